//! The wire conventions every part of seawall speaks.
//!
//! | meaning | HTTP | gRPC |
//! |---|---|---|
//! | time left for this request | `Request-Timeout-Ms: <ms>` | `grpc-timeout` |
//! | which attempt this is | `Request-Attempt: <n>` (1 = first; absent = first) | `grpc-previous-rpc-attempts` |
//! | wait at least / don't retry | `Retry-After`, `Retry-Pushback-Ms` (negative = don't retry) | `grpc-retry-pushback-ms` |
//! | safe to retry a write | `Idempotency-Key` | same key in metadata |
//!
//! Header values from the network are untrusted: parsed strictly, clamped, never a panic. The
//! codecs for time and hints live in the core ([`seawall::deadline`], [`seawall::hint`]); this
//! module adds the attempt number and the request extension that carries a deadline from a
//! server layer to the client layers of outgoing calls.

use std::num::NonZeroU32;

use http::HeaderName;
use seawall::deadline::Deadline;

/// `Request-Attempt`: 1 for a first attempt, 2 for the first retry, … Absent means a first
/// attempt: seawall's client layers stamp it from the first retry on (a first attempt of a
/// header-less request then needs no header map at all), and its servers read no header as 1.
pub const REQUEST_ATTEMPT: HeaderName = HeaderName::from_static("request-attempt");
/// `Request-Timeout-Ms`: time left for the request, in whole milliseconds.
pub const REQUEST_TIMEOUT_MS: HeaderName = HeaderName::from_static("request-timeout-ms");
/// `Retry-Pushback-Ms`: wait at least this long; negative means don't retry.
pub const RETRY_PUSHBACK_MS: HeaderName = HeaderName::from_static("retry-pushback-ms");
/// `Idempotency-Key` (IETF httpapi draft).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// gRPC: time left.
pub const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
/// gRPC: attempts before this one (0 for a first attempt).
pub const GRPC_PREVIOUS_RPC_ATTEMPTS: HeaderName =
    HeaderName::from_static("grpc-previous-rpc-attempts");
/// gRPC: pushback in milliseconds; negative means don't retry.
pub const GRPC_RETRY_PUSHBACK_MS: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");

/// Highest attempt number believed from the wire. Nobody legitimately sends more; a larger value
/// is clamped (it still marks the request as a retry, which is what matters for shedding).
pub const MAX_WIRE_ATTEMPT: u32 = 100;

/// Parses `Request-Attempt`: one to three ASCII digits, at least 1; larger values clamp to
/// [`MAX_WIRE_ATTEMPT`]. Anything else is `None` (treated as absent: a first attempt).
pub fn parse_attempt(value: &[u8]) -> Option<NonZeroU32> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits = value.iter().skip_while(|&&b| b == b'0').count();
    let n = if digits > 3 {
        MAX_WIRE_ATTEMPT
    } else {
        value.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0')).min(MAX_WIRE_ATTEMPT)
    };
    NonZeroU32::new(n)
}

/// Parses `grpc-previous-rpc-attempts` (0 = first attempt) into the attempt number (1 = first),
/// with the same strictness and clamp as [`parse_attempt`].
pub fn parse_grpc_previous_attempts(value: &[u8]) -> Option<NonZeroU32> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits = value.iter().skip_while(|&&b| b == b'0').count();
    let prev = if digits > 3 {
        MAX_WIRE_ATTEMPT
    } else {
        value.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'))
    };
    NonZeroU32::new(prev.saturating_add(1).min(MAX_WIRE_ATTEMPT))
}

/// The deadline of the request being served, an instant of the clock of the layer that set it
/// ([`seawall::time::SystemClock`] unless the layer was built `with_clock`). The server
/// `DeadlineLayer` inserts it into request extensions; handlers copy it onto outgoing requests,
/// where the client layers read it on their own clock, so the edge's deadline flows down the
/// whole call path. Build the server and client layers of one service on the same clock (or on
/// `SystemClock` and `time::TokioClock`, which share an epoch and agree unless the runtime is
/// paused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestDeadline(pub Deadline);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_parsing_is_strict_and_clamped() {
        assert_eq!(parse_attempt(b"1").map(NonZeroU32::get), Some(1));
        assert_eq!(parse_attempt(b"3").map(NonZeroU32::get), Some(3));
        assert_eq!(parse_attempt(b"007").map(NonZeroU32::get), Some(7));
        assert_eq!(parse_attempt(b"99999999999999999999").map(NonZeroU32::get), Some(100));
        for bad in [&b""[..], b"0", b"-1", b"+1", b" 1", b"1.0", b"abc", b"\xff"] {
            assert_eq!(parse_attempt(bad), None, "{bad:?}");
        }
        assert_eq!(parse_grpc_previous_attempts(b"0").map(NonZeroU32::get), Some(1));
        assert_eq!(parse_grpc_previous_attempts(b"2").map(NonZeroU32::get), Some(3));
        assert_eq!(parse_grpc_previous_attempts(b"x"), None);
    }
}
