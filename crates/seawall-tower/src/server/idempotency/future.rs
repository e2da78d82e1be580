//! The request flow of [`Idempotency`](super::Idempotency): check the key, run once, store,
//! replay.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::BodyExt;
use seawall::time::Clock;
use tower_service::Service;

use super::error::StoreError;
use super::key::{KeyError, StoreKey, fingerprint, parse_key, scope_of};
use super::layer::{Config, DEFAULT_RETRY_AFTER_SECS};
use super::lease::Lease;
use super::metrics::Event;
use super::store::{Begin, IdempotencyStore, StoredResponse};
use crate::server::body::{self, Refused};
use crate::server::problem as p;
use crate::server::response::problem;
use crate::wire::{IDEMPOTENCY_KEY, RequestDeadline};

/// The future [`Idempotency`](super::Idempotency) returns (boxed: this path awaits the store).
pub struct ResponseFuture<B, E> {
    inner: Pin<Box<dyn Future<Output = Result<Response<B>, E>> + Send>>,
}

impl<B, E> fmt::Debug for ResponseFuture<B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<B, E> Future for ResponseFuture<B, E> {
    type Output = Result<Response<B>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<B, E> ResponseFuture<B, E> {
    pub(super) fn passthrough(
        f: impl Future<Output = Result<Response<B>, E>> + Send + 'static,
    ) -> Self {
        ResponseFuture { inner: Box::pin(f) }
    }
}

fn key_of(headers: &http::HeaderMap) -> Option<Result<String, KeyError>> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return Some(Err(KeyError::Repeated));
    }
    Some(parse_key(first.as_bytes()).map(str::to_owned))
}

/// The layer's own refusal when the store cannot take the key: `503` (store down or full) or
/// `429` (this principal's share), with a `Retry-After` of when space frees if the store knows,
/// else a jittered one.
fn unavailable<B: From<Bytes>>(cfg: &Config, e: &StoreError) -> Response<B> {
    let (event, status, body, frees_in) = match e {
        StoreError::Full { frees_in } => {
            (Event::CapacityRefused, StatusCode::SERVICE_UNAVAILABLE, p::STORE_FULL, *frees_in)
        }
        StoreError::ScopeFull { frees_in } => {
            (Event::ScopeRefused, StatusCode::TOO_MANY_REQUESTS, p::QUOTA, *frees_in)
        }
        StoreError::PendingFull => {
            (Event::PendingRefused, StatusCode::SERVICE_UNAVAILABLE, p::STORE_FULL, None)
        }
        _ => (Event::StoreUnavailable, StatusCode::SERVICE_UNAVAILABLE, p::STORE_DOWN, None),
    };
    cfg.metrics.count(event);
    let mut res = problem(status, body);
    let retry_after = match frees_in {
        // Whole seconds, rounded up, at least the jitter's floor: never "retry now".
        Some(d) => {
            let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
            HeaderValue::from(secs.max(u64::from(DEFAULT_RETRY_AFTER_SECS.0)))
        }
        None => cfg.retry_after(),
    };
    res.headers_mut().insert(header::RETRY_AFTER, retry_after);
    res
}

/// A store call bounded by the store timeout (counted when it hits it).
async fn bounded<T>(
    cfg: &Config,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(cfg.store_timeout, call).await {
        Ok(r) => r,
        Err(_) => {
            cfg.metrics.count(Event::StoreTimeout);
            Err(StoreError::Timeout)
        }
    }
}

