//! Why a service config was refused, and where.

use std::fmt;

/// A service config gRPC would refuse, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceConfigError {
    pub(super) path: String,
    pub(super) method_config: Option<usize>,
    pub(super) kind: ErrorKind,
}

/// What was wrong.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Not JSON, or not a JSON object; with the 1-based line and column serde_json reports.
    Syntax {
        /// The parser's message.
        message: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// A value out of its allowed form or range.
    Invalid {
        /// What the value must be, in words.
        expected: &'static str,
    },
    /// The same method name appears in two places.
    DuplicateName,
}

impl ServiceConfigError {
    pub(super) fn invalid(
        path: String,
        method_config: Option<usize>,
        expected: &'static str,
    ) -> Self {
        ServiceConfigError { path, method_config, kind: ErrorKind::Invalid { expected } }
    }

    /// The JSON path of the offending value, e.g. `methodConfig[0].retryPolicy.maxAttempts`
    /// (empty for a syntax error).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The index of the `methodConfig` entry at fault, if one is.
    pub fn method_config(&self) -> Option<usize> {
        self.method_config
    }

    /// What was wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

impl fmt::Display for ServiceConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Syntax { message, .. } => {
                write!(f, "not a gRPC service config (JSON object): {message}")
            }
            ErrorKind::Invalid { expected } => {
                write!(f, "{} must be {expected} (gRFC A6)", self.path)
            }
            ErrorKind::DuplicateName => {
                write!(f, "{} names a method already configured", self.path)
            }
        }
    }
}

impl std::error::Error for ServiceConfigError {}
