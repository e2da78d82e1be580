//! Deadlines, not timeouts, and strict codecs for the headers that carry them.
//!
//! The edge stamps one deadline; every hop sends the *time remaining* (never a timestamp, so
//! clock skew between hosts does not matter, as gRPC does) and computes its own budget from it.
//! A hop with 30 ms left does not get to spend 250.
//!
//! Wire formats:
//! - HTTP `Request-Timeout-Ms: <ms>` — one to [`MAX_MS_DIGITS`] ASCII digits, nothing else.
//! - gRPC `grpc-timeout` — one to eight ASCII digits and a unit `H M S m u n` (gRPC over HTTP/2
//!   spec). Encoding picks the finest unit whose value fits in eight digits and rounds *up*, so
//!   the callee never believes it has less time than it does… but never more than one unit more.
//!
//! Values from the network are untrusted: parsing is strict, never panics, and
//! [`Deadline::from_header_timeout`] clamps to the local maximum.
//!
//! ```
//! use seawall::deadline::{Deadline, encode_grpc_timeout, parse_grpc_timeout};
//! use seawall::time::Instant;
//! use std::time::Duration;
//!
//! assert_eq!(parse_grpc_timeout("250m").unwrap(), Duration::from_millis(250));
//! assert_eq!(encode_grpc_timeout(Duration::from_millis(250)), "250000u");
//! let now = Instant::ZERO;
//! let d = Deadline::after(now, Duration::from_secs(2));
//! assert_eq!(d.remaining(now + Duration::from_millis(500)), Duration::from_millis(1500));
//! ```

use std::fmt;
use std::time::Duration;

use crate::time::Instant;

/// The instant by which a logical request must be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline(Instant);

impl Deadline {
    /// A deadline at `at`.
    pub const fn at(at: Instant) -> Self {
        Deadline(at)
    }

    /// A deadline `timeout` after `now`.
    pub fn after(now: Instant, timeout: Duration) -> Self {
        Deadline(now + timeout)
    }

    /// The deadline implied by a timeout read from a header, clamped to `max` (a caller cannot
    /// make a server wait longer than its own limit).
    pub fn from_header_timeout(now: Instant, timeout: Duration, max: Duration) -> Self {
        Deadline(now + timeout.min(max))
    }

    /// The instant itself.
    pub const fn instant(self) -> Instant {
        self.0
    }

    /// Time left at `now` (zero once passed).
    pub fn remaining(self, now: Instant) -> Duration {
        self.0.saturating_duration_since(now)
    }

    /// True once `now` has reached the deadline.
    pub fn is_expired(self, now: Instant) -> bool {
        now >= self.0
    }

    /// The earlier of two deadlines.
    pub fn min(self, other: Deadline) -> Deadline {
        if other.0 < self.0 { other } else { self }
    }
}

/// Why a timeout header was rejected. Callers treat a rejected header as absent (and may answer
/// 400); they never panic and never trust part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutParseError {
    /// The value was empty.
    Empty,
    /// The value had a character that is not an ASCII digit (a sign, a space, a decimal point).
    NotDigits,
    /// More digits than the format allows.
    TooLong,
    /// gRPC only: the unit was missing or not one of `H M S m u n`.
    BadUnit,
    /// The header came more than once (a single-value field: which one the sender meant is
    /// unknown).
    Repeated,
}

impl fmt::Display for TimeoutParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutParseError::Empty => "empty timeout value",
            TimeoutParseError::NotDigits => "timeout value must be ASCII digits only",
            TimeoutParseError::TooLong => "timeout value has too many digits",
            TimeoutParseError::BadUnit => "grpc-timeout unit must be one of H M S m u n",
            TimeoutParseError::Repeated => "the timeout header came more than once",
        })
    }
}

impl std::error::Error for TimeoutParseError {}

/// Most digits accepted in `Request-Timeout-Ms`: 10 digits is ~115 days, more than any real
/// deadline; longer values are rejected rather than silently overflowing.
pub const MAX_MS_DIGITS: usize = 10;

/// The HTTP header carrying the time left, in whole milliseconds.
pub const REQUEST_TIMEOUT_MS: &str = "request-timeout-ms";

/// The gRPC metadata key carrying the time left.
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

