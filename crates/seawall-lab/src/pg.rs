//! The parent's side of `--backend postgres://…`: the table the orders read, the faults, and
//! a `pg_stat_activity` query (identical statements running at once) once a second.
//!
//! # The faults, inside PostgreSQL
//!
//! Every fault acts on the database itself, not on the order service's code, so the order
//! service's pool, timeouts and retries meet it the way they would meet a real incident:
//!
//! - `fail` — every query fails at once (a verification test's fault): the table is renamed away
//!   (`ALTER TABLE … RENAME`), so each statement errors with "relation does not exist", and
//!   renamed back when the fault ends (a bad migration, rolled back).
//! - `hang` — every query blocks: the parent holds `LOCK TABLE … IN ACCESS EXCLUSIVE MODE` in an
//!   open transaction for the fault, then rolls back (a long DDL or a forgotten transaction).
//!   This is the fault that fills `pg_stat_activity` with identical waiting statements.
//! - `slow` — the statement's cost (the row `pg_sleep` reads) ×6 (an index slowdown:
//!   p50 40 → 240 ms).
//!
//! `restart` is not offered: restarting a shared PostgreSQL is not the lab's to do.
//!
//! Each lab run creates its own table, `seawall_lab_<pid>_<n>`, and drops it at the end, so
//! concurrent runs against one database do not meet. A run killed mid-way can leave one behind
//! (`DROP TABLE seawall_lab_…` is safe).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio_postgres::{Client, NoTls};

use crate::LabError;
use crate::config::{FaultKind, FaultSpec};
use crate::node::backend::statement;

/// The `pg_stat_activity` query: identical statements running concurrently, and the oldest one's
/// age (as seconds, so it can be read without an interval type).
pub const SEED_QUERY: &str = "SELECT left(query, 60) AS statement, count(*) AS running_copies, \
     EXTRACT(EPOCH FROM max(now() - query_start))::float8 AS oldest \
     FROM pg_stat_activity WHERE state = 'active' GROUP BY 1 ORDER BY running_copies DESC LIMIT 5";

/// One second's reading of [`SEED_QUERY`] for the lab's statement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PgSample {
    /// Copies of the order statement active at once.
    pub running_copies: u64,
    /// Age of the oldest, seconds.
    pub oldest_s: f64,
}

static RUNS: AtomicU32 = AtomicU32::new(0);

/// A lab's PostgreSQL: an admin connection (table, faults) and a monitor connection (the
/// `pg_stat_activity` query, never blocked by the admin's lock).
#[derive(Debug)]
pub struct PgLab {
    admin: Client,
    monitor: Client,
    table: String,
    cost_s: f64,
}

async fn connect(url: &str) -> Result<Client, LabError> {
    let c = tokio::time::timeout(Duration::from_secs(5), tokio_postgres::connect(url, NoTls))
        .await
        .map_err(|_| LabError::Backend(format!("{url}: no connection within 5 s")))?;
    let (client, conn) = c.map_err(|e| LabError::Backend(format!("{url}: {e}")))?;
    tokio::spawn(conn);
    Ok(client)
}

fn pg(e: tokio_postgres::Error) -> LabError {
    LabError::Backend(e.to_string())
}

impl PgLab {
    /// Connects and creates the run's table with one row of `cost` (the healthy statement time).
    pub async fn setup(url: &str, cost: Duration) -> Result<Self, LabError> {
        let (admin, monitor) = (connect(url).await?, connect(url).await?);
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let table = format!("seawall_lab_{}_{n}", std::process::id());
        let cost_s = cost.as_secs_f64();
        admin
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {table}; DROP TABLE IF EXISTS {table}_off; \
                 CREATE TABLE {table} (id int PRIMARY KEY, cost float8 NOT NULL); \
                 INSERT INTO {table} VALUES (1, {cost_s});"
            ))
            .await
            .map_err(pg)?;
        Ok(PgLab { admin, monitor, table, cost_s })
    }

    /// The table the order service reads.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Applies `fault` now, holds it for its duration, and undoes it.
    pub async fn fault(&self, fault: FaultSpec) -> Result<(), LabError> {
        let t = &self.table;
        let (on, off) = match fault.kind {
            FaultKind::Fail => (
                format!("ALTER TABLE {t} RENAME TO {t}_off"),
                format!("ALTER TABLE {t}_off RENAME TO {t}"),
            ),
            FaultKind::Hang => {
                (format!("BEGIN; LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE"), "ROLLBACK".into())
            }
            FaultKind::Slow => (
                format!("UPDATE {t} SET cost = {}", self.cost_s * 6.0),
                format!("UPDATE {t} SET cost = {}", self.cost_s),
            ),
            FaultKind::Restart => {
                return Err(LabError::bad_input(
                    "--fault",
                    "restart is not offered with --backend",
                ));
            }
        };
        self.admin.batch_execute(&on).await.map_err(pg)?;
        tokio::time::sleep(fault.duration).await;
        self.admin.batch_execute(&off).await.map_err(pg)
    }

    /// The `pg_stat_activity` query now, for the order statement (zero copies if none is active).
    pub async fn sample(&self) -> Result<PgSample, LabError> {
        let ours: String = statement(&self.table).chars().take(60).collect();
        let rows = self.monitor.query(SEED_QUERY, &[]).await.map_err(pg)?;
        let row = rows
            .iter()
            .find(|r| r.try_get::<_, Option<String>>(0).ok().flatten() == Some(ours.clone()));
        Ok(row.map_or(PgSample::default(), |r| PgSample {
            running_copies: r.try_get::<_, i64>(1).unwrap_or(0).max(0) as u64,
            oldest_s: r.try_get::<_, Option<f64>>(2).ok().flatten().unwrap_or(0.0),
        }))
    }

    /// Drops the run's table (and its renamed copy, if a fault was cut short).
    pub async fn teardown(&self) -> Result<(), LabError> {
        let t = &self.table;
        let sql = format!("ROLLBACK; DROP TABLE IF EXISTS {t}; DROP TABLE IF EXISTS {t}_off;");
        // ROLLBACK outside a transaction is only a warning.
        self.admin.batch_execute(&sql).await.map_err(pg)
    }
}
