//! Running a proxy as a program: its own runtime, until Ctrl-C or a time limit.

use std::sync::Arc;
use std::time::Duration;

use seawall::time::SystemClock;

use super::{Proxy, ProxyConfig};
use crate::ProxyError;

/// The longest `run_blocking` runs when given a limit: a day.
pub const MAX_RUNTIME: Duration = Duration::from_secs(86_400);

/// Starts `config` on a runtime of its own, calls `ready` once the listeners are bound, and
/// serves until Ctrl-C (or SIGTERM), or for `limit` if given (capped at [`MAX_RUNTIME`]).
/// Returns the proxy's final Prometheus text.
pub fn run_blocking(
    config: ProxyConfig,
    limit: Option<Duration>,
    ready: impl FnOnce(&Proxy),
) -> Result<String, ProxyError> {
    config.validate()?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async {
        let proxy = Proxy::start(config, Arc::new(SystemClock)).await?;
        ready(&proxy);
        let limit = limit.map_or(MAX_RUNTIME, |l| l.min(MAX_RUNTIME));
        tokio::select! {
            _ = tokio::time::sleep(limit) => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = terminated() => {}
        }
        Ok(proxy.stats().prometheus())
    })
}

#[cfg(unix)]
async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn terminated() {
    std::future::pending().await
}
