//! Server protection for the seawall configuration: the `seawall-tower` server layers.
//!
//! `DeadlineLayer` (outermost) reads the caller's time left and drops the request when it runs
//! out; `ShedLayer` admits at most `max_in_flight` at once, queues a few, sheds retries first
//! and rejects the rest at once with a 503. The baseline gets neither — only a pass-through
//! [`observe`]: a `ShedLayer` with no effective cap, there to count (`seawall_server_*`) and to
//! carry the operator's admission knob, which admits everything until someone turns it down.
//!
//! Every node serves the knob on its admin listener (see [`super::admin`]), not here.
//!
//! Both count each attempt as it arrives, outside every layer (`count_arrivals`): an attempt
//! the layers turn away is still one that reached the node, and the simulator counts a tier's
//! attempts at its door in the same way.

// The runtime's clock: the wall clock on a real runtime, virtual time in the virtual lab.
use seawall_tower::time::TokioClock;
use std::num::NonZeroUsize;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use seawall::control::Control;
use seawall_tower::server::shed::CallerKey;
use seawall_tower::server::{DeadlineLayer, RejectReason, ServerMetrics, ShedLayer};
use tower::util::MapRequestLayer;

use super::stats::{CALLER_HEADER, NodeStats, StatsSnapshot};

/// Wraps every route of `router` in the server layers, reporting into `metrics`, and counts
/// arrivals into `stats`. `admission` is the operator's knob (100 % unless turned down).
pub fn protect<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    max_in_flight: usize,
    metrics: &ServerMetrics,
    admission: &Arc<Control>,
    stats: &Arc<NodeStats>,
) -> Router<S> {
    let cap = NonZeroUsize::new(max_in_flight.max(1)).expect("at least 1");
    let router = router
        .route_layer(
            ShedLayer::new(cap)
                .with_admission(admission.clone())
                .with_callers(CallerKey::header(CALLER_HEADER))
                .with_metrics(metrics.clone())
                .with_clock(TokioClock),
        )
        .route_layer(DeadlineLayer::new().with_metrics(metrics.clone()).with_clock(TokioClock));
    count_arrivals(router, stats)
}

/// Counts every request to `router`'s routes into `stats` as it arrives, before any server
/// layer can shed it or drop it as doomed (the outermost layer).
fn count_arrivals<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    stats: &Arc<NodeStats>,
) -> Router<S> {
    let stats = stats.clone();
    router.route_layer(MapRequestLayer::new(move |req: Request| {
        stats.received();
        req
    }))
}

/// The baseline's in-flight "cap": far above anything the lab offers, so nothing ever queues or
/// is shed in the layer.
pub const NO_CAP: usize = 1 << 30;

/// The baseline's server: a `ShedLayer` that never sheds on its own (no deadline is read, the
/// cap is [`NO_CAP`], so every request runs at once), counting into `metrics` and turning
/// requests away only when an operator cuts `admission` below 100 %. At 100 % the baseline
/// behaves as before; it just exports `seawall_server_*` like any instrumented service.
pub fn observe<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    metrics: &ServerMetrics,
    admission: &Arc<Control>,
    stats: &Arc<NodeStats>,
) -> Router<S> {
    let cap = NonZeroUsize::new(NO_CAP).expect("nonzero");
    let router = router.route_layer(
        ShedLayer::new(cap)
            .with_admission(admission.clone())
            .with_callers(CallerKey::header(CALLER_HEADER))
            .with_metrics(metrics.clone())
            .with_clock(TokioClock),
    );
    count_arrivals(router, stats)
}

/// Adds what the server layers counted to a node's snapshot: deadline drops as doomed, every
/// other rejection as shed, and the layer's queue age if older than the node's own.
pub fn merge(mut s: StatsSnapshot, metrics: &ServerMetrics) -> StatsSnapshot {
    let m = metrics.snapshot();
    let expired = m.rejected(RejectReason::DeadlineExpired);
    s.doomed += expired;
    s.shed += m.rejected_total() - expired;
    s.queue_age_s = s.queue_age_s.max(m.oldest_queued.as_secs_f64());
    s.queue_len += m.queue_len;
    s
}
