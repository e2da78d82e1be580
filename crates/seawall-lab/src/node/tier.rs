//! A middle tier (edge, gateway, order): an axum server whose handler calls the next tier.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use seawall::control::Control;
use seawall::deadline::parse_timeout_ms;
use seawall_tower::admin::AdminAuth;
use seawall_tower::client::{admin_response, metrics_response};
use seawall_tower::server::{ServerMetrics, admission_response};
use seawall_tower::wire::{REQUEST_TIMEOUT_MS, RETRY_PUSHBACK_MS, RequestDeadline};
use tower::util::BoxCloneSyncService;

use super::admin;
use super::backend::{PgBackend, PgService};
use super::client::{Downstream, http_client};
use super::spans::{self, SpanGuard, Tracer};
use super::stats::{NodeStats, SERVICE_HEADER, StatsSnapshot};
use super::{NodeSpec, Role};
use crate::LabError;
use crate::config::Stack;

/// The longest deadline a tier believes from the wire.
pub const MAX_DEADLINE: Duration = Duration::from_secs(60);

/// The time left that the caller sent (`Request-Timeout-Ms`), clamped; `None` if absent or bad.
pub fn header_deadline(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(REQUEST_TIMEOUT_MS)?.to_str().ok()?;
    parse_timeout_ms(v).ok().map(|d| d.min(MAX_DEADLINE))
}

/// A tier's in-flight cap under seawall: generous, since a tier only waits on the next one;
/// the dependency's own cap is what protects the stack.
pub const TIER_IN_FLIGHT: usize = 512;

/// A tier's state.
#[derive(Debug)]
pub struct Tier {
    stack: Stack,
    down: Downstream,
    stats: Arc<NodeStats>,
    layers: ServerMetrics,
    registry: Registry,
    backend: Option<Arc<PgBackend>>,
    admission: Arc<Control>,
    tracer: Option<Arc<Tracer>>,
}

impl Tier {
    /// The node's counters.
    pub(super) fn stats(&self) -> &Arc<NodeStats> {
        &self.stats
    }

    /// Its spans, when the spec asks for them ([`NodeSpec::otlp`]).
    pub(super) fn tracer(&self) -> Option<&Arc<Tracer>> {
        self.tracer.as_ref()
    }

    /// A tier for `spec`.
    pub async fn new(spec: &NodeSpec) -> Result<Arc<Self>, LabError> {
        let tracer = tracer(spec);
        let (down, backend) = match (&spec.backend, spec.role) {
            (Some(url), Role::Order) => {
                let table = spec.backend_table.as_deref().ok_or_else(|| {
                    LabError::bad_input("backend", "a postgres backend needs its table")
                })?;
                let pg = PgBackend::connect(url, table, spec.workers, spec.stack).await?;
                let inner =
                    traced(&tracer, BoxCloneSyncService::new(PgService(pg.clone())), "postgres");
                // The URL is only a label here: the service is the pool.
                (
                    Downstream::new("http://postgres/", inner, spec.role, spec.stack, spec.seed)?,
                    Some(pg),
                )
            }
            _ => {
                let url = spec.downstream.as_deref().ok_or_else(|| {
                    LabError::bad_input("downstream", "a tier needs a downstream URL")
                })?;
                return Self::over(spec, url, http_client());
            }
        };
        Ok(Self::assemble(spec, down, backend, tracer))
    }

    /// A tier for `spec` whose downstream calls go to `inner` (labelled `url`): the process
    /// lab's HTTP client, or the virtual lab's link ([`crate::vlab`]). The layers, handler and
    /// routes are the same either way.
    pub fn over(
        spec: &NodeSpec,
        url: &str,
        inner: super::client::Inner,
    ) -> Result<Arc<Self>, LabError> {
        let tracer = tracer(spec);
        let authority = url.parse::<http::Uri>().ok().and_then(|u| u.authority().cloned());
        let authority = authority.map_or_else(|| url.to_string(), |a| a.to_string());
        let inner = traced(&tracer, inner, &authority);
        let down = Downstream::new(url, inner, spec.role, spec.stack, spec.seed)?;
        Ok(Self::assemble(spec, down, None, tracer))
    }

    fn assemble(
        spec: &NodeSpec,
        down: Downstream,
        backend: Option<Arc<PgBackend>>,
        tracer: Option<Arc<Tracer>>,
    ) -> Arc<Self> {
        let mut registry = Registry::default();
        down.metrics().register(&mut registry);
        let layers = ServerMetrics::new();
        layers.register(&mut registry);
        Arc::new(Tier {
            stack: spec.stack,
            down,
            stats: Arc::default(),
            layers,
            registry,
            backend,
            admission: Arc::new(Control::new()),
            tracer,
        })
    }