fn digits(s: &[u8], max: usize) -> Result<u64, TimeoutParseError> {
    if s.is_empty() {
        return Err(TimeoutParseError::Empty);
    }
    if !s.iter().all(u8::is_ascii_digit) {
        return Err(TimeoutParseError::NotDigits);
    }
    if s.len() > max {
        return Err(TimeoutParseError::TooLong);
    }
    Ok(s.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

/// The deadline a server gives a request at `now`, from the values of its `Request-Timeout-Ms`
/// and `grpc-timeout` headers (every value each header came with, in order; none when absent):
/// the smaller of the two timeouts when present, else `default`, clamped to `max` (a caller
/// cannot make a server wait longer than its own limit). A `Request-Timeout-Ms` longer than
/// its ten digits is clamped to `max` too. A header that is present but malformed, or that
/// came twice, is an error: the adapter decides whether to refuse the request (400) or use
/// the default. `DeadlineLayer` renders this on HTTP requests.
///
/// ```
/// use seawall::deadline::{resolve, TimeoutParseError};
/// use seawall::time::Instant;
/// use std::time::Duration;
///
/// let (now, default, max) = (Instant::ZERO, Duration::from_secs(15), Duration::from_secs(60));
/// let left = |ms: &[&[u8]], grpc: &[&[u8]]| {
///     resolve(ms.iter().copied(), grpc.iter().copied(), now, default, max).map(|d| d.remaining(now))
/// };
/// assert_eq!(left(&[], &[]), Ok(default));
/// assert_eq!(left(&[b"900"], &[b"300m"]), Ok(Duration::from_millis(300)));
/// assert_eq!(left(&[b"99999999999"], &[]), Ok(max));
/// assert_eq!(left(&[b"250", b"9000"], &[]), Err(TimeoutParseError::Repeated));
/// assert_eq!(left(&[b" 5"], &[]), Err(TimeoutParseError::NotDigits));
/// ```
pub fn resolve<'a>(
    request_timeout_ms: impl IntoIterator<Item = &'a [u8]>,
    grpc_timeout: impl IntoIterator<Item = &'a [u8]>,
    now: Instant,
    default: Duration,
    max: Duration,
) -> Result<Deadline, TimeoutParseError> {
    fn single<'a>(
        values: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Option<&'a [u8]>, TimeoutParseError> {
        let mut values = values.into_iter();
        let first = values.next();
        if values.next().is_some() {
            return Err(TimeoutParseError::Repeated);
        }
        Ok(first)
    }
    let text = |v: Option<&'a [u8]>| {
        v.map(|v| std::str::from_utf8(v).map_err(|_| TimeoutParseError::NotDigits)).transpose()
    };
    // Repetition first, of either header: which value the sender meant is unknown.
    let (ms, grpc) = (single(request_timeout_ms)?, single(grpc_timeout)?);
    let (ms, grpc) = (text(ms)?, text(grpc)?);
    let ms = match ms.map(parse_timeout_ms).transpose() {
        Err(TimeoutParseError::TooLong) => Some(max),
        other => other?,
    };
    let grpc = grpc.map(parse_grpc_timeout).transpose()?;
    let timeout = match (ms, grpc) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b).unwrap_or(default),
    };
    Ok(Deadline::from_header_timeout(now, timeout, max))
}

/// Parses `Request-Timeout-Ms`: one to ten ASCII digits. `-5`, `+5`, ` 5`, `5.0` are rejected.
pub fn parse_timeout_ms(value: &str) -> Result<Duration, TimeoutParseError> {
    digits(value.as_bytes(), MAX_MS_DIGITS).map(Duration::from_millis)
}

/// Encodes the time left as `Request-Timeout-Ms`, rounding *down* to whole milliseconds (a
/// callee told 0 ms knows the request is already dead).
pub fn encode_timeout_ms(left: Duration) -> String {
    let ms = left.as_millis().min(10u128.pow(MAX_MS_DIGITS as u32) - 1);
    ms.to_string()
}

/// Parses `grpc-timeout`: one to eight ASCII digits followed by one unit of `H M S m u n`.
pub fn parse_grpc_timeout(value: &str) -> Result<Duration, TimeoutParseError> {
    let b = value.as_bytes();
    let Some((&unit, num)) = b.split_last() else {
        return Err(TimeoutParseError::Empty);
    };
    let per_unit_nanos: u64 = match unit {
        b'H' => 3_600_000_000_000,
        b'M' => 60_000_000_000,
        b'S' => 1_000_000_000,
        b'm' => 1_000_000,
        b'u' => 1_000,
        b'n' => 1,
        b'0'..=b'9' => return Err(TimeoutParseError::BadUnit),
        _ => return Err(TimeoutParseError::BadUnit),
    };
    let n = digits(num, 8)?;
    // 99_999_999 hours in nanoseconds overflows u64 (but not u128, nor Duration's seconds).
    let nanos = u128::from(n) * u128::from(per_unit_nanos);
    Ok(Duration::new((nanos / 1_000_000_000) as u64, (nanos % 1_000_000_000) as u32))
}

