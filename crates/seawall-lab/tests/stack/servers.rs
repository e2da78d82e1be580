//! The in-test parts of the example stack: the shared dependency, the backends calling it
//! (the library's [`seawall_lab::example`], as tasks), and a bounded edge load.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use seawall_lab::example::{self, BackendClient, BackendConfig, BoundedConfig, ExampleNode};
use tokio::task::{JoinHandle, JoinSet};

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// A server task aborted on drop.
pub(crate) struct Server {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) async fn serve<F, Fut>(handler: F) -> Server
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut conns = JoinSet::new();
        while let Ok((s, _)) = l.accept().await {
            let h = handler.clone();
            conns.spawn(async move {
                let svc = service_fn(move |_req: Request<Incoming>| {
                    let h = h.clone();
                    async move { Ok::<_, Infallible>(h().await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    Server { addr, task }
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(b"ok")));
    *r.status_mut() = code;
    r
}

/// The shared dependency: answers every request with 200 (its faults come from the proxy).
pub(crate) async fn dependency() -> Server {
    serve(|| async { status(StatusCode::OK) }).await
}

/// Serves one of the example stack's processes ([`seawall_lab::example`]) on a free port.
async fn example(node: ExampleNode) -> Server {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let never = std::future::pending::<()>();
        let _ = match node {
            ExampleNode::Backend(cfg) => example::serve_backend(l, cfg, never).await,
            ExampleNode::Dependency(cfg) => example::serve_bounded(l, cfg, never).await,
        };
    });
    Server { addr, task }
}

/// A backend instance: per request, up to `attempts` GETs to `dep`, each given up after
/// `timeout` (the next at once after a non-2xx, an error or a timeout: the naive retry), then
/// 200 or 503.
pub(crate) async fn backend(dep: SocketAddr, attempts: u32, timeout: Duration) -> Server {
    let client = BackendClient::Naive { attempts: attempts.try_into().unwrap() };
    let cfg = BackendConfig::new(&format!("http://{dep}/dep"), client, timeout).unwrap();
    example(ExampleNode::Backend(cfg)).await
}

/// A backend instance whose one call to `dep` goes through seawall's own client layer, the
/// retries' single owner ([`BackendClient::Seawall`]: 3 attempts at most, full jitter, the
/// gRPC-style token budget, the call's `timeout` as its deadline), then 200 or 503.
pub(crate) async fn seawall_backend(dep: SocketAddr, timeout: Duration, seed: u64) -> Server {
    let client = BackendClient::Seawall { seed };
    let cfg = BackendConfig::new(&format!("http://{dep}/dep"), client, timeout).unwrap();
    example(ExampleNode::Backend(cfg)).await
}

/// A dependency with `workers` workers, each taking `service` per request, and a FIFO queue
/// of at most `queue` requests (beyond: 503 at once), working on queued requests whose caller
/// has left ([`seawall_lab::example::serve_bounded`]).
pub(crate) async fn limited_dependency(workers: u32, service: Duration, queue: u32) -> Server {
    example(ExampleNode::Dependency(BoundedConfig::new(workers, service, queue).unwrap())).await
}

/// What the edge load saw.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Outcome {
    /// Answered 2xx.
    pub(crate) ok: u64,
    /// Answered otherwise, or failed, or timed out (5 s).
    pub(crate) failed: u64,
}

impl Outcome {
    /// Requests sent.
    pub(crate) fn sent(&self) -> u64 {
        self.ok + self.failed
    }
}

/// `workers` loops each sending `each` requests (`method`, empty body) to `url` one after
/// another (bounded: `workers × each` requests, 5 s each at most).
pub(crate) async fn edge_load(
    url: &str,
    method: http::Method,
    workers: usize,
    each: usize,
) -> Outcome {
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let mut set = JoinSet::new();
    for _ in 0..workers {
        let (client, uri, method) =
            (client.clone(), url.parse::<http::Uri>().unwrap(), method.clone());
        set.spawn(async move {
            let mut out = Outcome::default();
            for _ in 0..each {
                let req = Request::builder()
                    .method(method.clone())
                    .uri(uri.clone())
                    .body(Empty::new())
                    .unwrap();
                let call = client.request(req);
                match tokio::time::timeout(Duration::from_secs(5), call).await {
                    Ok(Ok(r)) if r.status().is_success() => {
                        let _ = r.into_body().collect().await;
                        out.ok += 1;
                    }
                    _ => out.failed += 1,
                }
            }
            out
        });
    }
    let mut total = Outcome::default();
    while let Some(o) = set.join_next().await {
        let o = o.unwrap();
        total.ok += o.ok;
        total.failed += o.failed;
    }
    total
}
