//! The admin endpoints' shared parts: the bearer-token check every endpoint makes first, and
//! the percentage knobs' request handling (the client's retry switch and the server's admission
//! knob).
//!
//! # Authentication is built in
//!
//! An admin endpoint that turns retries off or admission down is a denial-of-service switch, so
//! [`admin_response`](crate::client::admin_response) and
//! [`admission_response`](crate::server::admission_response) take an [`AdminAuth`] and check it
//! before anything else: a request without `Authorization: Bearer <token>` matching the
//! configured [`AdminToken`] gets `401` with `WWW-Authenticate: Bearer` and changes nothing.
//! The comparison is constant-time in the token's contents (only the length can leak, and
//! tokens are at least [`AdminToken::MIN_LEN`] bytes of random). There is no silent default:
//! serving an endpoint without a token takes [`AdminAuth::unauthenticated`], spelled out at the
//! mount site. Serve admin routes on a separate listener bound to loopback or a management
//! network too; a token is the second lock, not the only one.
//!
//! ```
//! use seawall_tower::admin::{AdminAuth, AdminToken};
//!
//! let auth = AdminAuth::Bearer(AdminToken::new("s3cr3t-0123456789abcdef").unwrap());
//! let ok = http::Request::get("/admin").header("authorization", "Bearer s3cr3t-0123456789abcdef");
//! assert!(auth.allows(&ok.body(()).unwrap()));
//! let bad = http::Request::get("/admin").header("authorization", "Bearer guess");
//! assert!(!auth.allows(&bad.body(()).unwrap()));
//! ```
//!
//! # The percentage knobs
//!
//! Both knobs are a [`Control`]: one atomic percentage with a kill switch and the staged ramp
//! 10 → 25 → 50 → 100 % ([`seawall::control::RAMP`]). Only the name under which the percentage
//! is reported differs (`retry_percent`, `admit_percent`), so the request handling lives here
//! once.
//!
//! | request | effect |
//! |---|---|
//! | `GET` | `{"<field>":N}` |
//! | `POST ?action=off` | 0 % from the next decision on |
//! | `POST ?action=ramp` | the next stage of the ramp |
//! | `POST ?action=on` | 100 % at once (prefer `ramp`) |
//! | `POST ?percent=N` | exactly N % (0–100) |

use std::fmt;

use http::{Method, Request, Response, StatusCode};
use seawall::control::Control;

/// A secret an admin request must present as `Authorization: Bearer <token>`.
#[derive(Clone)]
pub struct AdminToken(Box<[u8]>);

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminTokenError {
    /// Shorter than [`AdminToken::MIN_LEN`] bytes.
    TooShort,
    /// A byte outside the RFC 6750 `b64token` alphabet (letters, digits, `-._~+/=`).
    BadChar,
    /// The environment variable is unset or not UTF-8.
    Missing(String),
}

impl fmt::Display for AdminTokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdminTokenError::TooShort => {
                write!(f, "admin token shorter than {} bytes", AdminToken::MIN_LEN)
            }
            AdminTokenError::BadChar => {
                f.write_str("admin token must be letters, digits and -._~+/= (RFC 6750)")
            }
            AdminTokenError::Missing(var) => write!(f, "admin token: ${var} is not set"),
        }
    }
}

impl std::error::Error for AdminTokenError {}

impl AdminToken {
    /// Shortest token accepted: 16 bytes (128 bits when drawn at random, e.g.
    /// `openssl rand -hex 16` gives 32).
    pub const MIN_LEN: usize = 16;

    /// A token; at least [`MIN_LEN`](Self::MIN_LEN) bytes of the RFC 6750 `b64token` alphabet.
    pub fn new(token: impl AsRef<str>) -> Result<Self, AdminTokenError> {
        let t = token.as_ref().as_bytes();
        if t.len() < Self::MIN_LEN {
            return Err(AdminTokenError::TooShort);
        }
        if !t.iter().all(|b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(b)) {
            return Err(AdminTokenError::BadChar);
        }
        Ok(AdminToken(t.into()))
    }

    /// The token in the environment variable `var` (e.g. `SEAWALL_ADMIN_TOKEN`).
    pub fn from_env(var: &str) -> Result<Self, AdminTokenError> {
        let v = std::env::var(var).map_err(|_| AdminTokenError::Missing(var.to_owned()))?;
        Self::new(v)
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(&self.0, presented)
    }
}

/// Equality whose running time depends on the lengths only, not on the contents: every byte is
/// compared, differences are OR-ed together, and there is no early exit.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // `black_box` keeps the optimiser from turning the fold back into an early-exit compare.
    std::hint::black_box(diff) == 0
}

/// How an admin endpoint authenticates requests.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AdminAuth {
    /// `Authorization: Bearer <token>` must match.
    Bearer(AdminToken),
    /// No check. Only for a listener that nothing but trusted local processes can reach; build
    /// it with [`AdminAuth::unauthenticated`] so the choice is visible where it is made.
    Unauthenticated,
}

impl AdminAuth {
    /// No authentication: the caller vouches that only trusted processes reach this endpoint.
    pub fn unauthenticated() -> Self {
        AdminAuth::Unauthenticated
    }

