//! The policy's settings and the role of its layer, validated when built.

use std::time::Duration;

use crate::backoff::Backoff;
use crate::error::{ConfigError, check_f64};

/// Whether this layer owns retries for its call path. A call carries its role from its start
/// ([`RetryPolicy::start`](super::RetryPolicy::start) takes the configuration's,
/// [`RetryPolicy::start_as`](super::RetryPolicy::start_as) the one an adapter's type fixes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Role {
    /// Retries, within the attempt cap, budget and deadline.
    #[default]
    Owner,
    /// One attempt; overload below becomes "overloaded; don't retry" above.
    FailFast,
}

/// Policy settings. Defaults are safe without tuning; every one is documented with its source.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyConfig {
    pub(super) role: Role,
    pub(super) max_attempts: u32,
    pub(super) backoff: Backoff,
    pub(super) per_try_timeout: Option<Duration>,
    pub(super) min_time_left: Duration,
    pub(super) max_wait: Duration,
    pub(super) hint_spread: f64,
}

impl Default for PolicyConfig {
    /// Owner role; 3 attempts (Google SRE per-request cap, AWS standard mode); AWS 2026 backoff;
    /// no per-try timeout (the deadline bounds each attempt); 5 ms minimum time left for an
    /// attempt; waits at most 20 s (the AWS backoff cap); server hints spread by up to +50 %.
    fn default() -> Self {
        PolicyConfig {
            role: Role::Owner,
            max_attempts: 3,
            backoff: Backoff::default(),
            per_try_timeout: None,
            min_time_left: Duration::from_millis(5),
            max_wait: Duration::from_secs(20),
            hint_spread: 0.5,
        }
    }
}

/// The most attempts a policy may be configured with (gRPC caps `maxAttempts` at 5; seawall
/// allows 10 so the simulator can reproduce the worst configurations seen in incidents).
pub const MAX_ATTEMPTS: u32 = 10;

impl PolicyConfig {
    /// A fail-fast layer: one attempt, overload passed upward.
    pub fn fail_fast() -> Self {
        PolicyConfig { role: Role::FailFast, max_attempts: 1, ..Self::default() }
    }

    /// The role of calls started with [`RetryPolicy::start`](super::RetryPolicy::start).
    pub fn role(&self) -> Role {
        self.role
    }

    /// The attempt cap (1 for fail-fast).
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The backoff.
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// The per-attempt timeout, if any.
    pub fn per_try_timeout(&self) -> Option<Duration> {
        self.per_try_timeout
    }

    /// Attempts per call including the first, in `[1, 10]`. Setting it on a fail-fast config is
    /// an error unless it is 1.
    pub fn with_max_attempts(mut self, n: u32) -> Result<Self, ConfigError> {
        let allowed = "in [1, 10] (exactly 1 for a fail-fast layer)";
        if n == 0 || n > MAX_ATTEMPTS {
            return Err(ConfigError::out_of_range("policy.max_attempts", allowed, n));
        }
        if self.role == Role::FailFast && n != 1 {
            return Err(ConfigError::conflict("policy.max_attempts", allowed, n));
        }
        self.max_attempts = n;
        Ok(self)
    }

    /// The backoff between attempts.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// A timeout for each attempt (1 ms to 1 h); the attempt's real timeout is the smaller of it
    /// and the time left before the deadline.
    pub fn with_per_try_timeout(mut self, t: Duration) -> Result<Self, ConfigError> {
        if t < Duration::from_millis(1) || t > Duration::from_secs(3600) {
            return Err(ConfigError::out_of_range(
                "policy.per_try_timeout",
                "in [1 ms, 1 h]",
                format!("{t:?}"),
            ));
        }
        self.per_try_timeout = Some(t);
        Ok(self)
    }

    /// No attempt starts with less than this left before the deadline (0 to 60 s).
    pub fn with_min_time_left(mut self, t: Duration) -> Result<Self, ConfigError> {
        if t > Duration::from_secs(60) {
            return Err(ConfigError::out_of_range(
                "policy.min_time_left",
                "in [0, 60 s]",
                format!("{t:?}"),
            ));
        }
        self.min_time_left = t;
        Ok(self)
    }

    /// The longest wait before a retry, whatever the backoff or a server hint says (0 to 1 h). A
    /// server hint longer than this makes the call give up instead of retrying early.
    pub fn with_max_wait(mut self, t: Duration) -> Result<Self, ConfigError> {
        if t > Duration::from_secs(3600) {
            return Err(ConfigError::out_of_range(
                "policy.max_wait",
                "in [0, 1 h]",
                format!("{t:?}"),
            ));
        }
        self.max_wait = t;
        Ok(self)
    }

    /// Jitter added on top of a server hint, as a fraction of it (in [0, 10]): a hint of 5 s with
    /// spread 0.5 waits uniformly between 5 and 7.5 s, so clients told the same thing do not
    /// return together.
    pub fn with_hint_spread(mut self, spread: f64) -> Result<Self, ConfigError> {
        self.hint_spread = check_f64("policy.hint_spread", "in [0, 10]", spread, 0.0, 10.0)?;
        Ok(self)
    }
}
