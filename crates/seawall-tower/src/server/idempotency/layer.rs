//! [`IdempotencyLayer`]: which requests, which store, how long, whose keys, and every bound.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::{HeaderName, HeaderValue, Method, header, request::Parts};
use seawall::rng::{Rng as _, SeedSource, splitmix64};
use seawall::time::{Clock, SystemClock};
use tower_layer::Layer;

use super::Idempotency;
use super::metrics::IdempotencyMetrics;
use super::scope::{ScopeFn, principal_scope};
use super::store::IdempotencyStore;
use super::store::memory::{DEFAULT_CAPACITY, MemoryStore};

/// How long a first execution may run before a repeat calls its outcome unknown: 60 s, the
/// `DeadlineLayer` maximum, so a request still within its deadline is never declared lost.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// How long a key and its response are kept: 24 h (Stripe's retention; the IETF draft leaves it
/// to the resource).
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
/// Bound on every store call, including the wait for a pooled connection: 5 s. A healthy
/// PostgreSQL or Redis answers one of these statements in about a millisecond, but a burst can
/// queue requests for the pool's few connections for a second or more (1,000 concurrent keyed
/// requests on a 2-core machine did, with a 1 s bound: 60 % answered 503 from a healthy
/// database), and each such 503 is a write refused. 5 s is the Redis store's own command
/// timeout, for the same reason, and still leaves most of a typical 10–30 s edge deadline for a
/// retry after a black-holed store answered 503. Lower it when your deadlines are shorter.
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request or response body fingerprinted and stored, and the bound on reading a keyed
/// request's body: the same as [`BufferBodyLayer`](crate::server::BufferBodyLayer)'s.
pub use crate::server::body::{DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY};
/// `Retry-After` range of the layer's own `503`s (store down or full): 1–5 s, jittered, so a
/// fleet of clients does not return in lockstep when the store comes back.
pub const DEFAULT_RETRY_AFTER_SECS: (u16, u16) = (1, 5);

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) methods: Vec<Method>,
    pub(crate) require_key: bool,
    pub(crate) lease: Duration,
    pub(crate) ttl: Duration,
    pub(crate) max_body: usize,
    pub(crate) scope: Arc<ScopeFn>,
    pub(crate) stored_headers: Vec<HeaderName>,
    pub(crate) store_timeout: Duration,
    pub(crate) body_timeout: Duration,
    pub(crate) retry_after: Arc<[HeaderValue]>,
    pub(crate) seed: u64,
    pub(crate) draws: Arc<AtomicU64>,
    pub(crate) metrics: IdempotencyMetrics,
}

impl Config {
    /// A jittered `Retry-After` for the layer's own `503`s (the next draw of the layer's
    /// seeded stream; lock-free).
    pub(crate) fn retry_after(&self) -> HeaderValue {
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let i = (splitmix64(self.seed ^ n) % self.retry_after.len() as u64) as usize;
        self.retry_after.get(i).cloned().unwrap_or(HeaderValue::from_static("1"))
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("methods", &self.methods)
            .field("require_key", &self.require_key)
            .field("lease", &self.lease)
            .field("ttl", &self.ttl)
            .field("max_body", &self.max_body)
            .field("store_timeout", &self.store_timeout)
            .field("body_timeout", &self.body_timeout)
            .finish_non_exhaustive()
    }
}

/// Makes `POST`/`PATCH` requests carrying an `Idempotency-Key` execute once. See the
/// [module docs](super).
///
/// `C` is the clock the layer compares request deadlines against (and, for
/// [`in_memory_with_clock`](Self::in_memory_with_clock), the store's clock); the store and body
/// timeouts are tokio timers, so `tokio::time::pause` drives them.
#[derive(Debug, Clone)]
pub struct IdempotencyLayer<C = SystemClock> {
    store: Arc<dyn IdempotencyStore>,
    cfg: Arc<Config>,
    clock: C,
}

impl IdempotencyLayer<SystemClock> {
    /// With a bounded in-memory store ([`MemoryStore::new`]): one replica only.
    pub fn in_memory() -> Self {
        Self::new(MemoryStore::new())
    }

    /// With `store` (PostgreSQL or Redis for a fleet of replicas).
    pub fn new(store: impl IdempotencyStore) -> Self {
        Self::with_store_and_clock(Arc::new(store), SystemClock)
    }
}

impl<C: Clock + Clone + 'static> IdempotencyLayer<C> {
    /// With an in-memory store of [`DEFAULT_CAPACITY`] records, both on `clock`.
    pub fn in_memory_with_clock(clock: C) -> Self {
        let store = MemoryStore::with_clock(DEFAULT_CAPACITY, clock.clone());
        Self::with_store_and_clock(Arc::new(store), clock)
    }
}

