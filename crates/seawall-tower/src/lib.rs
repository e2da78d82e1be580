//! tower middleware built on the [`seawall`] core.
//!
//! - `client`: one layer that owns retries (`client::RetryLayer`) and a fail-fast layer for
//!   every other hop, with deadlines and attempt numbers on the wire.
//! - `server`: admission control that sheds early and cheaply, deadline enforcement, and
//!   idempotency keys that make retried writes safe.
//!
//! Both speak the wire conventions of [`wire`], and read the time through an injected clock
//! (`time::TokioClock` runs them on a paused tokio runtime's virtual time).
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