/// Encodes `grpc-timeout` with the finest unit whose value fits in eight digits, rounding up.
pub fn encode_grpc_timeout(left: Duration) -> String {
    const UNITS: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    let nanos = left.as_nanos();
    for (per, unit) in UNITS {
        let v = nanos.div_ceil(per);
        if v <= 99_999_999 {
            return format!("{v}{unit}");
        }
    }
    "99999999H".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn grpc_timeout_vectors() {
        assert_eq!(parse_grpc_timeout("1H").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_grpc_timeout("2M").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_grpc_timeout("3S").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_grpc_timeout("4m").unwrap(), Duration::from_millis(4));
        assert_eq!(parse_grpc_timeout("5u").unwrap(), Duration::from_micros(5));
        assert_eq!(parse_grpc_timeout("6n").unwrap(), Duration::from_nanos(6));
        assert_eq!(
            parse_grpc_timeout("99999999H").unwrap(),
            Duration::from_secs(99_999_999 * 3600)
        );
        for bad in ["", "S", "100", "123456789S", "1s", "-1S", " 1S", "1.5S", "1SS", "١S"] {
            assert!(parse_grpc_timeout(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn grpc_timeout_encodes_finest_unit_rounding_up() {
        assert_eq!(encode_grpc_timeout(Duration::from_nanos(1)), "1n");
        assert_eq!(encode_grpc_timeout(Duration::from_nanos(99_999_999)), "99999999n");
        assert_eq!(encode_grpc_timeout(Duration::from_nanos(100_000_001)), "100001u");
        assert_eq!(encode_grpc_timeout(Duration::from_secs(1)), "1000000u");
        assert_eq!(encode_grpc_timeout(Duration::from_secs(100_000)), "100000S");
        // 100,000 s + 1 ns no longer fits in milliseconds: whole seconds, rounded up.
        assert_eq!(encode_grpc_timeout(Duration::new(100_000, 1)), "100001S");
        assert_eq!(encode_grpc_timeout(Duration::ZERO), "0n");
    }

    #[test]
    fn request_timeout_ms_is_strict() {
        assert_eq!(parse_timeout_ms("250").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_timeout_ms("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_timeout_ms("-5"), Err(TimeoutParseError::NotDigits));
        assert_eq!(parse_timeout_ms(""), Err(TimeoutParseError::Empty));
        assert_eq!(parse_timeout_ms("99999999999"), Err(TimeoutParseError::TooLong));
        assert_eq!(parse_timeout_ms("1e3"), Err(TimeoutParseError::NotDigits));
    }

    #[test]
    fn header_timeout_is_clamped() {
        let d = Deadline::from_header_timeout(
            Instant::ZERO,
            Duration::from_secs(3600),
            Duration::from_secs(30),
        );
        assert_eq!(d.remaining(Instant::ZERO), Duration::from_secs(30));
    }

    proptest! {
        #[test]
        fn grpc_round_trip_never_shrinks_and_is_close(nanos in 0u64..u64::MAX / 4) {
            let d = Duration::from_nanos(nanos);
            let back = parse_grpc_timeout(&encode_grpc_timeout(d)).unwrap();
            prop_assert!(back >= d);
            // At most one unit more. A unit is chosen only once the value needs more than eight
            // digits in the next finer one, so one unit is at most 1/10^5 of the value (the
            // m → S and n → u steps are ×1000: above 99,999,999 ms, whole seconds).
            prop_assert!((back - d).as_nanos() <= d.as_nanos() / 100_000 + 1);
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,20}") {
            let _ = parse_grpc_timeout(&s);
            let _ = parse_timeout_ms(&s);
        }

        /// Whatever the headers hold, resolving never panics, never gives more than `max`, and
        /// an accepted deadline is the smaller timeout asked for (or the default).
        #[test]
        fn resolve_is_clamped_and_never_panics(
            ms in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..14), 0..3),
            grpc in proptest::collection::vec("[0-9]{0,10}[HMSmun ]?", 0..3),
            default_s in 0u64..100,
            max_s in 0u64..100,
        ) {
            let (now, default, max) =
                (Instant::ZERO, Duration::from_secs(default_s), Duration::from_secs(max_s));
            let r = resolve(
                ms.iter().map(Vec::as_slice),
                grpc.iter().map(|g| g.as_bytes()),
                now,
                default,
                max,
            );
            if let Ok(d) = r {
                prop_assert!(d.remaining(now) <= max);
                prop_assert!(ms.len() <= 1 && grpc.len() <= 1);
                if ms.is_empty() && grpc.is_empty() {
                    prop_assert_eq!(d.remaining(now), default.min(max));
                }
            }
            if ms.len() > 1 || grpc.len() > 1 {
                prop_assert_eq!(r, Err(TimeoutParseError::Repeated));
            }
        }

        #[test]
        fn ms_round_trip(ms in 0u64..9_999_999_999) {
            let d = Duration::from_millis(ms);
            prop_assert_eq!(parse_timeout_ms(&encode_timeout_ms(d)).unwrap(), d);
        }
    }
}
