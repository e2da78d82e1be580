//! What an attempt's outcome means for retrying: success, retryable, throttled, or never-retry.
//!
//! Only retry what can succeed and is safe. A 400 will fail the same way the
//! next time, so retrying it multiplies load for nothing; a 429 or 503 is the server asking for
//! less traffic, so it is retried only after a longer wait (the throttling base) and costs less
//! from budgets that distinguish it (AWS). Transport failures are retryable, and a refused
//! connection proves the request never reached the server, so even a non-idempotent request may
//! be resent.

/// Why an attempt failed in a way a later attempt might not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Transient {
    /// A server error that is worth another try (502, 503 without pushback, 504, gRPC UNAVAILABLE).
    ServerError,
    /// The attempt's own timeout fired.
    Timeout,
    /// The connection failed after the request may have been sent (reset, broken pipe).
    Connection,
    /// The connection was never established (refused, DNS): the server never saw the request.
    ConnectRefused,
}

/// The class of one attempt's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Class {
    /// The attempt succeeded (or failed in a way that is the caller's answer, e.g. a 404 that
    /// is a valid "not found": use [`Class::NeverRetry`] if it should count as a failure).
    Success,
    /// Failed; another attempt may succeed.
    Retryable(Transient),
    /// The server is shedding load (429, gRPC RESOURCE_EXHAUSTED): retry only after the
    /// throttling backoff, and spend less from budgets that price throttling separately.
    Throttled,
    /// The server or a layer below said "overloaded; don't retry" (`Retry-Pushback-Ms: -1`).
    Overloaded,
    /// Will fail the same way again (400, 401, 403, 404, 422, …).
    NeverRetry,
}

impl Class {
    /// True for [`Class::Success`].
    pub fn is_success(self) -> bool {
        matches!(self, Class::Success)
    }

    /// True if a budget should count this attempt as a failure of the dependency (as opposed to
    /// a success or a client error that says nothing about the dependency's health).
    pub fn is_dependency_failure(self) -> bool {
        matches!(self, Class::Retryable(_) | Class::Throttled | Class::Overloaded)
    }
}

/// HTTP methods by idempotency (RFC 9110 §9.2.2).
pub fn is_idempotent_method(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE")
}

/// Classifies HTTP status codes.
///
/// Defaults: retry 408, 502, 503, 504; 429 is throttling; 500 is *not* retried (configurable,
/// because a 500 is as often a bug that fails every time as a transient fault); every other 4xx
/// and 5xx is never retried. 501 and 505 say the server cannot do this at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HttpClassifier {
    retry_500: bool,
}

impl HttpClassifier {
    /// The default classifier (500 not retried).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a 500 is retried (default: no).
    pub fn retry_500(mut self, yes: bool) -> Self {
        self.retry_500 = yes;
        self
    }

    /// The class of a response status. Out-of-range codes (below 100 or above 599) are
    /// [`Class::NeverRetry`]: a peer that sends them is not one to hammer.
    #[inline]
    pub fn classify(&self, status: u16) -> Class {
        match status {
            100..=399 => Class::Success,
            408 => Class::Retryable(Transient::Timeout),
            429 => Class::Throttled,
            500 if self.retry_500 => Class::Retryable(Transient::ServerError),
            502..=504 => Class::Retryable(Transient::ServerError),
            _ => Class::NeverRetry,
        }
    }
}

/// gRPC status codes (the numeric values of the wire protocol).
#[allow(missing_docs)]
pub mod grpc_code {
    pub const OK: i32 = 0;
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const NOT_FOUND: i32 = 5;
    pub const ALREADY_EXISTS: i32 = 6;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const FAILED_PRECONDITION: i32 = 9;
    pub const ABORTED: i32 = 10;
    pub const OUT_OF_RANGE: i32 = 11;
    pub const UNIMPLEMENTED: i32 = 12;
    pub const INTERNAL: i32 = 13;
    pub const UNAVAILABLE: i32 = 14;
    pub const DATA_LOSS: i32 = 15;
    pub const UNAUTHENTICATED: i32 = 16;
}

/// Classifies a gRPC status code: UNAVAILABLE is retryable, RESOURCE_EXHAUSTED is throttling,
/// everything else (including DEADLINE_EXCEEDED: the caller's deadline is gone) is not.
pub fn classify_grpc(code: i32) -> Class {
    match code {
        grpc_code::OK => Class::Success,
        grpc_code::UNAVAILABLE => Class::Retryable(Transient::ServerError),
        grpc_code::RESOURCE_EXHAUSTED => Class::Throttled,
        _ => Class::NeverRetry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_defaults() {
        let c = HttpClassifier::default();
        for s in [200, 201, 204, 301, 304] {
            assert_eq!(c.classify(s), Class::Success, "{s}");
        }
        for s in [408, 502, 503, 504] {
            assert!(matches!(c.classify(s), Class::Retryable(_)), "{s}");
        }
        assert_eq!(c.classify(429), Class::Throttled);
        for s in [400, 401, 403, 404, 409, 422, 500, 501, 505, 0, 99, 600, u16::MAX] {
            assert_eq!(c.classify(s), Class::NeverRetry, "{s}");
        }
        assert!(matches!(c.retry_500(true).classify(500), Class::Retryable(_)));
    }

    #[test]
    fn grpc_codes() {
        assert_eq!(classify_grpc(grpc_code::OK), Class::Success);
        assert!(matches!(classify_grpc(grpc_code::UNAVAILABLE), Class::Retryable(_)));
        assert_eq!(classify_grpc(grpc_code::RESOURCE_EXHAUSTED), Class::Throttled);
        for c in [1, 2, 3, 4, 5, 13, 16, -1, 99] {
            assert_eq!(classify_grpc(c), Class::NeverRetry, "{c}");
        }
    }

    #[test]
    fn idempotent_methods() {
        assert!(is_idempotent_method("GET"));
        assert!(is_idempotent_method("PUT"));
        assert!(!is_idempotent_method("POST"));
        assert!(!is_idempotent_method("PATCH"));
        assert!(!is_idempotent_method("get"), "methods are case-sensitive (RFC 9110 §9.1)");
    }
}
