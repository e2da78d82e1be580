//! Server hints: `Retry-After`, `Retry-Pushback-Ms` and `grpc-retry-pushback-ms`.
//!
//! A server that says "come back in 5 s" knows more than the client's backoff does, so a hint is
//! a *lower bound* on the wait. But if every client hears `Retry-After: 5` they all return
//! together, so the policy adds jitter on top, and clamps the result: never past the call's
//! deadline (then it gives up at once), never past a configured maximum.
//!
//! Parsing (untrusted input, never panics):
//! - `Retry-After` (RFC 9110 §10.2.3): delay-seconds (ASCII digits) or an HTTP-date in any of the
//!   three formats recipients must accept. Anything else is ignored ([`Hint::None`]): a garbled
//!   hint is no reason to refuse a retry the policy would otherwise make.
//! - `Retry-Pushback-Ms` and `grpc-retry-pushback-ms` (gRFC A6): an integer number of
//!   milliseconds; negative *or unparseable* means "don't retry", as gRFC A6 specifies.
//!
//! ```
//! use seawall::hint::{Hint, parse_pushback_ms, parse_retry_after};
//! use std::time::{Duration, UNIX_EPOCH};
//!
//! assert_eq!(parse_pushback_ms("-1"), Hint::DontRetry);
//! assert_eq!(parse_pushback_ms("250"), Hint::After(Duration::from_millis(250)));
//! let now = UNIX_EPOCH + Duration::from_secs(784_111_770);
//! assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), Hint::After(Duration::from_secs(7)));
//! assert_eq!(parse_retry_after("120", now), Hint::After(Duration::from_secs(120)));
//! ```

use std::time::{Duration, SystemTime};

/// What a server said about retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Hint {
    /// No hint (or an unusable `Retry-After`).
    #[default]
    None,
    /// Wait at least this long before retrying.
    After(Duration),
    /// Do not retry this call.
    DontRetry,
}

impl Hint {
    /// The stricter of two hints: `DontRetry` wins, then the longer wait.
    pub fn max(self, other: Hint) -> Hint {
        match (self, other) {
            (Hint::DontRetry, _) | (_, Hint::DontRetry) => Hint::DontRetry,
            (Hint::After(a), Hint::After(b)) => Hint::After(a.max(b)),
            (Hint::After(a), Hint::None) | (Hint::None, Hint::After(a)) => Hint::After(a),
            (Hint::None, Hint::None) => Hint::None,
        }
    }
}

/// `Retry-After` header name.
pub const RETRY_AFTER: &str = "retry-after";
/// seawall's HTTP pushback header name (milliseconds; negative = don't retry).
pub const RETRY_PUSHBACK_MS: &str = "retry-pushback-ms";
/// gRPC pushback metadata key (gRFC A6).
pub const GRPC_RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";

/// Longest delay-seconds accepted from `Retry-After` before saturation: 10 digits (~317 years).
/// The policy clamps to its own maximum anyway; this only keeps the parse exact.
const MAX_SECONDS_DIGITS: usize = 10;

/// Parses a `Retry-After` value. `now` is the wall-clock time, for the HTTP-date form; a date in
/// the past means "retry now" (`After(0)`).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Hint {
    let v = value.trim_matches([' ', '\t']);
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        if v.len() > MAX_SECONDS_DIGITS {
            return Hint::After(Duration::from_secs(u64::MAX / 2));
        }
        return v.parse::<u64>().map(|s| Hint::After(Duration::from_secs(s))).unwrap_or(Hint::None);
    }
    match httpdate::parse_http_date(v) {
        Ok(at) => Hint::After(at.duration_since(now).unwrap_or(Duration::ZERO)),
        Err(_) => Hint::None,
    }
}

/// Parses `Retry-Pushback-Ms` / `grpc-retry-pushback-ms`: an optional `-` and ASCII digits.
/// Negative, empty, or anything unparseable is [`Hint::DontRetry`] (gRFC A6).
pub fn parse_pushback_ms(value: &str) -> Hint {
    let b = value.trim_matches([' ', '\t']).as_bytes();
    if b.first() == Some(&b'-') {
        return Hint::DontRetry;
    }
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return Hint::DontRetry;
    }
    if b.len() > 12 {
        // > 31 years in ms: treat as a very long wait; the policy clamps it.
        return Hint::After(Duration::from_millis(999_999_999_999));
    }
    let ms = b.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Hint::After(Duration::from_millis(ms))
}

/// Formats a delay as `Retry-After` delay-seconds, rounding up (a server must not ask for less
/// than it means).
pub fn format_retry_after(wait: Duration) -> String {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::UNIX_EPOCH;

    fn now() -> SystemTime {
        // Sun, 06 Nov 1994 08:49:30 GMT
        UNIX_EPOCH + Duration::from_secs(784_111_770)
    }

    #[test]
    fn retry_after_all_three_date_formats() {
        for v in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(parse_retry_after(v, now()), Hint::After(Duration::from_secs(7)), "{v}");
        }
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now()),
            Hint::After(Duration::ZERO)
        );
    }

    #[test]
    fn retry_after_seconds_and_garbage() {
        assert_eq!(parse_retry_after("0", now()), Hint::After(Duration::ZERO));
        assert_eq!(parse_retry_after(" 5 ", now()), Hint::After(Duration::from_secs(5)));
        for bad in ["", "-1", "1.5", "soon", "5s", "0x10"] {
            assert_eq!(parse_retry_after(bad, now()), Hint::None, "{bad:?}");
        }
        assert!(
            matches!(parse_retry_after("99999999999999999999999", now()), Hint::After(d) if d > Duration::from_secs(1 << 40))
        );
    }

    #[test]
    fn pushback() {
        assert_eq!(parse_pushback_ms("0"), Hint::After(Duration::ZERO));
        assert_eq!(parse_pushback_ms("-1"), Hint::DontRetry);
        assert_eq!(parse_pushback_ms("-0"), Hint::DontRetry);
        assert_eq!(parse_pushback_ms("abc"), Hint::DontRetry);
        assert_eq!(parse_pushback_ms(""), Hint::DontRetry);
        assert_eq!(parse_pushback_ms("+5"), Hint::DontRetry);
    }

    #[test]
    fn max_prefers_dont_retry_then_longer() {
        let a = Hint::After(Duration::from_secs(1));
        let b = Hint::After(Duration::from_secs(2));
        assert_eq!(a.max(b), b);
        assert_eq!(a.max(Hint::DontRetry), Hint::DontRetry);
        assert_eq!(Hint::None.max(a), a);
    }

    #[test]
    fn format_rounds_up() {
        assert_eq!(format_retry_after(Duration::from_millis(1)), "1");
        assert_eq!(format_retry_after(Duration::from_secs(3)), "3");
        assert_eq!(format_retry_after(Duration::from_millis(3001)), "4");
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,40}") {
            let _ = parse_retry_after(&s, now());
            let _ = parse_pushback_ms(&s);
        }
    }
}
