//! The parent's HTTP calls to its nodes: stats and Prometheus metrics each second, and the fault
//! at `--at`.

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

use crate::LabError;
use crate::config::FaultSpec;
use crate::node::stats::StatsSnapshot;
use crate::prom;

/// A node's counters from its two pages: the server side from `GET /lab/stats` (`stats`), the
/// client layer's attempts, retries and budget refusals from its Prometheus page
/// (`GET /metrics`, when it answered 200). `base` names the node in errors.
pub fn snapshot_of(
    base: &str,
    stats: &[u8],
    metrics: Option<&[u8]>,
) -> Result<StatsSnapshot, LabError> {
    let mut s: StatsSnapshot = serde_json::from_slice(stats)
        .map_err(|e| LabError::Http(format!("{base}/lab/stats: {e}")))?;
    if let Some(page) = metrics {
        use seawall::metrics::names;
        let page = prom::Page::parse(&String::from_utf8_lossy(page))
            .map_err(|e| LabError::Http(format!("{base}/metrics: {e}")))?;
        s.attempts_sent = page.counter(names::CLIENT_ATTEMPTS);
        s.retries_sent = page.counter(names::CLIENT_RETRIES);
        s.budget_refusals = page.counter(names::CLIENT_RETRY_OVERFLOW);
    }
    Ok(s)
}

/// A small client for the nodes' `/lab/…` endpoints.
#[derive(Debug, Clone)]
pub struct Admin {
    http: Client<HttpConnector, Empty<Bytes>>,
}

impl Default for Admin {
    fn default() -> Self {
        Admin { http: Client::builder(TokioExecutor::new()).build(HttpConnector::new()) }
    }
}

impl Admin {
    async fn send(&self, method: Method, url: String) -> Result<(u16, Bytes), LabError> {
        self.send_as(method, url, None).await
    }

    async fn send_as(
        &self,
        method: Method,
        url: String,
        token: Option<&str>,
    ) -> Result<(u16, Bytes), LabError> {
        let mut req = Request::builder().method(method).uri(&url);
        if let Some(t) = token {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req.body(Empty::new()).map_err(|e| LabError::Http(format!("{url}: {e}")))?;
        let call = async {
            let resp =
                self.http.request(req).await.map_err(|e| LabError::Http(format!("{url}: {e}")))?;
            let status = resp.status().as_u16();
            let body =
                resp.into_body().collect().await.map_err(|e| LabError::Http(e.to_string()))?;
            Ok((status, body.to_bytes()))
        };
        // A node too busy to answer its stats within a second is itself a finding, not a hang.
        tokio::time::timeout(Duration::from_secs(2), call)
            .await
            .map_err(|_| LabError::Http(format!("{url}: no answer within 2 s")))?
    }

    /// The node's counters: the server side from `GET /lab/stats`, the client layer's attempts,
    /// retries and budget refusals from its Prometheus page, `GET /metrics`.
    pub async fn stats(&self, base: &str) -> Result<StatsSnapshot, LabError> {
        let (_, body) = self.send(Method::GET, format!("{base}/lab/stats")).await?;
        let (status, page) = self.send(Method::GET, format!("{base}/metrics")).await?;
        snapshot_of(base, &body, (status == 200).then_some(&page[..]))
    }

    /// The order service's PostgreSQL pool counters (`GET /lab/backend`).
    pub async fn backend_stats(&self, base: &str) -> Result<StatsSnapshot, LabError> {
        let (_, body) = self.send(Method::GET, format!("{base}/lab/backend")).await?;
        serde_json::from_slice(&body)
            .map_err(|e| LabError::Http(format!("{base}/lab/backend: {e}")))
    }

    /// Starts `fault` now on the dependency whose admin listener is `admin_base`, with the
    /// stack's admin `token` (the fault endpoint is an admin endpoint, off the traffic port).
    pub async fn inject(
        &self,
        admin_base: &str,
        token: &str,
        fault: FaultSpec,
    ) -> Result<(), LabError> {
        use crate::node::admin::FAULT_PATH;
        let (kind, ms) = (fault.kind.as_str(), fault.duration.as_millis());
        let url = format!("{admin_base}{FAULT_PATH}/{kind}/{ms}");
        match self.send_as(Method::POST, url.clone(), Some(token)).await? {
            (204, _) => Ok(()),
            (s, _) => Err(LabError::Http(format!("{url}: status {s}"))),
        }
    }
}
