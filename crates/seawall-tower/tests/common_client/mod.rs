//! Shared helpers for the client integration tests: an axum server on 127.0.0.1 and reqwest as
//! a `tower::Service<http::Request<Bytes>>`.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;

/// Serves `router` on an ephemeral loopback port until the test's runtime ends.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// reqwest's client behind the `http` types the layers speak.
#[derive(Clone, Debug)]
pub struct Reqwest(pub reqwest::Client);

impl Reqwest {
    pub fn new() -> Self {
        Reqwest(reqwest::Client::builder().no_proxy().build().unwrap())
    }
}

impl tower::Service<http::Request<Bytes>> for Reqwest {
    type Response = http::Response<Bytes>;
    type Error = reqwest::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Bytes>) -> Self::Future {
        let client = self.0.clone();
        Box::pin(async move {
            let req = reqwest::Request::try_from(req)?;
            let resp = client.execute(req).await?;
            let mut out = http::Response::builder().status(resp.status());
            for (k, v) in resp.headers() {
                out = out.header(k, v);
            }
            let body = resp.bytes().await?;
            Ok(out.body(body).unwrap())
        })
    }
}

pub fn get(addr: SocketAddr, path: &str) -> http::Request<Bytes> {
    http::Request::get(format!("http://{addr}{path}")).body(Bytes::new()).unwrap()
}

pub fn post(addr: SocketAddr, path: &str) -> http::Request<Bytes> {
    http::Request::post(format!("http://{addr}{path}")).body(Bytes::from_static(b"{}")).unwrap()
}

/// An axum response from a status and headers.
pub fn reply(status: u16, headers: &[(&'static str, String)]) -> axum::response::Response {
    let mut r = http::Response::builder().status(status);
    for (k, v) in headers {
        r = r.header(*k, v.as_str());
    }
    r.body(axum::body::Body::empty()).unwrap()
}

/// The `Request-Timeout-Ms` of each request, in order (a request without one panics).
pub fn timeouts_ms<'a>(requests: impl IntoIterator<Item = &'a http::HeaderMap>) -> Vec<u64> {
    requests
        .into_iter()
        .map(|h| h["request-timeout-ms"].to_str().unwrap().parse().unwrap())
        .collect()
}

/// Reads an HTTP/1.1 request head off `sock` (for hand-written loopback servers); false if the
/// peer hung up or the read failed first.
pub fn read_head(sock: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}
