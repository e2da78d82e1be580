//! The Prometheus text exposition of a registry, shared by the client's
//! [`metrics_text`](crate::client::metrics_text) / `metrics_response` and the server's
//! `prometheus::encode` / `prometheus::metrics_response` (compiled when either is).

use prometheus_client::registry::Registry;

/// The registry in the Prometheus (OpenMetrics) text exposition format.
pub(crate) fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would leave a partial page, which a
    // scraper rejects, so it is not worth a panic.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

/// An HTTP response with the registry's text exposition and the OpenMetrics content type.
pub(crate) fn response(registry: &Registry) -> http::Response<String> {
    let mut resp = http::Response::new(encode(registry));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    );
    resp
}
