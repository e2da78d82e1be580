//! `grpc-timeout` and `Request-Timeout-Ms` (seawall::deadline): never panic, stay within the
//! documented maxima, and what the encoders print parses back to the same duration.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use seawall::deadline::{
    MAX_MS_DIGITS, encode_grpc_timeout, encode_timeout_ms, parse_grpc_timeout, parse_timeout_ms,
};

/// 99 999 999 hours: eight digits of the largest unit.
const GRPC_MAX: Duration = Duration::from_secs(99_999_999 * 3600);

fuzz_target!(|data: &[u8]| {
    // Header values reach the parsers as `&str` only when they are valid UTF-8 (http's
    // `HeaderValue::to_str` is stricter still: visible ASCII).
    let Ok(value) = std::str::from_utf8(data) else { return };

    if let Ok(d) = parse_timeout_ms(value) {
        assert!(d.as_millis() < 10u128.pow(MAX_MS_DIGITS as u32), "{value:?} → {d:?}");
        assert!(value.len() <= MAX_MS_DIGITS && value.bytes().all(|b| b.is_ascii_digit()));
        // Whole milliseconds: the printer is exact on what the parser accepts.
        let printed = encode_timeout_ms(d);
        assert_eq!(parse_timeout_ms(&printed), Ok(d), "{value:?} printed as {printed:?}");
    }

    if let Ok(d) = parse_grpc_timeout(value) {
        assert!(d <= GRPC_MAX, "{value:?} → {d:?}");
        assert!(value.len() <= 9, "{value:?} has more than 8 digits and a unit");
        // The encoder picks the finest unit that fits in 8 digits, rounding up; every unit
        // divides the coarser ones, so a parsed value prints exactly.
        let printed = encode_grpc_timeout(d);
        assert_eq!(parse_grpc_timeout(&printed), Ok(d), "{value:?} printed as {printed:?}");
    }
});
