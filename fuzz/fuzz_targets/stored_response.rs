//! Stored idempotency responses (seawall-tower's `StoredResponse::decode`, which reads every
//! store's values: the memory store's, a PostgreSQL `response` column, the response part of a
//! Redis value): never panic, and a decoded response encodes to bytes that decode to it again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall_tower::server::idempotency::StoredResponse;

fuzz_target!(|data: &[u8]| {
    let Ok(r) = StoredResponse::decode(bytes::Bytes::copy_from_slice(data)) else { return };
    assert!(r.body.len() <= data.len());
    // A decoded response fits the format it came in, so it encodes.
    let bytes = r.encode().expect("a decoded response fits its own format");
    let again = StoredResponse::decode(bytes).expect("its own encoding decodes");
    assert_eq!(again, r);
});
