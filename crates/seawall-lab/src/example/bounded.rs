//! The example stack's dependency: fixed workers, a bounded queue, and work done for callers
//! who have left.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use http::StatusCode;
use tokio::net::TcpListener;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::task::JoinSet;

use crate::LabError;

/// Most workers.
pub const MAX_WORKERS: u32 = 1024;
/// Longest service time.
pub const MAX_SERVICE: Duration = Duration::from_secs(10);
/// Longest queue.
pub const MAX_QUEUE: u32 = 100_000;

/// A dependency of capacity `workers / service` requests per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundedConfig {
    /// Requests worked on at once.
    pub workers: u32,
    /// Time each takes.
    pub service: Duration,
    /// Requests that may wait for a worker; beyond, 503 at once.
    pub queue: u32,
}

impl BoundedConfig {
    /// Checks the ranges: workers 1 to [`MAX_WORKERS`], service 1 ms to [`MAX_SERVICE`], queue
    /// 1 to [`MAX_QUEUE`].
    pub fn new(workers: u32, service: Duration, queue: u32) -> Result<BoundedConfig, LabError> {
        super::count_in("--workers", workers, MAX_WORKERS)?;
        super::millis_in("--service-ms", service, MAX_SERVICE)?;
        super::count_in("--queue", queue, MAX_QUEUE)?;
        Ok(BoundedConfig { workers, service, queue })
    }
}

/// Serves `cfg` on `listener` until `shutdown` completes. Every request (any method, any path)
/// joins a FIFO queue of at most `queue` (beyond: 503 at once) and is answered 200 once a worker
/// has spent `service` on it. A request once queued is worked on even if its caller has gone,
/// as a database runs a statement whose client timed out: the wasted work that keeps a retry
/// storm going after its cause has passed.
pub async fn serve_bounded(
    listener: TcpListener,
    cfg: BoundedConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), LabError> {
    let (tx, rx) = mpsc::channel::<oneshot::Sender<()>>(cfg.queue as usize);
    let rx = Arc::new(Mutex::new(rx));
    // Dropped (the workers aborted) when this function returns.
    let mut workers = JoinSet::new();
    for _ in 0..cfg.workers {
        let rx = rx.clone();
        workers.spawn(async move {
            loop {
                let Some(done) = rx.lock().await.recv().await else { return };
                tokio::time::sleep(cfg.service).await;
                // The caller may have left: the work is done all the same.
                let _ = done.send(());
            }
        });
    }
    let app = Router::new().fallback(move || {
        let tx = tx.clone();
        async move {
            let (done, wait) = oneshot::channel();
            let code = match tx.try_send(done) {
                Ok(()) if wait.await.is_ok() => StatusCode::OK,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            super::text(code)
        }
    });
    super::serve_until(listener, app, shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_name_their_flag() {
        let ms = Duration::from_millis;
        let e = |w, s, q| BoundedConfig::new(w, s, q).unwrap_err().to_string();
        assert!(e(0, ms(20), 100).starts_with("--workers"));
        assert!(e(MAX_WORKERS + 1, ms(20), 100).starts_with("--workers"));
        assert!(e(2, ms(0), 100).starts_with("--service-ms"));
        assert!(e(2, MAX_SERVICE + ms(1), 100).starts_with("--service-ms"));
        assert!(e(2, ms(20), 0).starts_with("--queue"));
        assert!(e(2, ms(20), MAX_QUEUE + 1).starts_with("--queue"));
        assert_eq!(BoundedConfig::new(2, ms(20), 100).unwrap().workers, 2);
    }
}
