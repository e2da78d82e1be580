//! Small, allocation-light builders for the responses the server layers answer with themselves.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

/// `content-type` of the problem-details bodies (RFC 9457).
const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");

/// True if the request is gRPC (`content-type: application/grpc…`): gRPC clients expect HTTP 200
/// with a `grpc-status`, not an HTTP error status.
pub(crate) fn is_grpc(headers: &http::HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// A layer's own refusal: `status` with the problem body `problem` (a static string: no
/// allocation). For gRPC requests, HTTP 200 with `grpc_status` and no body (a trailers-only
/// response, as gRPC servers answer errors before any message).
pub(crate) fn refuse<B: From<&'static str>>(
    status: StatusCode,
    grpc: bool,
    grpc_status: &'static str,
    problem_body: &'static str,
) -> Response<B> {
    let mut res = Response::new(B::from(if grpc { "" } else { problem_body }));
    if grpc {
        res.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        res.headers_mut().insert("grpc-status", HeaderValue::from_static(grpc_status));
    } else {
        *res.status_mut() = status;
        res.headers_mut().insert(header::CONTENT_TYPE, PROBLEM_JSON);
    }
    res
}

/// A problem-details response whose body is a static JSON string (no allocation for the body).
pub(crate) fn problem<B: From<Bytes>>(status: StatusCode, body: &'static str) -> Response<B> {
    let mut res = Response::new(B::from(Bytes::from_static(body.as_bytes())));
    *res.status_mut() = status;
    res.headers_mut().insert(header::CONTENT_TYPE, PROBLEM_JSON);
    res
}
