//! One configuration's run: start the stack bottom-up, scrape it each second, inject the fault,
//! drive the load, stop everything.

use std::time::Duration;

use tokio::time::Instant;

use crate::LabError;
use crate::config::{LabParams, Stack};
use crate::launch::{Launcher, NodeHandle};
use crate::loadgen::{self, LoadCounts, LoadPlan};
use crate::node::stats::StatsSnapshot;
use crate::node::{NodeSpec, Role};
use crate::pg::{PgLab, PgSample};
use crate::scrape::Admin;

/// What one configuration's run measured, before it is turned into a report.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// The configuration.
    pub stack: Option<Stack>,
    /// The load generator's per-second counts.
    pub load: LoadCounts,
    /// `ticks[k][tier]`: each tier's counters at `k` seconds (k = 0 ..= duration), top first,
    /// then one last reading once every request has ended (the run's totals, drain included).
    /// With `--backend` the bottom "tier" is the order service's PostgreSQL pool.
    pub ticks: Vec<Vec<StatsSnapshot>>,
    /// With `--backend`: the `pg_stat_activity` reading at each second (k = 0 ..= duration).
    pub pg: Vec<PgSample>,
    /// The machine's CPU busy share in each second of the load ([`crate::saturation`]).
    pub cpu: Vec<f64>,
}

/// Where a running node can be reached: what `seawall detect --scrape` and `seawall escape
/// --admission-url` take. Written to [`LabParams::nodes_file`] when a stack is up.
///
/// The admin URLs are on the node's admin listener, not its traffic port, and want
/// `Authorization: Bearer <token>` ([`StackInfo::admin_token`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeInfo {
    /// Which tier (or `postgres` for the order service's pool).
    pub role: String,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Prometheus page: `seawall_client_*` (tiers) and `seawall_server_*` (every node).
    pub metrics: String,
    /// The admin listener, `http://127.0.0.1:ADMIN_PORT`.
    pub admin: String,
    /// The admission knob: `GET` → `{"admit_percent":N}`, `POST ?percent=N`.
    pub admission: String,
    /// The client layer's retry switch (tiers only): `GET` → `{"retry_percent":N}`,
    /// `POST ?action=off|ramp|on` or `?percent=N`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retries: Option<String>,
    /// `POST ?older_than_ms=N`: from then on, queued work older than N ms is dropped (the
    /// dependency only; 0 turns it off).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub flush: Option<String>,
}

/// The running stack of one configuration, as written to [`LabParams::nodes_file`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StackInfo {
    /// `baseline` or `seawall`.
    pub stack: String,
    /// The fleet switch the tiers follow, if any (`redis://…[#KEY]`).
    pub fleet: Option<String>,
    /// Seconds after the load starts that the fault starts, and how long it lasts.
    pub fault_at_s: Option<f64>,
    /// How long the fault lasts, seconds.
    pub fault_s: Option<f64>,
    /// How long the load runs, seconds (the stack goes down after it).
    pub duration_s: f64,
    /// Top (edge) first.
    pub nodes: Vec<NodeInfo>,
    /// The file holding [`admin_token`](Self::admin_token) (mode 0600), when the stack was
    /// started with a [`LabParams::nodes_file`]: what `seawall escape --admin-token-file` takes.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub admin_token_file: Option<std::path::PathBuf>,
    /// The bearer token every admin URL wants. Never written to the nodes file.
    #[serde(skip)]
    pub admin_token: String,
}

