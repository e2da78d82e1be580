//! The HTTP/1.1 transport: a pool of keep-alive connections to one loopback address.
//!
//! HTTP/1.1 carries one request at a time per connection, so the pool opens a connection when
//! a request finds none idle and keeps it for the next. The number of connections is bounded
//! by construction: each one is either idle or carrying one of the driver's in-flight requests,
//! so there are never more than `max_in_flight` of them. A connection whose request was
//! abandoned at its deadline is closed (its response may still be on the way) and so is one
//! that broke; a fresh one replaces it on demand, its connect time charged to that request.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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

type Conn = (SendRequest<Full<Bytes>>, Open);

/// Sends the spec's request over pooled HTTP/1.1 connections.
#[derive(Debug)]
pub struct HttpTransport {
    addr: SocketAddr,
    method: Method,
    path: Uri,
    headers: HeaderMap,
    body: Full<Bytes>,
    idle: Mutex<Vec<Conn>>,
    open: Arc<AtomicUsize>,
    peak: AtomicUsize,
}

impl HttpTransport {
    /// A pool for `spec`'s target and request.
    pub fn new(spec: &LoadSpec) -> Self {
        Self {
            addr: spec.target.addr,
            method: spec.method.clone(),
            path: spec.target.path.clone(),
            headers: spec.headers.clone(),
            body: Full::new(spec.body.clone()),
            idle: Mutex::new(Vec::new()),
            open: Arc::new(AtomicUsize::new(0)),
            peak: AtomicUsize::new(0),
        }
    }

    /// Most connections open at once so far.
    pub fn peak_connections(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(c) = idle.pop() {
            if !c.0.is_closed() {
                return Some(c);
            }
        }
        None
    }

    async fn connect(&self) -> Option<Conn> {
        let n = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        let open = Open(self.open.clone());
        self.peak.fetch_max(n, Ordering::Relaxed);
        let tcp = TcpStream::connect(self.addr).await.ok()?;
        tcp.set_nodelay(true).ok()?;
        let (send, conn) = http1::handshake(TokioIo::new(tcp)).await.ok()?;
        // The connection's I/O runs in its own task and ends when `send` is dropped.
        tokio::spawn(conn);
        Some((send, open))
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

    async fn send(&self, remaining: Duration) -> Outcome {
        let idle = match self.take_idle() {
            Some(mut c) => c.0.ready().await.is_ok().then_some(c),
            None => None,
        };
        let mut conn = match idle {
            Some(c) => c,
            None => match self.connect().await {
                Some(c) => c,
                None => return Outcome::Connect,
            },
        };
        let Ok(resp) = conn.0.send_request(self.request(remaining)).await else {
            return Outcome::Other;
        };
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                return Outcome::Other;
            }
        }
        if !conn.0.is_closed() {
            self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(conn);
        }
        Outcome::Status(status)
    }
}

impl Transport for HttpTransport {
    fn call(&self, remaining: Duration) -> impl Future<Output = Outcome> + Send {
        self.send(remaining)
    }
}
