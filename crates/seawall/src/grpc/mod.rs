//! gRPC retries and hedging by the rules of gRFC A6 (feature `grpc`): the service config, the
//! backoff and pushback rules, throttle accounting and the hedging schedule, sans-io.
//!
//! # Why a separate mode
//!
//! seawall's HTTP rules retry only what is safe by method (or carries an `Idempotency-Key`), and
//! every gRPC call is an HTTP `POST`: under them a gRPC call is never retried. gRPC has its own
//! answer, in the service config a service owner publishes: per method, which status codes are
//! retryable (`retryPolicy`) or which failures leave hedged copies worth waiting for
//! (`hedgingPolicy`), and a per-server token bucket (`retryThrottling`) that switches retries off
//! when failures pass about `tokenRatio` of successes. This module implements those rules as
//! written in gRFC A6, "gRPC Retry Design"
//! (<https://github.com/grpc/proposal/blob/master/A6-client-retries.md>), for any transport to
//! drive: `seawall-tower`'s `GrpcRetryLayer` drives it for tonic.
//!
//! Where A6 differs from seawall's HTTP policy, this mode follows A6; [`retry`] lists the
//! differences (pushback replaces the delay rather than bounding it, non-retryable codes leave
//! the throttle alone, codes rather than methods decide).
//!
//! ```
//! use std::time::Duration;
//! use seawall::grpc::{Code, Policy, Pushback, RetryDecision, RetryState, ServiceConfig};
//! use seawall::rng::SeededRng;
//!
//! let config = ServiceConfig::from_json(r#"{
//!   "methodConfig": [{"name": [{"service": "demo.Echo"}],
//!     "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
//!                     "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}],
//!   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
//! }"#)?;
//! let throttle = config.throttling().map(|t| t.throttle());
//! let Some(Policy::Retry(policy)) = &config.lookup_path("/demo.Echo/Say").unwrap().policy else {
//!     unreachable!()
//! };
//! let mut call = RetryState::new();
//! let mut rng = SeededRng::new(1);
//! match call.on_failure(policy, Code::UNAVAILABLE, Pushback::Absent, throttle.as_ref(), &mut rng) {
//!     RetryDecision::Retry { after, previous } => {
//!         // initialBackoff · random(0.8, 1.2) (A6 as revised on 2024-08-29)
//!         assert!(after >= Duration::from_millis(80) && after < Duration::from_millis(120));
//!         assert_eq!(previous, 1); // grpc-previous-rpc-attempts: 1
//!     }
//!     RetryDecision::Stop(why) => unreachable!("{why:?}"),
//! }
//! assert_eq!(throttle.unwrap().tokens(), 9.0);
//! # Ok::<(), seawall::grpc::ServiceConfigError>(())
//! ```

mod code;
pub mod config;
pub mod duration;
pub mod hedge;
mod pushback;
pub mod retry;

pub use code::{Code, CodeSet};
pub use config::{
    ErrorKind, HedgingConfig, MethodConfig, Name, Policy, RetryConfig, ServiceConfig,
    ServiceConfigError, Throttling,
};
pub use hedge::{HedgeState, HedgeVerdict};
pub use pushback::Pushback;
pub use retry::{RetryDecision, RetryState, StopReason};
