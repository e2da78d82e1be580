//! TCP mode: a byte pipe per connection, with faults at the connection and at each request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Shared;
use super::accept::accept_loop;
use super::fault::FailMode;
use super::gate::{Gate, pass};
use super::pgwire::{Event, Tracker};
use super::schedule::PerConnection;
use super::stats::InFlight;

/// Sync groups awaiting their `ReadyForQuery` per connection; beyond, tracking stops.
const MAX_GROUPS: usize = 64;

/// Accepts until aborted; the connection tasks die with it.
pub(super) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    accept_loop(listener, shared, |client, shared| async move { connection(client, &shared).await })
        .await
}

/// Ends a connection the way a fault asks.
async fn end(mut s: TcpStream, mode: FailMode) {
    match mode {
        FailMode::Reset => {
            let _ = s.set_zero_linger();
        }
        _ => {
            let _ = s.shutdown().await;
        }
    }
}

async fn connection(mut client: TcpStream, shared: &Shared) {
    let _open = shared.stats.open();
    let caller = super::http::peer_ip(&client);
    // Every share is a share of connections here: the connection draws once per fault, and its
    // requests all meet that draw (see `schedule::Draws`).
    let mut draws = PerConnection::new(shared.rng());
    if let Gate::Refuse(mode) = pass(shared, &mut draws).await {
        return end(client, mode).await;
    }
    let connect =
        tokio::time::timeout(shared.limits.connect_timeout, TcpStream::connect(shared.upstream));
    let Ok(Ok(mut upstream)) = connect.await else {
        shared.stats.rejected("upstream_unreachable");
        return end(client, FailMode::Reset).await;
    };
    let _ = (client.set_nodelay(true), upstream.set_nodelay(true));
    if let Err(mode) = pipe(shared, &mut client, &mut upstream, draws, &caller).await {
        end(upstream, FailMode::Reset).await;
        end(client, mode).await;
    }
}

/// The PostgreSQL reading of one connection and the statements it holds in flight.
#[derive(Default)]
struct Pg {
    tracker: Tracker,
    open: Vec<InFlight>,
    groups: VecDeque<Vec<InFlight>>,
}

fn lock(m: &Mutex<Pg>) -> std::sync::MutexGuard<'_, Pg> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Copies both ways until both sides close (`Ok`) or a fault ends the connection (`Err`).
async fn pipe(
    shared: &Shared,
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    mut draws: PerConnection<seawall::rng::SeededRng>,
    caller: &str,
) -> Result<(), FailMode> {
    let (mut cr, mut cw) = client.split();
    let (mut ur, mut uw) = upstream.split();
    let pg = Mutex::new(Pg::default());
    let size = shared.limits.buffer;
    let up = async {
        let mut buf = vec![0u8; size];
        loop {
            let n = cr.read(&mut buf).await.map_err(|_| FailMode::Reset)?;
            if n == 0 {
                let _ = uw.shutdown().await;
                return Ok(());
            }
            let chunk = &buf[..n];
            let requests = {
                let mut pg = lock(&pg);
                let events = pg.tracker.client(chunk);
                let t = shared.now();
                let mut requests = 0;
                for e in events {
                    match e {
                        Event::Statement(key) => {
                            requests += 1;
                            shared.stats.request(t, 1, caller);
                            let g = shared.stats.enter(key, t);
                            pg.open.push(g);
                        }
                        Event::Sync if pg.groups.len() < MAX_GROUPS => {
                            let group = std::mem::take(&mut pg.open);
                            pg.groups.push_back(group);
                        }
                        Event::Sync => {
                            pg.tracker.stop();
                            pg.groups.clear();
                            pg.open.clear();
                        }
                    }
                }
                if pg.tracker.is_broken() { 1 } else { requests }
            };
            if requests > 0
                && let Gate::Refuse(mode) = pass(shared, &mut draws).await
            {
                return Err(mode);
            }
            pace(shared, n).await;
            uw.write_all(chunk).await.map_err(|_| FailMode::Reset)?;
            shared.stats.bytes(true, n);
        }
    };
    let down = async {
        let mut buf = vec![0u8; size];
        loop {
            let n = ur.read(&mut buf).await.map_err(|_| FailMode::Reset)?;
            if n == 0 {
                let _ = cw.shutdown().await;
                return Ok(());
            }
            {
                let mut pg = lock(&pg);
                match pg.tracker.server(&buf[..n]) {
                    Some(ready) => {
                        for _ in 0..ready {
                            pg.groups.pop_front();
                        }
                    }
                    None => {
                        pg.groups.clear();
                        pg.open.clear();
                    }
                }
            }
            pace(shared, n).await;
            cw.write_all(&buf[..n]).await.map_err(|_| FailMode::Reset)?;
            shared.stats.bytes(false, n);
        }
    };
    tokio::try_join!(up, down).map(|_| ())
}

/// Waits as long as `n` bytes take at the active bandwidth limit, if any, before they are sent.
async fn pace(shared: &Shared, n: usize) {
    if let Some(rate) = shared.faults.bandwidth_at(shared.now()) {
        tokio::time::sleep(Duration::from_secs_f64(n as f64 / rate.max(1) as f64)).await;
    }
}
