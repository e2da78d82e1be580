//! A middle tier (edge, gateway, order): an axum server whose handler calls the next tier.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use seawall::deadline::{Deadline, parse_timeout_ms};
use seawall::time::{Clock, SystemClock};
use seawall_tower::wire::{REQUEST_TIMEOUT_MS, RETRY_PUSHBACK_MS};

use seawall_tower::server::ServerMetrics;

use super::NodeSpec;
use super::client::{Downstream, upward};
use super::stats::{NodeStats, StatsSnapshot};
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
    stats: NodeStats,
    layers: ServerMetrics,
}

impl Tier {
    /// A tier for `spec`.
    pub async fn new(spec: &NodeSpec) -> Result<Arc<Self>, LabError> {
        let url = spec
            .downstream
            .as_deref()
            .ok_or_else(|| LabError::bad_input("downstream", "a tier needs a downstream URL"))?;
        Ok(Arc::new(Tier {
            stack: spec.stack,
            down: Downstream::new(url, spec.role, spec.stack, spec.seed)?,
            stats: NodeStats::default(),
            layers: ServerMetrics::new(),
        }))
    }

    fn snapshot(&self) -> StatsSnapshot {
        let m = self.down.policy().metrics().snapshot();
        let s = StatsSnapshot {
            attempts_sent: m.attempts,
            retries_sent: m.retries,
            budget_refusals: m.retry_overflow(),
            ..self.stats.snapshot()
        };
        super::protect::merge(s, &self.layers)
    }
}

async fn handle(State(tier): State<Arc<Tier>>, headers: HeaderMap) -> Response {
    tier.stats.received();
    let outcome = match tier.stack {
        // Baseline: no deadline, and the call runs to the end even if our caller has gone (a
        // thread-per-request server that never learns its client hung up).
        Stack::Baseline => {
            let t = tier.clone();
            match tokio::spawn(async move { t.down.call(None).await }).await {
                Ok(o) => o,
                Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            }
        }
        // Seawall: the edge's deadline travels down; the call is cancelled with the request.
        Stack::Seawall => {
            let now = SystemClock.now();
            let deadline = header_deadline(&headers).map(|d| Deadline::after(now, d));
            if deadline.is_some_and(|d| d.is_expired(now)) {
                tier.stats.doomed();
                return StatusCode::SERVICE_UNAVAILABLE.into_response();
            }
            tier.down.call(deadline).await
        }
    };
    let (status, dont_retry) = upward(outcome, tier.stack);
    let mut resp = status.into_response();
    if dont_retry {
        resp.headers_mut().insert(RETRY_PUSHBACK_MS, HeaderValue::from_static("-1"));
    }
    resp
}

async fn stats(State(tier): State<Arc<Tier>>) -> String {
    serde_json::to_string(&tier.snapshot()).unwrap_or_default()
}

/// The tier's routes: `GET /` and `GET /lab/stats`.
pub fn router(tier: Arc<Tier>) -> Router {
    let mut work = Router::new().route("/", get(handle));
    if tier.stack == Stack::Seawall {
        work = super::protect::protect(work, TIER_IN_FLIGHT, &tier.layers);
    }
    work.route("/lab/stats", get(stats)).with_state(tier)
}
