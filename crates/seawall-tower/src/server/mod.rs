//! Server layers: shed load early and cheaply, drop doomed work, make retried writes safe.
//!
//! Old app versions, partners and scripts will retry however they like, so a server must protect
//! itself (DESIGN.md, rule 5). Three layers, outermost first:
//!
//! 1. [`DeadlineLayer`] reads the caller's remaining time (`Request-Timeout-Ms` / `grpc-timeout`),
//!    clamps it to the server's maximum, puts a [`RequestDeadline`](crate::wire::RequestDeadline)
//!    into the request extensions and cancels the work when the deadline passes.
//! 2. [`ShedLayer`] admits at most N requests at once, queues a few, and rejects the rest at once
//!    with 503 and a jittered `Retry-After`; first attempts are served before retries, and a
//!    standing queue switches it to CoDel + adaptive LIFO.
//! 3. [`IdempotencyLayer`] executes a request carrying an `Idempotency-Key` once and replays the
//!    stored response to repeats.
//!
//! All three report into one [`ServerMetrics`]; with the `prometheus` feature,
//! `ServerMetrics::register` exports it as `seawall_server_*` metrics.
//!
//! ```
//! use seawall_tower::server::{DeadlineLayer, IdempotencyLayer, ServerMetrics, ShedLayer};
//! use std::num::NonZeroUsize;
//! use tower::ServiceBuilder;
//!
//! let metrics = ServerMetrics::new();
//! let layers = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new().metrics(metrics.clone()))
//!     .layer(ShedLayer::new(NonZeroUsize::new(64).unwrap()).metrics(metrics.clone()))
//!     .layer(IdempotencyLayer::in_memory());
//! # let _ = layers;
//! ```

pub mod admission;
pub mod deadline;
pub mod idempotency;
pub mod metrics;
#[cfg(feature = "prometheus")]
pub mod prometheus;
mod response;
pub mod shed;

pub use admission::admission_response;
pub use deadline::{DeadlineLayer, MalformedTimeout};
pub use idempotency::IdempotencyLayer;
pub use metrics::{MetricsSnapshot, RejectReason, ServerMetrics};
pub use shed::ShedLayer;
