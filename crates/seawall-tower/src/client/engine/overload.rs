//! The explicit "overloaded; don't retry" answer a layer gives upward, so attempts never
//! multiply across layers.

use http::{HeaderValue, Response, StatusCode};

use crate::wire::{GRPC_RETRY_PUSHBACK_MS, RETRY_PUSHBACK_MS};

/// `-1`: the pushback value that means "don't retry".
const DONT_RETRY: HeaderValue = HeaderValue::from_static("-1");

/// HTTP 503 + `Retry-Pushback-Ms: -1`, or for gRPC a trailers-only UNAVAILABLE (status 14) +
/// `grpc-retry-pushback-ms: -1`. A seawall `RetryLayer` above never retries either; gRPC
/// clients that implement gRFC A6 do not either.
pub(crate) fn overloaded_response<B: Default>(grpc: bool) -> Response<B> {
    let mut resp = Response::new(B::default());
    if !grpc {
        *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    let h = resp.headers_mut();
    if grpc {
        h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        h.insert("grpc-status", HeaderValue::from_static("14"));
        h.insert("grpc-message", HeaderValue::from_static("overloaded; don't retry"));
        h.insert(GRPC_RETRY_PUSHBACK_MS, DONT_RETRY);
    } else {
        h.insert(RETRY_PUSHBACK_MS, DONT_RETRY);
    }
    resp
}

/// A fail-fast layer's attempt timed out: HTTP 504, or for gRPC a trailers-only UNAVAILABLE
/// without pushback. A timeout says nothing about overload by itself, so the owner above may
/// still retry it within its budget.
pub(crate) fn timed_out_response<B: Default>(grpc: bool) -> Response<B> {
    let mut resp = Response::new(B::default());
    if grpc {
        let h = resp.headers_mut();
        h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        h.insert("grpc-status", HeaderValue::from_static("14"));
        h.insert("grpc-message", HeaderValue::from_static("upstream attempt timed out"));
    } else {
        *resp.status_mut() = StatusCode::GATEWAY_TIMEOUT;
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::engine::classify::{Protocol, classify_response};
    use seawall::classify::{Class, HttpClassifier};

    #[test]
    fn our_own_signal_classifies_as_overloaded() {
        let c = HttpClassifier::default();
        let http: Response<()> = overloaded_response(false);
        assert_eq!(
            classify_response(&c, Protocol::Http, &http, || std::time::UNIX_EPOCH).0,
            Class::Overloaded
        );
        let grpc: Response<()> = overloaded_response(true);
        assert_eq!(
            classify_response(&c, Protocol::Grpc, &grpc, || std::time::UNIX_EPOCH).0,
            Class::Overloaded
        );
    }
}
