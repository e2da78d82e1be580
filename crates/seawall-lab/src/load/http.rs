//! The HTTP/1.1 transport: one keep-alive connection per worker, to one loopback address.
//!
//! HTTP/1.1 carries one request at a time per connection, and the driver's workers send one
//! request at a time each, so each worker owns its connection (its [`Transport::Slot`]): opened
//! when its first request finds none, kept for the next. So there are never more connections
//! than `max_in_flight`, and no pool to share. The connection's I/O is driven on the worker's
//! own task while it waits for an answer (no connection task, so no wake-up across tasks per
//! request). A connection whose request was abandoned at its deadline is closed (its response
//! may still be on the way) and so is one that broke; a fresh one replaces it on demand, its
//! connect time charged to that request.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use seawall_tower::wire::REQUEST_TIMEOUT_MS;
use tokio::net::TcpStream;

use super::drive::Transport;
use super::spec::LoadSpec;
use super::stats::Outcome;

/// Counts a connection as open for as long as it lives.
#[derive(Debug)]
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

type Io = http1::Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// One worker's connection: the request side, its I/O, and its place in the open count.
#[derive(Debug)]
pub struct Conn {
    send: SendRequest<Full<Bytes>>,
    io: Pin<Box<Io>>,
    _open: Open,
}

/// Polls `f` to completion while driving `io`; `None` if the connection ended first. The
/// connection is polled first, so an answer it reads completes `f` in the same poll.
async fn with_io<F: Future>(io: &mut Pin<Box<Io>>, f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut ended = false;
    std::future::poll_fn(|cx| {
        if !ended && io.as_mut().poll(cx).is_ready() {
            ended = true;
        }
        match f.as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending if ended => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Sends the spec's request over per-worker HTTP/1.1 connections.
#[derive(Debug)]
pub struct HttpTransport {
    addr: SocketAddr,
    method: Method,
    path: Uri,
    headers: HeaderMap,
    body: Full<Bytes>,
    open: Arc<AtomicUsize>,
    peak: AtomicUsize,
}

impl HttpTransport {
    /// A transport for `spec`'s target and request.
    pub fn new(spec: &LoadSpec) -> Self {
        Self {
            addr: spec.target.addr,
            method: spec.method.clone(),
            path: spec.target.path.clone(),
            headers: spec.headers.clone(),
            body: Full::new(spec.body.clone()),
            open: Arc::new(AtomicUsize::new(0)),
            peak: AtomicUsize::new(0),
        }
    }

    /// Most connections open at once so far.
    pub fn peak_connections(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    async fn connect(&self) -> Option<Conn> {
        let n = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        let open = Open(self.open.clone());
        self.peak.fetch_max(n, Ordering::Relaxed);
        let tcp = TcpStream::connect(self.addr).await.ok()?;
        tcp.set_nodelay(true).ok()?;
        let (send, io) = http1::handshake(TokioIo::new(tcp)).await.ok()?;
        Some(Conn { send, io: Box::pin(io), _open: open })
    }

    fn request(&self, remaining: Duration) -> Request<Full<Bytes>> {
        let mut req = Request::new(self.body.clone());
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.path.clone();
        *req.headers_mut() = self.headers.clone();
        let ms = remaining.as_millis().clamp(1, u128::from(u32::MAX)) as u64;
        req.headers_mut().insert(REQUEST_TIMEOUT_MS, HeaderValue::from(ms));
        req
    }

    /// The connection is taken out of `slot` for the request and put back only once its answer
    /// has been read to the end: a request abandoned at its deadline drops (closes) it.
    async fn send(&self, slot: &mut Option<Conn>, remaining: Duration) -> Outcome {
        let idle = match slot.take() {
            Some(mut c) if !c.send.is_closed() => {
                let ready = with_io(&mut c.io, c.send.ready()).await;
                matches!(ready, Some(Ok(()))).then_some(c)
            }
            _ => None,
        };
        let mut c = match idle {
            Some(c) => c,
            None => match self.connect().await {
                Some(c) => c,
                None => return Outcome::Connect,
            },
        };
        let sent = c.send.send_request(self.request(remaining));
        let Some(Ok(resp)) = with_io(&mut c.io, sent).await else {
            return Outcome::Other;
        };
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let read = with_io(&mut c.io, async {
            while let Some(frame) = body.frame().await {
                if frame.is_err() {
                    return false;
                }
            }
            true
        });
        if read.await != Some(true) {
            return Outcome::Other;
        }
        if !c.send.is_closed() {
            *slot = Some(c);
        }
        Outcome::Status(status)
    }
}

impl Transport for HttpTransport {
    type Slot = Option<Conn>;

    fn call(
        &self,
        slot: &mut Option<Conn>,
        remaining: Duration,
    ) -> impl Future<Output = Outcome> + Send {
        self.send(slot, remaining)
    }
}
