//! Retrying and hedging tonic calls by gRPC's own rules, gRFC A6.
//!
//! # Why a gRPC mode
//!
//! Every gRPC call is an HTTP `POST`, so seawall's HTTP rules (retry only what is idempotent by
//! method or carries an `Idempotency-Key`) never retry one, and tonic has no client retries of
//! its own. gRPC already says which calls to retry: the service owner's *service config* lists,
//! per method, the status codes worth retrying (`retryPolicy`) or the failures after which
//! hedged copies are worth waiting for (`hedgingPolicy`), and a per-server token bucket
//! (`retryThrottling`) that stops retries once failures pass about `tokenRatio` of successes.
//! [`GrpcRetryLayer`] reads that config and applies it as gRFC A6, "gRPC Retry Design"
//! (<https://github.com/grpc/proposal/blob/master/A6-client-retries.md>), specifies; the
//! decisions are the core's [`seawall::grpc`] (the differences from the HTTP rules are listed
//! in [`seawall::grpc::retry`]).
//!
//! It is **one layer** directly on a tonic `Channel`: it buffers the request itself (so there
//! is no order of layers to get wrong), and on each attempt stamps `grpc-previous-rpc-attempts`
//! (absent on the first, 1 on the second, …) and `grpc-timeout` with the time left.
//!
//! # What it does, per call
//!
//! - **Which policy**: the method config for the call's `/package.Service/Method` path (exact
//!   entry, else the service's, else the `{}` default). No policy: the call is sent once.
//! - **Deadline**: the earliest of the request's own timeout (`tonic::Request::set_timeout`),
//!   the method config's `timeout`, and the deadline the task inherited
//!   ([`seawall_tower::propagate::current`]). A6: it bounds the whole chain of attempts. A retry whose
//!   backoff would end past it is not made, and the caller gets the last attempt's status
//!   (say `UNAVAILABLE`) at once. C-core instead waits until the deadline and returns
//!   `DEADLINE_EXCEEDED` then; seawall answers at once because waiting would hold the caller
//!   (and its own caller's slot) with nothing left to gain, and the last status names the
//!   cause, where `DEADLINE_EXCEEDED` would point at the caller's timeout. A deadline that
//!   passes while an attempt is in flight ends the call with `DEADLINE_EXCEEDED`.
//! - **Metrics**: every call counts into the layer's core [`Metrics`] by the HTTP layers' rules
//!   (attempts by number, hedged copies included; the end once, with its give-up reason; a
//!   dropped call as abandoned), and [`GrpcRetryLayer::with_metrics`] exports them through a
//!   [`ClientMetrics`] under the same `seawall_client_*` names, so `seawall detect` and the
//!   alert rules read a gRPC client as they read an HTTP one.
//! - **Clock**: deadlines and the `grpc-timeout` sent with each attempt (the time left) are
//!   read from the layer's clock ([`GrpcRetryLayer::with_clock`], the system's by default);
//!   waits are tokio's timers, so `.with_clock(TokioClock)` on a paused runtime runs a call's
//!   whole chain of backoffs on virtual time ([`seawall_tower::time`]).
//! - **Retry policy**: a status in `retryableStatusCodes` is retried after
//!   `min(initialBackoff·multiplier^(n−1), maxBackoff) · random(0.8, 1.2)` (A6 as revised on
//!   2024-08-29, as grpc-go and C-core wait); a valid `grpc-retry-pushback-ms` replaces that
//!   wait and restarts the sequence; a negative or malformed one stops retries.
//!   `perAttemptRecvTimeout` cancels an attempt still waiting for its response headers as
//!   `CANCELLED` (grpc-core's status for it), retried only if that code is listed.
//! - **Hedging policy**: a copy every `hedgingDelay` up to `maxAttempts`; the first `OK` (or
//!   committed response) wins and the other copies are cancelled (their HTTP/2 streams reset);
//!   a non-fatal failure sends the next copy at once; a fatal one ends the call.
//! - **Throttle**: one [`GrpcThrottle`] per layer (per server, as A6 says: build one layer per
//!   channel). A success adds `tokenRatio`; a retryable (or non-fatal) code or a "don't retry"
//!   pushback takes 1; other codes nothing. Retries and hedges need tokens above half.
//! - **Committed**: a response with headers and no `grpc-status` goes to the caller as it is
//!   (A6: response headers commit the call); its trailing status settles the throttle when the
//!   caller reads it. A failure sent trailers-only (`grpc-status` in the headers: how tonic and
//!   other servers reject a call) is what gets retried.
//! - **Buffering**: a request up to [`GrpcRetryLayer::with_buffer_limit`] (64 KiB by default)
//!   is replayed; a larger one is sent once, as A6 says. The request body is read to its end
//!   before the first attempt, so give policies to unary and server-streaming methods only: a
//!   client- or bidi-streaming call under a policy would wait for its whole stream first.
//! - A transport error before any response counts as `UNAVAILABLE`; an HTTP error without
//!   `grpc-status` (a proxy's 503) is mapped to a code as gRPC's HTTP-to-gRPC table does.
//!
//! ```no_run
//! use seawall_grpc::GrpcRetryLayer;
//! use tower::ServiceBuilder;
//!
//! # fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let layer = GrpcRetryLayer::from_json(r#"{
//!   "methodConfig": [{
//!     "name": [{"service": "demo.Echo"}],
//!     "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.05s", "maxBackoff": "1s",
//!                     "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
//!   }],
//!   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
//! }"#)?;
//! let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect_lazy();
//! let svc = ServiceBuilder::new().layer(layer).service(channel);
//! let _client = tonic::client::Grpc::new(svc); // UNAVAILABLE is now retried, by A6's rules
//! # Ok(()) }
//! ```

