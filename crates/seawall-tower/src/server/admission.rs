//! The admission knob's admin endpoint: how an operator (or `seawall escape`) cuts a server's
//! admission to a fraction during a storm and ramps it back.
//!
//! Mount it next to the server, sharing the [`Control`] given to
//! [`ShedLayer::admission`](crate::server::ShedLayer::admission):
//!
//! ```
//! use axum::{Router, extract::Request, routing::{any, get}};
//! use seawall::control::Control;
//! use seawall_tower::server::{ShedLayer, admission_response};
//! use std::num::NonZeroUsize;
//! use std::sync::Arc;
//!
//! let knob = Arc::new(Control::new());
//! let shed = ShedLayer::new(NonZeroUsize::new(64).unwrap()).admission(knob.clone());
//! let app: Router = Router::new()
//!     .route("/work", get(|| async { "done" }))
//!     .layer(shed)
//!     .route(
//!         "/admin/admission",
//!         any(move |req: Request| {
//!             let k = knob.clone();
//!             async move { admission_response(&k, &req) }
//!         }),
//!     );
//! ```
//!
//! `GET` reports `{"admit_percent":N}`; `POST ?percent=N`, `?action=off|ramp|on` change it (the
//! same requests as the client's retry switch, and the same 10 → 25 → 50 → 100 % ramp). Protect
//! the route as you protect any admin route; this function does no authentication.

use http::{Request, Response};
use seawall::control::Control;

/// Serves the admission knob's admin endpoint (see the [module docs](self)).
pub fn admission_response<B>(knob: &Control, req: &Request<B>) -> Response<String> {
    crate::admin::percent_response(knob, req, "admit_percent")
}
