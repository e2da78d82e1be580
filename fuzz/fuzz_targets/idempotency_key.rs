//! `Idempotency-Key` values (seawall-tower's server idempotency key module): never panic; an
//! accepted key is non-empty, at most `MAX_KEY_LEN` bytes of visible ASCII, and is the value
//! itself or the inside of its quotes; the bare form of an accepted key parses to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall_tower::server::idempotency::key::{MAX_KEY_LEN, parse_key};

fuzz_target!(|data: &[u8]| {
    let Ok(key) = parse_key(data) else { return };
    assert!(!key.is_empty() && key.len() <= MAX_KEY_LEN, "{key:?}");
    assert!(key.bytes().all(|b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\'));
    let quoted = data.len() == key.len() + 2;
    assert!(quoted || data == key.as_bytes(), "a bare key is returned as given");
    if quoted {
        assert_eq!(&data[1..data.len() - 1], key.as_bytes());
    }
    // Quoting an accepted key gives the same key back.
    assert_eq!(parse_key(format!("\"{key}\"").as_bytes()), Ok(key));
});
