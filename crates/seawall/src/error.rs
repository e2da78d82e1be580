//! Configuration errors: every constructor validates and names the field and its allowed range.

use std::fmt;

/// A configuration value the constructor refused: which field, and what was wrong with it
/// ([`ConfigErrorKind`]). Returned by every constructor in this crate instead of panicking.
///
/// ```
/// use seawall::budget::GrpcThrottle;
/// use seawall::{ConfigError, ConfigErrorKind};
///
/// let e: ConfigError = GrpcThrottle::new(0, 0.1).unwrap_err();
/// assert_eq!(e.field(), "budget.max_tokens");
/// assert!(matches!(e.kind(), ConfigErrorKind::OutOfRange { .. }));
/// assert_eq!(e.to_string(), "budget.max_tokens must be in (0, 1000], got 0");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    field: &'static str,
    kind: ConfigErrorKind,
}

/// What was wrong with a configuration value. Each kind says what the field allows and what it
/// got, in words, for the message.
///
/// Non-exhaustive: a later release may tell more cases apart, so match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The value is outside the range the field allows (a zero attempt count, a window of an
    /// hour where a minute is the most).
    OutOfRange {
        /// The allowed range in words, e.g. `"in (0, 1000]"`.
        allowed: &'static str,
        /// The value given, as text.
        got: String,
    },
    /// A floating-point value that is NaN or infinite, which no field accepts.
    NotFinite {
        /// The allowed range in words.
        allowed: &'static str,
        /// The value given (`NaN`, `inf` or `-inf`).
        got: String,
    },
    /// A value in range on its own but not together with another setting of the same
    /// constructor or builder (a longest open time below the first one, several attempts on a
    /// fail-fast layer).
    Conflict {
        /// What is allowed given the other setting, in words.
        allowed: &'static str,
        /// The value given, as text.
        got: String,
    },
}

impl ConfigError {
    /// An error of `kind` for `field`.
    pub fn new(field: &'static str, kind: ConfigErrorKind) -> Self {
        ConfigError { field, kind }
    }

    /// `field` must be `allowed` but was `got` ([`ConfigErrorKind::OutOfRange`]).
    pub(crate) fn out_of_range(
        field: &'static str,
        allowed: &'static str,
        got: impl fmt::Display,
    ) -> Self {
        ConfigError::new(field, ConfigErrorKind::OutOfRange { allowed, got: got.to_string() })
    }

    /// `field` must be `allowed` given another setting, but was `got`
    /// ([`ConfigErrorKind::Conflict`]).
    pub(crate) fn conflict(
        field: &'static str,
        allowed: &'static str,
        got: impl fmt::Display,
    ) -> Self {
        ConfigError::new(field, ConfigErrorKind::Conflict { allowed, got: got.to_string() })
    }

    /// The name of the offending field, e.g. `"budget.max_tokens"`.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// What was wrong with it.
    pub fn kind(&self) -> &ConfigErrorKind {
        &self.kind
    }

    /// What the field allows, in words, e.g. `"in (0, 1000]"` (every kind says).
    pub fn allowed(&self) -> &'static str {
        match &self.kind {
            ConfigErrorKind::OutOfRange { allowed, .. }
            | ConfigErrorKind::NotFinite { allowed, .. }
            | ConfigErrorKind::Conflict { allowed, .. } => allowed,
        }
    }

    fn got(&self) -> &str {
        match &self.kind {
            ConfigErrorKind::OutOfRange { got, .. }
            | ConfigErrorKind::NotFinite { got, .. }
            | ConfigErrorKind::Conflict { got, .. } => got,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} must be {}, got {}", self.field, self.allowed(), self.got())
    }
}

impl std::error::Error for ConfigError {}

/// Checks `lo <= v <= hi` for a finite float.
pub(crate) fn check_f64(
    field: &'static str,
    allowed: &'static str,
    v: f64,
    lo: f64,
    hi: f64,
) -> Result<f64, ConfigError> {
    if !v.is_finite() {
        Err(ConfigError::new(field, ConfigErrorKind::NotFinite { allowed, got: v.to_string() }))
    } else if v >= lo && v <= hi {
        Ok(v)
    } else {
        Err(ConfigError::out_of_range(field, allowed, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_names_the_field_and_reads_as_before() {
        let e = check_f64("budget.k", "in [1, 10]", f64::NAN, 1.0, 10.0).unwrap_err();
        assert!(matches!(e.kind(), ConfigErrorKind::NotFinite { got, .. } if got == "NaN"));
        assert_eq!(e.to_string(), "budget.k must be in [1, 10], got NaN");
        let e = check_f64("budget.k", "in [1, 10]", 11.0, 1.0, 10.0).unwrap_err();
        assert!(matches!(e.kind(), ConfigErrorKind::OutOfRange { allowed: "in [1, 10]", .. }));
        assert_eq!((e.field(), e.allowed()), ("budget.k", "in [1, 10]"));
        assert_eq!(check_f64("budget.k", "in [1, 10]", 10.0, 1.0, 10.0), Ok(10.0));
    }

    #[test]
    fn a_value_refused_because_of_another_setting_is_a_conflict() {
        use std::time::Duration;

        use crate::breaker::BreakerConfig;
        use crate::policy::PolicyConfig;

        let conflict = |e: ConfigError| matches!(e.kind(), ConfigErrorKind::Conflict { .. });
        let range = |e: ConfigError| matches!(e.kind(), ConfigErrorKind::OutOfRange { .. });
        // Two attempts are fine for an owner, not for a fail-fast layer; zero for neither.
        assert!(PolicyConfig::default().with_max_attempts(2).is_ok());
        assert!(conflict(PolicyConfig::fail_fast().with_max_attempts(2).unwrap_err()));
        assert!(range(PolicyConfig::fail_fast().with_max_attempts(0).unwrap_err()));
        // A longest open time below the first one conflicts; above an hour is out of range.
        let open = |max_s| {
            BreakerConfig::default().with_open(
                Duration::from_secs(5),
                Duration::from_secs(max_s),
                0.1,
            )
        };
        assert!(open(10).is_ok());
        assert!(conflict(open(2).unwrap_err()));
        assert!(range(open(7200).unwrap_err()));
    }
}
