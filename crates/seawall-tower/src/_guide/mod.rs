//! A guide to adding seawall to a service: the server layers on an axum service, a reqwest
//! client, a tonic client, clients kept in application state, a budget per dependency, and
//! tests of your own service on virtual time.
//!
//! This module holds no code; every example below compiles (and most run) as a doctest.
//!
//! # 0. Dependencies
//!
//! The server layers and the reqwest client below need these features (`client`, `server` and
//! `client-prometheus` are on by default). seawall has no published release yet: take it from
//! a checkout by path, or by `git = "…"` from wherever you cloned it.
//!
//! ```toml
//! [dependencies]
//! seawall-tower = { path = "../seawall/crates/seawall-tower", features = ["axum", "reqwest-middleware"] }
//! axum = "0.8"
//! reqwest = "0.13"
//! reqwest-middleware = "0.5"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! Add `seawall-grpc` for section 3, the features `postgres` or `redis-store` for a shared idempotency store,
//! `redis-control` for the fleet-wide retry switch and `otel` for OpenTelemetry metrics. The
//! crate's front page lists every feature. `seawall-tower/tests/guide_scratch_crate.rs` builds
//! a crate outside the workspace from exactly this table and the examples of sections 1 and 2.
//!
//! # 1. An axum service: shed early, enforce deadlines, make writes safe to retry
//!
//! Three layers, outermost first: [`DeadlineLayer`](crate::server::DeadlineLayer) reads the
//! caller's time left (`Request-Timeout-Ms` or `grpc-timeout`) and drops the handler at the
//! deadline; [`IdempotencyLayer`](crate::server::IdempotencyLayer) runs a keyed write once per
//! `Idempotency-Key` and principal and replays its answer to retries;
//! [`ShedLayer`](crate::server::ShedLayer) admits at most N requests at once, queues a few
//! (CoDel, first attempts before retries) and refuses the rest at once with 503 and a jittered
//! `Retry-After`. In that order the body is read (and its limits enforced) before a request
//! takes an admission slot, and a request whose deadline passed in the queue is dropped there.
//! With axum, the last `.layer` is the outermost:
//!
//! ```
//! use std::num::NonZeroUsize;
//!
//! use std::time::Duration;
//!
//! use axum::{Router, routing::post};
//! use seawall_tower::server::idempotency::scope::Principal;
//! use seawall_tower::server::{DeadlineLayer, IdempotencyLayer, ShedLayer};
//!
//! async fn pay() -> &'static str {
//!     "paid"
//! }
//!
//! let app: Router = Router::new()
//!     .route("/pay", post(pay))
//!     // 64 requests in service at once: set it from a load test of the service (or use
//!     // `ShedLayer::adaptive` for a limit that follows the measured latency).
//!     .layer(ShedLayer::new(NonZeroUsize::new(64).unwrap()))
//!     // Keys are scoped by the principal your auth middleware resolved (a `Principal` in the
//!     // request extensions, by default): a keyed request without one is refused with 401.
//!     .layer(IdempotencyLayer::in_memory())
//!     // Callers without a deadline get 5 s; none gets more than 30 s.
//!     .layer(
//!         DeadlineLayer::new()
//!             .with_default_timeout(Duration::from_secs(5))
//!             .with_max_timeout(Duration::from_secs(30)),
//!     );
//! # let _ = (app, Principal::user("u1"));
//! ```
//!
//! A handler that wants to know its time left (to skip optional work, say) asks for it: with the
//! `axum` feature, [`TimeLeft`](crate::server::TimeLeft) is an extractor;
//! [`time_left`](crate::server::time_left) reads it from a request's extensions without axum.
//!
//! A handler's outgoing calls inherit its deadline by themselves: `DeadlineLayer` runs the
//! handler inside [`propagate::scope`](crate::propagate::scope), and the client layers below
//! read [`propagate::current`](crate::propagate::current) when a request carries no deadline of
//! its own. Work a handler moves to another task with `tokio::spawn` leaves the scope; wrap it
//! in `propagate::scope(d, fut)` to take the deadline along. The deadline keeps the clock it was
//! made on ([`RequestDeadline`](crate::wire::RequestDeadline)): a client layer on another clock
//! (a paused `TokioClock` in a test under a `SystemClock` server, say) reads its time left
//! rather than misreading its instant.
//!
//! # 2. A reqwest client
//!
//! With the `reqwest-middleware` feature, [`RetryMiddleware`](crate::client::middleware::RetryMiddleware)
//! goes on a reqwest-middleware `ClientBuilder`; calls stay `client.get(url).send()`, responses
//! stay reqwest's (`.json()`, streaming), and the policy is the same as `RetryLayer`'s: three
//! attempts, a retry budget, full jitter, `Retry-After` honoured, writes retried only with an
//! `Idempotency-Key`. The [`middleware`](crate::client::middleware) module docs set the lines
//! beside reqwest-retry's.
#![cfg_attr(
    feature = "reqwest-middleware",
    doc = r##"