impl StackInfo {
    /// The stack whose nodes (top first) serve traffic at `urls` and admin at `admin_urls`, for
    /// `params`, its admin endpoints behind `admin_token`.
    pub fn new(
        params: &LabParams,
        stack: Stack,
        urls: &[String],
        admin_urls: &[String],
        admin_token: &str,
    ) -> Self {
        use crate::node::admin::{ADMISSION_PATH, FLUSH_PATH, RETRIES_PATH};
        let nodes = urls
            .iter()
            .zip(admin_urls)
            .zip(Role::ALL)
            .map(|((u, a), role)| NodeInfo {
                role: role.as_str().to_string(),
                url: u.clone(),
                metrics: format!("{u}/metrics"),
                admin: a.clone(),
                admission: format!("{a}{ADMISSION_PATH}"),
                retries: (role != Role::Dependency).then(|| format!("{a}{RETRIES_PATH}")),
                flush: (role == Role::Dependency).then(|| format!("{a}{FLUSH_PATH}")),
            })
            .collect();
        StackInfo {
            stack: stack.as_str().to_string(),
            fleet: params.fleet.clone(),
            fault_at_s: params.fault.map(|_| params.at.as_secs_f64()),
            fault_s: params.fault.map(|f| f.duration.as_secs_f64()),
            duration_s: params.duration.as_secs_f64(),
            nodes,
            admin_token_file: None,
            admin_token: admin_token.to_string(),
        }
    }

    /// The metrics URLs, edge first: `seawall detect --scrape …` / `seawall escape --scrape …`.
    pub fn scrape_urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.metrics.clone()).collect()
    }

    /// Human-readable lines: each node's metrics and admin URLs, and the commands to point at
    /// them.
    pub fn describe(&self) -> String {
        let mut out = format!("seawall lab: {} stack is up\n", self.stack);
        for n in &self.nodes {
            out.push_str(&format!(
                "  {:<10} metrics {}  admission {}{}{}\n",
                n.role,
                n.metrics,
                n.admission,
                n.retries.as_ref().map_or(String::new(), |r| format!("  retries {r}")),
                n.flush.as_ref().map_or(String::new(), |f| format!("  flush {f}"))
            ));
        }
        out.push_str(&format!(
            "  detect: seawall detect --scrape {}\n",
            self.scrape_urls().join(" ")
        ));
        match &self.admin_token_file {
            Some(f) => out.push_str(&format!(
                "  admin URLs want `Authorization: Bearer $(cat {p})`; \
                 seawall escape --admin-token-file {p}\n",
                p = f.display()
            )),
            None => out.push_str(&format!(
                "  admin URLs want `Authorization: Bearer {}`\n",
                self.admin_token
            )),
        }
        out
    }
}

/// Extra time a node may live beyond the run (start-up, drain), after which it exits by itself.
const NODE_GRACE: Duration = Duration::from_secs(30);

/// Starts the stack for `stack`, returning the handles top (edge) first.
///
/// With a PostgreSQL backend (`pg`) there is no dependency node: the order service queries the
/// database's `pg.table()` itself.
pub async fn start_stack(
    params: &LabParams,
    stack: Stack,
    launcher: &Launcher,
    pg: Option<&PgLab>,
    admin_token: &str,
) -> Result<Vec<NodeHandle>, LabError> {
    let max_runtime = params.duration + params.deadline + NODE_GRACE;
    let mut handles: Vec<NodeHandle> = Vec::new();
    let mut downstream = None;
    let roles = if pg.is_some() { &Role::ALL[..3] } else { &Role::ALL[..] };
    for role in roles.iter().rev() {
        let mut spec = NodeSpec::new(*role, stack, params, downstream.take());
        spec.backend_table = pg.map(|p| p.table().to_string()).filter(|_| spec.backend.is_some());
        spec.admin_token = Some(admin_token.to_string());
        let h = launcher.spawn(&spec, max_runtime).await?;
        downstream = Some(h.url());
        handles.push(h);
    }
    handles.reverse();
    Ok(handles)
}

