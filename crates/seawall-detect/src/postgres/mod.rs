//! The database's view of a storm: many copies of one statement running at once, the oldest
//! older than any caller's timeout.
//!
//! At the bottom of a stack, a retry storm is the same statement running many times
//! concurrently: each retry of each layer above sends it again, and a statement whose caller
//! has given up keeps running (PostgreSQL does not know the client left until it writes the
//! answer). [`PgSampler::sample`] reads `pg_stat_activity` once — active client backends grouped
//! by their statement text, the count and the oldest one's age — and [`judge`] says what one
//! reading shows:
//!
//! - **working for callers who have left** — at least [`PgOptions::min_copies`] copies of one
//!   statement, the oldest older than the callers' timeout (`--caller-timeout`): every copy
//!   older than that is work whose answer nobody will read;
//! - **old queue** — as many copies, the oldest older than the callers' timeout is unknown
//!   (no `--caller-timeout`) but older than [`PgOptions::old_s`]: the database is behind;
//! - **quiet** — neither.
//!
//! # What the sampler does to the database
//!
//! One connection, opened with `default_transaction_read_only = on`, a `statement_timeout`
//! ([`PgOptions::statement_timeout`], 500 ms by default: a sample that takes longer is a failed
//! interval, not a pile-up of its own) and `application_name = seawall-detect`; it excludes its
//! own backend from what it reads. One query per interval, over `pg_stat_activity` only (no
//! table is read). Its cost is in the crate's BENCHMARKS.md (`cargo bench -p seawall-detect
//! --bench pg_sampler`).
//!
//! # Privileges
//!
//! Any role can read `pg_stat_activity`, but the statement text of another role's sessions
//! reads `<insufficient privilege>` unless the sampler's role is a member of
//! `pg_read_all_stats` (PostgreSQL's predefined role for this):
//!
//! ```sql
//! CREATE ROLE seawall_detect LOGIN;
//! GRANT pg_read_all_stats TO seawall_detect;
//! ```
//!
//! Without it, those sessions are counted as one group the sampler cannot name, and the
//! judgement says so.
//!
//! The connection is plain TCP (no TLS): point it at a database on the same host or network
//! (`sslmode=require` URLs are refused by the connector).

use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio_postgres::{Client, NoTls};

#[cfg(test)]
mod tests;

/// The query: active client backends other than the sampler's own, grouped by their
/// statement's first [`STATEMENT_CHARS`] characters (whitespace runs folded), largest group
/// first. `$1` is the number of groups returned.
pub const ACTIVITY_QUERY: &str = "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 120) AS statement, \
       count(*)::int8 AS running_copies, \
       COALESCE(EXTRACT(EPOCH FROM max(now() - query_start)), 0)::float8 AS oldest_s, \
       count(*) FILTER (WHERE wait_event_type = 'Lock')::int8 AS waiting_on_locks \
     FROM pg_stat_activity \
     WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid() \
     GROUP BY 1 ORDER BY 2 DESC, 3 DESC LIMIT $1";

/// How many characters of a statement name its group (as in the query).
pub const STATEMENT_CHARS: usize = 120;

/// What PostgreSQL shows instead of another role's statement without `pg_read_all_stats`.
pub const HIDDEN_STATEMENT: &str = "<insufficient privilege>";

/// The sampler's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PgOptions {
    /// The callers' timeout: a copy older than this is work nobody waits for. `None`: not
    /// known, and the judgement says "old queue" instead (see the module docs).
    pub caller_timeout: Option<Duration>,
    /// Copies of one statement that count as "many" (default 10: a pool's worth of one
    /// statement, where a healthy service runs a handful at a time).
    pub min_copies: u64,
    /// Without a caller timeout: the oldest copy's age, seconds, that makes a queue "old"
    /// (default 10 s, longer than the default timeouts of the common HTTP clients' retries).
    pub old_s: f64,
    /// The sampler's own statement timeout (default 500 ms).
    pub statement_timeout: Duration,
    /// Groups read per sample (default 5, as the article's query; clamped to 1..=50).
    pub top: u32,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            caller_timeout: None,
            min_copies: 10,
            old_s: 10.0,
            statement_timeout: Duration::from_millis(500),
            top: 5,
        }
    }
}

