//! Retrying and hedging tonic calls by gRPC's own rules, gRFC A6 (feature `grpc`).
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
//!   ([`crate::propagate::current`]). A6: it bounds the whole chain of attempts; a retry whose
//!   backoff would end past it is not made.
//! - **Retry policy**: a status in `retryableStatusCodes` is retried after `random(0,
//!   min(initialBackoff·multiplier^(n−1), maxBackoff))`; a valid `grpc-retry-pushback-ms`
//!   replaces that wait and restarts the sequence; a negative or malformed one stops retries.
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
//! use seawall_tower::client::grpc::GrpcRetryLayer;
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
mod legacy;

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use seawall::budget::GrpcThrottle;
use seawall::grpc::{ConfigError, ServiceConfig, StopReason};
use seawall::rng::SeedSource;
use tower_layer::Layer;
use tower_service::Service;

pub use legacy::{Buffer, BufferLayer, IntoTonic, IntoTonicLayer};

use crate::client::future::ResponseFuture;
use crate::client::retry::BoxError;

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

type Observer = Arc<dyn Fn(&GrpcEvent) + Send + Sync>;

pub(crate) struct Shared {
    config: ServiceConfig,
    throttle: Option<Arc<GrpcThrottle>>,
    seeds: SeedSource,
    buffer_limit: usize,
    observer: Option<Observer>,
}

impl Shared {
    fn emit(&self, e: GrpcEvent) {
        if let Some(o) = &self.observer {
            o(&e);
        }
    }
}

/// Retries and hedges tonic calls by a gRPC service config, as gRFC A6 specifies. See the
/// [module docs](self).
#[derive(Clone)]
pub struct GrpcRetryLayer {
    config: Arc<ServiceConfig>,
    throttle: Option<Arc<GrpcThrottle>>,
    seed: Option<u64>,
    buffer_limit: usize,
    observer: Option<Observer>,
}

impl fmt::Debug for GrpcRetryLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcRetryLayer")
            .field("config", &self.config)
            .field("throttle", &self.throttle)
            .field("buffer_limit", &self.buffer_limit)
            .finish_non_exhaustive()
    }
}

impl GrpcRetryLayer {
    /// A layer for `config`, with a full token bucket if it sets `retryThrottling`.
    pub fn new(config: ServiceConfig) -> Self {
        let throttle = config.throttling().map(|t| Arc::new(t.throttle()));
        GrpcRetryLayer {
            config: Arc::new(config),
            throttle,
            seed: None,
            buffer_limit: DEFAULT_BUFFER_LIMIT,
            observer: None,
        }
    }

    /// Parses a service config (JSON) strictly; see [`seawall::grpc::config`] for the rules.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        ServiceConfig::from_json(text).map(Self::new)
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

impl<S> Layer<S> for GrpcRetryLayer {
    type Service = GrpcRetry<S>;

    fn layer(&self, inner: S) -> GrpcRetry<S> {
        let seeds = self.seed.map_or_else(SeedSource::from_entropy, SeedSource::new);
        let shared = Shared {
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
#[derive(Clone)]
pub struct GrpcRetry<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: fmt::Debug> fmt::Debug for GrpcRetry<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcRetry").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<S> Service<Request<tonic::body::Body>> for GrpcRetry<S>
where
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