```
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use seawall_tower::client::middleware::RetryMiddleware;

let client: ClientWithMiddleware =
    ClientBuilder::new(reqwest::Client::new()).with(RetryMiddleware::new()).build();
# let _ = client;
```
"##
)]
//!
//! Tower users who keep `http::Request`s use `RetryLayer` over
//! [`ReqwestService`](crate::client::reqwest::ReqwestService) (feature `reqwest`) instead.
//!
//! # 3. A tonic client
//!
//! gRPC calls are all POSTs, so seawall's HTTP rules would never retry them. The companion crate
//! `seawall-grpc` (`crates/seawall-grpc`) has `GrpcRetryLayer`, which retries (or hedges) each
//! method as the service config says, by gRFC A6's rules — the same JSON a gRPC client in any
//! other language reads. It is one layer directly over the channel (it buffers requests itself,
//! so there is no order to get wrong), and its crate page has the example:
//!
//! ```toml
//! seawall-grpc = { path = "../seawall/crates/seawall-grpc" }
//! tonic = "0.14"
//! ```
//!
//! # 4. Clients in application state
//!
//! A layered client's type is long; name it once. `RetryLayer` over a service `S` makes a
//! [`Retry<S>`](crate::client::Retry) (budget and clock have defaults), and it is `Clone`: keep one in
//! the state and clone it per request, so every request shares its budget and metrics.
//!
//! ```
//! use std::sync::Arc;
//!
//! use seawall_tower::client::{ClientMetrics, Retry, RetryLayer};
//! use tower::Layer;
//!
//! /// The service this application calls its dependencies through (any
//! /// `tower::Service<http::Request<B>>`: hyper's client, `ReqwestService`, a channel).
//! #[derive(Clone, Debug)]
//! struct Http;
//! # impl tower::Service<http::Request<String>> for Http {
//! #     type Response = http::Response<String>;
//! #     type Error = std::convert::Infallible;
//! #     type Future = std::future::Ready<Result<Self::Response, Self::Error>>;
//! #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
//! #         std::task::Poll::Ready(Ok(()))
//! #     }
//! #     fn call(&mut self, _: http::Request<String>) -> Self::Future {
//! #         std::future::ready(Ok(http::Response::new(String::new())))
//! #     }
//! # }
//!
//! /// The client as the state stores it.
//! type Inventory = Retry<Http>;
//!
//! #[derive(Clone)]
//! struct AppState {
//!     inventory: Inventory,
//! }
//!
//! let metrics = Arc::new(ClientMetrics::new());
//! let state = AppState { inventory: RetryLayer::new().with_metrics(metrics).layer(Http) };
//! # let _ = state.clone().inventory;
//! ```
//!
//! With the middleware, the state holds reqwest-middleware's `ClientWithMiddleware`, which is
//! already a plain type; with `ReqwestService`, the alias
//! [`RetryingReqwest`](crate::client::reqwest::RetryingReqwest) names the stack.
//!
//! # 5. Several dependencies, a budget each
//!
//! A budget protects one dependency from this client's retries: give each dependency its own
//! layer and policy, so a sick payments service empties the payments budget and nothing else.
//! The budget types are the core's ([`seawall::budget`]): a ratio budget (Finagle's and tower's
//! `TpsBudget`), gRPC's throttle, the AWS SDKs' retry quota, Envoy's concurrent-retry budget,
//! Google's adaptive throttle.
//!
//! ```
//! use std::time::Duration;
//!
//! use seawall::budget::{GrpcThrottle, RatioBudget};
//! use seawall::policy::{PolicyConfig, RetryPolicy};
//! use seawall_tower::client::RetryLayer;
//!
//! # fn main() -> Result<(), seawall::error::ConfigError> {
//! // Payments: at most 10 % retries over 10 s, plus 1 per second.
//! let payments = RetryLayer::from_policy(RetryPolicy::new(
//!     PolicyConfig::default(),
//!     RatioBudget::new(Duration::from_secs(10), 1, 0.1)?,
//! ));
//! // Search: gRPC's throttle (10 tokens, 0.1 per success), 2 attempts.
//! let search = RetryLayer::from_policy(RetryPolicy::new(
//!     PolicyConfig::default().with_max_attempts(2)?,
//!     GrpcThrottle::new(10, 0.1)?,
//! ));
//! # let _ = (payments, search);
//! # Ok(()) }
//! ```
//!
//! Label each dependency's metrics by giving each layer its own
//! [`ClientMetrics`](crate::client::ClientMetrics) registered under a label of its name.
//!
//! # 6. Testing your own service on virtual time
//!
//! Every layer reads the time through a clock (`with_clock`), so a test can run a whole
//! retry-and-deadline story in milliseconds and the same way every time:
//! [`TokioClock`](crate::time::TokioClock) reads tokio's clock, which a
//! `#[tokio::test(start_paused = true)]` runtime moves only when every task waits, straight to
//! the next timer. A dependency that fails twice, then answers, is retried after its full-jitter
//! waits without a real millisecond passing:
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::time::Duration;
//!
//! use seawall_tower::client::RetryLayer;
//! use seawall_tower::time::TokioClock;
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let calls = Arc::new(AtomicU32::new(0));
//! let seen = calls.clone();
//! let flaky = service_fn(move |_req: http::Request<String>| {
//!     let n = seen.fetch_add(1, Ordering::SeqCst);
//!     async move {
//!         let status = if n < 2 { 503 } else { 200 };
//!         let resp = http::Response::builder().status(status).body(String::new()).unwrap();
//!         Ok::<_, std::convert::Infallible>(resp)
//!     }
//! });
//! let client = RetryLayer::new()
//!     .with_clock(TokioClock)
//!     .with_default_timeout(Duration::from_secs(5))
//!     .layer(flaky);
//! let started = tokio::time::Instant::now();
//! let resp = client.oneshot(http::Request::new(String::new())).await.unwrap();
//! assert_eq!(resp.status(), 200);
//! assert_eq!(calls.load(Ordering::SeqCst), 3);
//! // The waits happened on virtual time: at most the backoff caps, and no real time.
//! assert!(started.elapsed() < Duration::from_secs(5));
//! # }
//! ```
//!
//! The simulator (`seawall simulate`) runs the same policy and admission code at fleet scale;
//! the lab (`seawall lab --target`) runs faults against your own stack on loopback.
//!
//! # 7. Your service through a retry storm, before production does
//!
//! The virtual lab puts your own axum `Router`, with its seawall layers on
//! [`TokioClock`](crate::time::TokioClock), between the lab's open-loop load and the lab's
//! dependency, and runs a scenario — a rate, a dependency's capacity, a fault — through it on
//! virtual time: `seawall_lab::vlab::run_service(&params, VirtualParams::default(),
//! Stack::Baseline, "checkout", |dependency| my_router(dependency))`. You build the router from
//! a `Link` to the dependency, the inner service of your client layers; what comes back is the
//! run the other labs judge (attempts per second at the dependency, goodput before, during and
//! after the fault, "recovered" or not). `crates/seawall-lab/examples/virtual_service.rs` does
//! it for a checkout service with the client teams often write first and with seawall's
//! (`cargo run -p seawall-lab --example virtual_service`, about a second):
//!
//! ```text
//!    naive: recovered false — 480 attempts/s at the dependency at the peak, goodput 100 % before / 1 % during / 0 % after the fault
//!  seawall: recovered true — 165 attempts/s at the dependency at the peak, goodput 100 % before / 0 % during / 100 % after the fault
//! ```
//!
//! and `crates/seawall-lab/tests/virtual_service.rs` runs that example's service through the
//! storm and asserts both verdicts.
