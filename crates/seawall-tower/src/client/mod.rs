//! Client layers: one layer that owns retries, fail-fast layers below it, deadlines and attempt
//! numbers on the wire, metrics a dashboard can use.
//!
//! # What to add to an existing service
//!
//! At the edge of each call path, [`RetryLayer`]: it retries by the core
//! [`RetryPolicy`](seawall::policy::RetryPolicy) — attempt cap, budget, jittered backoff, server
//! hints, deadline. On every other hop, [`FailFastLayer`]: one attempt, and a dependency's
//! overload becomes an explicit "overloaded; don't retry" for the caller above, so attempts
//! never multiply across layers. Both stamp the attempt number on retries
//! (`Request-Attempt: 2`, 3, …, or `grpc-previous-rpc-attempts` for gRPC; a first attempt
//! carries none, which servers read as 1) and the time left on every attempt
//! (`Request-Timeout-Ms`, or `grpc-timeout`), and cut each attempt off at its timeout. The
//! deadline comes from the request's [`RequestDeadline`](crate::wire::RequestDeadline) extension,
//! else from the request the task is serving ([`propagate`](crate::propagate): the server
//! `DeadlineLayer` runs its handler in that scope, so nothing is copied by hand), else the
//! layer's default. A [`BreakerLayer`] below the retry owner stops even first attempts to a
//! failing dependency (when to use one rather than a budget alone: [`breaker`]).
//!
//! Both read the time from a clock, [`SystemClock`](seawall::time::SystemClock) unless built
//! `with_clock` (`crate::time::TokioClock` runs them on a paused runtime's virtual time, for
//! tests of your own service; an inherited deadline made on another clock is read as its time
//! left), and both are fixed in their role by their type: a policy given
//! to a `FailFastLayer` makes one attempt per call whatever its configuration's role says.
//!
//! Both wrap any `tower::Service<http::Request<B>>`: hyper's client, reqwest (through
//! `reqwest::ReqwestService` with the `reqwest` feature; see `examples/reqwest_client.rs`), axum's
//! outbound calls, tonic channels.
//!
//! reqwest users who keep reqwest's API (`client.get(url).send()`, streamed responses) add the
//! same policy as a reqwest-middleware middleware instead: `middleware::RetryMiddleware` (feature
//! `reqwest-middleware`; see `examples/reqwest_middleware.rs`).
//!
//! Runtime control — the kill switch and the staged ramp of [`seawall::control`] — is shared
//! through the policy's `Arc<Control>`; [`admin_response`] serves it over HTTP and, with the
//! `redis-control` feature, `fleet` switches a whole fleet at once. Metrics:
//! [`ClientMetrics`] (Prometheus, OpenTelemetry names, the attempts-per-call PromQL and alert
//! rules in its docs); with the `otel` feature, `metrics::otel` exports the same values through an
//! OpenTelemetry `Meter`.
//!
//! The layout: each layer in its folder (`retry/`, `fail_fast/`, `breaker/`), what they share
//! around each attempt in `engine/` (stamping, classifying, replaying the body, the timers, the
//! layers' configuration), the metrics and their Prometheus and OpenTelemetry exports in
//! `metrics/`, and the adapters (`reqwest`, `middleware/`, `fleet`, `control`) beside them.

pub mod breaker;
pub mod control;
mod engine;
mod fail_fast;
pub mod metrics;
mod retry;

#[cfg(feature = "redis-control")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis-control")))]
pub mod fleet;
#[cfg(feature = "reqwest-middleware")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest-middleware")))]
pub mod middleware;
#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
pub mod reqwest;

pub use breaker::{
    BreakerFuture, BreakerLayer, BreakerMetrics, BreakerOpen, BreakerService, Forced,
};
pub use control::{ControlState, admin_response};
pub use engine::body::ReplayBody;
pub use fail_fast::{FailFast, FailFastFuture, FailFastLayer};
pub use metrics::ClientMetrics;
#[cfg(feature = "client-prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "client-prometheus")))]
pub use metrics::prometheus::{metrics_response, metrics_text};
pub use retry::{BoxError, GaveUpError, LastOutcome, Retry, RetryFuture, RetryLayer};