    /// The control of the tier's retry policy, which `--fleet` drives.
    pub fn retry_control(&self) -> Arc<Control> {
        self.down.control().clone()
    }

    /// The server-side counters; the client's come from `GET /metrics` (see [`crate::scrape`]).
    fn snapshot(&self) -> StatsSnapshot {
        super::protect::merge(self.stats.snapshot(), &self.layers)
    }
}

/// The tracer of `spec`'s node, when it asks for spans.
fn tracer(spec: &NodeSpec) -> Option<Arc<Tracer>> {
    spec.otlp.as_ref().map(|_| Tracer::new(spec.role.as_str(), spec.seed))
}

/// `inner` traced at `authority` by `tracer`, if there is one.
fn traced(
    tracer: &Option<Arc<Tracer>>,
    inner: super::client::Inner,
    authority: &str,
) -> super::client::Inner {
    match tracer {
        Some(t) => spans::traced(inner, t.clone(), authority.to_string()),
        None => inner,
    }
}

/// Records `resp` in `span` (a 5xx fails it) and ends it.
fn end(span: Option<SpanGuard>, resp: &http::Response<()>) {
    if let Some(mut s) = span
        && resp.status().is_server_error()
    {
        s.fail(Some(resp.status().as_u16()));
    }
}

async fn handle(State(tier): State<Arc<Tier>>, req: Request) -> Response {
    let span = tier.tracer.as_ref().map(|t| t.server(req.headers()));
    let tp = span.as_ref().map(SpanGuard::traceparent);
    let resp = match tier.stack {
        // Baseline: no deadline, and the call runs to the end even if our caller has gone (a
        // thread-per-request server that never learns its client hung up); its span ends with
        // the work, not with the caller.
        Stack::Baseline => {
            let t = tier.clone();
            let work = async move {
                let r = t.down.call(None, tp).await;
                end(span, &r);
                r
            };
            match tokio::spawn(work).await {
                Ok(r) => r,
                Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            }
        }
        // Seawall: the deadline the server `DeadlineLayer` read from our caller travels down
        // (the client layer stamps the time left); the call, and its span, end with the
        // request.
        Stack::Seawall => {
            let deadline = req.extensions().get::<RequestDeadline>().cloned();
            let r = tier.down.call(deadline, tp).await;
            end(span, &r);
            r
        }
    };
    let (parts, ()) = resp.into_parts();
    let mut out = parts.status.into_response();
    // The pushback for the caller's policy, and the busy time behind the answer for the load
    // generator's wasted work (see `stats::SERVICE_HEADER`).
    for name in [RETRY_PUSHBACK_MS, SERVICE_HEADER] {
        if let Some(v) = parts.headers.get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    out
}

async fn stats(State(tier): State<Arc<Tier>>) -> String {
    serde_json::to_string(&tier.snapshot()).unwrap_or_default()
}

/// The PostgreSQL pool's counters, as the bottom "tier" of the stack (404 without a backend).
async fn backend(State(tier): State<Arc<Tier>>) -> Response {
    match &tier.backend {
        Some(pg) => serde_json::to_string(&pg.stats()).unwrap_or_default().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn metrics(State(tier): State<Arc<Tier>>) -> http::Response<String> {
    metrics_response(&tier.registry)
}

/// The tier's traffic routes: `GET /`, `GET /metrics` (the client layer's and the server
/// layers' Prometheus metrics), `GET /lab/stats` and `GET /lab/backend` (the PostgreSQL pool's
/// counters). The knobs are on [`admin_router`].
pub fn router(tier: Arc<Tier>) -> Router {
    let mut work = Router::new().route("/", get(handle));
    work = match tier.stack {
        Stack::Seawall => super::protect::protect(
            work,
            TIER_IN_FLIGHT,
            &tier.layers,
            &tier.admission,
            &tier.stats,
        ),
        Stack::Baseline => {
            super::protect::observe(work, &tier.layers, &tier.admission, &tier.stats)
        }
    };
    work.route("/lab/stats", get(stats))
        .route("/lab/backend", get(backend))
        .route("/metrics", get(metrics))
        .with_state(tier)
}

/// The tier's admin routes, each behind `auth`: the admission knob at
/// [`admin::ADMISSION_PATH`] and the client layer's retry switch at [`admin::RETRIES_PATH`].
pub fn admin_router(tier: &Arc<Tier>, auth: &AdminAuth) -> Router {
    let (knob, retries) = (tier.admission.clone(), tier.retry_control());
    let r = admin::knob_route(Router::new(), admin::ADMISSION_PATH, auth, move |a, req| {
        admission_response(&knob, a, req)
    });
    admin::knob_route(r, admin::RETRIES_PATH, auth, move |a, req| admin_response(&retries, a, req))
}