mod body;
mod call;
mod future;

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use seawall::budget::GrpcThrottle;
use seawall::grpc::{ServiceConfig, ServiceConfigError, StopReason};
use seawall::metrics::Metrics;
use seawall::rng::SeedSource;
use seawall::time::{Clock, SystemClock};
use tower_layer::Layer;
use tower_service::Service;

use seawall_tower::client::{BoxError, ClientMetrics};

use crate::future::ResponseFuture;

/// The default largest request replayed: 64 KiB.
pub const DEFAULT_BUFFER_LIMIT: usize = 64 * 1024;

/// What happened during a call, for logs, metrics and tests
/// ([`GrpcRetryLayer::with_observer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrpcEvent {
    /// An attempt (or hedged copy) is sent, with this `grpc-previous-rpc-attempts` (0: first).
    Attempt {
        /// Attempts before this one.
        previous: u32,
    },
    /// A retry will be sent after this wait.
    Backoff {
        /// The wait: A6's random backoff, or the server's pushback exactly.
        after: Duration,
    },
    /// No more attempts for this call.
    Stopped {
        /// Why.
        reason: StopReason,
    },
    /// Hedged copies still in flight were cancelled (a winner, a fatal failure or the deadline).
    Cancelled {
        /// How many.
        copies: usize,
    },
    /// The request was larger than the buffer limit and was sent once.
    Unbuffered,
}

impl GrpcEvent {
    /// The wait of a [`GrpcEvent::Backoff`], `None` for any other event: an observer's events
    /// `.iter().filter_map(GrpcEvent::backoff)` are the waits before each retry.
    pub fn backoff(&self) -> Option<Duration> {
        match self {
            GrpcEvent::Backoff { after } => Some(*after),
            _ => None,
        }
    }
}

type Observer = Arc<dyn Fn(&GrpcEvent) + Send + Sync>;

pub(crate) struct Shared<C> {
    clock: C,
    /// The layer's counters, the HTTP layers' kind ([`seawall::metrics`]).
    core: Arc<Metrics>,
    /// Where successful calls' durations go, when attached.
    metrics: Option<Arc<ClientMetrics>>,
    config: ServiceConfig,
    throttle: Option<Arc<GrpcThrottle>>,
    seeds: SeedSource,
    buffer_limit: usize,
    observer: Option<Observer>,
}

impl<C> Shared<C> {
    fn emit(&self, e: GrpcEvent) {
        if let Some(o) = &self.observer {
            o(&e);
        }
    }
}

/// Retries and hedges tonic calls by a gRPC service config, as gRFC A6 specifies. See the
/// [module docs](self).
#[derive(Clone)]
pub struct GrpcRetryLayer<C = SystemClock> {
    clock: C,
    core: Arc<Metrics>,
    metrics: Option<Arc<ClientMetrics>>,
    config: Arc<ServiceConfig>,
    throttle: Option<Arc<GrpcThrottle>>,
    seed: Option<u64>,
    buffer_limit: usize,
    observer: Option<Observer>,
}

