//! The lab's error type: what went wrong, in words a user can act on.

use std::fmt;

/// Why a lab run, a node or a flag failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum LabError {
    /// A flag or parameter is out of range or malformed (the CLI exits 2).
    BadInput {
        /// The flag or field (`--rate`, `--fault`, …).
        what: &'static str,
        /// What was expected, and what was given.
        detail: String,
    },
    /// A node could not be started, or died, or did not report its port in time.
    Node {
        /// Which node.
        node: String,
        /// What happened.
        detail: String,
    },
    /// An I/O error (sockets, files, child processes).
    Io(std::io::Error),
    /// Talking to a node (admin, stats) failed.
    Http(String),
    /// The PostgreSQL backend failed.
    Backend(String),
    /// The simulator could not run the lab's parameters (the `sim` column).
    Sim(String),
}

impl LabError {
    /// A [`LabError::BadInput`].
    pub fn bad_input(what: &'static str, detail: impl Into<String>) -> Self {
        LabError::BadInput { what, detail: detail.into() }
    }

    /// A [`LabError::Node`].
    pub fn node(node: impl Into<String>, detail: impl Into<String>) -> Self {
        LabError::Node { node: node.into(), detail: detail.into() }
    }

    /// Whether the error is the user's input (exit code 2) rather than a failure of the run.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, LabError::BadInput { .. })
    }
}

impl fmt::Display for LabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LabError::BadInput { what, detail } => write!(f, "{what}: {detail}"),
            LabError::Node { node, detail } => write!(f, "lab node {node}: {detail}"),
            LabError::Io(e) => write!(f, "i/o: {e}"),
            LabError::Http(e) => write!(f, "http: {e}"),
            LabError::Backend(e) => write!(f, "postgres backend: {e}"),
            LabError::Sim(e) => write!(f, "simulator prediction: {e}"),
        }
    }
}

impl std::error::Error for LabError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LabError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for LabError {
    fn from(e: std::io::Error) -> Self {
        LabError::Io(e)
    }
}

impl From<seawall_proxy::ProxyError> for LabError {
    fn from(e: seawall_proxy::ProxyError) -> Self {
        match e {
            seawall_proxy::ProxyError::BadInput { what, detail } => {
                LabError::BadInput { what, detail }
            }
            seawall_proxy::ProxyError::Io(e) => LabError::Io(e),
            other => LabError::Node { node: "proxy".into(), detail: other.to_string() },
        }
    }
}
