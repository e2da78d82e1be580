//! Breaker settings, validated when built; defaults and their sources in the module docs.

use std::num::NonZeroU32;
use std::time::Duration;

use crate::error::{ConfigError, check_f64};

/// Breaker settings. Build with [`BreakerConfig::default`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerConfig {
    pub(super) consecutive_failures: u32,
    pub(super) failure_rate: f64,
    pub(super) window: Duration,
    pub(super) min_calls: u32,
    pub(super) open_for: Duration,
    pub(super) max_open: Duration,
    pub(super) open_jitter: f64,
    pub(super) probes: NonZeroU32,
    pub(super) probe_timeout: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            consecutive_failures: 5,
            failure_rate: 0.5,
            window: Duration::from_secs(10),
            min_calls: 20,
            open_for: Duration::from_secs(5),
            max_open: Duration::from_secs(60),
            open_jitter: 0.2,
            probes: NonZeroU32::MIN,
            probe_timeout: Duration::from_secs(10),
        }
    }
}

impl BreakerConfig {
    /// Open after this many consecutive failures (0 disables the rule; at most 10,000).
    pub fn with_consecutive_failures(mut self, n: u32) -> Result<Self, ConfigError> {
        if n > 10_000 {
            return Err(ConfigError::out_of_range(
                "breaker.consecutive_failures",
                "in [0, 10000]",
                n,
            ));
        }
        self.consecutive_failures = n;
        Ok(self)
    }

    /// Open when the failure rate over `window` (1 s to 1 h) is at least `rate` (in (0, 1];
    /// 1.0 with `min_calls` 0 effectively disables it … use a rate of 1.0) once there were at
    /// least `min_calls` calls.
    pub fn with_failure_rate(
        mut self,
        rate: f64,
        window: Duration,
        min_calls: u32,
    ) -> Result<Self, ConfigError> {
        self.failure_rate =
            check_f64("breaker.failure_rate", "in (0, 1]", rate, f64::MIN_POSITIVE, 1.0)?;
        if window < Duration::from_secs(1) || window > Duration::from_secs(3600) {
            return Err(ConfigError::out_of_range(
                "breaker.window",
                "in [1 s, 1 h]",
                format!("{window:?}"),
            ));
        }
        self.window = window;
        self.min_calls = min_calls;
        Ok(self)
    }

    /// The first open period (1 ms to 1 h), its maximum after doublings, and the jitter (in
    /// [0, 1)).
    pub fn with_open(
        mut self,
        open_for: Duration,
        max_open: Duration,
        jitter: f64,
    ) -> Result<Self, ConfigError> {
        let ok = |d: Duration| d >= Duration::from_millis(1) && d <= Duration::from_secs(3600);
        if !ok(open_for) {
            return Err(ConfigError::out_of_range(
                "breaker.open_for",
                "in [1 ms, 1 h]",
                format!("{open_for:?}"),
            ));
        }
        if !ok(max_open) || max_open < open_for {
            let e = if ok(max_open) { ConfigError::conflict } else { ConfigError::out_of_range };
            return Err(e("breaker.max_open", "in [open_for, 1 h]", format!("{max_open:?}")));
        }
        self.open_jitter = check_f64("breaker.open_jitter", "in [0, 1)", jitter, 0.0, 0.999)?;
        self.open_for = open_for;
        self.max_open = max_open;
        Ok(self)
    }

    /// Concurrent probes allowed half-open (1 to 1,000), and how long before a probe that never
    /// reported is released (1 ms to 1 h).
    pub fn with_probes(
        mut self,
        probes: u32,
        probe_timeout: Duration,
    ) -> Result<Self, ConfigError> {
        self.probes = NonZeroU32::new(probes)
            .filter(|p| p.get() <= 1000)
            .ok_or_else(|| ConfigError::out_of_range("breaker.probes", "in [1, 1000]", probes))?;
        if probe_timeout < Duration::from_millis(1) || probe_timeout > Duration::from_secs(3600) {
            return Err(ConfigError::out_of_range(
                "breaker.probe_timeout",
                "in [1 ms, 1 h]",
                format!("{probe_timeout:?}"),
            ));
        }
        self.probe_timeout = probe_timeout;
        Ok(self)
    }
}
