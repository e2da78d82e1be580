//! The proto3 JSON mapping of `google.protobuf.Duration`: `"1.5s"`, `".1s"`, `"0s"`.

use std::time::Duration;

/// The largest seconds value a `google.protobuf.Duration` may hold (10,000 years).
pub const MAX_SECONDS: u64 = 315_576_000_000;

/// Parses a proto3 JSON duration strictly: an optional `-`, decimal seconds with at most nine
/// fractional digits (at least one digit in all), and a final `s`. Nothing else is accepted: no
/// spaces, no `+`, no exponent, no other unit. `".1s"` and `"1.s"` are accepted because gRPC's
/// own documentation and grpc-go accept them. Negative values are returned as `Err(Negative)` so a
/// caller can say which rule was broken; seconds above [`MAX_SECONDS`] are out of range.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let body = s.strip_suffix('s').ok_or(DurationError::Malformed)?;
    let (negative, body) = match body.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, body),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !digits(int) || !digits(frac) || frac.len() > 9 {
        return Err(DurationError::Malformed);
    }
    // At most 12 digits fit MAX_SECONDS; longer is out of range (leading zeros are still digits).
    let int = int.trim_start_matches('0');
    if int.len() > 12 {
        return Err(DurationError::OutOfRange);
    }
    let secs = int.bytes().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    if secs > MAX_SECONDS {
        return Err(DurationError::OutOfRange);
    }
    let nanos = frac.bytes().chain(std::iter::repeat(b'0')).take(9);
    let nanos = nanos.fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
    let d = Duration::new(secs, nanos);
    if negative && !d.is_zero() {
        return Err(DurationError::Negative);
    }
    Ok(d)
}

/// Why a duration string was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DurationError {
    /// Not of the form `-?digits(.digits)?s`.
    Malformed,
    /// Below zero.
    Negative,
    /// More than [`MAX_SECONDS`] seconds.
    OutOfRange,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepted_forms() {
        assert_eq!(parse_duration("0.1s"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration(".1s"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("1.s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("-0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1.000000001s"), Ok(Duration::new(1, 1)));
        assert_eq!(parse_duration("315576000000s"), Ok(Duration::from_secs(MAX_SECONDS)));
    }

    #[test]
    fn refused_forms() {
        for bad in
            ["", "s", ".s", "1", "1ms", " 1s", "1s ", "+1s", "1e3s", "1.0000000001s", "1..2s"]
        {
            assert_eq!(parse_duration(bad), Err(DurationError::Malformed), "{bad:?}");
        }
        assert_eq!(parse_duration("-1s"), Err(DurationError::Negative));
        assert_eq!(parse_duration("315576000001s"), Err(DurationError::OutOfRange));
        assert_eq!(parse_duration("99999999999999999999999s"), Err(DurationError::OutOfRange));
    }

    proptest! {
        #[test]
        fn round_trips_and_never_panics(secs in 0u64..=MAX_SECONDS, nanos in 0u32..1_000_000_000,
                                        junk in "\\PC{0,24}") {
            let text = format!("{secs}.{nanos:09}s");
            prop_assert_eq!(parse_duration(&text), Ok(Duration::new(secs, nanos)));
            let _ = parse_duration(&junk);
        }
    }
}
