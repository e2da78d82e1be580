//! [`IdempotencyLayer`]: a retried write executes once (IETF httpapi `Idempotency-Key` draft).
//!
//! # Why
//!
//! A client that timed out on a `POST` cannot know whether it took effect; retrying it may pay
//! twice. With an `Idempotency-Key` per logical operation, reused on every attempt, the server
//! executes the first request, stores its response, and replays that response to every repeat.
//! It does nothing for load (pair it with the `ShedLayer` and a retry budget), but it makes
//! retrying a write *safe*.
//!
//! # Semantics (draft-ietf-httpapi-idempotency-key-header)
//!
//! For `POST` and `PATCH` (configurable) with an `Idempotency-Key`:
//!
//! | situation | answer |
//! |---|---|
//! | first time the key is seen | the handler runs; 2xx–4xx responses are stored (status, the headers in [`IdempotencyLayer::with_stored_headers`], whole body) |
//! | repeat, same payload, first finished | the stored response, with `Idempotent-Replayed: true` |
//! | repeat while the first is in flight | `409 Conflict` |
//! | same key, different payload fingerprint (method, target, body) | `422 Unprocessable Content` |
//! | malformed key (empty, > 255 bytes, not visible ASCII), or two keys | `400 Bad Request` |
//! | body larger than [`max_body`](IdempotencyLayer::with_max_body) (from `Content-Length`, before reading) | `413 Content Too Large` |
//! | body not received within [`body_timeout`](IdempotencyLayer::with_body_timeout) | `408 Request Timeout` |
//! | no principal ([`scope`]) | `401 Unauthorized`, not executed |
//! | the store is unreachable or slow (over [`store_timeout`](IdempotencyLayer::with_store_timeout)) | `503` with a jittered `Retry-After`, and the handler does **not** run (fail closed) |
//! | the store is full | `503` with a `Retry-After` of when its oldest record expires; not executed |
//! | the store is three-quarters full and this principal holds a quarter, or 100 outcome-unknown records | `429` with a `Retry-After` of when its oldest record expires; not executed |
//!
//! Problem bodies are RFC 9457 problems with a stable `type` URI and `code` member, listed with
//! what a client should do in [`crate::server::problem`].
//! Every outcome is counted in [`IdempotencyMetrics`].
//!
//! # The crash guarantee: at most once, and never silently
//!
//! Before the handler runs, the store atomically records the key as *in flight* with a lease.
//! The response is stored after the handler returns. If the process dies in between, the record
//! stays in flight: repeats get `409` while the lease runs, and after it a `409` whose problem
//! `code` is `outcome-unknown` until the entry expires. If the request is *cancelled* (its
//! deadline passed, the client left), the layer settles the key at once: released if the
//! handler had not been called, outcome unknown if it had. **The handler never runs a second
//! time for a key whose first execution may have had effects**, and the client is told so
//! explicitly instead of getting a fresh execution it cannot tell from a replay. Reconciling an
//! unknown outcome (look the order up) is the client's decision. Failures the caller *saw* — a
//! 5xx response or a service error — release the key, so a retry executes; handlers must make
//! such failures atomic (roll back).
//!
//! # Limits: what the layer promises, and what it does not
//!
//! - **Store outages.** Every store call is bounded by
//!   [`store_timeout`](IdempotencyLayer::with_store_timeout) (default 5 s). While the store is down
//!   or black-holed, keyed requests get `503` with a jittered `Retry-After` within that bound and
//!   are **not executed** (the layer fails closed: availability of keyed writes is that of the
//!   store). A store that fails *after* the handler ran leaves the key in flight, then outcome
//!   unknown: never a second execution, but the client gets no replay either. A `begin` runs
//!   in a task of its own: when it answers after the request gave up (`503`) or was cut, the
//!   key it recorded is released, so a retry executes. Only a `begin` that takes more than
//!   twice the store timeout is dropped; if the store records it anyway, that key answers
//!   outcome-unknown after its lease although its handler never ran (the safe side).
//!   After a store restart, the PostgreSQL pool replaces its broken connections and a
//!   `RedisStore` made with `connect` or `with_client` reconnects, so keyed requests are served
//!   again as soon as the store answers (`tests/server_faults.rs` stops and starts the real
//!   servers under traffic).
//! - **Crashes.** A replica killed mid-request (`kill -9`: no destructor runs) leaves its key in
//!   flight: repeats on any replica get `409` while the lease runs, then `409` outcome unknown,
//!   and no replica executes it again.
//! - **Capacity.** The in-memory store never evicts an unexpired key (see
//!   [`store::memory`]): when its pending pool or its records are full it refuses *new* keys
//!   with `503` and a `Retry-After` of when its oldest record expires, and keeps answering
//!   stored ones. Its last quarter is a reserve: once the store is that full, a principal
//!   holding a quarter itself, or 100 outcome-unknown records, gets `429` for *its* new keys,
//!   with a `Retry-After` of when its oldest record expires, and other principals still get
//!   theirs. Refused keys are
//!   not executed; nothing stored is ever executed again. A record lives for the TTL, so the
//!   store takes new keys at no more than capacity ÷ TTL on average (with the defaults, 417 per
//!   hour per replica, 104 per hour per principal): size the capacity and the TTL for your write
//!   rate. PostgreSQL and Redis are bounded by their own storage, not by a count, so no principal
//!   can fill them for the others (`one_principal_cannot_fill_the_store` runs on all three
//!   stores) and they keep no per-principal share: they hold every key for the TTL, **new keys
//!   per second × TTL** records (100 a second for 24 h is 8.64 M rows, or Redis keys, each its
//!   key, fingerprint, owner and stored response): size the table, or Redis's `maxmemory`, for
//!   that. Redis with an eviction policy other than `noeviction` can drop keys, which would let a
//!   retry execute again: configure `noeviction` for the store's database. Exactly-once holds within the TTL; after
//!   the TTL a key may run again.
//! - **Cancellation.** Every in-flight record carries its request's [`Owner`](key::Owner)
//!   token, and only that request settles it. A request cut at any point before its handler
//!   was called — while the store begins its key, before the call, or while it waits in a
//!   `ShedLayer` queue below (the shedder marks the request's [`Dispatch`](crate::server::Dispatch)
//!   as queued) — releases exactly its own key, so a retry executes once; one cut after its
//!   handler was called is recorded outcome unknown at once (`409`, never executed again). The
//!   layer cannot know whether a handler it called did anything, so "called" counts as "may
//!   have had effects". The `ShedLayer`'s own rejections (`503`, `504` for a deadline that
//!   passed in its queue) also release the key. `tests/server_idempotency_stores.rs` cuts 1,000
//!   keyed requests with a 10 ms deadline in this layer order on each store and retries them.
//! - **Scoping.** Keys are kept per principal, which the application supplies ([`scope`]):
//!   by default the [`Principal`] your auth middleware inserts (`Principal::user(id)`,
//!   `Principal::tenant(id)`, or a kind of your own: two kinds never share a scope, so a
//!   cookie user and an API-key tenant with one name cannot collide). Without one,
//!   keyed requests are refused (`401`), never pooled in a shared scope. Two scopes never see
//!   each other's keys (no replay, no `422`). The principal must be stable across a client's
//!   retries: scope by the user or tenant id, not a token that can be refreshed.
//! - **Bodies.** A `Content-Length` over [`max_body`](IdempotencyLayer::with_max_body) is refused
//!   before reading; reading the rest is bounded by
//!   [`body_timeout`](IdempotencyLayer::with_body_timeout) (default 10 s). Put this layer *outside*
//!   any admission layer (`DeadlineLayer` → `IdempotencyLayer` → `ShedLayer` → handler) so that
//!   a slow body is read before an admission slot is taken; a slow body then holds a connection,
//!   never a slot. (With the layer inside admission, a slow body holds a slot for at most
//!   `body_timeout`.)
//! - **One replica.** The in-memory store is exact for one process; replicas that must agree
//!   share a PostgreSQL or Redis store.
//!
//! ```
//! use seawall_tower::server::IdempotencyLayer;
//! use seawall_tower::server::idempotency::scope::header_scope;
//! use std::time::Duration;
//!
//! let layer = IdempotencyLayer::in_memory()
//!     .with_ttl(Duration::from_secs(3600))
//!     .with_store_timeout(Duration::from_millis(500))
//!     .with_scope(header_scope(http::HeaderName::from_static("x-authenticated-tenant")));
//! # let _ = layer;
//! ```

