//! An admin endpoint for the retry kill switch and ramp: read, switch off, ramp back up.
//!
//! # Why an endpoint
//!
//! During a storm, the one preparation that pays off is a flag that turns retries off: once
//! flipped, the dependency can recover within minutes. Flipping it must not need a deploy, and
//! turning retries back on must not re-form the herd: so `off` is instant and `ramp` walks 10 → 25
//! → 50 → 100 % ([`seawall::control::RAMP`]). This is a plain function of the [`Control`] and the
//! request, so it mounts on any framework; with axum:
//!
//! ```
//! use axum::{Router, extract::Request, routing::any};
//! use seawall::control::Control;
//! use seawall_tower::admin::{AdminAuth, AdminToken};
//! use seawall_tower::client::admin_response;
//! use std::sync::Arc;
//!
//! let control = Arc::new(Control::new());
//! let auth = Arc::new(AdminAuth::Bearer(AdminToken::new("example-token-0123456789").unwrap()));
//! let app: Router = Router::new().route(
//!     "/admin/retries",
//!     any(move |req: Request| {
//!         let (c, a) = (control.clone(), auth.clone());
//!         async move { admin_response(&c, &a, &req) }
//!     }),
//! );
//! ```
//!
//! | request | effect |
//! |---|---|
//! | `GET` | `{"retry_percent":N}` |
//! | `POST ?action=off` | kill switch: no retries from the next decision on |
//! | `POST ?action=ramp` | next stage of the ramp |
//! | `POST ?action=on` | all retries at once (prefer `ramp`) |
//! | `POST ?percent=N` | exactly N % (0–100) |
//!
//! Every request must carry `Authorization: Bearer <token>` matching the [`AdminAuth`]
//! (`401` otherwise, nothing changed; see [`crate::admin`]). Serve it on a management listener,
//! not the traffic port.
//!
//! [`AdminAuth`]: crate::admin::AdminAuth

use http::{Request, Response};
use seawall::control::Control;

/// The state the admin endpoint reports.
///
/// ```
/// use seawall::control::Control;
/// use seawall_tower::client::ControlState;
///
/// let c = Control::new();
/// c.disable();
/// assert_eq!(ControlState::of(&c).to_json(), r#"{"retry_percent":0}"#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlState {
    /// Percentage of retries allowed (0 = kill switch on).
    pub retry_percent: u8,
}

impl ControlState {
    /// The current state of `control`.
    pub fn of(control: &Control) -> Self {
        ControlState { retry_percent: control.percent() }
    }

    /// As a JSON object.
    pub fn to_json(self) -> String {
        format!("{{\"retry_percent\":{}}}", self.retry_percent)
    }
}

/// Serves the admin endpoint for `control` (see the [module docs](self) for the requests).
pub fn admin_response<B>(
    control: &Control,
    auth: &crate::admin::AdminAuth,
    req: &Request<B>,
) -> Response<String> {
    let before = control.percent();
    let resp = crate::admin::percent_response(control, auth, req, "retry_percent");
    if control.percent() != before {
        tracing::info!(retry_percent = control.percent(), "seawall: retry control changed");
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(c: &Control, method: &str, uri: &str) -> (u16, String) {
        let req = Request::builder().method(method).uri(uri).body(()).unwrap();
        let r = admin_response(c, &crate::admin::AdminAuth::unauthenticated(), &req);
        (r.status().as_u16(), r.into_body())
    }

    #[test]
    fn read_switch_off_and_ramp() {
        let c = Control::new();
        assert_eq!(call(&c, "GET", "/"), (200, r#"{"retry_percent":100}"#.into()));
        assert_eq!(call(&c, "POST", "/?action=off").1, r#"{"retry_percent":0}"#);
        assert_eq!(call(&c, "POST", "/?action=ramp").1, r#"{"retry_percent":10}"#);
        assert_eq!(call(&c, "POST", "/?percent=50").1, r#"{"retry_percent":50}"#);
        assert_eq!(call(&c, "POST", "/?percent=101").0, 400);
        assert_eq!(call(&c, "POST", "/?percent=-1").0, 400);
        assert_eq!(call(&c, "POST", "/").0, 400);
        assert_eq!(call(&c, "DELETE", "/").0, 405);
        assert_eq!(c.percent(), 50);
    }
}
