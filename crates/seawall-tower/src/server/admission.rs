//! The admission knob's admin endpoint: how an operator (or `seawall escape`) cuts a server's
//! admission to a fraction during a storm and ramps it back.
//!
//! Mount it next to the server, sharing the [`Control`] given to
//! [`ShedLayer::with_admission`](crate::server::ShedLayer::with_admission):
//!
//! ```
//! use axum::{Router, extract::Request, routing::{any, get}};
//! use seawall::control::Control;
//! use seawall_tower::admin::{AdminAuth, AdminToken};
//! use seawall_tower::server::{ShedLayer, admission_response};
//! use std::num::NonZeroUsize;
//! use std::sync::Arc;
//!
//! let knob = Arc::new(Control::new());
//! let auth = Arc::new(AdminAuth::Bearer(AdminToken::from_env("SEAWALL_ADMIN_TOKEN")
//!     .unwrap_or_else(|_| AdminToken::new("example-token-0123456789").unwrap())));
//! let shed = ShedLayer::new(NonZeroUsize::new(64).unwrap()).with_admission(knob.clone());
//! let app: Router = Router::new()
//!     .route("/work", get(|| async { "done" }))
//!     .layer(shed)
//!     .route(
//!         "/admin/admission",
//!         any(move |req: Request| {
//!             let (k, a) = (knob.clone(), auth.clone());
//!             async move { admission_response(&k, &a, &req) }
//!         }),
//!     );
//! ```
//!
//! `GET` reports `{"admit_percent":N}`; `POST ?percent=N`, `?action=off|ramp|on` change it (the
//! same requests as the client's retry switch, and the same 10 → 25 → 50 → 100 % ramp). Every
//! request must carry `Authorization: Bearer <token>` (see [`crate::admin`]: `401` otherwise,
//! nothing changed); serve it on a management listener, not the traffic port.

use http::{Request, Response};
use seawall::control::Control;

use crate::admin::AdminAuth;

/// Serves the admission knob's admin endpoint (see the [module docs](self)) after checking
/// `auth`.
pub fn admission_response<B>(
    knob: &Control,
    auth: &AdminAuth,
    req: &Request<B>,
) -> Response<String> {
    crate::admin::percent_response(knob, auth, req, "admit_percent")
}
