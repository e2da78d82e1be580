//! The processes of the example stack in `crates/seawall-lab/stack/`: a backend that calls one
//! upstream URL, and a dependency of bounded capacity.
//!
//! The third-party retriers of that stack (HAProxy, nginx) need something to proxy to. These
//! are it, small enough to read in one sitting: [`serve_backend`] answers each request by
//! calling its upstream, through a naive client ([`BackendClient::Naive`]: N immediate
//! attempts, each given up after a timeout) or through seawall's own client layer
//! ([`BackendClient::Seawall`]); [`serve_bounded`] is a dependency with a fixed number of
//! workers and a bounded queue that, like a database running a statement whose client timed
//! out, finishes the work of callers who have left. `seawall node backend|dependency` runs
//! them as processes, so that a `seawall lab --target --config NAME='…'` command can start the
//! whole stack; the in-process test (`crates/seawall-lab/tests/stack_third_party.rs`) runs
//! them as tasks.

mod backend;
mod bounded;

pub use backend::{BackendClient, BackendConfig, MAX_ATTEMPTS, MAX_TIMEOUT, serve_backend};
pub use bounded::{BoundedConfig, MAX_QUEUE, MAX_SERVICE, MAX_WORKERS, serve_bounded};

use std::net::SocketAddr;
use std::time::Duration;

use crate::LabError;

/// Checks that `addr` is a loopback address (every part of the lab stays on loopback).
pub fn loopback(what: &'static str, addr: SocketAddr) -> Result<SocketAddr, LabError> {
    if addr.ip().is_loopback() {
        Ok(addr)
    } else {
        Err(LabError::bad_input(
            what,
            format!("{addr} is not a loopback address (127.0.0.0/8, ::1)"),
        ))
    }
}

/// Checks that `v` is in `1..=max` for the flag `what`.
fn count_in(what: &'static str, v: u32, max: u32) -> Result<u32, LabError> {
    if (1..=max).contains(&v) {
        Ok(v)
    } else {
        Err(LabError::bad_input(what, format!("1 to {max}, got {v}")))
    }
}

/// Checks that `d` is between 1 ms and `max` for the milliseconds flag `what`.
fn millis_in(what: &'static str, d: Duration, max: Duration) -> Result<Duration, LabError> {
    if d >= Duration::from_millis(1) && d <= max {
        Ok(d)
    } else {
        Err(LabError::bad_input(
            what,
            format!("1 to {} ms, got {}", max.as_millis(), d.as_millis()),
        ))
    }
}

/// Serves `app` on `listener` until `shutdown` completes. Not a graceful shutdown: in-flight
/// work (a retry chain, a queued request) is what must not outlive the run.
async fn serve_until(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), LabError> {
    tokio::select! {
        r = std::future::IntoFuture::into_future(axum::serve(listener, app)) => {
            r.map_err(LabError::from)
        }
        () = shutdown => Ok(()),
    }
}

fn text(code: http::StatusCode) -> axum::response::Response {
    use axum::response::IntoResponse;
    (code, if code.is_success() { "ok" } else { "unavailable" }).into_response()
}

/// One process of the example stack.
#[derive(Debug, Clone)]
pub enum ExampleNode {
    /// [`serve_backend`].
    Backend(BackendConfig),
    /// [`serve_bounded`].
    Dependency(BoundedConfig),
}

/// Serves `node` on `listen` (loopback only) on a runtime of its own until SIGTERM, Ctrl-C or
/// `max_runtime`; `on_listen` is called once it listens (with the bound address).
pub fn run_blocking(
    node: ExampleNode,
    listen: SocketAddr,
    max_runtime: Duration,
    on_listen: impl FnOnce(SocketAddr),
) -> Result<(), LabError> {
    let listen = loopback("--listen", listen)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let stop = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
                () = tokio::time::sleep(max_runtime) => {}
            }
        };
        let l = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| LabError::bad_input("--listen", format!("{listen}: {e}")))?;
        on_listen(l.local_addr()?);
        match node {
            ExampleNode::Backend(cfg) => serve_backend(l, cfg, stop).await,
            ExampleNode::Dependency(cfg) => serve_bounded(l, cfg, stop).await,
        }
    })?;
    // Dropping the runtime cancels in-flight work at once.
    drop(rt);
    Ok(())
}
