//! A capacity-limited dependency and a bounded open-loop edge load, for the "stays down after
//! the fault" run.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::servers::{Server, serve};

/// A dependency with `workers` workers, each taking `service` per request, and a FIFO queue
/// of at most `queue` requests (beyond: 503 at once). A request once queued is worked on
/// even if its caller has given up, as a database runs a statement whose client timed out:
/// that is the wasted work that keeps a storm going.
pub(crate) async fn limited_dependency(workers: usize, service: Duration, queue: usize) -> Server {
    let (tx, rx) = mpsc::channel::<oneshot::Sender<()>>(queue);
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let mut pool = JoinSet::new();
    for _ in 0..workers {
        let rx = rx.clone();
        pool.spawn(async move {
            loop {
                let Some(done) = rx.lock().await.recv().await else { return };
                tokio::time::sleep(service).await;
                let _ = done.send(());
            }
        });
    }
    let pool = Arc::new(pool);
    serve(move || {
        let (tx, _pool) = (tx.clone(), pool.clone());
        async move {
            let (done, wait) = oneshot::channel();
            let code = match tx.try_send(done) {
                Ok(()) if wait.await.is_ok() => StatusCode::OK,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            let mut r = Response::new(Full::new(Bytes::from_static(b"ok")));
            *r.status_mut() = code;
            r
        }
    })
    .await
}

/// Per second of the open-loop load (by scheduled send time): sent, answered 2xx.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Second {
    pub(crate) sent: u64,
    pub(crate) ok: u64,
}

/// GETs to `url` at `rate` per second for `secs` seconds, each sent on schedule whether or
/// not earlier ones returned (bounded: `rate × secs` requests, 5 s each at most).
pub(crate) async fn open_loop(url: &str, rate: u32, secs: u32) -> Vec<Second> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let uri: http::Uri = url.parse().unwrap();
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    let mut set = JoinSet::new();
    for i in 0..rate * secs {
        tick.tick().await;
        let (client, uri) = (client.clone(), uri.clone());
        set.spawn(async move {
            let call = tokio::time::timeout(Duration::from_secs(5), client.get(uri)).await;
            let ok = match call {
                Ok(Ok(r)) if r.status().is_success() => r.into_body().collect().await.is_ok(),
                _ => false,
            };
            ((i / rate) as usize, ok)
        });
    }
    let mut out = vec![Second::default(); secs as usize];
    while let Some(r) = set.join_next().await {
        let (s, ok) = r.unwrap();
        out[s].sent += 1;
        out[s].ok += u64::from(ok);
    }
    out
}
