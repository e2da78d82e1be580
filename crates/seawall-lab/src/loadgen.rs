//! The open-loop load generator: requests leave at scheduled instants, whatever the responses do.
//!
//! A closed-loop generator (send, wait, send) slows down exactly when the system does, and so
//! never sees a storm — coordinated omission. Here each request is a task spawned at its
//! scheduled instant; a late scheduler sends the backlog at once rather than skipping it, and the
//! lag is reported. Each request carries the edge deadline (`Request-Timeout-Ms`) and counts as
//! goodput only if it is answered 2xx within it. Counts are bucketed by the second it was sent.
//! A good answer also carries the dependency's busy time behind it
//! ([`SERVICE_HEADER`](crate::node::stats::SERVICE_HEADER)), summed into
//! [`LoadCounts::good_busy`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use seawall::deadline::encode_timeout_ms;
use seawall_tower::wire::{REQUEST_ATTEMPT, REQUEST_TIMEOUT_MS};
use tokio::time::Instant;

use crate::node::stats::service_of;

/// What to send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadPlan {
    /// Requests per second at the start.
    pub rate: f64,
    /// Requests per second at the end (linear ramp); equal to `rate` for a fixed rate.
    pub rate_end: f64,
    /// How long to send.
    pub duration: Duration,
    /// Each request's deadline.
    pub deadline: Duration,
}

impl LoadPlan {
    /// The plan of a lab run: its rate (ramped to `ramp_to` if given), duration and deadline.
    pub fn of(params: &crate::LabParams) -> Self {
        LoadPlan {
            rate: params.rate,
            rate_end: params.ramp_to.unwrap_or(params.rate),
            duration: params.duration,
            deadline: params.deadline,
        }
    }

    /// The rate at `t` seconds from the start.
    fn rate_at(&self, t: f64) -> f64 {
        let f = (t / self.duration.as_secs_f64()).clamp(0.0, 1.0);
        self.rate + (self.rate_end - self.rate) * f
    }

    /// Send instants, seconds from the start: evenly spaced at the current rate. Bounded by the
    /// higher rate × duration.
    pub fn schedule(&self) -> Vec<f64> {
        let end = self.duration.as_secs_f64();
        let bound = (self.rate.max(self.rate_end) * end).ceil() as usize + 1;
        if self.rate == self.rate_end {
            // Computed, not accumulated, so a fixed rate sends exactly rate × duration requests.
            let n = (self.rate * end).round() as usize;
            return (0..n.min(bound)).map(|i| i as f64 / self.rate).collect();
        }
        let mut out = Vec::with_capacity(bound);
        let mut t = 0.0;
        while t < end && out.len() < bound {
            out.push(t);
            t += 1.0 / self.rate_at(t).max(1e-3);
        }
        out
    }
}

/// What the generator saw, per second of sending.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadCounts {
    /// Requests sent in each second.
    pub offered: Vec<u64>,
    /// Of those, answered 2xx within their deadline.
    pub good: Vec<u64>,
    /// The bottom's busy time behind those good answers, summed (each answer carries it in
    /// [`SERVICE_HEADER`](crate::node::stats::SERVICE_HEADER)): the part of the dependency's
    /// work whose answer a user used.
    pub good_busy: Duration,
    /// The scheduler's worst lag behind its schedule (a busy machine, not the system under test).
    pub max_lag: Duration,
}

/// Drives `url` with `plan` (from now) and returns when every request has finished or passed its
/// deadline.
pub async fn run(url: &str, plan: LoadPlan) -> LoadCounts {
    let uri: http::Uri = url.parse().expect("a node URL is a valid URI");
    let mut conn = HttpConnector::new();
    conn.set_nodelay(true);
    let http: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).pool_max_idle_per_host(1024).build(conn);
    run_with(plan, move |req: Request<Empty<Bytes>>| {
        let (http, uri) = (http.clone(), uri.clone());
        async move {
            let (mut parts, body) = req.into_parts();
            parts.uri = uri;
            let r = http.request(Request::from_parts(parts, body)).await.ok()?;
            Some((r.status(), r.headers().clone()))
        }
    })
    .await
}

/// [`run`] through `send`, which delivers one request and yields its status and headers (or
/// `None` for a transport error): the process lab's HTTP client, or the virtual lab's link.
/// Each request is a task spawned at its scheduled instant on the runtime's clock.
pub async fn run_with<F, Fut>(plan: LoadPlan, send: F) -> LoadCounts
where
    F: Fn(Request<Empty<Bytes>>) -> Fut,
    Fut: std::future::Future<Output = Option<(http::StatusCode, http::HeaderMap)>> + Send + 'static,
{
    let secs = plan.duration.as_secs_f64().ceil() as usize;
    let offered: Arc<Vec<AtomicU64>> = Arc::new((0..secs).map(|_| AtomicU64::new(0)).collect());
    let good: Arc<Vec<AtomicU64>> = Arc::new((0..secs).map(|_| AtomicU64::new(0)).collect());
    let good_busy_ns = Arc::new(AtomicU64::new(0));
    let timeout_header = encode_timeout_ms(plan.deadline);
    let start = Instant::now();
    let mut max_lag = Duration::ZERO;
    let mut tasks = tokio::task::JoinSet::new();
    for t in plan.schedule() {
        let at = start + Duration::from_secs_f64(t);
        tokio::time::sleep_until(at).await;
        max_lag = max_lag.max(Instant::now().saturating_duration_since(at));
        let sec = (t as usize).min(secs.saturating_sub(1));
        offered[sec].fetch_add(1, Ordering::Relaxed);
        let req = Request::get("/")
            .header(REQUEST_ATTEMPT, "1")
            .header(REQUEST_TIMEOUT_MS, timeout_header.as_str())
            .body(Empty::new())
            .expect("valid request");
        let (good, good_busy_ns) = (good.clone(), good_busy_ns.clone());
        let call = send(req);
        tasks.spawn(async move {
            let resp = tokio::time::timeout(plan.deadline, call).await;
            if let Ok(Some((status, headers))) = resp
                && status.is_success()
            {
                good[sec].fetch_add(1, Ordering::Relaxed);
                // No work can have taken longer than the deadline it was answered within.
                let busy = service_of(&headers, plan.deadline).unwrap_or_default();
                good_busy_ns.fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
            }
        });
        // Reap finished tasks as we go so the set stays the size of what is in flight.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let load = |v: &[AtomicU64]| v.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    let good_busy = Duration::from_nanos(good_busy_ns.load(Ordering::Relaxed));
    LoadCounts { offered: load(&offered), good: load(&good), good_busy, max_lag }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_is_open_loop_and_bounded() {
        let plan = LoadPlan {
            rate: 100.0,
            rate_end: 100.0,
            duration: Duration::from_secs(3),
            deadline: Duration::from_secs(1),
        };
        let s = plan.schedule();
        assert_eq!(s.len(), 300);
        assert!(s.windows(2).all(|w| (w[1] - w[0] - 0.01).abs() < 1e-9));
        let ramp = LoadPlan { rate_end: 300.0, ..plan };
        let n = ramp.schedule().len();
        assert!((550..=650).contains(&n), "{n}"); // mean rate 200 over 3 s
    }
}