impl<C: Clock + Clone> IdempotencyLayer<C> {
    /// With a shared `store` and `clock`.
    pub fn with_store_and_clock(store: Arc<dyn IdempotencyStore>, clock: C) -> Self {
        let (lo, hi) = DEFAULT_RETRY_AFTER_SECS;
        IdempotencyLayer {
            store,
            clock,
            cfg: Arc::new(Config {
                methods: vec![Method::POST, Method::PATCH],
                require_key: false,
                lease: DEFAULT_LEASE,
                ttl: DEFAULT_TTL,
                max_body: DEFAULT_MAX_BODY,
                scope: Arc::new(principal_scope),
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
                store_timeout: DEFAULT_STORE_TIMEOUT,
                body_timeout: DEFAULT_BODY_TIMEOUT,
                retry_after: (lo..=hi).map(HeaderValue::from).collect(),
                seed: SeedSource::from_entropy().stream().next_u64(),
                draws: Arc::new(AtomicU64::new(0)),
                metrics: IdempotencyMetrics::new(),
            }),
        }
    }

    fn with(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(Arc::make_mut(&mut self.cfg));
        self
    }

    /// Which methods the layer applies to (default `POST`, `PATCH`; others pass through).
    pub fn with_methods(self, methods: impl IntoIterator<Item = Method>) -> Self {
        let m: Vec<Method> = methods.into_iter().collect();
        self.with(|c| c.methods = m)
    }

    /// Answer 400 to a request of those methods without a key (default: let it through).
    pub fn with_require_key(self, on: bool) -> Self {
        self.with(|c| c.require_key = on)
    }

    /// How long a first execution holds its key before repeats call its outcome unknown.
    pub fn with_lease(self, d: Duration) -> Self {
        self.with(|c| c.lease = d)
    }

    /// How long keys and responses are kept (default 24 h).
    pub fn with_ttl(self, d: Duration) -> Self {
        self.with(|c| c.ttl = d)
    }

    /// Largest request body accepted (413 above, from `Content-Length` before reading) and
    /// response body stored (default 1 MiB).
    pub fn with_max_body(self, bytes: usize) -> Self {
        self.with(|c| c.max_body = bytes)
    }

    /// Bound on every store call (default [`DEFAULT_STORE_TIMEOUT`]; at least 1 ms).
    pub fn with_store_timeout(self, d: Duration) -> Self {
        self.with(|c| c.store_timeout = d.max(Duration::from_millis(1)))
    }

    /// Bound on reading the request body (default [`DEFAULT_BODY_TIMEOUT`]; at least 1 ms).
    pub fn with_body_timeout(self, d: Duration) -> Self {
        self.with(|c| c.body_timeout = d.max(Duration::from_millis(1)))
    }

    /// `Retry-After` range, in seconds, of the layer's own `503`s (default 1–5).
    pub fn with_retry_after_secs(self, min: u16, max: u16) -> Self {
        let (lo, hi) = (min.min(max), min.max(max));
        self.with(|c| c.retry_after = (lo..=hi).map(HeaderValue::from).collect())
    }

    /// Seeds the `Retry-After` jitter (default: from entropy, so replicas differ).
    pub fn with_seed(self, seed: u64) -> Self {
        self.with(|c| c.seed = seed)
    }

    /// Counts into `metrics` (default: the layer's own, see [`metrics_handle`](Self::metrics_handle)).
    pub fn with_metrics(self, metrics: IdempotencyMetrics) -> Self {
        self.with(|c| c.metrics = metrics)
    }

    /// The counters this layer reports into.
    pub fn metrics_handle(&self) -> IdempotencyMetrics {
        self.cfg.metrics.clone()
    }

    /// The principal extractor that scopes keys (default
    /// [`principal_scope`](super::scope::principal_scope); see [`scope`](super::scope)).
    /// Returning `None` refuses the keyed request with `401`.
    pub fn with_scope(self, f: impl Fn(&Parts) -> Option<Vec<u8>> + Send + Sync + 'static) -> Self {
        let f: Arc<ScopeFn> = Arc::new(f);
        self.with(|c| c.scope = f)
    }

    /// Response headers stored and replayed (default: content-type, -encoding, -language,
    /// location, etag, last-modified, cache-control).
    pub fn with_stored_headers(self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        let n: Vec<HeaderName> = names.into_iter().collect();
        self.with(|c| c.stored_headers = n)
    }
}

impl<S, C: Clock + Clone> Layer<S> for IdempotencyLayer<C> {
    type Service = Idempotency<S, C>;

    fn layer(&self, inner: S) -> Idempotency<S, C> {
        Idempotency {
            inner,
            store: self.store.clone(),
            cfg: self.cfg.clone(),
            clock: self.clock.clone(),
        }
    }
}