    /// Whether `req` may use the endpoint.
    pub fn allows<B>(&self, req: &Request<B>) -> bool {
        let AdminAuth::Bearer(token) = self else { return true };
        let mut values = req.headers().get_all(http::header::AUTHORIZATION).iter();
        let (Some(v), None) = (values.next(), values.next()) else { return false };
        let v = v.as_bytes();
        // The scheme is case-insensitive (RFC 9110 §11.1), one space, then the token.
        v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer ") && token.matches(&v[7..])
    }
}

fn reply(status: StatusCode, body: String) -> Response<String> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

/// Serves the admin endpoint for `control`, reporting its percentage as `field`.
pub(crate) fn percent_response<B>(
    control: &Control,
    auth: &AdminAuth,
    req: &Request<B>,
    field: &'static str,
) -> Response<String> {
    if !auth.allows(req) {
        let mut r = reply(StatusCode::UNAUTHORIZED, r#"{"error":"unauthorized"}"#.into());
        r.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static(r#"Bearer realm="seawall-admin""#),
        );
        return r;
    }
    let bad = |why: &str| reply(StatusCode::BAD_REQUEST, format!("{{\"error\":\"{why}\"}}"));
    match *req.method() {
        Method::GET | Method::HEAD => {}
        Method::POST | Method::PUT => {
            let query = req.uri().query().unwrap_or("");
            let mut done = false;
            for (k, v) in query.split('&').filter_map(|kv| kv.split_once('=')) {
                match (k, v) {
                    ("action", "off") => control.disable(),
                    ("action", "on") => control.enable(),
                    ("action", "ramp") => {
                        control.ramp_up();
                    }
                    ("percent", p) => match p.parse::<u8>().ok().map(|p| control.set_percent(p)) {
                        Some(Ok(())) => {}
                        _ => return bad("percent must be an integer in [0, 100]"),
                    },
                    _ => return bad("expected action=off|on|ramp or percent=N"),
                }
                done = true;
            }
            if !done {
                return bad("expected action=off|on|ramp or percent=N");
            }
        }
        _ => return reply(StatusCode::METHOD_NOT_ALLOWED, "{}".into()),
    }
    reply(StatusCode::OK, format!("{{\"{field}\":{}}}", control.percent()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "test-token-0123456789";

    fn call(c: &Control, method: &str, uri: &str) -> (u16, String) {
        let auth = AdminAuth::Bearer(AdminToken::new(TOKEN).unwrap());
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(())
            .unwrap();
        let r = percent_response(c, &auth, &req, "p");
        (r.status().as_u16(), r.into_body())
    }

    #[test]
    fn without_the_token_nothing_changes() {
        let c = Control::new();
        let auth = AdminAuth::Bearer(AdminToken::new(TOKEN).unwrap());
        let wrong_last = format!("Bearer {}X", &TOKEN[..TOKEN.len() - 1]);
        for h in
            [None, Some("Bearer nope"), Some(TOKEN), Some(wrong_last.as_str()), Some("Basic x")]
        {
            let mut b = Request::builder().method("POST").uri("/?action=off");
            if let Some(h) = h {
                b = b.header("authorization", h);
            }
            let r = percent_response(&c, &auth, &b.body(()).unwrap(), "p");
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{h:?}");
            assert!(r.headers()["www-authenticate"].to_str().unwrap().starts_with("Bearer"));
        }
        // Two Authorization headers: refused even if one is right.
        let two = Request::builder()
            .method("POST")
            .uri("/?action=off")
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("authorization", "Bearer x")
            .body(())
            .unwrap();
        assert_eq!(percent_response(&c, &auth, &two, "p").status(), StatusCode::UNAUTHORIZED);
        assert_eq!(c.percent(), 100, "no request got through");
        let lower = Request::builder()
            .method("POST")
            .uri("/?action=off")
            .header("authorization", format!("bearer {TOKEN}"))
            .body(())
            .unwrap();
        assert_eq!(percent_response(&c, &auth, &lower, "p").status(), StatusCode::OK);
        assert_eq!(c.percent(), 0);
    }

    #[test]
    fn tokens_are_validated_and_compared_in_full() {
        assert_eq!(AdminToken::new("short").unwrap_err(), AdminTokenError::TooShort);
        assert_eq!(AdminToken::new("has space 0123456789").unwrap_err(), AdminTokenError::BadChar);
        assert!(format!("{:?}", AdminToken::new(TOKEN).unwrap()).contains("redacted"));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"xbc"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        let open = AdminAuth::unauthenticated();
        assert!(open.allows(&Request::get("/").body(()).unwrap()));
    }

    #[test]
    fn read_switch_off_ramp_and_set() {
        let c = Control::new();
        assert_eq!(call(&c, "GET", "/"), (200, r#"{"p":100}"#.into()));
        assert_eq!(call(&c, "POST", "/?action=off").1, r#"{"p":0}"#);
        assert_eq!(call(&c, "POST", "/?action=ramp").1, r#"{"p":10}"#);
        assert_eq!(call(&c, "POST", "/?percent=50").1, r#"{"p":50}"#);
        assert_eq!(call(&c, "POST", "/?percent=101").0, 400);
        assert_eq!(call(&c, "POST", "/?percent=-1").0, 400);
        assert_eq!(call(&c, "POST", "/?nonsense=1").0, 400);
        assert_eq!(call(&c, "POST", "/").0, 400);
        assert_eq!(call(&c, "DELETE", "/").0, 405);
        assert_eq!(c.percent(), 50);
    }
}
