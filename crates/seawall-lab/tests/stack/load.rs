//! A bounded open-loop edge load, for the "stays down after the fault" run.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::task::JoinSet;

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
