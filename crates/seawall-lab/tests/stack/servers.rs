//! The in-test parts of the example stack: the shared dependency, the backends calling it,
//! and a bounded edge load.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
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

/// A backend instance: per request, up to `attempts` GETs to `dep`, each given up after
/// `timeout` (the next at once after a non-2xx, an error or a timeout: the naive retry), then
/// 200 or 503.
pub(crate) async fn backend(dep: SocketAddr, attempts: u32, timeout: Duration) -> Server {
    let client: Arc<HttpClient> = Arc::new(Client::builder(TokioExecutor::new()).build_http());
    let url: Arc<str> = format!("http://{dep}/dep").into();
    serve(move || {
        let (client, url) = (client.clone(), url.clone());
        async move {
            for _ in 0..attempts {
                let call = client.get(url.parse().unwrap());
                if let Ok(Ok(r)) = tokio::time::timeout(timeout, call).await {
                    let ok = r.status().is_success();
                    let _ = r.into_body().collect().await;
                    if ok {
                        return status(StatusCode::OK);
                    }
                }
            }
            status(StatusCode::SERVICE_UNAVAILABLE)
        }
    })
    .await
}

/// A backend instance whose one call to `dep` goes through seawall's own client layer, the
/// retries' single owner ([`Downstream`] as the synthetic lab's seawall edge builds it: 3
/// attempts at most, full jitter, the gRPC-style token budget, the call's deadline honoured):
/// each request's call carries a `timeout` deadline, so no attempt starts that cannot finish,
/// then 200 or 503.
pub(crate) async fn seawall_backend(dep: SocketAddr, timeout: Duration, seed: u64) -> Server {
    use seawall::time::{Clock, SystemClock};
    use seawall_lab::config::Stack;
    use seawall_lab::node::Role;
    use seawall_lab::node::client::{Downstream, http_client};
    use seawall_tower::wire::RequestDeadline;
    let url = format!("http://{dep}/dep");
    let d =
        Arc::new(Downstream::new(&url, http_client(), Role::Edge, Stack::Seawall, seed).unwrap());
    serve(move || {
        let d = d.clone();
        async move {
            let deadline =
                RequestDeadline(seawall::deadline::Deadline::after(SystemClock.now(), timeout));
            match tokio::time::timeout(timeout, d.call(Some(deadline))).await {
                Ok(r) if r.status().is_success() => status(StatusCode::OK),
                _ => status(StatusCode::SERVICE_UNAVAILABLE),
            }
        }
    })
    .await
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