/// One group of identical statements running at one time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Statement {
    /// The statement's first [`STATEMENT_CHARS`] characters, control characters replaced, or
    /// [`HIDDEN_STATEMENT`].
    pub statement: String,
    /// Copies active at once.
    pub running_copies: u64,
    /// The oldest copy's age, seconds (0 when PostgreSQL has no start time for it).
    pub oldest_s: f64,
    /// Of those, copies waiting on a lock.
    pub waiting_on_locks: u64,
}

impl Statement {
    /// A group from one row's raw values, clamped: negative or absent counts are 0, an age that
    /// is negative, not finite or absent is 0 (a clock step), the text is cut at
    /// [`STATEMENT_CHARS`] characters and its control characters are replaced by spaces.
    pub fn from_row(
        statement: Option<&str>,
        running_copies: Option<i64>,
        oldest_s: Option<f64>,
        waiting_on_locks: Option<i64>,
    ) -> Statement {
        let count = |v: Option<i64>| v.map_or(0, |n| u64::try_from(n).unwrap_or(0));
        let running = count(running_copies);
        Statement {
            statement: statement
                .unwrap_or("")
                .chars()
                .take(STATEMENT_CHARS)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect(),
            running_copies: running,
            oldest_s: oldest_s.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(0.0),
            waiting_on_locks: count(waiting_on_locks).min(running),
        }
    }

    /// Whether PostgreSQL hid this group's text from the sampler's role.
    pub fn hidden(&self) -> bool {
        self.statement == HIDDEN_STATEMENT
    }
}

/// One reading of `pg_stat_activity`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Activity {
    /// When it was read (the sampler's clock).
    #[serde(with = "unix_s")]
    pub at: SystemTime,
    /// The largest groups, largest first.
    pub statements: Vec<Statement>,
}

mod unix_s {
    use std::time::{SystemTime, UNIX_EPOCH};

    pub(super) fn serialize<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        let secs = t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        s.serialize_f64(secs)
    }
}

/// Why the sampler could not read.
#[derive(Debug)]
pub enum PgError {
    /// The connection could not be opened or configured.
    Connect(tokio_postgres::Error),
    /// The sample's query failed (its statement timeout included).
    Query(tokio_postgres::Error),
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PgError::Connect(e) => write!(f, "cannot connect to PostgreSQL: {e}"),
            PgError::Query(e) => write!(f, "pg_stat_activity could not be read: {e}"),
        }
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PgError::Connect(e) | PgError::Query(e) => Some(e),
        }
    }
}

/// A read-only connection that samples `pg_stat_activity`.
#[derive(Debug)]
pub struct PgSampler {
    client: Client,
    top: i64,
}

impl PgSampler {
    /// Connects to `url` (a `postgres://` URL or a libpq key=value string) and configures the
    /// session: read only, the statement timeout of `options`, `application_name`. The
    /// connection's task runs on the current Tokio runtime.
    pub async fn connect(url: &str, options: &PgOptions) -> Result<PgSampler, PgError> {
        let (client, connection) =
            tokio_postgres::connect(url, NoTls).await.map_err(PgError::Connect)?;
        tokio::spawn(async move {
            // The connection ends with the client; its error surfaces on the next query.
            let _ = connection.await;
        });
        let timeout_ms = options.statement_timeout.as_millis().clamp(1, 60_000);
        client
            .batch_execute(&format!(
                "SET default_transaction_read_only = on; SET statement_timeout = {timeout_ms}; \
                 SET application_name = 'seawall-detect'"
            ))
            .await
            .map_err(PgError::Connect)?;
        Ok(PgSampler { client, top: i64::from(options.top.clamp(1, 50)) })
    }

