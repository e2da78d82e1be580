//! The tiers' outgoing calls: `seawall-tower`'s client layers around a hyper-util client.
//!
//! Both configurations use the same layers a user would add — only their configuration
//! differs (see [`Downstream::new`]):
//!
//! - **baseline**, every tier: a [`RetryLayer`] configured the way teams often do — owner,
//!   3 attempts, flat 100 ms with [`Jitter::None`], an [`Unlimited`] budget, a 250 ms per-try
//!   timeout, 500s retried, no deadline. Three tiers of it multiply to 27.
//! - **seawall**: the edge's [`RetryLayer`] owns retries (3 attempts,
//!   full jitter from 50 ms, the gRPC-style token budget, the edge deadline propagated); the
//!   gateway and the order service use [`FailFastLayer`] and pass the dependency's overload up
//!   as 503 + `Retry-Pushback-Ms: -1`.
//!
//! Each layer reports into a [`ClientMetrics`], which the node serves at `GET /metrics` and the
//! parent scrapes for the attempts, retries and budget refusals of each tier.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use seawall::backoff::{Backoff, Jitter};
use seawall::budget::{AnyBudget, GrpcThrottle, Unlimited};
use seawall::classify::HttpClassifier;
use seawall::control::Control;
use seawall::policy::{PolicyConfig, RetryPolicy};
use seawall_tower::client::{BoxError, ClientMetrics, FailFast, FailFastLayer, Retry, RetryLayer};
use seawall_tower::wire::RequestDeadline;
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};

use super::Role;
use crate::LabError;
use crate::config::Stack;

/// The W3C Trace Context header (Trace Context, Level 1), which carries a traced call's
/// context to the next tier (see [`super::spans`]).
pub const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");

/// The per-try timeout of the baseline's teams (a 250 ms client timeout, as in an
/// index slowdown where the p50 goes 40 → 240 ms).
pub const BASELINE_TIMEOUT: Duration = Duration::from_millis(250);
/// The baseline's flat delay between attempts (3 retries, flat 100 ms).
pub const BASELINE_DELAY: Duration = Duration::from_millis(100);

/// The service the layers wrap: the next tier over HTTP ([`http_client`]) or, for the order
/// service with `--backend`, the PostgreSQL pool ([`super::backend::PgService`]). Boxed so one
/// client type serves both.
pub type Inner = BoxCloneSyncService<Request<Empty<Bytes>>, Response<()>, InnerError>;

/// The inner service's error: a transport error, boxed.
///
/// A named type rather than `BoxError` itself: the layers take `S::Error: Into<BoxError>`, and
/// with `BoxError` as `S::Error` rustc cannot prove the spawned call future `Send` ("`From` is
/// not general enough", a known higher-ranked lifetime limitation). The wrapper keeps the
/// error's `source()` chain, which the layers walk to spot a refused connection.
#[derive(Debug)]
pub struct InnerError(pub BoxError);

impl std::fmt::Display for InnerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for InnerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// A hyper-util client, pooled, `TCP_NODELAY`. Response bodies are dropped: every lab answer is
/// an empty body, and `FailFast` needs a body type with a `Default` (for its own 503).
pub fn http_client() -> Inner {
    let mut conn = HttpConnector::new();
    conn.set_nodelay(true);
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).pool_max_idle_per_host(512).build(conn);
    BoxCloneSyncService::new(
        client
            .map_response(|r: Response<Incoming>| r.map(|_| ()))
            .map_err(|e| InnerError(e.into())),
    )
}

/// The retry policy of the owner layer of `stack`: every tier's usual settings
/// (baseline) or seawall's edge (seawall). Only the core's knobs.
pub fn owner_policy(stack: Stack, seed: u64) -> RetryPolicy<AnyBudget> {
    let (cfg, budget) = match stack {
        Stack::Baseline => (
            PolicyConfig::default()
                .with_backoff(Backoff::constant(BASELINE_DELAY).expect("valid"))
                .with_per_try_timeout(BASELINE_TIMEOUT)
                .expect("valid"),
            AnyBudget::Unlimited(Unlimited),
        ),
        Stack::Seawall => (
            PolicyConfig::default().with_backoff(
                Backoff::new(Jitter::Full, Duration::from_millis(50), Duration::from_secs(1), 2.0)
                    .expect("valid"),
            ),
            AnyBudget::Grpc(GrpcThrottle::default()),
        ),
    };
    RetryPolicy::new(cfg, budget).with_seed(seed)
}

#[derive(Debug, Clone)]
enum Layered {
    Owner(Retry<Inner>),
    FailFast(FailFast<Inner>),
}