fn refuse<B, E>(cfg: &Config, e: Event, s: StatusCode, body: &'static str) -> ResponseFuture<B, E>
where
    B: From<Bytes> + Send + 'static,
    E: Send + 'static,
{
    cfg.metrics.count(e);
    ResponseFuture::passthrough(std::future::ready(Ok(problem(s, body))))
}

pub(super) fn run<S, ReqB, ResB, C>(
    mut svc: S,
    store: Arc<dyn IdempotencyStore>,
    cfg: Arc<Config>,
    clock: C,
    req: Request<ReqB>,
) -> ResponseFuture<ResB, S::Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    ReqB: Body + From<Bytes> + Send + 'static,
    ReqB::Data: Send,
    ReqB::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    ResB: Body + From<Bytes> + Default + Send + 'static,
    ResB::Data: Send,
    C: Clock + Send + 'static,
{
    let key = match key_of(req.headers()) {
        None if cfg.require_key => {
            return ResponseFuture::passthrough(std::future::ready(Ok(problem(
                StatusCode::BAD_REQUEST,
                p::NO_KEY,
            ))));
        }
        None => return ResponseFuture::passthrough(svc.call(req)),
        Some(Err(_)) => {
            return ResponseFuture::passthrough(std::future::ready(Ok(problem(
                StatusCode::BAD_REQUEST,
                p::BAD_KEY,
            ))));
        }
        Some(Ok(k)) => k,
    };
    let (parts, body) = req.into_parts();
    let Some(principal) = (cfg.scope)(&parts) else {
        return refuse(&cfg, Event::PrincipalMissing, StatusCode::UNAUTHORIZED, p::NO_PRINCIPAL);
    };
    // Refuse an oversized body before reading a byte of it.
    if body::declared_over(&parts.headers, cfg.max_body) {
        return refuse(&cfg, Event::BodyTooLarge, StatusCode::PAYLOAD_TOO_LARGE, p::TOO_LARGE);
    }
    // As an instant of this layer's clock (the time left, if it was made on another).
    let deadline =
        parts.extensions.get::<RequestDeadline>().map(|d| d.for_clock(&clock, clock.now()));
    let expired = move || deadline.is_some_and(|d| d.is_expired(clock.now()));
    ResponseFuture::passthrough(async move {
        let body = match body::read(body, cfg.max_body, cfg.body_timeout).await {
            Ok(bytes) => bytes,
            Err(refused) => {
                match refused {
                    Refused::TooLarge => cfg.metrics.count(Event::BodyTooLarge),
                    Refused::Timeout => cfg.metrics.count(Event::BodyTimeout),
                    Refused::Broken => {}
                }
                let (status, body) = refused.answer();
                return Ok(problem(status, body));
            }
        };
        if expired() {
            return Ok(problem(StatusCode::GATEWAY_TIMEOUT, p::DEADLINE));
        }
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let fp = fingerprint(&parts.method, target, &body);
        let skey = StoreKey { scope: scope_of(Some(&principal)), key };
        // The guard exists before the store is asked, so a cut at any later await settles the
        // key for this request's owner token (see `lease`).
        let mut lease = Lease::begin(store.clone(), cfg.clone(), skey, fp);
        let began = lease.answer().await;
        let answer = |e: Event, s: StatusCode, b: &'static str| {
            cfg.metrics.count(e);
            Ok(problem(s, b))
        };
        match began {
            Err(e) => {
                // Whatever `begin` may still record for us is given back once it finishes.
                lease.give_back();
                return Ok(unavailable(&cfg, &e));
            }
            Ok(Begin::Execute) => {}
            Ok(Begin::InFlight) => {
                return answer(Event::Conflict, StatusCode::CONFLICT, p::IN_FLIGHT);
            }
            Ok(Begin::Unknown) => return answer(Event::Conflict, StatusCode::CONFLICT, p::UNKNOWN),
            Ok(Begin::Mismatch) => {
                return answer(Event::Mismatch, StatusCode::UNPROCESSABLE_ENTITY, p::MISMATCH);
            }
            Ok(Begin::Done(stored)) => {
                cfg.metrics.count(Event::Replayed);
                return Ok(replay(stored));
            }
        }
        if expired() {
            // The store took the rest of the deadline: give the key back (the drop releases it).
            return Ok(problem(StatusCode::GATEWAY_TIMEOUT, p::DEADLINE));
        }
        let mut parts = parts;
        parts.extensions.insert(lease.call());
        cfg.metrics.count(Event::Executed);
        let res = svc.call(Request::from_parts(parts, ReqB::from(body))).await;
        // Until the outcome is recorded, a cancellation marks the key outcome unknown.
        let (skey, owner) = (lease.key().0.clone(), *lease.key().1);
        let res = match res {
            Ok(r) if !r.status().is_server_error() => r,
            other => {
                // A failure the caller sees: free the key so a retry may execute.
                let _ = bounded(&cfg, store.release(&skey, &owner)).await;
                lease.disarm();
                return other;
            }
        };
        let (head, body) = res.into_parts();
        let Ok(collected) = body.collect().await else {
            // The body broke after the handler ran: the lease's drop records outcome unknown.
            return Ok(problem(StatusCode::INTERNAL_SERVER_ERROR, p::BAD_RESPONSE));
        };
        let body = collected.to_bytes();
        if body.len() <= cfg.max_body {
            let stored = stored(&cfg, &head, body.clone());
            // If storing fails the key stays in flight: repeats get 409, never a second run.
            let _ = bounded(&cfg, store.complete(&skey, &owner, &stored, cfg.ttl)).await;
            lease.disarm();
        }
        // Too large to store: the lease's drop records outcome unknown (never run again).
        Ok(Response::from_parts(head, ResB::from(body)))
    })
}

fn stored(cfg: &Config, head: &http::response::Parts, body: Bytes) -> StoredResponse {
    let headers = cfg
        .stored_headers
        .iter()
        .flat_map(|n| {
            head.headers
                .get_all(n)
                .iter()
                .map(move |v| (n.as_str().to_owned(), Bytes::copy_from_slice(v.as_bytes())))
        })
        .collect();
    StoredResponse { status: head.status.as_u16(), headers, body }
}

/// Rebuilds a stored response, marked `Idempotent-Replayed: true`.
fn replay<B: From<Bytes>>(stored: StoredResponse) -> Response<B> {
    let mut res = Response::new(B::from(stored.body));
    *res.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    for (name, value) in stored.headers {
        if let (Ok(n), Ok(v)) =
            (http::HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_maybe_shared(value))
        {
            res.headers_mut().append(n, v);
        }
    }
    res.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    res
}