impl<C: fmt::Debug> fmt::Debug for GrpcRetryLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcRetryLayer")
            .field("config", &self.config)
            .field("throttle", &self.throttle)
            .field("buffer_limit", &self.buffer_limit)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl GrpcRetryLayer {
    /// A layer for `config`, with a full token bucket if it sets `retryThrottling`, on the
    /// system's clock.
    pub fn new(config: ServiceConfig) -> Self {
        let throttle = config.throttling().map(|t| Arc::new(t.throttle()));
        GrpcRetryLayer {
            clock: SystemClock,
            core: Arc::new(Metrics::new()),
            metrics: None,
            config: Arc::new(config),
            throttle,
            seed: None,
            buffer_limit: DEFAULT_BUFFER_LIMIT,
            observer: None,
        }
    }

    /// Parses a service config (JSON) strictly; see [`seawall::grpc::config`] for the rules.
    pub fn from_json(text: &str) -> Result<Self, ServiceConfigError> {
        ServiceConfig::from_json(text).map(Self::new)
    }
}

impl<C: Clock + Clone> GrpcRetryLayer<C> {
    /// Reads the time from `clock` (deadlines, the time left sent as `grpc-timeout`, the
    /// hedging schedule); waits are tokio's timers, so under a paused runtime
    /// `.with_clock(`[`TokioClock`](seawall_tower::time::TokioClock)`)` runs every backoff and
    /// deadline on virtual time ([`seawall_tower::time`]).
    pub fn with_clock<C2: Clock + Clone>(self, clock: C2) -> GrpcRetryLayer<C2> {
        let GrpcRetryLayer {
            clock: _,
            core,
            metrics,
            config,
            throttle,
            seed,
            buffer_limit,
            observer,
        } = self;
        GrpcRetryLayer { clock, core, metrics, config, throttle, seed, buffer_limit, observer }
    }

    /// Records every call into `metrics` ([`ClientMetrics`]), as the HTTP layers do: calls,
    /// attempts by number (hedged copies included), retries, give-ups by reason (the throttle's
    /// refusals as retry overflow, [`GiveUpReason::from`](seawall::policy::GiveUpReason)) and
    /// successful calls' durations, exported under the same `seawall_client_*` names.
    pub fn with_metrics(mut self, metrics: Arc<ClientMetrics>) -> Self {
        metrics.attach(&self.core);
        self.metrics = Some(metrics);
        self
    }

    /// The layer's own counters (every service it builds counts into them), with or without
    /// [`with_metrics`](Self::with_metrics).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.core
    }

    /// Seeds the backoff's random draws (default: from entropy, different in every process).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Replays requests of at most `limit` bytes (default [`DEFAULT_BUFFER_LIMIT`]); larger
    /// ones are sent once.
    pub fn with_buffer_limit(mut self, limit: usize) -> Self {
        self.buffer_limit = limit;
        self
    }

    /// Shares `throttle` instead of the config's own bucket (one bucket for several layers on
    /// the same server).
    pub fn with_throttle(mut self, throttle: Arc<GrpcThrottle>) -> Self {
        self.throttle = Some(throttle);
        self
    }

    /// Calls `f` on every [`GrpcEvent`], synchronously (keep it cheap).
    pub fn with_observer(mut self, f: impl Fn(&GrpcEvent) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(f));
        self
    }

    /// The token bucket, if the config sets `retryThrottling` (or one was given).
    pub fn throttle(&self) -> Option<&Arc<GrpcThrottle>> {
        self.throttle.as_ref()
    }

    /// The service config.
    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }
}

impl<S, C: Clock + Clone> Layer<S> for GrpcRetryLayer<C> {
    type Service = GrpcRetry<S, C>;

    fn layer(&self, inner: S) -> GrpcRetry<S, C> {
        let seeds = self.seed.map_or_else(SeedSource::from_entropy, SeedSource::new);
        let shared = Shared {
            clock: self.clock.clone(),
            core: self.core.clone(),
            metrics: self.metrics.clone(),
            config: (*self.config).clone(),
            throttle: self.throttle.clone(),
            seeds,
            buffer_limit: self.buffer_limit,
            observer: self.observer.clone(),
        };
        GrpcRetry { inner, shared: Arc::new(shared) }
    }
}

/// See [`GrpcRetryLayer`].
pub struct GrpcRetry<S, C = SystemClock> {
    inner: S,
    shared: Arc<Shared<C>>,
}

impl<S: Clone, C> Clone for GrpcRetry<S, C> {
    fn clone(&self) -> Self {
        GrpcRetry { inner: self.inner.clone(), shared: self.shared.clone() }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for GrpcRetry<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcRetry").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<S, C> Service<Request<tonic::body::Body>> for GrpcRetry<S, C>
where
    C: Clock + Clone + 'static,
    S: Service<Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = BoxError;
    type Future = ResponseFuture<http::Response<tonic::body::Body>, BoxError>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<tonic::body::Body>) -> Self::Future {
        // The ready service makes the first attempt; later ones use clones readied in turn.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        ResponseFuture::new(call::run(self.shared.clone(), inner, req))
    }
}
