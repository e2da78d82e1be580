//! [`DeadlineLayer`]: defaults, the server maximum and the malformed-header policy.

use std::time::Duration;

use seawall::time::{Clock, SystemClock};
use tower_layer::Layer;

use super::DeadlineService;
use crate::server::metrics::ServerMetrics;
use crate::wire::DeadlineClock;

/// Deadline of a request that carries none: 15 s, Envoy's default route timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest deadline a caller can ask for: 60 s (a local choice; set it to your own SLO).
pub const DEFAULT_MAX: Duration = Duration::from_secs(60);

/// What to do with a present but malformed timeout header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MalformedTimeout {
    /// Answer `400 Bad Request` (gRPC `INVALID_ARGUMENT`) without running the handler (default).
    #[default]
    Reject,
    /// Treat the header as absent: the server default applies.
    Ignore,
}

/// Reads, clamps and enforces the caller's deadline. See the [module docs](super).
///
/// The deadline is an instant of the layer's clock (`C`, [`SystemClock`] unless
/// [`with_clock`](Self::with_clock) says otherwise) and travels with it
/// ([`RequestDeadline`](crate::wire::RequestDeadline)): client layers below on another clock
/// read its time left.
#[derive(Debug, Clone)]
pub struct DeadlineLayer<C = SystemClock> {
    default: Duration,
    max: Duration,
    malformed: MalformedTimeout,
    metrics: Option<ServerMetrics>,
    clock: C,
}

impl Default for DeadlineLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl DeadlineLayer {
    /// Default 15 s, maximum 60 s, malformed headers rejected with 400.
    pub fn new() -> Self {
        DeadlineLayer {
            default: DEFAULT_TIMEOUT,
            max: DEFAULT_MAX,
            malformed: MalformedTimeout::Reject,
            metrics: None,
            clock: SystemClock,
        }
    }
}

impl<C: Clock + Clone> DeadlineLayer<C> {
    /// Reads the time from `clock`. The deadline's timer is a tokio timer set for the time
    /// left by `clock`, so a clock other than tokio's must move with tokio's:
    /// [`TokioClock`](crate::time::TokioClock) runs the layer on a paused runtime's virtual
    /// time.
    pub fn with_clock<C2: Clock + Clone>(self, clock: C2) -> DeadlineLayer<C2> {
        let DeadlineLayer { default, max, malformed, metrics, .. } = self;
        DeadlineLayer { default, max, malformed, metrics, clock }
    }

    /// The deadline of requests that carry none (clamped to the maximum).
    pub fn with_default_timeout(mut self, d: Duration) -> Self {
        self.default = d;
        self
    }

    /// The longest deadline a caller can ask for.
    pub fn with_max_timeout(mut self, d: Duration) -> Self {
        self.max = d;
        self
    }

    /// What to do with a malformed header (default [`MalformedTimeout::Reject`]).
    pub fn with_malformed(mut self, m: MalformedTimeout) -> Self {
        self.malformed = m;
        self
    }

    /// Count expired requests into `metrics` as [`RejectReason::DeadlineExpired`](crate::server::RejectReason::DeadlineExpired).
    pub fn with_metrics(mut self, metrics: ServerMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

impl<S, C: Clock + Clone + 'static> Layer<S> for DeadlineLayer<C> {
    type Service = DeadlineService<S, C>;

    fn layer(&self, inner: S) -> DeadlineService<S, C> {
        DeadlineService {
            stamp: DeadlineClock::of(&self.clock),
            inner,
            default: self.default,
            max: self.max,
            malformed: self.malformed,
            metrics: self.metrics.clone(),
            clock: self.clock.clone(),
        }
    }
}
