//! The RFC 9457 problem bodies seawall's server layers answer with themselves.
//!
//! Each body has a stable `type` URI (`…/server/problem/index.html#CODE`: this page, where the
//! row for `CODE` says what it means), the status's own phrase as `title`, the `status`, a
//! `code` member equal to the fragment (for clients that branch on a short string), and a
//! human `detail`. The bodies are `&'static str` built at compile time, so answering with one
//! costs no allocation: the reject path stays as cheap as an empty response.
//!
//! | code | status | layer | what a client should do |
//! |---|---|---|---|
//! | `bad-idempotency-key` | 400 | idempotency | fix the request: one `Idempotency-Key`, a quoted string of 1–255 visible characters; not executed |
//! | `idempotency-key-required` | 400 | idempotency | send an `Idempotency-Key` (this route requires one); not executed |
//! | `idempotency-principal-missing` | 401 | idempotency | authenticate, then retry with the same key; not executed |
//! | `body-too-large` | 413 | idempotency, body | do not retry the same body: it is over the limit; not executed |
//! | `bad-body` | 400 | idempotency, body | the body could not be read; retry (with the same key, if any) if the transport failed; not executed |
//! | `body-timeout` | 408 | idempotency, body | send the body faster; retry (with the same key, if any); not executed |
//! | `idempotency-in-flight` | 409 | idempotency | the same key is running now: retry later with the same key (after `Retry-After` if given) |
//! | `outcome-unknown` | 409 | idempotency | do not retry: it started and its outcome was not recorded; reconcile (read the resource) |
//! | `idempotency-key-reused` | 422 | idempotency | the key was used with another request: use a new key for a new request |
//! | `idempotency-store-unavailable` | 503 | idempotency | retry with the same key after `Retry-After`; not executed |
//! | `idempotency-store-full` | 503 | idempotency | retry with the same key after `Retry-After` (when the store's oldest record expires); not executed |
//! | `idempotency-quota` | 429 | idempotency | you hold your share of the store (or too many outcome-unknown requests): retry with the same key after `Retry-After` (when your oldest record expires), or reconcile your unknown outcomes; not executed |
//! | `deadline-expired` | 504 | shed, deadline, idempotency | the deadline passed before the request ran; not executed: retry only with a new deadline and budget |
//! | `deadline-passed-while-running` | 504 | deadline | the deadline passed while the handler ran: its outcome is unknown; retry only if the request is idempotent (a key makes it so) |
//! | `bad-request-timeout` | 400 | deadline | fix `Request-Timeout-Ms` (digits, milliseconds) or `grpc-timeout`; not executed |
//! | `overloaded` | 503 | shed | the server is shedding load: retry after `Retry-After`, within your retry budget; not executed |
//! | `response-failed` | 500 | idempotency | the response body failed after the handler ran: outcome unknown; reconcile |
//!
//! gRPC requests get no body: HTTP 200 with the equivalent `grpc-status` (trailers-only), as
//! gRPC servers answer errors.

/// The base every problem `type` URI starts with; the code follows a `#`.
pub const TYPE_BASE: &str =
    "https://docs.rs/seawall-tower/latest/seawall_tower/server/problem/index.html";

/// One problem body, built at compile time.
macro_rules! problem {
    ($name:ident, $status:literal, $title:literal, $code:literal, $detail:literal) => {
        #[doc = concat!("The `", $code, "` problem (", $status, "): ", $detail, ".")]
        pub const $name: &str = concat!(
            r#"{"type":"https://docs.rs/seawall-tower/latest/seawall_tower/server/problem/index.html#"#,
            $code,
            r#"","title":""#,
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
    "request body over the server's limit; it was not executed"
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
    QUOTA,
    429,
    "Too Many Requests",
    "idempotency-quota",
    "this principal holds its share of the idempotency store; new keys are refused until its records expire; request not executed"
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

problem!(
    OVERLOADED,
    503,
    "Service Unavailable",
    "overloaded",
    "the server is shedding load; the request was not executed"
);
problem!(
    DEADLINE_RUNNING,
    504,
    "Gateway Timeout",
    "deadline-passed-while-running",
    "the request's deadline passed while it ran; its outcome is unknown"
);
problem!(
    BAD_TIMEOUT,
    400,
    "Bad Request",
    "bad-request-timeout",
    "malformed Request-Timeout-Ms (milliseconds, digits only) or grpc-timeout; the request was not executed"
);

/// Every body, for the tests.
#[cfg(test)]
const ALL: &[&str] = &[
    BAD_KEY,
    NO_KEY,
    NO_PRINCIPAL,
    TOO_LARGE,
    BAD_BODY,
    BODY_TIMEOUT,
    IN_FLIGHT,
    UNKNOWN,
    MISMATCH,
    STORE_DOWN,
    STORE_FULL,
    QUOTA,
    DEADLINE,
    BAD_RESPONSE,
    OVERLOADED,
    DEADLINE_RUNNING,
    BAD_TIMEOUT,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Each body is RFC 9457 JSON whose `type` is this page's row for its `code`, and the table
    /// above has that row with the same status: the URIs are pinned, and documented.
    #[test]
    fn every_problem_has_its_type_uri_and_its_row() {
        let doc = include_str!("problem.rs");
        let mut codes = std::collections::HashSet::new();
        for body in ALL {
            let v: serde_json::Value = serde_json::from_str(body).expect(body);
            let code = v["code"].as_str().unwrap().to_string();
            assert!(codes.insert(code.clone()), "{code} twice");
            assert_eq!(v["type"], format!("{TYPE_BASE}#{code}"), "{body}");
            let status = v["status"].as_u64().unwrap();
            let row = format!("//! | `{code}` | {status} |");
            assert!(doc.contains(&row), "no table row {row:?}");
            assert!(v["title"].as_str().is_some_and(|t| !t.is_empty()));
            assert!(v["detail"].as_str().is_some_and(|t| !t.is_empty()));
        }
        let rows = doc.lines().filter(|l| l.starts_with("//! | `")).count();
        assert_eq!(rows, ALL.len(), "a table row without a body, or a body without a row");
        assert_eq!(
            UNKNOWN,
            format!(
                r#"{{"type":"{TYPE_BASE}#outcome-unknown","title":"Conflict","status":409,"code":"outcome-unknown","detail":"a request with this Idempotency-Key started but its outcome was not recorded; it will not be executed again"}}"#
            )
        );
    }
}
