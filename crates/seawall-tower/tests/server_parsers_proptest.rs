//! Property tests: no header bytes make a server parser or the whole server stack panic.
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body_util::Full;
use proptest::prelude::*;
use seawall::time::Instant;
use seawall_tower::server::idempotency::key::parse_key;
use seawall_tower::server::{DeadlineLayer, IdempotencyLayer, ShedLayer, deadline};
use tower::{Layer, ServiceExt};

fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    // Everything a HeaderValue can hold (visible ASCII, space, tab, obs-text), biased to digits.
    prop_oneof![
        prop::collection::vec(
            prop_oneof![
                Just(b'0'),
                Just(b'9'),
                Just(b'-'),
                Just(b'"'),
                0x20u8..0x7f,
                0x80u8..=0xff
            ],
            0..40
        ),
        "[0-9]{0,30}[HMSmun]?".prop_map(String::into_bytes),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parsers_never_panic(v in header_bytes()) {
        let _ = parse_key(&v);
        let _ = seawall_tower::wire::parse_attempt(&v);
        let _ = seawall_tower::wire::parse_grpc_previous_attempts(&v);
        if let Ok(hv) = HeaderValue::from_bytes(&v) {
            for name in ["request-timeout-ms", "grpc-timeout"] {
                let mut h = http::HeaderMap::new();
                h.insert(name, hv.clone());
                if let Ok(d) = deadline::resolve(&h, Instant::ZERO, Duration::from_secs(15), Duration::from_secs(60)) {
                    prop_assert!(d.remaining(Instant::ZERO) <= Duration::from_secs(60));
                }
            }
        }
    }

    #[test]
    fn the_whole_stack_answers_every_header_value(v in header_bytes()) {
        let Ok(hv) = HeaderValue::from_bytes(&v) else { return Ok(()) };
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let handler = tower::service_fn(|_req: Request<Full<Bytes>>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
            });
            let stack = DeadlineLayer::new().layer(
                ShedLayer::new(NonZeroUsize::new(4).unwrap()).layer(IdempotencyLayer::in_memory().layer(handler)),
            );
            for name in ["request-timeout-ms", "grpc-timeout", "request-attempt", "grpc-previous-rpc-attempts", "idempotency-key"] {
                let req = Request::post("/x").header(name, hv.clone()).body(Full::new(Bytes::new())).unwrap();
                let res = stack.clone().oneshot(req).await.unwrap();
                assert!(res.status().as_u16() < 600);
            }
        });
    }
}
