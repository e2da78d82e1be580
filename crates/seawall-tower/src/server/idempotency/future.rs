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
use http_body_util::{BodyExt, Limited};
use seawall::time::Clock;
use tower_service::Service;

use super::error::StoreError;
use super::key::{KeyError, StoreKey, fingerprint, parse_key, scope_of};
use super::layer::Config;
use super::lease::Lease;
use super::metrics::Event;
use super::store::{Begin, IdempotencyStore, StoredResponse};
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

/// The declared body length, if the header is one well-formed decimal number.
fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    let v = headers.get(header::CONTENT_LENGTH)?.to_str().ok()?;
    (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())).then(|| v.parse().ok())?
}

/// The layer's own `503` (store down or full), with a jittered `Retry-After`.
fn unavailable<B: From<Bytes>>(cfg: &Config, e: &StoreError) -> Response<B> {
    let (event, body) = match e {
        StoreError::Full => (Event::CapacityRefused, p::STORE_FULL),
        StoreError::PendingFull => (Event::PendingRefused, p::STORE_FULL),
        _ => (Event::StoreUnavailable, p::STORE_DOWN),
    };
    cfg.metrics.count(event);
    let mut res = problem(StatusCode::SERVICE_UNAVAILABLE, body);
    res.headers_mut().insert(header::RETRY_AFTER, cfg.retry_after());
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
    if content_length(&parts.headers).is_some_and(|n| n > cfg.max_body as u64) {
        return refuse(&cfg, Event::BodyTooLarge, StatusCode::PAYLOAD_TOO_LARGE, p::TOO_LARGE);
    }
    // As an instant of this layer's clock (the time left, if it was made on another).
    let deadline =
        parts.extensions.get::<RequestDeadline>().map(|d| d.for_clock(&clock, clock.now()));
    let expired = move || deadline.is_some_and(|d| d.is_expired(clock.now()));
    ResponseFuture::passthrough(async move {
        let read =
            tokio::time::timeout(cfg.body_timeout, Limited::new(body, cfg.max_body).collect());
        let body = match read.await {
            Ok(Ok(c)) => c.to_bytes(),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                cfg.metrics.count(Event::BodyTooLarge);
                return Ok(problem(StatusCode::PAYLOAD_TOO_LARGE, p::TOO_LARGE));
            }
            Ok(Err(_)) => return Ok(problem(StatusCode::BAD_REQUEST, p::BAD_BODY)),
            Err(_) => {
                cfg.metrics.count(Event::BodyTimeout);
                return Ok(problem(StatusCode::REQUEST_TIMEOUT, p::BODY_TIMEOUT));
            }
        };
        if expired() {
            return Ok(problem(StatusCode::GATEWAY_TIMEOUT, p::DEADLINE));
        }
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let fp = fingerprint(&parts.method, target, &body);
        let skey = StoreKey { scope: scope_of(Some(&principal)), key };
        let began = bounded(&cfg, store.begin(&skey, &fp, cfg.lease, cfg.ttl)).await;
        let answer = |e: Event, s: StatusCode, b: &'static str| {
            cfg.metrics.count(e);
            Ok(problem(s, b))
        };
        match began {
            Err(e) => return Ok(unavailable(&cfg, &e)),
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
        let mut lease = Lease::new(store.clone(), cfg.clone(), skey, fp);
        if expired() {
            // The store took the rest of the deadline: give the key back (the drop releases it).
            return Ok(problem(StatusCode::GATEWAY_TIMEOUT, p::DEADLINE));
        }
        lease.start();
        cfg.metrics.count(Event::Executed);
        let res = svc.call(Request::from_parts(parts, ReqB::from(body))).await;
        // Until the outcome is recorded, a cancellation marks the key outcome unknown.
        let (skey, fp) = (lease.key().0.clone(), *lease.key().1);
        let res = match res {
            Ok(r) if !r.status().is_server_error() => r,
            other => {
                // A failure the caller sees: free the key so a retry may execute.
                let _ = bounded(&cfg, store.release(&skey, &fp)).await;
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
            let _ = bounded(&cfg, store.complete(&skey, &fp, &stored, cfg.ttl)).await;
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
