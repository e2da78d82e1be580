//! The RFC 9457 problem responses the layer answers with itself.
//!
//! Each has `"type":"about:blank"` (RFC 9457 §4.2.1: the problem means no more than its HTTP
//! status), the status's own phrase as `title`, a human `detail`, and a stable machine-readable
//! extension member `code` that clients may branch on (`outcome-unknown` tells a client to
//! reconcile instead of retrying).

/// One problem body, built at compile time.
macro_rules! problem {
    ($name:ident, $status:literal, $title:literal, $code:literal, $detail:literal) => {
        pub(super) const $name: &str = concat!(
            r#"{"type":"about:blank","title":""#,
            $title,
            r#"","status":"#,
            $status,
            r#","code":""#,
            $code,
            r#"","detail":""#,
            $detail,
            r#""}"#
        );
    };
}

problem!(
    BAD_KEY,
    400,
    "Bad Request",
    "bad-idempotency-key",
    "malformed or repeated Idempotency-Key"
);
problem!(
    NO_KEY,
    400,
    "Bad Request",
    "idempotency-key-required",
    "this request needs an Idempotency-Key"
);
problem!(
    NO_PRINCIPAL,
    401,
    "Unauthorized",
    "idempotency-principal-missing",
    "a request with an Idempotency-Key must be authenticated; it was not executed"
);
problem!(
    TOO_LARGE,
    413,
    "Content Too Large",
    "body-too-large",
    "request body too large for an idempotent request"
);
problem!(BAD_BODY, 400, "Bad Request", "bad-body", "request body could not be read");
problem!(
    BODY_TIMEOUT,
    408,
    "Request Timeout",
    "body-timeout",
    "the request body did not arrive in time; it was not executed"
);
problem!(
    IN_FLIGHT,
    409,
    "Conflict",
    "idempotency-in-flight",
    "a request with this Idempotency-Key is in progress"
);
problem!(
    UNKNOWN,
    409,
    "Conflict",
    "outcome-unknown",
    "a request with this Idempotency-Key started but its outcome was not recorded; it will not be executed again"
);
problem!(
    MISMATCH,
    422,
    "Unprocessable Content",
    "idempotency-key-reused",
    "this Idempotency-Key was used with a different request"
);
problem!(
    STORE_DOWN,
    503,
    "Service Unavailable",
    "idempotency-store-unavailable",
    "idempotency store unavailable; request not executed"
);
problem!(
    STORE_FULL,
    503,
    "Service Unavailable",
    "idempotency-store-full",
    "idempotency store full; new keys are refused until records expire; request not executed"
);
problem!(
    DEADLINE,
    504,
    "Gateway Timeout",
    "deadline-expired",
    "the request's deadline passed before it could execute; it was not executed"
);
problem!(
    BAD_RESPONSE,
    500,
    "Internal Server Error",
    "response-failed",
    "the response body failed; outcome recorded as unknown"
);

#[cfg(test)]
mod tests {
    #[test]
    fn bodies_are_rfc9457_shaped() {
        assert_eq!(
            super::UNKNOWN,
            r#"{"type":"about:blank","title":"Conflict","status":409,"code":"outcome-unknown","detail":"a request with this Idempotency-Key started but its outcome was not recorded; it will not be executed again"}"#
        );
        for b in [super::BAD_KEY, super::NO_PRINCIPAL, super::STORE_FULL, super::DEADLINE] {
            assert!(b.starts_with(r#"{"type":"about:blank","title":""#) && !b.contains("invalid"));
        }
    }
}
