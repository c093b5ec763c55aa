//! `--from-time` values: milliseconds since the epoch, an RFC 3339 time
//! (`2026-11-29T21:00:00Z`, `2026-11-29T22:00:00.250+01:00`), or an age (`-15m`, `-2h`,
//! `-30s`, `-1d`) counted back from now.

use std::time::{SystemTime, UNIX_EPOCH};

/// Parses a `--from-time` value to ms since the epoch; `now_ms` anchors ages.
pub(crate) fn parse_time(s: &str, now_ms: i64) -> Result<i64, String> {
    let s = s.trim();
    if let Ok(ms) = s.parse::<i64>() {
        // Negative values are ListOffsets' special codes (-1 latest, -2 earliest), not times.
        if ms < 0 {
            return Err(format!(
                "time {ms} is negative; an age needs a unit, e.g. -15m"
            ));
        }
        return Ok(ms);
    }
    if let Some(age) = s.strip_prefix('-') {
        return parse_age(age).map(|ms| now_ms.saturating_sub(ms));
    }
    parse_rfc3339(s).ok_or_else(|| {
        format!("cannot read time {s:?}: use ms since the epoch, 2026-11-29T21:00:00Z, or -15m")
    })
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn parse_age(s: &str) -> Result<i64, String> {
    let split = s.len().saturating_sub(1);
    let (number, unit) = s.split_at(split);
    let n: i64 = number.parse().map_err(|_| format!("bad age -{s}"))?;
    let unit_ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("bad age -{s}: the unit is s, m, h or d")),
    };
    n.checked_mul(unit_ms)
        .ok_or_else(|| format!("age -{s} is too large"))
}

fn digits(s: &str, range: std::ops::Range<usize>) -> Option<i64> {
    let part = s.get(range)?;
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (digits(s, 0..4)?, digits(s, 5..7)?, digits(s, 8..10)?);
    let (hour, minute, second) = (digits(s, 11..13)?, digits(s, 14..16)?, digits(s, 17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &s[19..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let first3 = format!("{:0<3}", &frac[..n.min(3)]);
        millis = first3.parse::<i64>().ok()?;
        rest = &frac[n..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            sign * (digits(rest, 1..3)? * 60 + digits(rest, 4..6)?)
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1_000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_milliseconds_pass_through() {
        assert_eq!(parse_time("1700000000123", 0), Ok(1_700_000_000_123));
        assert_eq!(parse_time("0", 5), Ok(0));
    }

    #[test]
    fn rfc3339_times() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z", 0), Ok(0));
        // 2023-11-14T22:13:20Z is 1_700_000_000 s.
        assert_eq!(parse_time("2023-11-14T22:13:20Z", 0), Ok(1_700_000_000_000));
        assert_eq!(
            parse_time("2023-11-14T22:13:20.5Z", 0),
            Ok(1_700_000_000_500)
        );
        assert_eq!(
            parse_time("2023-11-14T23:13:20.123456+01:00", 0),
            Ok(1_700_000_000_123)
        );
        assert_eq!(
            parse_time("2023-11-14T21:13:20-01:00", 0),
            Ok(1_700_000_000_000)
        );
        assert_eq!(parse_time("2000-02-29T00:00:00Z", 0), Ok(951_782_400_000));
    }

    #[test]
    fn ages_count_back_from_now() {
        let now = 10_000_000;
        assert_eq!(parse_time("-30s", now), Ok(now - 30_000));
        assert_eq!(parse_time("-15m", now), Ok(now - 900_000));
        assert_eq!(parse_time("-2h", now), Ok(now - 7_200_000));
        assert_eq!(parse_time("-1d", now), Ok(now - 86_400_000));
    }

    #[test]
    fn garbage_is_rejected() {
        for bad in [
            "-5",
            "yesterday",
            "-5y",
            "-m",
            "2023-13-01T00:00:00Z",
            "2023-11-14T22:13:20",
            "2023-11-14T22:13:20+0100",
            "2023-11-14T22:13:20.Z",
        ] {
            assert!(parse_time(bad, 0).is_err(), "{bad}");
        }
    }
}
