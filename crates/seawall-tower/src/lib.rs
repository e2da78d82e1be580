//! tower middleware that retries right and sheds load cheaply, built on the [`seawall`] core.
//!
//! A retry storm needs every layer retrying, retries nobody budgets, and servers doing work for
//! callers who have given up. These layers remove all three:
//!
//! - `client`: one layer that owns retries (`client::RetryLayer`: attempts capped, a retry
//!   budget, full jitter, server hints honoured) and a fail-fast layer for every other hop, with
//!   deadlines and attempt numbers on the wire.
//! - `server`: admission control that sheds early and cheaply, deadline enforcement, and
//!   idempotency keys that make retried writes safe.
//!
//! Both speak the wire conventions of [`wire`], and read the time through an injected clock
//! (`time::TokioClock` runs them on a paused tokio runtime's virtual time).
//!
//! # Start here
//!
//! [The guide](crate::_guide) (built with the default features) walks through an axum
//! service, a reqwest client, a tonic client, clients in application state, a budget per
//! dependency and tests on virtual time. The dependency lines for its first two sections:
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
//! Optional parts are features: `axum`, `reqwest`, `reqwest-middleware`, `otel`,
//! `prometheus`, `redis-control`, `postgres`, `redis-store` (the crate's README has a table). gRPC is the
//! companion crate `seawall-grpc`.
//! Items that need one say so in these docs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

#[cfg(all(feature = "client", feature = "server"))]
pub mod _guide;
#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
pub mod client;
#[cfg(any(feature = "client", feature = "server"))]
pub mod propagate;
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod server;
#[cfg(any(feature = "client", feature = "server"))]
pub mod time;
pub mod wire;

#[cfg(any(feature = "client", feature = "server"))]
pub mod admin;
#[cfg(any(feature = "client-prometheus", feature = "prometheus"))]
mod exposition;
