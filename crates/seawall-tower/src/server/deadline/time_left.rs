//! The time a handler has left: [`time_left`], and the [`TimeLeft`] axum extractor.

#[cfg(feature = "axum")]
use std::fmt;
use std::time::Duration;

use http::Extensions;

use crate::wire::RequestDeadline;

/// The time left for the request whose extensions these are: its [`RequestDeadline`], read on
/// the clock that made it (the [`DeadlineLayer`](super::DeadlineLayer)'s, for a deadline the
/// layer put there). `None` without a deadline; zero once it has passed.
///
/// ```
/// use seawall_tower::server::{DeadlineLayer, time_left};
/// use std::time::Duration;
/// use tower::{Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let handler = tower::service_fn(|req: http::Request<()>| async move {
///     let left = time_left(req.extensions()).unwrap();
///     Ok::<_, std::convert::Infallible>(http::Response::new(format!("{}", left.as_millis())))
/// });
/// let mut svc = tower::Layer::layer(&DeadlineLayer::new(), handler);
/// let req = http::Request::get("/").header("request-timeout-ms", "250").body(()).unwrap();
/// let resp = svc.ready().await.unwrap().call(req).await.unwrap();
/// let ms: u64 = resp.body().parse().unwrap();
/// assert!(ms <= 250 && ms > 200);
/// # }
/// ```
pub fn time_left(extensions: &Extensions) -> Option<Duration> {
    extensions.get::<RequestDeadline>().map(RequestDeadline::remaining)
}

/// Extracts the time the handler has left ([`time_left`]), for axum handlers behind a
/// [`DeadlineLayer`](super::DeadlineLayer) (feature `axum`). Read it again before deciding
/// something late in a handler: it is the time left when extracted.
///
/// `Option<TimeLeft>` is `None` without the layer; a plain `TimeLeft` then rejects the request
/// with [`MissingDeadline`] (500: the server is missing its layer, not the caller at fault).
///
#[cfg_attr(feature = "axum", doc = "```")]
#[cfg_attr(not(feature = "axum"), doc = "```ignore")]
/// use axum::{Router, routing::get};
/// use seawall_tower::server::{DeadlineLayer, TimeLeft};
///
/// async fn handler(TimeLeft(left): TimeLeft) -> String {
///     format!("{} ms left", left.as_millis())
/// }
/// let app: Router = Router::new().route("/", get(handler)).layer(DeadlineLayer::new());
/// # let _ = app;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeLeft(pub Duration);

/// The rejection of a [`TimeLeft`] extractor on a request no [`DeadlineLayer`](super::DeadlineLayer)
/// served: 500, since the server is misconfigured.
#[cfg(feature = "axum")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingDeadline;

#[cfg(feature = "axum")]
impl fmt::Display for MissingDeadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no DeadlineLayer serves this handler: the request has no deadline")
    }
}

#[cfg(feature = "axum")]
impl std::error::Error for MissingDeadline {}

#[cfg(feature = "axum")]
impl axum::response::IntoResponse for MissingDeadline {
    fn into_response(self) -> axum::response::Response {
        (http::StatusCode::INTERNAL_SERVER_ERROR, self.to_string()).into_response()
    }
}

#[cfg(feature = "axum")]
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for TimeLeft {
    type Rejection = MissingDeadline;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        time_left(&parts.extensions).map(TimeLeft).ok_or(MissingDeadline)
    }
}

#[cfg(feature = "axum")]
impl<S: Send + Sync> axum::extract::OptionalFromRequestParts<S> for TimeLeft {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        _state: &S,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(time_left(&parts.extensions).map(TimeLeft))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seawall::time::ManualClock;

    #[test]
    fn reads_the_layers_clock() {
        let clock = ManualClock::new();
        let mut ext = Extensions::new();
        assert_eq!(time_left(&ext), None);
        ext.insert(RequestDeadline::after(&clock, Duration::from_millis(300)));
        assert_eq!(time_left(&ext), Some(Duration::from_millis(300)));
        clock.advance(Duration::from_millis(120));
        assert_eq!(time_left(&ext), Some(Duration::from_millis(180)));
        clock.advance(Duration::from_secs(1));
        assert_eq!(time_left(&ext), Some(Duration::ZERO));
    }
}
