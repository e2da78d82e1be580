//! The request flow of [`Idempotency`](super::Idempotency): check the key, run once, store,
//! replay.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use tower_service::Service;

use super::key::{KeyError, StoreKey, fingerprint, parse_key, scope_of};
use super::layer::Config;
use super::store::{Begin, IdempotencyStore, StoredResponse};
use crate::server::response::problem;
use crate::wire::IDEMPOTENCY_KEY;

const BAD_KEY: &str = r#"{"type":"https://seawall.invalid/problems/bad-idempotency-key","title":"malformed or repeated Idempotency-Key","status":400}"#;
const NO_KEY: &str = r#"{"type":"https://seawall.invalid/problems/idempotency-key-required","title":"this request needs an Idempotency-Key","status":400}"#;
const TOO_LARGE: &str = r#"{"type":"https://seawall.invalid/problems/body-too-large","title":"request body too large for an idempotent request","status":413}"#;
const BAD_BODY: &str = r#"{"type":"https://seawall.invalid/problems/bad-body","title":"request body could not be read","status":400}"#;
const IN_FLIGHT: &str = r#"{"type":"https://seawall.invalid/problems/idempotency-in-flight","title":"a request with this Idempotency-Key is in progress","status":409}"#;
const UNKNOWN: &str = r#"{"type":"https://seawall.invalid/problems/outcome-unknown","title":"a request with this Idempotency-Key started but its outcome was not recorded; it will not be executed again","status":409}"#;
const MISMATCH: &str = r#"{"type":"https://seawall.invalid/problems/idempotency-key-reused","title":"this Idempotency-Key was used with a different request","status":422}"#;
const STORE_DOWN: &str = r#"{"type":"https://seawall.invalid/problems/idempotency-store-unavailable","title":"idempotency store unavailable; request not executed","status":503}"#;
const BAD_RESPONSE: &str = r#"{"type":"https://seawall.invalid/problems/response-failed","title":"the response body failed; outcome recorded as unknown","status":500}"#;

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

pub(super) fn run<S, ReqB, ResB>(
    mut svc: S,
    store: Arc<dyn IdempotencyStore>,
    cfg: Arc<Config>,
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
{
    let key = match key_of(req.headers()) {
        None if cfg.require_key => {
            return ResponseFuture::passthrough(ready(problem(StatusCode::BAD_REQUEST, NO_KEY)));
        }
        None => return ResponseFuture::passthrough(svc.call(req)),
        Some(Err(_)) => {
            return ResponseFuture::passthrough(ready(problem(StatusCode::BAD_REQUEST, BAD_KEY)));
        }
        Some(Ok(k)) => k,
    };
    ResponseFuture::passthrough(async move {
        let (parts, body) = req.into_parts();
        let body = match Limited::new(body, cfg.max_body).collect().await {
            Ok(c) => c.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return Ok(problem(StatusCode::PAYLOAD_TOO_LARGE, TOO_LARGE));
            }
            Err(_) => return Ok(problem(StatusCode::BAD_REQUEST, BAD_BODY)),
        };
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let fp = fingerprint(&parts.method, target, &body);
        let skey = StoreKey { scope: scope_of((cfg.scope)(&parts).as_deref()), key };
        match store.begin(&skey, &fp, cfg.lease, cfg.ttl).await {
            Err(_) => return Ok(problem(StatusCode::SERVICE_UNAVAILABLE, STORE_DOWN)),
            Ok(Begin::Execute) => {}
            Ok(Begin::InFlight) => return Ok(problem(StatusCode::CONFLICT, IN_FLIGHT)),
            Ok(Begin::Unknown) => return Ok(problem(StatusCode::CONFLICT, UNKNOWN)),
            Ok(Begin::Mismatch) => return Ok(problem(StatusCode::UNPROCESSABLE_ENTITY, MISMATCH)),
            Ok(Begin::Done(stored)) => return Ok(replay(stored)),
        }
        let res = svc.call(Request::from_parts(parts, ReqB::from(body))).await;
        let res = match res {
            Ok(r) if !r.status().is_server_error() => r,
            other => {
                // A failure the caller sees: free the key so a retry may execute.
                let _ = store.release(&skey, &fp).await;
                return other;
            }
        };
        let (head, body) = res.into_parts();
        let Ok(collected) = body.collect().await else {
            // The body broke after the handler ran: keep the key in flight (outcome unknown).
            return Ok(problem(StatusCode::INTERNAL_SERVER_ERROR, BAD_RESPONSE));
        };
        let body = collected.to_bytes();
        if body.len() <= cfg.max_body {
            let headers =
                cfg.stored_headers
                    .iter()
                    .flat_map(|n| {
                        head.headers.get_all(n).iter().map(move |v| {
                            (n.as_str().to_owned(), Bytes::copy_from_slice(v.as_bytes()))
                        })
                    })
                    .collect();
            let stored =
                StoredResponse { status: head.status.as_u16(), headers, body: body.clone() };
            // If storing fails the key stays in flight: repeats get 409, never a second run.
            let _ = store.complete(&skey, &fp, &stored, cfg.ttl).await;
        }
        Ok(Response::from_parts(head, ResB::from(body)))
    })
}

fn ready<T: Send + 'static, E: Send + 'static>(
    v: T,
) -> impl Future<Output = Result<T, E>> + Send + 'static {
    std::future::ready(Ok(v))
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
