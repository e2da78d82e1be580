//! [`IdempotencyLayer`]: a retried write executes once (IETF httpapi `Idempotency-Key` draft).
//!
//! # Why
//!
//! A client that timed out on a `POST` cannot know whether it took effect; retrying it may pay
//! twice. With an `Idempotency-Key` per logical operation, reused on every attempt, the server
//! executes the first request, stores its response, and replays that response to every repeat.
//! It does nothing for load (pair it with the `ShedLayer` and a retry budget), but it makes
//! retrying a write *safe* (DESIGN.md, rule 6).
//!
//! # Semantics (draft-ietf-httpapi-idempotency-key-header)
//!
//! For `POST` and `PATCH` (configurable) with an `Idempotency-Key`:
//!
//! | situation | answer |
//! |---|---|
//! | first time the key is seen | the handler runs; 2xx–4xx responses are stored (status, the headers in [`IdempotencyLayer::stored_headers`], whole body) |
//! | repeat, same payload, first finished | the stored response, with `Idempotent-Replayed: true` |
//! | repeat while the first is in flight | `409 Conflict` |
//! | same key, different payload fingerprint (method, target, body) | `422 Unprocessable Content` |
//! | malformed key (empty, > 255 bytes, not visible ASCII), or two keys | `400 Bad Request` |
//! | body larger than [`max_body`](IdempotencyLayer::max_body) | `413 Content Too Large` |
//! | the store is unreachable | `503`, and the handler does **not** run (fail closed) |
//!
//! Keys are scoped by a client identity ([`IdempotencyLayer::scope`]; default the
//! `Authorization` header, hashed), so one client can never read another's stored response.
//! Entries expire after [`ttl`](IdempotencyLayer::ttl) (default 24 h).
//!
//! # The crash guarantee: at most once, and never silently
//!
//! Before the handler runs, the store atomically records the key as *in flight* with a lease.
//! The response is stored after the handler returns. If the process dies in between (or the
//! work is cancelled, e.g. by the deadline), the record stays in flight: repeats get `409`
//! while the lease runs, and after it a `409` whose problem type is `…/outcome-unknown` until
//! the entry expires. **The handler never runs a second time for a key whose first execution
//! may have had effects**, and the client is told so explicitly instead of getting a fresh
//! execution it cannot tell from a replay. Reconciling an unknown outcome (look the order up)
//! is the client's decision. Failures the caller *saw* — a 5xx response or a service error —
//! release the key, so a retry executes; handlers must make such failures atomic (roll back).
//!
//! ```
//! use seawall_tower::server::IdempotencyLayer;
//! use std::time::Duration;
//!
//! let layer = IdempotencyLayer::in_memory()
//!     .ttl(Duration::from_secs(3600))
//!     .scope(|parts| parts.headers.get("x-api-key").map(|v| v.as_bytes().to_vec()));
//! # let _ = layer;
//! ```

pub mod error;
mod future;
pub mod key;
mod layer;
pub mod store;

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

pub use error::StoreError;
pub use future::ResponseFuture;
pub use layer::{
    DEFAULT_LEASE, DEFAULT_MAX_BODY, DEFAULT_TTL, IdempotencyLayer, ScopeFn, authorization_scope,
};
pub use store::{Begin, IdempotencyStore, StoredResponse};

use layer::Config;

/// The service [`IdempotencyLayer`] makes.
#[derive(Clone)]
pub struct Idempotency<S> {
    inner: S,
    store: Arc<dyn IdempotencyStore>,
    cfg: Arc<Config>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for Idempotency<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("inner", &self.inner)
            .field("store", &self.store)
            .finish()
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for Idempotency<S>
where
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
        future::run(ready, self.store.clone(), self.cfg.clone(), req)
    }
}
