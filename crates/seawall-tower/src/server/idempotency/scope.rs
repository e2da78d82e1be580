//! Whose keys: the principal that scopes `Idempotency-Key`s.
//!
//! A key is only unique per client, so the layer keeps keys per *principal* (a user id, a tenant
//! id, an API-key id — whatever the application's authentication resolved). The principal must
//! be **stable**: a raw credential is not (a refreshed bearer token would make a retry a new
//! scope and execute it twice), and a header the client chooses is not an identity (two tenants
//! sending the same key would share stored responses).
//!
//! The default, [`principal_scope`], reads the [`Principal`] your auth middleware put in the
//! request extensions. A keyed request without a principal is **refused** with `401` (problem
//! code `idempotency-principal-missing`) and never executed: there is no shared anonymous scope.
//! [`extension_scope`] reads any other extension type; [`header_scope`] reads a header that a
//! trusted proxy sets (and strips from clients).
//!
//! ```
//! use http::HeaderName;
//! use seawall_tower::server::IdempotencyLayer;
//! use seawall_tower::server::idempotency::scope::{extension_scope, header_scope};
//!
//! #[derive(Clone)]
//! struct UserId(u64);
//!
//! // Your auth layer inserts `UserId`; keys are scoped by it.
//! let by_user = IdempotencyLayer::in_memory()
//!     .with_scope(extension_scope(|u: &UserId| u.0.to_be_bytes().to_vec()));
//! // A gateway that authenticates and sets `x-tenant-id` (and strips it from clients).
//! let by_tenant = IdempotencyLayer::in_memory()
//!     .with_scope(header_scope(HeaderName::from_static("x-tenant-id")));
//! # let _ = (by_user, by_tenant);
//! ```

use http::HeaderName;
use http::request::Parts;

/// Extracts the principal that scopes keys, from the request head; `None`: no principal (the
/// keyed request is refused with `401`).
pub type ScopeFn = dyn Fn(&Parts) -> Option<Vec<u8>> + Send + Sync;

/// The authenticated principal, as your auth middleware resolved it: a kind and an id (a user
/// id, a tenant id — not a credential). Insert it into the request extensions before the
/// `IdempotencyLayer`.
///
/// The kind is part of the scope, so two authentication mechanisms cannot share keys by
/// accident: a cookie user `acme` and an API-key tenant `acme` are two principals.
///
/// ```
/// use seawall_tower::server::idempotency::scope::Principal;
/// assert_ne!(Principal::user("acme"), Principal::tenant("acme"));
/// assert_eq!(Principal::of_kind("api-key", "k-1").kind(), "api-key");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    kind: &'static str,
    id: String,
}

impl Principal {
    /// A user, e.g. the subject of a session cookie or a token.
    pub fn user(id: impl Into<String>) -> Principal {
        Principal::of_kind("user", id)
    }

    /// A tenant (an organisation, an API customer).
    pub fn tenant(id: impl Into<String>) -> Principal {
        Principal::of_kind("tenant", id)
    }

    /// A principal of a kind of your own (`"api-key"`, `"service"`): principals of two kinds
    /// never share a scope, whatever their ids.
    pub fn of_kind(kind: &'static str, id: impl Into<String>) -> Principal {
        Principal { kind, id: id.into() }
    }

    /// The kind (`user`, `tenant`, or yours).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The id within its kind.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The scope bytes: the kind's length, the kind, the id — so no two (kind, id) pairs give
    /// the same bytes.
    fn scope(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.kind.len() + self.id.len());
        out.extend_from_slice(&(self.kind.len() as u32).to_be_bytes());
        out.extend_from_slice(self.kind.as_bytes());
        out.extend_from_slice(self.id.as_bytes());
        out
    }
}

/// The default scope: the [`Principal`] in the request extensions (an empty id counts as
/// none).
pub fn principal_scope(parts: &Parts) -> Option<Vec<u8>> {
    parts.extensions.get::<Principal>().filter(|p| !p.id.is_empty()).map(Principal::scope)
}

/// A scope read from the request extension `T` (set by your auth middleware) through `f`.
pub fn extension_scope<T, F>(f: F) -> impl Fn(&Parts) -> Option<Vec<u8>> + Send + Sync + 'static
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> Vec<u8> + Send + Sync + 'static,
{
    move |parts: &Parts| parts.extensions.get::<T>().map(&f)
}

/// A scope read from the header `name` (exactly one, non-empty value). Only sound when a trusted
/// proxy in front sets it after authenticating, and removes it from client requests.
pub fn header_scope(
    name: HeaderName,
) -> impl Fn(&Parts) -> Option<Vec<u8>> + Send + Sync + 'static {
    move |parts: &Parts| {
        let mut values = parts.headers.get_all(&name).iter();
        let v = values.next()?;
        (values.next().is_none() && !v.is_empty()).then(|| v.as_bytes().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(f: impl FnOnce(http::request::Builder) -> http::request::Builder) -> Parts {
        f(http::Request::builder()).body(()).unwrap().into_parts().0
    }

    #[test]
    fn extractors_find_the_principal_or_nothing() {
        assert_eq!(principal_scope(&parts(|b| b)), None);
        assert_eq!(principal_scope(&parts(|b| b.extension(Principal::user("")))), None);
        let p = parts(|b| b.extension(Principal::user("u1")));
        assert_eq!(principal_scope(&p).as_deref(), Some(&b"\0\0\0\x04useru1"[..]));
        // Two kinds, one id: two scopes; and no (kind, id) split gives another's bytes.
        let scope = |p: Principal| principal_scope(&parts(|b| b.extension(p))).unwrap();
        assert_ne!(scope(Principal::user("acme")), scope(Principal::tenant("acme")));
        assert_ne!(scope(Principal::of_kind("a", "bc")), scope(Principal::of_kind("ab", "c")));
        let h = header_scope(HeaderName::from_static("x-tenant"));
        assert_eq!(h(&parts(|b| b.header("x-tenant", "t1"))).as_deref(), Some(&b"t1"[..]));
        assert_eq!(h(&parts(|b| b.header("x-tenant", ""))), None);
        assert_eq!(h(&parts(|b| b.header("x-tenant", "a").header("x-tenant", "b"))), None);
        let e = extension_scope(|n: &u32| n.to_be_bytes().to_vec());
        assert_eq!(e(&parts(|b| b.extension(7u32))), Some(vec![0, 0, 0, 7]));
        assert_eq!(e(&parts(|b| b)), None);
    }
}
