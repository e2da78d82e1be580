//! Your own service on the virtual lab.
//!
//! [`run_service`] puts a service of yours — an axum [`Router`] with its seawall layers, or
//! any tower service made into one — on the virtual lab's clock between the lab's open-loop
//! load and the lab's dependency, and runs a scenario through it: `params`' rate, duration,
//! deadline and fault, the dependency's capacity and workers. You build the service from a
//! [`Link`] to the dependency (a tower service of `http::Request<Empty<Bytes>>`, the inner
//! service of your client layers); the load arrives at your router as `GET /` with
//! `Request-Attempt: 1` and `Request-Timeout-Ms` (the deadline); the dependency answers
//! `GET /`. What comes back is the same [`Run`] — series, verdict, figures — the other labs
//! judge, so a user can see, before production does, whether the service recovers.
//!
//! What differs from the lab's own stacks: the lab cannot read your service's counters, so the
//! run has one tier, the dependency (its attempts per second are the storm's measure), and
//! wasted work is the dependency's own view — the share of its completed work whose caller
//! (your service) had already gone, by count — rather than the edge's.
//!
//! `crates/seawall-lab/examples/virtual_service.rs` is a checkout service written this way,
//! with a naive client and with seawall's; `tests/virtual_service.rs` runs it through a storm.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use seawall_report::{Results, Run};
use tower::ServiceExt;

use super::{InFlight, Link, align, get, guard, inject, rebase};
use crate::LabError;
use crate::config::{LabParams, Stack, VirtualParams};
use crate::loadgen::{self, LoadPlan};
use crate::node::dependency::{self, Dependency};
use crate::node::stats::StatsSnapshot;
use crate::node::{NodeSpec, Role, admin};
use crate::report;
use crate::run::Measured;

/// Runs `params` through the service `build` makes, on the current runtime (whose clock must
/// be paused: [`super::runtime`]), and judges it as the run named `name`. `dependency` says how
/// the lab's dependency serves: [`Stack::Baseline`], a database that finishes what it starts
/// whether its caller waits or not, or [`Stack::Seawall`], one behind `ShedLayer` that drops
/// work whose caller left.
///
/// Refuses a `--backend` or `--fleet` (nothing leaves the process) and stops with
/// [`LabError::BadInput`] past `v`'s budget, as [`super::run_stack`] does.
pub async fn run_service<F>(
    params: &LabParams,
    v: VirtualParams,
    dependency: Stack,
    name: &str,
    build: F,
) -> Result<Run, LabError>
where
    F: FnOnce(Link) -> Router,
{
    if params.backend.is_some() || params.fleet.is_some() {
        return Err(LabError::bad_input(
            "run_service",
            "a service on the virtual lab talks to the built-in dependency only: no backend or \
             fleet",
        ));
    }
    align().await;
    let in_flight = Arc::new(InFlight::default());
    let token = admin::random_token();
    let mut spec = NodeSpec::new(Role::Dependency, dependency, params, None);
    spec.admin_token = Some(token.clone());
    let auth = admin::auth(Role::Dependency.as_str(), spec.admin_token.as_deref())?;
    let dep = Arc::new(Dependency::new(&spec));
    let dep_router = dependency::router(dep.clone());
    let dep_admin = dependency::admin_router(&dep, &auth);
    let app =
        build(Link { to: dep_router.clone(), latency: v.latency, in_flight: in_flight.clone() });
    let edge = Link { to: app, latency: Duration::ZERO, in_flight: in_flight.clone() };

    let plan = LoadPlan::of(params);
    let secs = params.duration.as_secs_f64().ceil() as u64;
    let start = tokio::time::Instant::now();
    let wall = std::time::Instant::now();
    let load = loadgen::run_with(plan, move |req| {
        let call = edge.clone().oneshot(req);
        async move {
            let resp = call.await.ok()?;
            Some((resp.status(), resp.headers().clone()))
        }
    });
    let fault = inject(params, &dep_admin, &token, start);
    let read = |prev: Option<&StatsSnapshot>| {
        let dep_router = dep_router.clone();
        let prev = prev.copied();
        async move {
            let (_, stats) = get(&dep_router, "/lab/stats").await;
            let (status, page) = get(&dep_router, "/metrics").await;
            let name = Role::Dependency.as_str();
            let snap =
                crate::scrape::snapshot_of(name, &stats, (status == 200).then_some(&page[..]));
            vec![snap.ok().or(prev).unwrap_or_default()]
        }
    };
    let scrape = async {
        let mut ticks: Vec<Vec<StatsSnapshot>> = Vec::new();
        for k in 0..=secs {
            tokio::time::sleep_until(start + Duration::from_secs(k)).await;
            let r = read(ticks.last().map(|r| &r[0])).await;
            ticks.push(r);
        }
        ticks
    };
    let work = async { tokio::join!(load, fault, scrape) };
    let (load, fault, mut ticks) = tokio::select! {
        biased;
        e = guard(&in_flight, v, start, wall) => return Err(e),
        r = work => r,
    };
    fault?;
    let drained = read(ticks.last().map(|r| &r[0])).await;
    ticks.push(drained);
    rebase(&mut ticks);
    let last = ticks.last().map(|r| r[0]).unwrap_or_default();
    let m = Measured { stack: None, load, ticks, pg: Vec::new(), cpu: Vec::new() };
    let (mut run, _) = report::to_run(params, &m);
    run.policy = name.to_string();
    run.wasted_work =
        if last.completed == 0 { 0.0 } else { last.wasted as f64 / last.completed as f64 };
    Ok(run)
}

/// The [`Results`] of services run with [`run_service`] under `params`: one tier, the
/// dependency, and the runs given (say, the service before and after a change).
pub fn service_results(params: &LabParams, service: &str, runs: Vec<Run>) -> Results {
    let what = format!("virtual lab: {service},");
    let tiers = vec![Role::Dependency.as_str().to_string()];
    report::results(params, "virtual-service", &what, tiers, runs)
}
