//! [`IdempotencyLayer`]: which requests, which store, how long, and whose keys.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, Method, header, request::Parts};
use tower_layer::Layer;

use super::Idempotency;
use super::store::IdempotencyStore;
use super::store::memory::MemoryStore;

/// How long a first execution may run before a repeat calls its outcome unknown: 60 s, the
/// `DeadlineLayer` maximum, so a request still within its deadline is never declared lost.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// How long a key and its response are kept: 24 h (Stripe's retention; the IETF draft leaves it
/// to the resource).
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
/// Largest request or response body fingerprinted and stored: 1 MiB (local choice).
pub const DEFAULT_MAX_BODY: usize = 1 << 20;

/// Extracts the client identity that scopes keys, from the request head.
pub type ScopeFn = dyn Fn(&Parts) -> Option<Vec<u8>> + Send + Sync;

pub(crate) struct Config {
    pub(crate) methods: Vec<Method>,
    pub(crate) require_key: bool,
    pub(crate) lease: Duration,
    pub(crate) ttl: Duration,
    pub(crate) max_body: usize,
    pub(crate) scope: Arc<ScopeFn>,
    pub(crate) stored_headers: Vec<HeaderName>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("methods", &self.methods)
            .field("require_key", &self.require_key)
            .field("lease", &self.lease)
            .field("ttl", &self.ttl)
            .field("max_body", &self.max_body)
            .finish_non_exhaustive()
    }
}

/// The default client identity: the `Authorization` header (hashed before it is stored), so two
/// API keys never share a key space. Requests without one share the anonymous scope.
pub fn authorization_scope(parts: &Parts) -> Option<Vec<u8>> {
    parts.headers.get(header::AUTHORIZATION).map(|v| v.as_bytes().to_vec())
}

/// Makes `POST`/`PATCH` requests carrying an `Idempotency-Key` execute once. See the
/// [module docs](super).
#[derive(Debug, Clone)]
pub struct IdempotencyLayer {
    store: Arc<dyn IdempotencyStore>,
    cfg: Arc<Config>,
}

impl IdempotencyLayer {
    /// With a bounded in-memory store ([`MemoryStore::new`]): one replica only.
    pub fn in_memory() -> Self {
        Self::new(MemoryStore::new())
    }

    /// With `store` (PostgreSQL or Redis for a fleet of replicas).
    pub fn new(store: impl IdempotencyStore) -> Self {
        IdempotencyLayer {
            store: Arc::new(store),
            cfg: Arc::new(Config {
                methods: vec![Method::POST, Method::PATCH],
                require_key: false,
                lease: DEFAULT_LEASE,
                ttl: DEFAULT_TTL,
                max_body: DEFAULT_MAX_BODY,
                scope: Arc::new(authorization_scope),
                stored_headers: [
                    header::CONTENT_TYPE,
                    header::CONTENT_ENCODING,
                    header::CONTENT_LANGUAGE,
                    header::LOCATION,
                    header::ETAG,
                    header::LAST_MODIFIED,
                    header::CACHE_CONTROL,
                ]
                .into(),
            }),
        }
    }

    fn with(mut self, f: impl FnOnce(&mut Config)) -> Self {
        let old = &self.cfg;
        let mut c = Config {
            methods: old.methods.clone(),
            require_key: old.require_key,
            lease: old.lease,
            ttl: old.ttl,
            max_body: old.max_body,
            scope: old.scope.clone(),
            stored_headers: old.stored_headers.clone(),
        };
        f(&mut c);
        self.cfg = Arc::new(c);
        self
    }

    /// Which methods the layer applies to (default `POST`, `PATCH`; others pass through).
    pub fn methods(self, methods: impl IntoIterator<Item = Method>) -> Self {
        let m: Vec<Method> = methods.into_iter().collect();
        self.with(|c| c.methods = m)
    }

    /// Answer 400 to a request of those methods without a key (default: let it through).
    pub fn require_key(self, on: bool) -> Self {
        self.with(|c| c.require_key = on)
    }

    /// How long a first execution holds its key before repeats call its outcome unknown.
    pub fn lease(self, d: Duration) -> Self {
        self.with(|c| c.lease = d)
    }

    /// How long keys and responses are kept (default 24 h).
    pub fn ttl(self, d: Duration) -> Self {
        self.with(|c| c.ttl = d)
    }

    /// Largest request body accepted (413 above) and response body stored (default 1 MiB).
    pub fn max_body(self, bytes: usize) -> Self {
        self.with(|c| c.max_body = bytes)
    }

    /// The client-identity extractor that scopes keys (default [`authorization_scope`]).
    pub fn scope(self, f: impl Fn(&Parts) -> Option<Vec<u8>> + Send + Sync + 'static) -> Self {
        let f: Arc<ScopeFn> = Arc::new(f);
        self.with(|c| c.scope = f)
    }

    /// Response headers stored and replayed (default: content-type, -encoding, -language,
    /// location, etag, last-modified, cache-control).
    pub fn stored_headers(self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        let n: Vec<HeaderName> = names.into_iter().collect();
        self.with(|c| c.stored_headers = n)
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = Idempotency<S>;

    fn layer(&self, inner: S) -> Idempotency<S> {
        Idempotency { inner, store: self.store.clone(), cfg: self.cfg.clone() }
    }
}
