//! Who sent a request, for the table of heaviest callers ([`ShedLayer::with_callers`]).
//!
//! [`ShedLayer::with_callers`]: super::ShedLayer::with_callers

use std::fmt;
use std::sync::Arc;

use http::{Extensions, HeaderMap, HeaderName};

use crate::server::idempotency::scope::Principal;

type KeyFn = dyn Fn(&HeaderMap, &Extensions) -> Option<String> + Send + Sync;

/// How a server names a request's caller: a header, the authenticated [`Principal`], or a
/// function of your own (a peer address your server put in the extensions). A request without
/// one is counted as `unknown`.
///
/// ```
/// use seawall_tower::server::shed::CallerKey;
/// let by_header = CallerKey::header(http::HeaderName::from_static("x-client-id"));
/// let mut h = http::HeaderMap::new();
/// h.insert("x-client-id", "billing".parse().unwrap());
/// assert_eq!(by_header.caller(&h, &http::Extensions::new()), "billing");
/// assert_eq!(by_header.caller(&http::HeaderMap::new(), &http::Extensions::new()), "unknown");
///
/// // axum: serve with `into_make_service_with_connect_info::<SocketAddr>()`, then
/// let by_peer = CallerKey::from_fn(|_, ext| {
///     ext.get::<std::net::SocketAddr>().map(|a| a.ip().to_string())
/// });
/// ```
#[derive(Clone)]
pub struct CallerKey(Arc<KeyFn>);

impl fmt::Debug for CallerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CallerKey(..)")
    }
}

/// The name of a request whose caller cannot be told.
pub const UNKNOWN_CALLER: &str = "unknown";

impl CallerKey {
    /// The value of header `name` (visible ASCII only; anything else counts as unknown).
    pub fn header(name: HeaderName) -> CallerKey {
        CallerKey::from_fn(move |h, _| {
            h.get(&name).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()).map(String::from)
        })
    }

    /// The [`Principal`] your authentication middleware put in the extensions, as `kind:id`.
    pub fn principal() -> CallerKey {
        CallerKey::from_fn(|_, ext| {
            ext.get::<Principal>()
                .filter(|p| !p.id().is_empty())
                .map(|p| format!("{}:{}", p.kind(), p.id()))
        })
    }

    /// Your own function of the request's headers and extensions.
    pub fn from_fn(
        f: impl Fn(&HeaderMap, &Extensions) -> Option<String> + Send + Sync + 'static,
    ) -> CallerKey {
        CallerKey(Arc::new(f))
    }

    /// The caller of a request with these headers and extensions ([`UNKNOWN_CALLER`] if none).
    pub fn caller(&self, headers: &HeaderMap, ext: &Extensions) -> String {
        (self.0)(headers, ext).unwrap_or_else(|| UNKNOWN_CALLER.to_string())
    }
}
