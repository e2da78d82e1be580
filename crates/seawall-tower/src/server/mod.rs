//! Server layers: shed load early and cheaply, drop doomed work, make retried writes safe.
//!
//! Old app versions, partners and scripts will retry however they like, so a server must protect
//! itself (the Google SRE book, "Handling Overload"). Four layers, outermost first:
//!
//! 1. [`DeadlineLayer`] reads the caller's remaining time (`Request-Timeout-Ms` / `grpc-timeout`),
//!    clamps it to the server's maximum, puts a [`RequestDeadline`](crate::wire::RequestDeadline)
//!    into the request extensions and cancels the work when the deadline passes.
//! 2. [`BufferBodyLayer`] reads every (non-gRPC) request body, bounded in size and time, before
//!    the request asks for a slot, so a handler that reads its body never waits for a slow
//!    client inside admission: 96 trickled bodies hold connections, not the 32 slots
//!    (`tests/server_slow_bodies.rs`). Leave it out for routes that stream large uploads.
//! 3. [`IdempotencyLayer`] executes a request carrying an `Idempotency-Key` once and replays the
//!    stored response to repeats. It sits *outside* admission: it reads a keyed request's body
//!    (bounded by its `max_body` and `body_timeout`) before the request asks for a slot, so a
//!    client trickling its body holds a connection, never an admission slot, and the shedder's
//!    own rejections (503, or 504 for a deadline that passed in its queue) release the key
//!    instead of being stored. A request cut while it waits in the shedder's queue releases its
//!    key too: the shedder marks its [`Dispatch`] as queued.
//! 4. [`ShedLayer`] admits at most N requests at once, queues a few, and rejects the rest at once
//!    with 503 and a jittered `Retry-After`; first attempts are served before retries, and a
//!    standing queue switches it to CoDel + adaptive LIFO.
//!
//! The deadline and shedding layers report into one [`ServerMetrics`], the idempotency layer
//! into its [`IdempotencyMetrics`](idempotency::IdempotencyMetrics); with the `prometheus`
//! feature, `ServerMetrics::register` and `IdempotencyMetrics::register` export them as
//! `seawall_server_*` and `seawall_server_idempotency_*` metrics.
//!
//! ```
//! use seawall_tower::server::{
//!     BufferBodyLayer, DeadlineLayer, IdempotencyLayer, ServerMetrics, ShedLayer,
//! };
//! use std::num::NonZeroUsize;
//! use tower::ServiceBuilder;
//!
//! let metrics = ServerMetrics::new();
//! let layers = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new().with_metrics(metrics.clone()))
//!     .layer(BufferBodyLayer::new())
//!     .layer(IdempotencyLayer::in_memory())
//!     .layer(ShedLayer::new(NonZeroUsize::new(64).unwrap()).with_metrics(metrics.clone()));
//! # let _ = layers;
//! ```

pub mod admission;
pub mod body;
pub mod deadline;
mod dispatch;
pub mod idempotency;
pub mod metrics;
pub mod problem;
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub mod prometheus;
mod response;
pub mod shed;

pub use admission::admission_response;
pub use body::BufferBodyLayer;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use deadline::MissingDeadline;
pub use deadline::{DeadlineLayer, MalformedTimeout};
pub use deadline::{TimeLeft, time_left};
pub use dispatch::Dispatch;
pub use idempotency::IdempotencyLayer;
pub use metrics::{MetricsSnapshot, RejectReason, ServerMetrics};
pub use shed::ShedLayer;