/// A tier's client of the next tier: the client layer of its role, and its metrics.
#[derive(Debug, Clone)]
pub struct Downstream {
    url: http::Uri,
    stack: Stack,
    svc: Layered,
    metrics: Arc<ClientMetrics>,
    control: Arc<Control>,
    /// Our name, sent as [`super::stats::CALLER_HEADER`].
    caller: http::HeaderValue,
}

impl Downstream {
    /// A client of `url` through `http` (see [`Inner`]) for `role` in `stack`.
    pub fn new(
        url: &str,
        http: Inner,
        role: Role,
        stack: Stack,
        seed: u64,
    ) -> Result<Self, LabError> {
        let url =
            url.parse().map_err(|e| LabError::bad_input("downstream", format!("{url}: {e}")))?;
        let metrics = Arc::new(ClientMetrics::new());
        let control = Arc::new(Control::new());
        let svc = match (stack, role) {
            (Stack::Seawall, Role::Gateway | Role::Order) => {
                Layered::FailFast(FailFastLayer::new().with_metrics(metrics.clone()).layer(http))
            }
            _ => {
                // The baseline's teams retry 500s too; seawall's default classifier does not.
                let classifier = HttpClassifier::new().retry_500(stack == Stack::Baseline);
                let layer = RetryLayer::from_policy(
                    owner_policy(stack, seed).with_control(control.clone()),
                )
                .with_classifier(classifier)
                .with_metrics(metrics.clone());
                Layered::Owner(layer.layer(http))
            }
        };
        let caller = http::HeaderValue::from_static(role.as_str());
        Ok(Downstream { url, stack, svc, metrics, control, caller })
    }

    /// The runtime control of the layer's retry policy (the fleet switch drives it; a
    /// fail-fast layer never retries, so there it changes nothing).
    pub fn control(&self) -> &Arc<Control> {
        &self.control
    }

    /// The layer's metrics (served at `GET /metrics`).
    pub fn metrics(&self) -> &Arc<ClientMetrics> {
        &self.metrics
    }

    /// One logical call, carrying `deadline` (seawall: the one the server `DeadlineLayer` read
    /// from our caller). Returns the answer to give upward.
    /// With `traceparent`, the call's attempts are traced under it (see
    /// [`super::spans::traced`]).
    pub async fn call(
        &self,
        deadline: Option<RequestDeadline>,
        traceparent: Option<http::HeaderValue>,
    ) -> Response<()> {
        let mut req = Request::get(self.url.clone()).body(Empty::new()).expect("valid request");
        req.headers_mut().insert(super::stats::CALLER_HEADER, self.caller.clone());
        if let Some(tp) = traceparent {
            req.headers_mut().insert(TRACEPARENT, tp);
        }
        if let Some(d) = deadline {
            req.extensions_mut().insert(d);
        }
        match &self.svc {
            Layered::Owner(s) => match s.clone().oneshot(req).await {
                Ok(resp) => resp,
                // Seawall passes "overloaded; don't retry" upward; the baseline's teams answer a
                // plain 503, which the tier above retries.
                Err(e) if self.stack == Stack::Seawall => e.into_response(),
                Err(_) => status(StatusCode::SERVICE_UNAVAILABLE),
            },
            Layered::FailFast(s) => match s.clone().oneshot(req).await {
                Ok(resp) => resp,
                Err(_) => status(StatusCode::BAD_GATEWAY),
            },
        }
    }
}

fn status(s: StatusCode) -> Response<()> {
    let mut r = Response::new(());
    *r.status_mut() = s;
    r
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::Full;
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    use tokio::net::TcpListener;

    use super::*;

    /// Consecutive calls share one keep-alive connection, as a real service's client does, so
    /// the lab's tiers do not pay a connect (and leave a TIME_WAIT socket) per attempt. The
    /// answers' bodies are dropped unread (`map(|_| ())`); a short body has arrived with the
    /// head, and the connection still goes back to the pool. Red with an idle pool of 0.
    #[tokio::test]
    async fn consecutive_calls_reuse_one_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let server = tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let answer = service_fn(|_req| async {
                        Ok::<_, std::convert::Infallible>(Response::new(Full::new(
                            Bytes::from_static(b"ok\n"),
                        )))
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(tcp), answer).await;
                });
            }
        });
        let http = http_client();
        let url: http::Uri = format!("http://{addr}/").parse().unwrap();
        for _ in 0..20 {
            let req = Request::get(url.clone()).body(Empty::new()).unwrap();
            let r = http.clone().oneshot(req).await.unwrap();
            assert_eq!(r.status(), StatusCode::OK);
        }
        server.abort();
        assert_eq!(accepted.load(Ordering::Relaxed), 1, "one connection for 20 calls");
    }
}
