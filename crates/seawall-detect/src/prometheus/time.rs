//! The two ways a user names a window: a duration (`--last 90m`) and RFC 3339 instants
//! (`--from 2026-03-01T09:00:00Z --to 2026-03-01T10:30:00+01:00`).
//!
//! Parsed here, strictly, so that a typo is an error naming the flag rather than a window of the
//! wrong length. No calendar crate: RFC 3339's grammar is small, and the conversion to Unix
//! time is the classic days-from-civil formula.

/// Parses `90s`, `15m`, `1h`, `2d`, `500ms` (one number and one unit) into seconds.
///
/// ```
/// use seawall_detect::prometheus::time::parse_duration;
/// assert_eq!(parse_duration("1h"), Some(3600.0));
/// assert_eq!(parse_duration("250ms"), Some(0.25));
/// assert_eq!(parse_duration("1h30m"), None);
/// ```
pub fn parse_duration(s: &str) -> Option<f64> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let unit_s = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return None,
    };
    let v = n as f64 * unit_s;
    (v > 0.0 && v <= 366.0 * 86_400.0).then_some(v)
}

/// Parses an RFC 3339 date-time (`2026-03-01T09:00:00Z`, `…T09:00:00.250+01:00`) into Unix
/// seconds.
///
/// ```
/// use seawall_detect::prometheus::time::parse_rfc3339;
/// assert_eq!(parse_rfc3339("1970-01-02T00:00:00Z"), Some(86_400.0));
/// assert_eq!(parse_rfc3339("2026-03-01T10:00:00+01:00"), parse_rfc3339("2026-03-01T09:00:00Z"));
/// assert_eq!(parse_rfc3339("2026-02-30T00:00:00Z"), None);
/// ```
pub fn parse_rfc3339(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&mo) || d < 1 || d > days_in[(mo - 1) as usize] {
        return None;
    }
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        if n == 0 || n > 9 {
            return None;
        }
        frac = format!("0.{}", &r[..n]).parse().ok()?;
        rest = &r[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && matches!(&rest[..1], "+" | "-") && &rest[3..4] == ":" => {
            let oh = num(s.len() - 5..s.len() - 3)?;
            let om = num(s.len() - 2..s.len())?;
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if rest.starts_with('-') { -o } else { o }
        }
        _ => return None,
    };
    // Days from 1970-01-01 to y-mo-d (Howard Hinnant's days_from_civil).
    let (yy, mm) = if mo <= 2 { (y - 1, mo + 9) } else { (y, mo - 3) };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + sec - offset) as f64 + frac)
}

/// Formats Unix seconds as RFC 3339 in UTC, to the second (`2026-03-01T09:00:00Z`): the
/// wall-clock time a verdict's evidence names. Howard Hinnant's civil_from_days, the inverse of
/// [`parse_rfc3339`].
///
/// ```
/// use seawall_detect::prometheus::time::format_rfc3339;
/// assert_eq!(format_rfc3339(951_868_800.4), "2000-03-01T00:00:00Z");
/// ```
pub fn format_rfc3339(unix: f64) -> String {
    // Clamped to years 0000..=9999 so the four-digit year stays four digits.
    let secs = unix.floor().clamp(-62_167_219_200.0, 253_402_300_799.0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn format_inverts_parse(secs in -62_167_219_200i64..253_402_300_799) {
            let text = format_rfc3339(secs as f64);
            proptest::prop_assert_eq!(parse_rfc3339(&text), Some(secs as f64), "{}", text);
        }
    }

    #[test]
    fn known_instants() {
        assert_eq!(parse_rfc3339("2000-03-01T00:00:00Z"), Some(951_868_800.0));
        assert_eq!(parse_rfc3339("2024-02-29T12:00:00.5Z"), Some(1_709_208_000.5));
        assert_eq!(parse_rfc3339("2026-12-01T11:08:00-00:30"), Some(1_796_125_080.0));
        for bad in [
            "2026-13-01T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00+1:00",
            "2026-01-01T00:00:00.Z",
            "yesterday",
            "2026-01-01T00:00:00Zjunk",
            "2023-02-29T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Some(90.0));
        assert_eq!(parse_duration("2d"), Some(172_800.0));
        for bad in ["", "h", "1", "1 h", "-1h", "0s", "1.5h", "1y", "400d"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