pub mod error;
mod future;
pub mod key;
mod layer;
mod lease;
pub mod metrics;

pub mod scope;
pub mod store;

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use seawall::time::{Clock, SystemClock};
use tower_service::Service;

pub use error::StoreError;
pub use future::ResponseFuture;
pub use layer::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_LEASE, DEFAULT_MAX_BODY, DEFAULT_RETRY_AFTER_SECS,
    DEFAULT_STORE_TIMEOUT, DEFAULT_TTL, IdempotencyLayer,
};
pub use metrics::{IdempotencyMetrics, IdempotencySnapshot};
pub use scope::{Principal, ScopeFn};
pub use store::{Begin, IdempotencyStore, StoredResponse};

use layer::Config;

/// The service [`IdempotencyLayer`] makes.
#[derive(Clone)]
pub struct Idempotency<S, C = SystemClock> {
    inner: S,
    store: Arc<dyn IdempotencyStore>,
    cfg: Arc<Config>,
    clock: C,
}

impl<S: std::fmt::Debug, C> std::fmt::Debug for Idempotency<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("inner", &self.inner)
            .field("store", &self.store)
            .finish()
    }
}

impl<S, ReqB, ResB, C> Service<Request<ReqB>> for Idempotency<S, C>
where
    C: Clock + Clone + Send + 'static,
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    ReqB: Body + From<Bytes> + Send + 'static,
    ReqB::Data: Send,
    ReqB::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    ResB: Body + From<Bytes> + Default + Send + 'static,
    ResB::Data: Send,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<ResB, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        if !self.cfg.methods.contains(req.method()) {
            return ResponseFuture::passthrough(self.inner.call(req));
        }
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        future::run(ready, self.store.clone(), self.cfg.clone(), self.clock.clone(), req)
    }
}
