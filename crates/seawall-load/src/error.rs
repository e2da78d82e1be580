//! What can be wrong with a load test's input, by kind.

use std::fmt;

/// Why a load test could not be built or run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadErrorKind {
    /// The URL does not parse, or is not `http://host[:port]/…`.
    Url,
    /// The target is not a loopback address (the lab only loads 127.0.0.0/8 and ::1).
    NotLoopback,
    /// A rate is not a finite number in range, or every rate is zero.
    Rate,
    /// A `--ramp` stage does not parse, or the stages are empty.
    Ramp,
    /// The run is too long or not a duration.
    Duration,
    /// The deadline is out of range.
    Deadline,
    /// A header is not `Name: value`, or names one the generator sets itself.
    Header,
    /// The method is not an HTTP token.
    Method,
    /// The body file cannot be read or is too large.
    Body,
    /// A bound (max in flight, lateness) is out of range.
    Bound,
    /// The run itself failed (no runtime, no socket).
    Run,
}

/// An error with its kind and a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    kind: LoadErrorKind,
    message: String,
}

impl LoadError {
    /// An error of `kind`.
    pub fn new(kind: LoadErrorKind, message: String) -> Self {
        Self { kind, message }
    }

    /// What went wrong.
    pub fn kind(&self) -> LoadErrorKind {
        self.kind
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LoadError {}
