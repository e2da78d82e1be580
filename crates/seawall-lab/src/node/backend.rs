//! The order service's PostgreSQL backend (`--backend postgres://…`): a bounded pool and one
//! statement of known cost, as a tower service the client layers wrap like any other.
//!
//! # Capacity
//!
//! `workers` connections, each running `SELECT pg_sleep(cost) FROM <table>` where the table's
//! single row holds `cost` = the healthy service time: capacity = pool size / statement time,
//! the same arithmetic as the built-in dependency. The statement reads the table so that the
//! parent's faults (a lock, a rename, a slower `cost`, see [`crate::pg`]) act inside PostgreSQL.
//!
//! # Callers who have left
//!
//! A query runs on its connection until PostgreSQL answers, whatever the caller does: dropping
//! a `tokio-postgres` future does not stop the statement on the server, and the connection is
//! not reused until it has answered (a cancel aimed at a connection already running the *next*
//! query would cancel the wrong one). What differs is what the caller's departure does:
//!
//! - **baseline** (every tier's usual settings): nothing. The pool wait and the query run detached,
//!   so a retry whose predecessor timed out queues behind it — the database works for callers who
//!   have left, which the `pg_stat_activity` query ([`crate::pg`]) shows as old identical
//!   statements.
//! - **seawall** (work whose caller has gone is dropped): a caller that leaves while
//!   waiting for a connection leaves the queue; one that leaves while its statement runs sends
//!   PostgreSQL a cancel request for it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::{CancelToken, Client, NoTls};

use super::client::InnerError;
use super::stats::{BusySpan, NodeStats, QueueSlot, mark_service};
use crate::LabError;
use crate::config::Stack;

/// The statement every order runs: one row, `pg_sleep` for the row's `cost` seconds.
pub fn statement(table: &str) -> String {
    format!("SELECT pg_sleep(cost) FROM {table}")
}

/// An answer, and the statement time behind it when it ran.
type Served = (StatusCode, Option<Duration>);
const UNAVAILABLE: Served = (StatusCode::SERVICE_UNAVAILABLE, None);
const FAILED: Served = (StatusCode::INTERNAL_SERVER_ERROR, None);

/// A bounded pool of PostgreSQL connections running [`statement`].
#[derive(Debug)]
pub struct PgBackend {
    conns: Vec<Client>,
    free: Mutex<Vec<usize>>,
    pool: Arc<Semaphore>,
    statement: String,
    cancel_on_leave: bool,
    stats: NodeStats,
}

impl PgBackend {
    /// Opens `workers` connections to `url` for `stack`, querying `table`.
    pub async fn connect(
        url: &str,
        table: &str,
        workers: u32,
        stack: Stack,
    ) -> Result<Arc<Self>, LabError> {
        let mut conns = Vec::with_capacity(workers as usize);
        for _ in 0..workers {
            let connect = tokio_postgres::connect(url, NoTls);
            let (client, conn) = tokio::time::timeout(Duration::from_secs(5), connect)
                .await
                .map_err(|_| LabError::Backend(format!("{url}: no connection within 5 s")))?
                .map_err(|e| LabError::Backend(format!("{url}: {e}")))?;
            // The connection task ends when the client drops (the node stops).
            tokio::spawn(conn);
            conns.push(client);
        }
        Ok(Arc::new(PgBackend {
            free: Mutex::new((0..conns.len()).collect()),
            pool: Arc::new(Semaphore::new(conns.len())),
            conns,
            statement: statement(table),
            cancel_on_leave: stack == Stack::Seawall,
            stats: NodeStats::default(),
        }))
    }

    /// The pool's counters: queries received, completed, wasted (the caller had left), cancelled
    /// (as doomed), and the wait for a connection (queue length and age).
    pub fn stats(&self) -> super::stats::StatsSnapshot {
        self.stats.snapshot()
    }

    /// Runs the statement on a connection the permit guarantees is free; returns it after.
    /// Returns the answer and, when the statement ran to the end, how long it took (see
    /// [`super::stats::SERVICE_HEADER`]). The connection is busy for as long as the statement
    /// runs, waiting on a lock included: a hung table holds its connections.
    async fn run(&self, permit: OwnedSemaphorePermit, idx: usize, gone: &AtomicBool) -> Served {
        let busy = BusySpan::start(&self.stats);
        let r = self.conns[idx].execute(self.statement.as_str(), &[]).await;
        let took = busy.elapsed();
        drop(busy);
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(idx);
        drop(permit);
        match r {
            Ok(_) => {
                self.stats.completed(gone.load(Ordering::Relaxed));
                (StatusCode::OK, Some(took))
            }
            Err(e) => {
                if e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED) {
                    self.stats.doomed();
                }
                // A failing database (the `fail` fault renames the table) fails every query.
                UNAVAILABLE
            }
        }
    }

    fn take_conn(&self) -> usize {
        // A permit is held, so at least one index is free.
        self.free.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or(0)
    }

    async fn query(self: Arc<Self>) -> Served {
        self.stats.received();
        let gone = Arc::new(AtomicBool::new(false));
        // Set when this future is dropped: after completion that is harmless (the work already
        // read the flag), before it the caller has left.
        let mut left = Left { gone: gone.clone(), cancel: None };
        if !self.cancel_on_leave {
            let me = self.clone();
            let job = tokio::spawn(async move {
                let slot = QueueSlot::new(&me.stats);
                let Ok(permit) = me.pool.clone().acquire_owned().await else {
                    return UNAVAILABLE;
                };
                slot.done();
                let idx = me.take_conn();
                me.run(permit, idx, &gone).await
            });
            return job.await.unwrap_or(FAILED);
        }
        let slot = QueueSlot::new(&self.stats);
        let Ok(permit) = self.pool.clone().acquire_owned().await else {
            return UNAVAILABLE;
        };
        slot.done();
        let idx = self.take_conn();
        left.cancel = Some(self.conns[idx].cancel_token());
        let me = self.clone();
        let job = tokio::spawn(async move { me.run(permit, idx, &gone).await });
        let served = job.await.unwrap_or(FAILED);
        left.cancel = None;
        served
    }
}

/// Marks the caller gone when dropped early and, if armed, asks PostgreSQL to cancel the
/// statement still running for it.
struct Left {
    gone: Arc<AtomicBool>,
    cancel: Option<CancelToken>,
}

impl Drop for Left {
    fn drop(&mut self) {
        self.gone.store(true, Ordering::Relaxed);
        if let Some(token) = self.cancel.take() {
            tokio::spawn(async move {
                let _ = token.cancel_query(NoTls).await;
            });
        }
    }
}

/// [`PgBackend`] as the service the order service's client layer wraps: 200 when the statement
/// ran, 503 when it failed or was cancelled.
#[derive(Debug, Clone)]
pub struct PgService(pub Arc<PgBackend>);

impl tower::Service<Request<Empty<Bytes>>> for PgService {
    type Response = Response<()>;
    type Error = InnerError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<()>, InnerError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), InnerError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: Request<Empty<Bytes>>) -> Self::Future {
        let pg = self.0.clone();
        Box::pin(async move {
            let (status, busy) = pg.query().await;
            let mut r = Response::new(());
            *r.status_mut() = status;
            if let Some(d) = busy {
                mark_service(r.headers_mut(), d);
            }
            Ok(r)
        })
    }
}
