//! The accept loop both modes share: count, bound, spawn.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::Shared;

/// Accepts until aborted, running `handle` per connection. Connections beyond
/// [`Limits::max_connections`](super::Limits::max_connections) are reset at once. The
/// connection tasks live in a [`JoinSet`] owned here, so aborting this loop ends them too.
pub(super) async fn accept_loop<F, Fut>(listener: TcpListener, shared: Arc<Shared>, handle: F)
where
    F: Fn(TcpStream, Arc<Shared>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let conns = Arc::new(tokio::sync::Semaphore::new(shared.limits.max_connections));
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
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
                tasks.spawn(async move {
                    run.await;
                    drop(permit);
                });
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}
