//! Number formatting shared by the model's labels and the renderer: thousands
//! separators, the seed's decimal places, decimal units for estimates (GB, PB) and
//! binary units for configuration values (KiB, MiB).

use super::sheet::{Num, Style};

/// The printed form of a number in its style; infinity prints as "infinite".
pub(crate) fn number(num: Num) -> String {
    let value = num.value;
    if value.is_nan() {
        return "undefined".to_owned();
    }
    if value.is_infinite() {
        return "infinite".to_owned();
    }
    match num.style {
        Style::Int => fixed(value.round(), 0),
        Style::Dec(places) => fixed(value, usize::from(places)),
        Style::Sig(digits) => fixed(value, significant_places(value, usize::from(digits))),
        Style::Auto => auto(value),
    }
}

/// Whole numbers as such, otherwise four significant digits without trailing zeros.
pub(crate) fn auto(value: f64) -> String {
    if !value.is_finite() {
        return number(Num::int(value));
    }
    let nearest = value.round();
    if (value - nearest).abs() <= 1e-9 * nearest.abs().max(1.0) {
        return fixed(nearest, 0);
    }
    trim_zeros(fixed(value, significant_places(value, 4)))
}

/// "1.81 PB": an estimate in decimal units, at most two decimals.
pub(crate) fn decimal_bytes(value: f64) -> String {
    scaled(
        value,
        1_000.0,
        &["B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"],
    )
}

/// "8 GB/s".
pub(crate) fn decimal_rate(value: f64) -> String {
    format!("{}/s", decimal_bytes(value))
}

/// "32 MiB": a configuration value in the binary units the software reads it in.
pub(crate) fn binary_bytes(value: f64) -> String {
    scaled(
        value,
        1_024.0,
        &["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"],
    )
}

/// "50%", "2.34%": three significant digits.
pub(crate) fn percent(fraction: f64) -> String {
    if !fraction.is_finite() {
        return number(Num::int(fraction));
    }
    let percent = fraction * 100.0;
    let places = significant_places(percent, 3);
    format!("{}%", trim_zeros(fixed(percent, places)))
}

fn scaled(value: f64, step: f64, units: &[&str]) -> String {
    if !value.is_finite() {
        return number(Num::int(value));
    }
    let mut scaled = value;
    let mut unit = 0;
    while scaled.abs() >= step && unit + 1 < units.len() {
        scaled /= step;
        unit += 1;
    }
    // Round half away from zero at two decimals, as a reader would by hand (14.175 -> 14.18).
    let rounded = (scaled * 100.0).round() / 100.0;
    let name = units.get(unit).copied().unwrap_or("?");
    format!("{} {name}", trim_zeros(fixed(rounded, 2)))
}

/// Decimal places that show `digits` significant digits of `value`.
fn significant_places(value: f64, digits: usize) -> usize {
    if value == 0.0 || !value.is_finite() {
        return 0;
    }
    let magnitude = value.abs().log10().floor() as i64;
    let digits = i64::try_from(digits).unwrap_or(i64::MAX);
    usize::try_from(digits - 1 - magnitude).unwrap_or(0)
}

/// Fixed decimals with thousands separators in the integer part.
fn fixed(value: f64, places: usize) -> String {
    let text = format!("{value:.places$}");
    let (sign, unsigned) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text.as_str()),
    };
    let (whole, fraction) = match unsigned.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (unsigned, None),
    };
    let mut grouped = String::with_capacity(whole.len() + whole.len() / 3);
    for (index, digit) in whole.chars().enumerate() {
        if index > 0 && (whole.len() - index) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    match fraction {
        Some(fraction) => format!("{sign}{grouped}.{fraction}"),
        None => format!("{sign}{grouped}"),
    }
}

fn trim_zeros(text: String) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_styles() {
        assert_eq!(
            number(Num::int(1_814_400_000_000_000.0)),
            "1,814,400,000,000,000"
        );
        assert_eq!(number(Num::int(7_812.5)), "7,813");
        assert_eq!(number(Num::new(0.5, Style::Dec(2))), "0.50");
        assert_eq!(number(Num::new(0.023_437_5, Style::Sig(3))), "0.0234");
        assert_eq!(
            number(Num::new(5_000_000.0 / 86_400e6, Style::Sig(3))),
            "0.0000579"
        );
        assert_eq!(number(Num::new(1_000.0 / 16_384.0, Style::Sig(2))), "0.061");
        assert_eq!(number(Num::new(5e6 / 86_400.0, Style::Dec(1))), "57.9");
        assert_eq!(number(Num::new(0.010, Style::Dec(3))), "0.010");
        assert_eq!(number(Num::int(f64::INFINITY)), "infinite");
        assert_eq!(number(Num::int(-1_234.0)), "-1,234");
        assert_eq!(number(Num::int(100.0)), "100");
    }

    #[test]
    fn auto_trims() {
        assert_eq!(auto(7.0), "7");
        assert_eq!(auto(1.2), "1.2");
        assert_eq!(auto(1.05), "1.05");
        assert_eq!(auto(1.5), "1.5");
        assert_eq!(auto(10.0 / 24.0), "0.4167");
        assert_eq!(auto(1_000.0 / 3.0), "333.3");
        assert_eq!(auto(0.2 * 100.0), "20");
    }

    #[test]
    fn units() {
        assert_eq!(decimal_bytes(1_814_400_000_000_000_000.0), "1.81 EB");
        assert_eq!(decimal_bytes(1_814_400_000_000_000.0), "1.81 PB");
        assert_eq!(decimal_bytes(14_175_000_000_000.0), "14.18 TB");
        assert_eq!(decimal_bytes(960_000_000.0), "960 MB");
        assert_eq!(decimal_rate(8e9), "8 GB/s");
        assert_eq!(decimal_bytes(512.0), "512 B");
        assert_eq!(binary_bytes(33_554_432.0), "32 MiB");
        assert_eq!(binary_bytes(16_384.0), "16 KiB");
        assert_eq!(binary_bytes(1_073_741_824.0), "1 GiB");
        assert_eq!(percent(0.5), "50%");
        assert_eq!(percent(0.023_437_5), "2.34%");
        assert_eq!(percent(1.0), "100%");
    }
}