/// Runs `stack` under `params` and returns the measurements. Every node is stopped on return,
/// on error, and if the future is dropped (Ctrl-C). `pg` is the PostgreSQL backend, if any.
///
/// Once the stack is up, its [`StackInfo`] is handed to `announce` and written to
/// [`LabParams::nodes_file`] (if set), with its admin token beside it in `admin-token` (mode
/// 0600). The token is drawn at random for each stack ([`crate::node::admin::random_token`]).
pub async fn run_stack(
    params: &LabParams,
    stack: Stack,
    launcher: &Launcher,
    pg: Option<&PgLab>,
    announce: &mut dyn FnMut(&StackInfo),
) -> Result<Measured, LabError> {
    let token = crate::node::admin::random_token();
    let nodes = start_stack(params, stack, launcher, pg, &token).await?;
    let urls: Vec<String> = nodes.iter().map(NodeHandle::url).collect();
    let admin_urls: Vec<String> = nodes.iter().map(NodeHandle::admin_url).collect();
    let mut info = StackInfo::new(params, stack, &urls, &admin_urls, &token);
    if let Some(path) = &params.nodes_file {
        let token_file = path.with_file_name("admin-token");
        write_private(&token_file, &token)?;
        info.admin_token_file = Some(token_file);
        let json = serde_json::to_string_pretty(&info).expect("serializes");
        // Written whole, then renamed, so a tool polling for the file never reads half of it.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, json)?;
        std::fs::rename(&tmp, path)?;
    }
    announce(&info);
    // The order service (third node) reports its PostgreSQL pool as the bottom tier.
    let backend_of = pg.map(|_| urls[2].clone());
    let admin = Admin::default();
    let plan = LoadPlan::of(params);
    let secs = params.duration.as_secs_f64().ceil() as u64;
    let start = Instant::now();

    let scraper = {
        let (admin, urls, backend_of) = (admin.clone(), urls.clone(), backend_of.clone());
        tokio::spawn(async move {
            let mut ticks: Vec<Vec<StatsSnapshot>> = Vec::new();
            for k in 0..=secs {
                tokio::time::sleep_until(start + Duration::from_secs(k)).await;
                let row = scrape_row(&admin, &urls, backend_of.as_deref(), ticks.last()).await;
                ticks.push(row);
            }
            ticks
        })
    };
    let fault = async {
        let Some(f) = params.fault else { return Ok(()) };
        tokio::time::sleep_until(start + params.at).await;
        match pg {
            Some(pg) => pg.fault(f).await,
            None => admin.inject(&admin_urls[admin_urls.len() - 1], &token, f).await,
        }
    };
    // The pg_stat_activity query once a second, on the same clock as the scrapes.
    let monitor = async {
        let mut out = Vec::new();
        let Some(pg) = pg else { return out };
        for k in 0..=secs {
            tokio::time::sleep_until(start + Duration::from_secs(k)).await;
            out.push(pg.sample().await.unwrap_or_default());
        }
        out
    };
    let cpu = crate::saturation::sample_each_second(start, secs);
    let (load, fault, pg_samples, cpu) =
        tokio::join!(loadgen::run(&urls[0], plan), fault, monitor, cpu);
    let mut ticks = scraper.await.map_err(|e| LabError::node("scraper", e.to_string()))?;
    // Once every request has ended (the generator waits out the last deadline), one more
    // reading: the totals over the run and its drain, as the simulator counts them.
    let drained = scrape_row(&admin, &urls, backend_of.as_deref(), ticks.last()).await;
    ticks.push(drained);
    fault?;
    drop(nodes);
    Ok(Measured { stack: Some(stack), load, ticks, pg: pg_samples, cpu })
}

/// One reading of every node (top first, then the PostgreSQL pool with `backend_of`, the order
/// service's URL). A missed scrape repeats the value in `prev` (a zero-rate second), rather than
/// failing the whole run.
async fn scrape_row(
    admin: &Admin,
    urls: &[String],
    backend_of: Option<&str>,
    prev: Option<&Vec<StatsSnapshot>>,
) -> Vec<StatsSnapshot> {
    let prev_at = |i: usize| prev.and_then(|r| r.get(i).copied());
    let mut row = Vec::with_capacity(urls.len() + 1);
    for u in urls {
        row.push(admin.stats(u).await.ok().or(prev_at(row.len())).unwrap_or_default());
    }
    if let Some(order) = backend_of {
        row.push(admin.backend_stats(order).await.ok().or(prev_at(3)).unwrap_or_default());
    }
    row
}

/// Writes `contents` to a fresh file at `path` that only its owner can read (mode 0600 on Unix;
/// an old file is removed first, since the mode only applies on creation).
fn write_private(path: &std::path::Path, contents: &str) -> Result<(), LabError> {
    use std::io::Write;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    let mut f = open.open(path)?;
    f.write_all(contents.as_bytes())?;
    Ok(())
}
