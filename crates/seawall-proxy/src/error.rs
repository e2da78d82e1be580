//! The proxy's error type: what went wrong, in words a user can act on.

use std::fmt;

/// Why a proxy could not be configured or started.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProxyError {
    /// A flag, address, fault or bound is out of range or malformed (the CLI exits 2).
    BadInput {
        /// The flag or field (`--listen`, `--fault`, …).
        what: &'static str,
        /// What was expected, and what was given.
        detail: String,
    },
    /// An I/O error: the runtime could not start, or a socket failed.
    Io(std::io::Error),
}

impl ProxyError {
    /// A [`ProxyError::BadInput`].
    pub fn bad_input(what: &'static str, detail: impl Into<String>) -> Self {
        ProxyError::BadInput { what, detail: detail.into() }
    }

    /// Whether the error is the user's input (exit code 2) rather than a failure of the run.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, ProxyError::BadInput { .. })
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyError::BadInput { what, detail } => write!(f, "{what}: {detail}"),
            ProxyError::Io(e) => write!(f, "i/o: {e}"),
        }
    }
}

impl std::error::Error for ProxyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ProxyError::Io(e) => Some(e),
            ProxyError::BadInput { .. } => None,
        }
    }
}

impl From<std::io::Error> for ProxyError {
    fn from(e: std::io::Error) -> Self {
        ProxyError::Io(e)
    }
}
