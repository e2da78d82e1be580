//! The error a [`Retry`](crate::client::Retry) service returns when its policy gives up.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Mutex;

use seawall::policy::{GiveUp, GiveUpReason};

use crate::client::engine::overload::overloaded_response;

/// A boxed transport error, as tower passes them around.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// What the last attempt of a call produced.
#[derive(Debug)]
#[non_exhaustive]
pub enum LastOutcome<B> {
    /// The dependency answered (a 503, a 429, a gRPC UNAVAILABLE, …).
    Response(http::Response<B>),
    /// The transport failed (connection refused or reset, …); the inner service's error.
    Error(BoxError),
    /// The attempt's timeout (the smaller of the per-try timeout and the time left) fired.
    TimedOut,
    /// No attempt was sent: the policy refused the first one (deadline too close, circuit
    /// open, throttled locally).
    NotSent,
}

/// The policy gave up on a logical call: why ([`GiveUpReason`]), whether the caller must treat
/// it as "overloaded; don't retry", and what the last attempt produced.
///
/// Answers that belong to the caller — a 404, a 400, a gRPC `NOT_FOUND` — are *not* errors:
/// the layer returns them as `Ok` responses. This error means the dependency failed or was
/// refused. When [`GaveUpError::is_overloaded`] is true, pass the signal up with
/// [`GaveUpError::into_response`] (HTTP 503 + `Retry-Pushback-Ms: -1`, or gRPC UNAVAILABLE +
/// `grpc-retry-pushback-ms: -1`) so that no layer above retries it.
///
/// A transport error is the error's [`source`](StdError::source), so error reporters that walk
/// the chain print it. The last response sits behind a `Mutex` only so the error is `Sync`
/// (tower boxes errors as `Send + Sync`) even when the response body is not, as with tonic's.
///
/// ```
/// use seawall::policy::GiveUpReason;
/// use seawall_tower::client::GaveUpError;
///
/// fn report(err: GaveUpError<String>) -> http::Response<String> {
///     if err.reason() == GiveUpReason::BudgetExhausted {
///         // the retry budget is spent: the dependency is sick, say so upward
///     }
///     err.into_response()
/// }
/// ```
pub struct GaveUpError<B> {
    give_up: GiveUp,
    attempts: u32,
    grpc: bool,
    status: Option<http::StatusCode>,
    last: Last<B>,
}

/// [`LastOutcome`] as the error keeps it: the response behind a `Mutex` (a body need not be
/// `Sync`), the transport error as it is (it is `Send + Sync`), so that `source` can lend it.
enum Last<B> {
    Response(Mutex<http::Response<B>>),
    Error(BoxError),
    TimedOut,
    NotSent,
}

impl<B> GaveUpError<B> {
    pub(crate) fn new(give_up: GiveUp, attempts: u32, grpc: bool, last: LastOutcome<B>) -> Self {
        let (status, last) = match last {
            LastOutcome::Response(r) => (Some(r.status()), Last::Response(Mutex::new(r))),
            LastOutcome::Error(e) => (None, Last::Error(e)),
            LastOutcome::TimedOut => (None, Last::TimedOut),
            LastOutcome::NotSent => (None, Last::NotSent),
        };
        GaveUpError { give_up, attempts, grpc, status, last }
    }

    pub(crate) fn is_grpc(&self) -> bool {
        self.grpc
    }

    /// Why the call stopped (the core's reason).
    pub fn reason(&self) -> GiveUpReason {
        self.give_up.reason()
    }

    /// The core's give-up, reason and overload flag together.
    pub fn give_up(&self) -> GiveUp {
        self.give_up
    }

    /// True when the caller must not retry: the dependency failed or refused, and this layer
    /// already spent what retries it was allowed.
    pub fn is_overloaded(&self) -> bool {
        self.give_up.is_overloaded()
    }

    /// Attempts sent (0 if the policy refused the first).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The status of the last response, if the last attempt got one.
    pub fn status(&self) -> Option<http::StatusCode> {
        self.status
    }

    /// The last response, if the last attempt got one, by mutable reference.
    pub fn response_mut(&mut self) -> Option<&mut http::Response<B>> {
        match &mut self.last {
            Last::Response(r) => Some(r.get_mut().unwrap_or_else(|p| p.into_inner())),
            _ => None,
        }
    }

    /// The last attempt's transport error, if it failed with one (also the error's
    /// [`source`](StdError::source)).
    pub fn transport_error(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match &self.last {
            Last::Error(e) => Some(&**e),
            _ => None,
        }
    }

    /// How the last attempt ended, for [`seawall::policy::upstream`].
    pub(crate) fn last_attempt(&self) -> seawall::policy::LastAttempt {
        use seawall::policy::LastAttempt as A;
        match self.last {
            Last::Response(_) => A::Answered,
            Last::Error(_) => A::Failed,
            Last::TimedOut => A::TimedOut,
            Last::NotSent => A::NotSent,
        }
    }

    /// The last outcome, by value.
    pub fn into_last(self) -> LastOutcome<B> {
        match self.last {
            Last::Response(r) => {
                LastOutcome::Response(r.into_inner().unwrap_or_else(|p| p.into_inner()))
            }
            Last::Error(e) => LastOutcome::Error(e),
            Last::TimedOut => LastOutcome::TimedOut,
            Last::NotSent => LastOutcome::NotSent,
        }
    }

    /// The response to give the caller above: the explicit overload signal when
    /// [`is_overloaded`](Self::is_overloaded), otherwise the last response (or a 502 / gRPC
    /// UNAVAILABLE if there was none).
    pub fn into_response(self) -> http::Response<B>
    where
        B: Default,
    {
        let (overloaded, grpc) = (self.give_up.is_overloaded(), self.grpc);
        match self.into_last() {
            LastOutcome::Response(r) if !overloaded => r,
            _ => overloaded_response(grpc),
        }
    }
}

impl<B> fmt::Debug for GaveUpError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GaveUpError")
            .field("reason", &self.give_up.reason())
            .field("overloaded", &self.give_up.is_overloaded())
            .field("attempts", &self.attempts)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl<B> fmt::Display for GaveUpError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gave up after {} attempt(s): {}", self.attempts, self.give_up.reason())?;
        if let Some(s) = self.status {
            write!(f, " (last status {s})")?;
        }
        if self.give_up.is_overloaded() {
            f.write_str("; overloaded, don't retry")?;
        }
        Ok(())
    }
}

impl<B> StdError for GaveUpError<B> {
    /// The transport error the last attempt failed with, if it did.
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.last {
            Last::Error(e) => Some(&**e),
            _ => None,
        }
    }
}
