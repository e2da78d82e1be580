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
use crate::scrape::Admin;

/// What one configuration's run measured, before it is turned into a report.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// The configuration.
    pub stack: Option<Stack>,
    /// The load generator's per-second counts.
    pub load: LoadCounts,
    /// `ticks[k][tier]`: each tier's counters at `k` seconds (k = 0 ..= duration), top first.
    pub ticks: Vec<Vec<StatsSnapshot>>,
}

/// Extra time a node may live beyond the run (start-up, drain), after which it exits by itself.
const NODE_GRACE: Duration = Duration::from_secs(30);

/// Starts the stack for `stack`, returning the handles top (edge) first.
pub async fn start_stack(
    params: &LabParams,
    stack: Stack,
    launcher: &Launcher,
) -> Result<Vec<NodeHandle>, LabError> {
    let max_runtime = params.duration + params.deadline + NODE_GRACE;
    let mut handles: Vec<NodeHandle> = Vec::new();
    let mut downstream = None;
    for role in Role::ALL.iter().rev() {
        let spec = NodeSpec::new(*role, stack, params, downstream.take());
        let h = launcher.spawn(&spec, max_runtime).await?;
        downstream = Some(h.url());
        handles.push(h);
    }
    handles.reverse();
    Ok(handles)
}

/// Runs `stack` under `params` and returns the measurements. Every node is stopped on return,
/// on error, and if the future is dropped (Ctrl-C).
pub async fn run_stack(
    params: &LabParams,
    stack: Stack,
    launcher: &Launcher,
) -> Result<Measured, LabError> {
    let nodes = start_stack(params, stack, launcher).await?;
    let urls: Vec<String> = nodes.iter().map(NodeHandle::url).collect();
    let admin = Admin::default();
    let plan = LoadPlan {
        rate: params.rate,
        rate_end: params.ramp_to.unwrap_or(params.rate),
        duration: params.duration,
        deadline: params.deadline,
    };
    let secs = params.duration.as_secs_f64().ceil() as u64;
    let start = Instant::now();

    let scraper = {
        let (admin, urls) = (admin.clone(), urls.clone());
        tokio::spawn(async move {
            let mut ticks = Vec::new();
            for k in 0..=secs {
                tokio::time::sleep_until(start + Duration::from_secs(k)).await;
                let mut row = Vec::with_capacity(urls.len());
                for u in &urls {
                    // A missed scrape repeats the previous value (a zero-rate second), rather
                    // than failing the whole run.
                    let prev =
                        ticks.last().and_then(|r: &Vec<StatsSnapshot>| r.get(row.len()).copied());
                    row.push(admin.stats(u).await.ok().or(prev).unwrap_or_default());
                }
                ticks.push(row);
            }
            ticks
        })
    };
    let fault = params.fault.map(|f| {
        let (admin, url, at) = (admin.clone(), urls[urls.len() - 1].clone(), params.at);
        tokio::spawn(async move {
            tokio::time::sleep_until(start + at).await;
            admin.inject(&url, f).await
        })
    });
    let load = loadgen::run(&urls[0], plan).await;
    let ticks = scraper.await.map_err(|e| LabError::node("scraper", e.to_string()))?;
    if let Some(f) = fault {
        f.await.map_err(|e| LabError::node("fault", e.to_string()))??;
    }
    drop(nodes);
    Ok(Measured { stack: Some(stack), load, ticks })
}
