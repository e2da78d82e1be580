//! The accept loop both modes share: count, bound, spawn — and close the listener while a
//! fault refuses connections.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::Shared;

/// How often the loop looks for a refusal starting (a live fault can be posted at any time).
const TICK: Duration = Duration::from_millis(20);

/// Accepts until aborted, running `handle` per connection. Connections beyond
/// [`Limits::max_connections`](super::Limits::max_connections) are reset at once. While a
/// fault refuses connections the listener is closed, every open connection is closed with it,
/// and the listener is bound again to the same address when the refusal ends. The connection tasks live in a [`JoinSet`] owned here, so aborting this
/// loop ends them too.
pub(super) async fn accept_loop<F, Fut>(listener: TcpListener, shared: Arc<Shared>, handle: F)
where
    F: Fn(TcpStream, Arc<Shared>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Ok(addr) = listener.local_addr() else { return };
    let mut listener = Some(listener);
    let conns = Arc::new(tokio::sync::Semaphore::new(shared.limits.max_connections));
    let mut tasks = JoinSet::new();
    loop {
        if let Some(until) = shared.faults.refusing_until(shared.now()) {
            if listener.take().is_some() {
                shared.stats.faulted(shared.now(), "refuse");
                shared.restarts.send_modify(|n| *n += 1);
            }
            tokio::select! {
                _ = tokio::time::sleep(shared.until(until).min(TICK)) => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
            continue;
        }
        let Some(l) = &listener else {
            match TcpListener::bind(addr).await {
                Ok(l) => listener = Some(l),
                Err(_) => {
                    // The port was taken meanwhile: keep trying, slowly, and say so.
                    shared.stats.rejected("rebind_failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            continue;
        };
        tokio::select! {
            accepted = l.accept() => {
                let Ok((stream, _)) = accepted else {
                    // EMFILE and the like: back off briefly rather than spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                shared.stats.connection(shared.now());
                let Ok(permit) = conns.clone().try_acquire_owned() else {
                    shared.stats.rejected("max_connections");
                    let _ = stream.set_zero_linger();
                    continue;
                };
                let run = handle(stream, shared.clone());
                let mut restarts = shared.restarts.subscribe();
                tasks.spawn(async move {
                    // A refusal that closes the listener closes this connection too.
                    tokio::select! {
                        () = run => {}
                        _ = restarts.changed() => {}
                    }
                    drop(permit);
                });
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
    }
}
