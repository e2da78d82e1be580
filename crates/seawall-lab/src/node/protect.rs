//! Server protection for the seawall configuration: the `seawall-tower` server layers.
//!
//! `DeadlineLayer` (outermost) reads the caller's time left and drops the request when it runs
//! out; `ShedLayer` admits at most `max_in_flight` at once, queues a few, sheds retries first
//! and rejects the rest at once with a 503. The baseline gets neither — only a pass-through
//! [`observe`]: a `ShedLayer` with no effective cap, there to count (`seawall_server_*`) and to
//! carry the operator's admission knob, which admits everything until someone turns it down.
//!
//! Every node serves the knob on its admin listener (see [`super::admin`]), not here.

use std::num::NonZeroUsize;
use std::sync::Arc;

use axum::Router;
use seawall::control::Control;
use seawall_tower::server::{DeadlineLayer, RejectReason, ServerMetrics, ShedLayer};

use super::stats::StatsSnapshot;

/// Wraps every route of `router` in the server layers, reporting into `metrics`.
/// `admission` is the operator's knob (100 % unless turned down).
pub fn protect<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    max_in_flight: usize,
    metrics: &ServerMetrics,
    admission: &Arc<Control>,
) -> Router<S> {
    let cap = NonZeroUsize::new(max_in_flight.max(1)).expect("at least 1");
    router
        .route_layer(
            ShedLayer::new(cap).with_admission(admission.clone()).with_metrics(metrics.clone()),
        )
        .route_layer(DeadlineLayer::new().with_metrics(metrics.clone()))
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
) -> Router<S> {
    let cap = NonZeroUsize::new(NO_CAP).expect("nonzero");
    router.route_layer(
        ShedLayer::new(cap).with_admission(admission.clone()).with_metrics(metrics.clone()),
    )
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
