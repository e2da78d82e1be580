//! A node's admin listener: the knobs an operator (or `seawall escape`) turns, apart from the
//! traffic.
//!
//! The retry switch, the admission knob, the dependency's flush endpoint and its fault injection
//! are each a denial-of-service switch, so a node serves them on a second loopback listener of their own
//! (never on the traffic port the load generator and the tier above reach), and every request
//! there must carry `Authorization: Bearer <token>` ([`AdminAuth`]). The lab draws the token at
//! random once per stack ([`random_token`]) and hands it to its nodes in their spec.
//!
//! | path | node | what |
//! |---|---|---|
//! | [`ADMISSION_PATH`] | every node | the `ShedLayer`'s admission knob |
//! | [`RETRIES_PATH`] | edge, gateway, order | the client layer's retry switch |
//! | [`FLUSH_PATH`] | dependency | drop queued work older than N ms |
//! | [`FAULT_PATH`]`/{kind}/{ms}` | dependency | start a fault (`fail`, `hang`, `slow`, `restart`) for `ms` |

use std::io::Read;

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use http::StatusCode;
use seawall_tower::admin::{AdminAuth, AdminToken};

use crate::LabError;

/// The admission knob: `GET` → `{"admit_percent":N}`, `POST ?percent=N`.
pub const ADMISSION_PATH: &str = "/admin/admission";
/// The retry switch: `GET` → `{"retry_percent":N}`, `POST ?action=off|ramp|on` or `?percent=N`.
pub const RETRIES_PATH: &str = "/admin/retries";
/// The dependency's flush: `POST ?older_than_ms=N`.
pub const FLUSH_PATH: &str = "/admin/flush";
/// The dependency's fault injection: `POST {FAULT_PATH}/{kind}/{ms}` → `204`.
pub const FAULT_PATH: &str = "/admin/fault";

/// The alphabet of [`random_token`]: RFC 6750 `b64token` characters that need no quoting in a
/// shell or a URL.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// 32 characters of 6 random bits each (192 bits): the operating system's random source
/// (`/dev/urandom`), or, where there is none, std's per-process random hash keys.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        use std::hash::BuildHasher;
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let h = std::collections::hash_map::RandomState::new().hash_one(i);
            chunk.copy_from_slice(&h.to_le_bytes());
        }
    }
    bytes.iter().map(|b| char::from(ALPHABET[usize::from(b & 63)])).collect()
}

/// The bearer check of a node whose spec carries `token`. A node without a token does not start:
/// there is no unauthenticated admin listener in the lab.
pub fn auth(role: &str, token: Option<&str>) -> Result<AdminAuth, LabError> {
    let token = token.ok_or_else(|| LabError::node(role, "the spec carries no admin token"))?;
    let token = AdminToken::new(token).map_err(|e| LabError::node(role, e.to_string()))?;
    Ok(AdminAuth::Bearer(token))
}

/// `401` with `WWW-Authenticate: Bearer`, for the endpoints that are not a percentage knob.
pub fn unauthorized() -> Response {
    let mut r = (StatusCode::UNAUTHORIZED, r#"{"error":"unauthorized"}"#).into_response();
    r.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static(r#"Bearer realm="seawall-lab""#),
    );
    r
}

/// Adds a percentage knob at `path`, served by `respond` (`admission_response` or
/// `admin_response`), which checks `auth` first.
pub fn knob_route(
    router: Router,
    path: &'static str,
    auth: &AdminAuth,
    respond: impl Fn(&AdminAuth, &Request) -> http::Response<String> + Clone + Send + Sync + 'static,
) -> Router {
    let auth = auth.clone();
    router.route(
        path,
        any(move |req: Request| {
            let (auth, respond) = (auth.clone(), respond.clone());
            async move { respond(&auth, &req) }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_valid_and_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(AdminToken::new(&a).is_ok());
        assert!(auth("edge", None).is_err());
        assert!(auth("edge", Some("short")).is_err());
    }
}
