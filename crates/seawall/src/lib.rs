//! # seawall — retry decisions that cannot amplify
//!
//! A retry storm is an outage a fleet makes by itself: a dependency slows for a moment, and
//! retries — multiplied across layers, synchronised by identical delays, never told to stop —
//! keep it down long after the trigger is gone. This crate is the sans-io core of seawall: the
//! decisions, with no runtime and no sockets. Time and randomness are injected, so the tower
//! middleware, the simulator and the lab all run this same code.
//!
//! ## The rules this code enforces
//!
//! 1. **One layer owns retries.** Every other layer makes one attempt and fails fast, passing an
//!    explicit "overloaded; don't retry" signal upward ([`policy::Role`], [`policy::GiveUp`]).
//! 2. **Retries spend from a budget.** A per-request cap (default 3 attempts) bounds one call; a
//!    per-client budget (retries ≤ ~10 % of traffic) bounds the fleet ([`budget`]).
//! 3. **Waits are exponential with full jitter**, server hints are honoured and jittered, and no
//!    wait outlives the deadline ([`backoff`], [`hint`]).
//! 4. **Deadlines, not timeouts**: the time left travels with the request ([`deadline`]).
//! 5. **Servers protect themselves** (the server layers in `seawall-tower` use the codecs here).
//! 6. **Only retry what can succeed and is safe** ([`classify`]): 4xx (but 408/429) never;
//!    non-idempotent requests only with an `Idempotency-Key`.
//!
//! ## Example
//!
//! ```
//! use seawall::prelude::*;
//! use std::time::Duration;
//!
//! // The owner layer: 3 attempts, full jitter, a gRPC-style token bucket.
//! let policy = RetryPolicy::new(PolicyConfig::default(), GrpcThrottle::default());
//! let now = Instant::ZERO;
//! let mut call = policy.start(now, RequestInfo::http("GET", false), Some(Deadline::after(now, Duration::from_secs(1))));
//! let attempt = policy.before_attempt(&mut call, now).expect("first attempt allowed");
//! assert_eq!(attempt.number(), 1);
//! // A 404 is an answer, not a failure to retry.
//! let decision = policy.after_attempt(&mut call, now, HttpClassifier::default().classify(404), Hint::None);
//! assert!(matches!(decision, Decision::GiveUp(g) if g.reason() == GiveUpReason::NotRetryable && !g.is_overloaded()));
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod admission;
pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod classify;
pub mod control;
pub mod deadline;
pub mod error;
#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub mod grpc;
pub mod hint;
pub mod metrics;
pub mod policy;
pub mod reason;
pub mod rng;
pub mod time;

pub use error::{ConfigError, ConfigErrorKind};

/// The types most users need, in one import.
pub mod prelude {
    pub use crate::backoff::{Backoff, Jitter};
    pub use crate::breaker::{Breaker, BreakerConfig};
    pub use crate::budget::{
        AdaptiveThrottle, AnyBudget, AwsRetryQuota, Budget, EnvoyRetryBudget, GrpcThrottle,
        RatioBudget, Unlimited,
    };
    pub use crate::classify::{Class, HttpClassifier, Transient, classify_grpc};
    pub use crate::control::Control;
    pub use crate::deadline::Deadline;
    pub use crate::hint::Hint;
    pub use crate::policy::{
        Attempt, Call, Decision, GiveUp, GiveUpReason, PolicyConfig, RequestInfo, RetryPolicy, Role,
    };
    pub use crate::rng::{Rng, SeededRng};
    pub use crate::time::{Clock, CoarseClock, Epoch, Instant, ManualClock, SystemClock};
}
