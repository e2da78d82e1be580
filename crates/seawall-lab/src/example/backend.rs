//! A backend of the example stack: per request, one logical call to its upstream.

use std::future::Future;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use seawall::time::SystemClock;
use seawall_tower::wire::RequestDeadline;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::LabError;
use crate::config::Stack;
use crate::node::Role;
use crate::node::client::{Downstream, Inner, http_client};

/// Most attempts of a naive backend.
pub const MAX_ATTEMPTS: u32 = 10;
/// Longest timeout of a backend's call.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);

/// How a backend calls its upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendClient {
    /// Up to `attempts` GETs, the next at once after an error, a non-2xx answer or a timeout
    /// (each attempt given up after [`BackendConfig::timeout`]): the retry loop written by hand.
    Naive {
        /// Attempts in all, the first included.
        attempts: NonZeroU32,
    },
    /// One call through seawall's [`RetryLayer`](seawall_tower::client::RetryLayer) as the
    /// synthetic lab's seawall edge configures it ([`Downstream`] for [`Role::Edge`] in
    /// [`Stack::Seawall`]: at most 3 attempts, full jitter from 50 ms, the gRPC-style token
    /// budget), carrying [`BackendConfig::timeout`] as its deadline, so that no attempt starts
    /// that cannot finish.
    Seawall {
        /// Seed of the jitter.
        seed: u64,
    },
}

/// A backend: where it calls, how, and how long it waits.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// `http://127.0.0.1:PORT/PATH` (loopback only).
    pub upstream: http::Uri,
    /// How it calls.
    pub client: BackendClient,
    /// How long one attempt (naive) or the whole call (seawall) may take.
    pub timeout: Duration,
}

impl BackendConfig {
    /// Checks `upstream` (an `http://` URL on a loopback address with a port), the attempts
    /// (1 to [`MAX_ATTEMPTS`]) and the timeout (1 ms to [`MAX_TIMEOUT`]).
    pub fn new(
        upstream: &str,
        client: BackendClient,
        timeout: Duration,
    ) -> Result<BackendConfig, LabError> {
        let bad = |d: String| LabError::bad_input("--upstream", d);
        let uri: http::Uri = upstream.parse().map_err(|e| bad(format!("{upstream:?}: {e}")))?;
        if uri.scheme_str() != Some("http") {
            return Err(bad(format!("{upstream:?}: expected http://HOST:PORT/PATH")));
        }
        let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
        let ip: std::net::IpAddr = host
            .parse()
            .map_err(|_| bad(format!("{upstream:?}: the host must be a loopback IP address")))?;
        let port = uri.port_u16().ok_or_else(|| bad(format!("{upstream:?}: no port")))?;
        super::loopback("--upstream", std::net::SocketAddr::new(ip, port))?;
        if let BackendClient::Naive { attempts } = client {
            super::count_in("--attempts", attempts.get(), MAX_ATTEMPTS)?;
        }
        super::millis_in("--timeout-ms", timeout, MAX_TIMEOUT)?;
        Ok(BackendConfig { upstream: uri, client, timeout })
    }
}

enum Caller {
    Naive { http: Inner, url: http::Uri, attempts: u32, timeout: Duration },
    Seawall { down: Downstream, timeout: Duration },
}

impl Caller {
    async fn call(&self) -> StatusCode {
        match self {
            Caller::Naive { http, url, attempts, timeout } => {
                for _ in 0..*attempts {
                    let req = Request::get(url.clone()).body(Empty::<Bytes>::new());
                    let Ok(req) = req else { break };
                    let call = http.clone().oneshot(req);
                    if let Ok(Ok(r)) = tokio::time::timeout(*timeout, call).await
                        && r.status().is_success()
                    {
                        return StatusCode::OK;
                    }
                }
                StatusCode::SERVICE_UNAVAILABLE
            }
            Caller::Seawall { down, timeout } => {
                let deadline = RequestDeadline::after(&SystemClock, *timeout);
                match tokio::time::timeout(*timeout, down.call(Some(deadline), None)).await {
                    Ok(r) if r.status().is_success() => StatusCode::OK,
                    _ => StatusCode::SERVICE_UNAVAILABLE,
                }
            }
        }
    }
}

/// Serves `cfg` on `listener` until `shutdown` completes: every request (any method, any path)
/// makes one logical call to the upstream and is answered 200 when it succeeded, 503 when not.
pub async fn serve_backend(
    listener: TcpListener,
    cfg: BackendConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), LabError> {
    let caller = Arc::new(match cfg.client {
        BackendClient::Naive { attempts } => Caller::Naive {
            http: http_client(),
            url: cfg.upstream,
            attempts: attempts.get(),
            timeout: cfg.timeout,
        },
        BackendClient::Seawall { seed } => Caller::Seawall {
            down: Downstream::new(
                &cfg.upstream.to_string(),
                http_client(),
                Role::Edge,
                Stack::Seawall,
                seed,
            )?,
            timeout: cfg.timeout,
        },
    });
    let app = Router::new().fallback(move || {
        let caller = caller.clone();
        async move { super::text(caller.call().await) }
    });
    super::serve_until(listener, app, shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_it_cannot_serve() {
        let naive = |n| BackendClient::Naive { attempts: NonZeroU32::new(n).unwrap() };
        let ms = Duration::from_millis;
        let e = |u: &str, c, t| BackendConfig::new(u, c, t).unwrap_err().to_string();
        assert!(e("http://10.0.0.1:80/", naive(2), ms(100)).contains("loopback"));
        assert!(e("http://localhost:80/", naive(2), ms(100)).contains("loopback IP"));
        assert!(e("https://127.0.0.1:80/", naive(2), ms(100)).contains("http://"));
        assert!(e("http://127.0.0.1/", naive(2), ms(100)).contains("no port"));
        assert!(e("http://127.0.0.1:80/", naive(11), ms(100)).starts_with("--attempts"));
        assert!(e("http://127.0.0.1:80/", naive(2), ms(0)).starts_with("--timeout-ms"));
        assert!(e("http://127.0.0.1:80/", naive(2), ms(60_001)).starts_with("--timeout-ms"));
        let ok = BackendConfig::new("http://[::1]:7080/dep", naive(2), ms(100)).unwrap();
        assert_eq!(ok.upstream.path(), "/dep");
        BackendConfig::new("http://127.0.0.1:7080/", BackendClient::Seawall { seed: 1 }, ms(1))
            .unwrap();
    }
}
