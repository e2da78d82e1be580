//! Configuration errors: every constructor validates and names the field and its allowed range.

use std::fmt;

/// A configuration value outside its allowed range. Returned by every constructor in this crate
/// instead of panicking.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    field: &'static str,
    allowed: &'static str,
    got: String,
}

impl ConfigError {
    /// A new error for `field`, which must be `allowed` but was `got`.
    pub fn new(field: &'static str, allowed: &'static str, got: impl fmt::Display) -> Self {
        ConfigError { field, allowed, got: got.to_string() }
    }

    /// The name of the offending field, e.g. `"budget.max_tokens"`.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The allowed range in words, e.g. `"in (0, 1000]"`.
    pub fn allowed(&self) -> &'static str {
        self.allowed
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} must be {}, got {}", self.field, self.allowed, self.got)
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
    if v.is_finite() && v >= lo && v <= hi {
        Ok(v)
    } else {
        Err(ConfigError::new(field, allowed, v))
    }
}