    /// One reading.
    pub async fn sample(&self) -> Result<Activity, PgError> {
        let rows = self.client.query(ACTIVITY_QUERY, &[&self.top]).await.map_err(PgError::Query)?;
        let statements = rows
            .iter()
            .map(|r| {
                Statement::from_row(
                    r.try_get::<_, Option<&str>>(0).ok().flatten(),
                    r.try_get::<_, Option<i64>>(1).ok().flatten(),
                    r.try_get::<_, Option<f64>>(2).ok().flatten(),
                    r.try_get::<_, Option<i64>>(3).ok().flatten(),
                )
            })
            .collect();
        Ok(Activity { at: SystemTime::now(), statements })
    }

    /// The backend process id of the sampler's own session (to measure what it costs).
    pub async fn backend_pid(&self) -> Result<i32, PgError> {
        let row =
            self.client.query_one("SELECT pg_backend_pid()", &[]).await.map_err(PgError::Query)?;
        row.try_get(0).map_err(PgError::Query)
    }
}

/// What one reading shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PgJudgement {
    /// Many copies of one statement, the oldest older than the callers' timeout.
    CallersLeft {
        /// The group.
        statement: Statement,
        /// The callers' timeout, seconds.
        caller_timeout_s: f64,
    },
    /// Many copies, the oldest older than [`PgOptions::old_s`] (no caller timeout given).
    OldQueue {
        /// The group.
        statement: Statement,
    },
    /// No group with many old copies.
    Quiet {
        /// Copies of the largest group (0 when nothing ran).
        largest: u64,
    },
}

impl PgJudgement {
    /// The judgement's name as the JSON and the timeline print it.
    pub fn as_str(&self) -> &'static str {
        match self {
            PgJudgement::CallersLeft { .. } => "callers_left",
            PgJudgement::OldQueue { .. } => "old_queue",
            PgJudgement::Quiet { .. } => "quiet",
        }
    }

    /// One sentence for a person.
    pub fn sentence(&self) -> String {
        let hidden = |s: &Statement| {
            if s.hidden() {
                " (the statement's text is hidden from this role: grant it pg_read_all_stats)"
            } else {
                ""
            }
        };
        let locks = |s: &Statement| {
            if s.waiting_on_locks > 0 {
                format!(", {} waiting on a lock", s.waiting_on_locks)
            } else {
                String::new()
            }
        };
        match self {
            PgJudgement::CallersLeft { statement: s, caller_timeout_s } => format!(
                "working for callers who have left: {} copies of `{}` running{}, the oldest {:.1} s \
                 old, callers give up after {:.1} s{}",
                s.running_copies,
                s.statement,
                locks(s),
                s.oldest_s,
                caller_timeout_s,
                hidden(s)
            ),
            PgJudgement::OldQueue { statement: s } => format!(
                "old queue: {} copies of `{}` running{}, the oldest {:.1} s old (give \
                 --caller-timeout to say whether their callers are still waiting){}",
                s.running_copies,
                s.statement,
                locks(s),
                s.oldest_s,
                hidden(s)
            ),
            PgJudgement::Quiet { largest: 0 } => "quiet: no statement running".to_string(),
            PgJudgement::Quiet { largest: 1 } => {
                "quiet: no statement running more than once".to_string()
            }
            PgJudgement::Quiet { largest } => format!(
                "quiet: at most {largest} copies of one statement running, none older than the limit"
            ),
        }
    }
}

/// What `activity` shows under `options` (see the module docs).
pub fn judge(activity: &Activity, options: &PgOptions) -> PgJudgement {
    let many = |s: &&Statement| s.running_copies >= options.min_copies.max(1);
    let limit = options.caller_timeout.map(|t| t.as_secs_f64());
    let old = |s: &&Statement| s.oldest_s > limit.unwrap_or(options.old_s);
    let worst = activity.statements.iter().filter(many).filter(old).max_by(|a, b| {
        a.running_copies.cmp(&b.running_copies).then(a.oldest_s.total_cmp(&b.oldest_s))
    });
    match (worst, limit) {
        (Some(s), Some(t)) => {
            PgJudgement::CallersLeft { statement: s.clone(), caller_timeout_s: t }
        }
        (Some(s), None) => PgJudgement::OldQueue { statement: s.clone() },
        (None, _) => PgJudgement::Quiet {
            largest: activity.statements.iter().map(|s| s.running_copies).max().unwrap_or(0),
        },
    }
}
