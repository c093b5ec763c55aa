//! Parsers for the assumption flags: durations (`7d`, `36h`, `100ms`), byte sizes
//! (`1GB` decimal, `32MiB` binary) and fractions (`0.6` or `60%`).
//!
//! Each returns `Result<_, String>` so clap can use it as a `value_parser` and print the
//! message next to the offending flag.

/// Seconds in a day: every per-day figure divides by this, never by 1e5.
pub(crate) const SECONDS_PER_DAY: f64 = 86_400.0;

/// A duration in seconds. A bare number is seconds; suffixes are `ms`, `s`, `m`, `h`,
/// `d`, `w`. Fractions are allowed (`1.5d`). Must be finite and non-negative.
pub(crate) fn duration_seconds(text: &str) -> Result<f64, String> {
    let (number, unit) = split_unit(text);
    let per_unit = match unit.to_ascii_lowercase().as_str() {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" | "min" => 60.0,
        "h" => 3_600.0,
        "d" => SECONDS_PER_DAY,
        "w" => 7.0 * SECONDS_PER_DAY,
        other => {
            return Err(format!(
                "unknown duration unit {other:?} in {text:?} (use ms, s, m, h, d or w)"
            ))
        }
    };
    let value = non_negative(number, text)? * per_unit;
    finite(value, text)
}

/// A byte count. A bare number is bytes. Decimal suffixes (`kB`/`KB`, `MB`, `GB`, `TB`,
/// `PB`) are powers of 1,000; binary ones (`KiB`, `MiB`, `GiB`, `TiB`) powers of 1,024,
/// because configuration values such as `buffer.memory` are read in binary units.
pub(crate) fn bytes(text: &str) -> Result<f64, String> {
    let (number, unit) = split_unit(text);
    let multiplier = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "pb" => 1e15,
        "kib" => 1_024.0,
        "mib" => 1_048_576.0,
        "gib" => 1_073_741_824.0,
        "tib" => 1_099_511_627_776.0,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {text:?} (use B, kB, MB, GB, TB, PB, KiB, MiB, GiB or TiB)"
            ))
        }
    };
    let value = non_negative(number, text)? * multiplier;
    finite(value, text)
}

/// A fraction in `[0, 1]`, written either as `0.6` or as `60%`.
pub(crate) fn fraction(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let value = match trimmed.strip_suffix('%') {
        Some(percent) => non_negative(percent.trim(), text)? / 100.0,
        None => non_negative(trimmed, text)?,
    };
    if value > 1.0 {
        return Err(format!("{text:?} is above 100%"));
    }
    Ok(value)
}

/// A plain non-negative decimal number (rates, Gbps, milliseconds).
pub(crate) fn number(text: &str) -> Result<f64, String> {
    let value = non_negative(text.trim(), text)?;
    finite(value, text)
}

fn split_unit(text: &str) -> (&str, &str) {
    let trimmed = text.trim();
    // The unit is the trailing run of letters, so `1e9` stays a number.
    let unit_start = trimmed
        .rfind(|c: char| !c.is_ascii_alphabetic())
        .map_or(0, |last_non_letter| last_non_letter + 1);
    let (number, unit) = trimmed.split_at(unit_start);
    (number.trim(), unit.trim())
}

fn non_negative(number: &str, whole: &str) -> Result<f64, String> {
    let cleaned: String = number.chars().filter(|c| *c != '_' && *c != ',').collect();
    let value: f64 = cleaned
        .parse()
        .map_err(|_| format!("{whole:?} is not a number"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{whole:?} must be a finite, non-negative number"));
    }
    Ok(value)
}

fn finite(value: f64, whole: &str) -> Result<f64, String> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!("{whole:?} is too large"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(duration_seconds("7d"), Ok(604_800.0));
        assert_eq!(duration_seconds("36h"), Ok(129_600.0));
        assert_eq!(duration_seconds("100ms"), Ok(0.1));
        assert_eq!(duration_seconds("5"), Ok(5.0));
        assert_eq!(duration_seconds("5s"), Ok(5.0));
        assert_eq!(duration_seconds("2w"), Ok(1_209_600.0));
        assert_eq!(duration_seconds("1.5d"), Ok(129_600.0));
        assert_eq!(duration_seconds("15m"), Ok(900.0));
        assert!(duration_seconds("7y").is_err());
        assert!(duration_seconds("-1s").is_err());
        assert!(duration_seconds("d").is_err());
        assert!(duration_seconds("1e400s").is_err());
        assert_eq!(duration_seconds("1e2s"), Ok(100.0));
    }

    #[test]
    fn decimal_and_binary_sizes_differ() {
        assert_eq!(bytes("1GB"), Ok(1e9));
        assert_eq!(bytes("1GiB"), Ok(1_073_741_824.0));
        assert_eq!(bytes("16KiB"), Ok(16_384.0));
        assert_eq!(bytes("16kB"), Ok(16_000.0));
        assert_eq!(bytes("32MiB"), Ok(33_554_432.0));
        assert_eq!(bytes("1,000"), Ok(1_000.0));
        assert_eq!(bytes("100GB"), Ok(1e11));
        assert!(bytes("12 parsecs").is_err());
        assert_eq!(bytes("1e9"), Ok(1e9));
    }

    #[test]
    fn fractions_as_ratio_or_percent() {
        assert_eq!(fraction("0.6"), Ok(0.6));
        assert_eq!(fraction("60%"), Ok(0.6));
        assert_eq!(fraction("5%"), Ok(0.05));
        assert_eq!(fraction("0"), Ok(0.0));
        assert!(fraction("120%").is_err());
        assert!(fraction("1.5").is_err());
        assert!(fraction("abc").is_err());
    }

    #[test]
    fn plain_numbers() {
        assert_eq!(number("1_000_000"), Ok(1e6));
        assert_eq!(number("10"), Ok(10.0));
        assert!(number("NaN").is_err());
        assert!(number("inf").is_err());
        assert!(number("-3").is_err());
    }
}
