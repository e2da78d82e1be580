//! [`BreakerOpen`]: the error of a request the breaker refused.

use std::fmt;

use seawall::time::Instant;

/// The error of a request the breaker refused: it was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerOpen {
    pub(crate) until: Option<Instant>,
}

impl BreakerOpen {
    /// When the breaker will next consider a probe (by the layer's clock); `None` when forced
    /// open by the operator.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    /// Forced open by the operator ([`Control`](seawall::control::Control) or [`BreakerLayer::force`](crate::client::BreakerLayer::force)), not by failures.
    pub fn is_forced(&self) -> bool {
        self.until.is_none()
    }
}

impl fmt::Display for BreakerOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_forced() {
            f.write_str("circuit breaker forced open by its control; request not sent")
        } else {
            f.write_str("circuit breaker open; request not sent")
        }
    }
}

impl std::error::Error for BreakerOpen {}
