//! The virtual lab: the lab's own tiers on a virtual clock, connected in memory.
//!
//! The process lab runs each tier as a process on loopback, where two cores cap the storm it
//! can produce. The virtual lab runs the *same node code* — [`Tier::over`] and
//! [`Dependency::new`], their axum routers, the same `RetryLayer` / `FailFastLayer` /
//! `ShedLayer` / `DeadlineLayer` stacks configured by the same functions — in one
//! current-thread Tokio runtime whose clock is paused ([`tokio::time::pause`]): it advances
//! only when every task waits on a timer, straight to the next one. A 60 s run takes the CPU
//! time its requests cost, not 60 s, and the storm is not capped by the machine.
//!
//! What differs from the process lab is only the transport and the clock:
//!
//! - **Links**: a tier's downstream calls go through [`Link`], a tower service that waits a
//!   one-way latency, calls the next node's router in memory, and waits the latency back. A
//!   caller that gives up (a per-try timeout, a deadline) drops the call, and with it the
//!   callee's handler — as hyper cancels a handler whose client disconnected. No bytes are
//!   encoded: HTTP parsing is the one layer of the real stack left out.
//! - **Clock**: every timer — per-try timeouts, backoff, the dependency's service time,
//!   deadlines — is Tokio's, and the lab's node code reads [`tokio::time::Instant`], so all of
//!   it runs on virtual time. Nothing measures the machine ([`crate::saturation`] has nothing to
//!   say): figures are never lower bounds.
//! - **Determinism**: one thread, a paused clock and seeded jitter make a run a function of its
//!   parameters: the same seed gives byte-identical results.
//!
//! The load is the process lab's open-loop schedule ([`loadgen::run_with`]); the dependency's
//! faults arrive through its admin router with the stack's token, as the process lab sends
//! them; each second every node's `/lab/stats` and `/metrics` are read in memory and turned into
//! the same [`Measured`] the process lab produces, so results, report and verdict are built
//! by the same code.
//!
//! Why not turmoil (tokio's network simulator): it would run each tier as a host over a
//! simulated TCP, hyper included, which keeps HTTP/1.1 parsing in the loop but costs every hop
//! its encoding, and the verification scale (54,000 attempts a second at the dependency) is
//! out of reach on two cores then. The layers under test sit above the transport; the
//! in-memory link keeps all of them.
//!
//! # Bounds
//!
//! [`Budget`] caps the requests in flight (default 200,000) and the run's wall time (default
//! 10 minutes): a scenario past either stops with [`LabError::BadInput`] saying which, instead
//! of exhausting memory.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Empty};
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use crate::LabError;
use crate::config::{LabParams, Stack};
use crate::loadgen::{self, LoadPlan};
use crate::node::client::{Inner, InnerError};
use crate::node::dependency::{self, Dependency};
use crate::node::stats::StatsSnapshot;
use crate::node::tier::{self, Tier};
use crate::node::{NodeSpec, Role, admin};
use crate::run::Measured;

pub use crate::config::{Budget, DEFAULT_LATENCY, VirtualParams};
pub use service::{run_service, service_results};

mod service;

/// Requests in flight on the links, and the highest count seen.
#[derive(Debug, Default)]
struct InFlight {
    now: AtomicU64,
    peak: AtomicU64,
}

/// A downstream link: waits the latency, calls `to` in memory, waits the latency back.
#[derive(Debug, Clone)]
pub struct Link {
    to: Router,
    latency: Duration,
    in_flight: Arc<InFlight>,
}

struct Leave(Arc<InFlight>);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::Relaxed);
    }
}

impl tower::Service<Request<Empty<Bytes>>> for Link {
    type Response = Response<()>;
    type Error = InnerError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<()>, InnerError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), InnerError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Empty<Bytes>>) -> Self::Future {
        let (to, latency, in_flight) = (self.to.clone(), self.latency, self.in_flight.clone());
        Box::pin(async move {
            let n = in_flight.now.fetch_add(1, Ordering::Relaxed) + 1;
            in_flight.peak.fetch_max(n, Ordering::Relaxed);
            let _leave = Leave(in_flight);
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            let (parts, _) = req.into_parts();
            let resp = to.oneshot(Request::from_parts(parts, Body::empty())).await;
            let resp = match resp {
                Ok(r) => r,
                Err(never) => match never {},
            };
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            let (parts, _) = resp.into_parts();
            Ok(Response::from_parts(parts, ()))
        })
    }
}

/// A stack in memory, top (edge) first.
struct Nodes {
    apps: Vec<Router>,
    dependency_admin: Router,
    token: String,
}

/// Builds `stack`'s four nodes bottom-up, each tier's downstream a [`Link`] to the next.
fn build(
    params: &LabParams,
    stack: Stack,
    v: VirtualParams,
    in_flight: &Arc<InFlight>,
) -> Result<Nodes, LabError> {
    let token = admin::random_token();
    let mut spec = NodeSpec::new(Role::Dependency, stack, params, None);
    spec.admin_token = Some(token.clone());
    let auth = admin::auth(Role::Dependency.as_str(), spec.admin_token.as_deref())?;
    let dep = Arc::new(Dependency::new(&spec));
    let mut apps = vec![dependency::router(dep.clone())];
    let dependency_admin = dependency::admin_router(&dep, &auth);
    for role in [Role::Order, Role::Gateway, Role::Edge] {
        let below = apps.last().expect("the dependency is built first").clone();
        let label = format!("http://{}.virtual/", Role::ALL[role as usize + 1].as_str());
        let mut spec = NodeSpec::new(role, stack, params, Some(label.clone()));
        spec.admin_token = Some(token.clone());
        let link = Link { to: below, latency: v.latency, in_flight: in_flight.clone() };
        let inner: Inner = BoxCloneSyncService::new(link);
        let tier = Tier::over(&spec, &label, inner)?;
        apps.push(tier::router(tier));
    }
    apps.reverse();
    Ok(Nodes { apps, dependency_admin, token })
}

async fn get(app: &Router, path: &str) -> (u16, Bytes) {
    let req = Request::builder()
        .method(Method::GET)
        .uri(path)
        .body(Body::empty())
        .expect("valid request");
    let resp = match app.clone().oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    (status, body)
}

async fn row(nodes: &Nodes, prev: Option<&Vec<StatsSnapshot>>) -> Vec<StatsSnapshot> {
    let mut out = Vec::with_capacity(nodes.apps.len());
    for (i, app) in nodes.apps.iter().enumerate() {
        let (_, stats) = get(app, "/lab/stats").await;
        let (status, page) = get(app, "/metrics").await;
        let name = Role::ALL[i].as_str();
        let snap = crate::scrape::snapshot_of(name, &stats, (status == 200).then_some(&page[..]));
        out.push(snap.ok().or_else(|| prev.and_then(|p| p.get(i).copied())).unwrap_or_default());
    }
    out
}

/// Runs `stack` under `params` on the current runtime, whose clock must be paused
/// ([`runtime`] makes such a runtime), and returns the same measurements as
/// [`crate::run::run_stack`].
pub async fn run_stack(
    params: &LabParams,
    stack: Stack,
    v: VirtualParams,
) -> Result<Measured, LabError> {
    if params.backend.is_some() || params.fleet.is_some() || params.otlp.is_some() {
        return Err(LabError::bad_input(
            "--virtual",
            "the virtual lab runs the built-in dependency with nothing outside the process: \
             no --backend, --fleet or --otlp (its clock is not the wall clock spans carry; and \
             no nodes to reach: --hold has nothing to hold)",
        ));
    }
    align().await;
    let in_flight = Arc::new(InFlight::default());
    let nodes = build(params, stack, v, &in_flight)?;
    let plan = LoadPlan::of(params);
    let secs = params.duration.as_secs_f64().ceil() as u64;
    let start = tokio::time::Instant::now();
    let wall = std::time::Instant::now();
    // The generator reaches the edge through a link of its own (no latency: the load is
    // measured at the edge), so in-flight counting and the call are the tiers' own.
    let edge =
        Link { to: nodes.apps[0].clone(), latency: Duration::ZERO, in_flight: in_flight.clone() };
    let load = loadgen::run_with(plan, move |req| {
        let call = edge.clone().oneshot(req);
        async move {
            let resp = call.await.ok()?;
            Some((resp.status(), resp.headers().clone()))
        }
    });
    let fault = inject(params, &nodes.dependency_admin, &nodes.token, start);
    let scrape = async {
        let mut ticks: Vec<Vec<StatsSnapshot>> = Vec::new();
        for k in 0..=secs {
            tokio::time::sleep_until(start + Duration::from_secs(k)).await;
            let r = row(&nodes, ticks.last()).await;
            ticks.push(r);
        }
        ticks
    };
    let guard = guard(&in_flight, v, start, wall);
    let work = async { tokio::join!(load, fault, scrape) };
    let (load, fault, mut ticks) = tokio::select! {
        biased;
        e = guard => return Err(e),
        r = work => r,
    };
    fault?;
    let drained = row(&nodes, ticks.last()).await;
    ticks.push(drained);
    rebase(&mut ticks);
    Ok(Measured { stack: Some(stack), load, ticks, pg: Vec::new(), cpu: Vec::new() })
}

/// Waits until the paused clock reads a whole hour. The core's windows slot time by its
/// absolute reading, and a paused runtime's clock starts wherever the wall clock was when it
/// was built: starting every run on a whole hour of that clock (a free wait on a paused clock)
/// puts every slot boundary at the same offset from the run's start, whenever and however
/// often the run is made.
async fn align() {
    use seawall::time::Clock;
    const ALIGN_NS: u64 = 3_600_000_000_000;
    let now = seawall_tower::time::TokioClock.now().as_nanos();
    tokio::time::sleep(Duration::from_nanos(ALIGN_NS - now % ALIGN_NS)).await;
}

/// Starts `params`' fault at its time, through the dependency's admin router and its token,
/// as the process lab sends it.
async fn inject(
    params: &LabParams,
    admin_router: &Router,
    token: &str,
    start: tokio::time::Instant,
) -> Result<(), LabError> {
    let Some(f) = params.fault else { return Ok(()) };
    tokio::time::sleep_until(start + params.at).await;
    let (kind, ms) = (f.kind.as_str(), f.duration.as_millis());
    let req = Request::builder()
        .method(Method::POST)
        .uri(format!("{}/{kind}/{ms}", admin::FAULT_PATH))
        .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::empty())
        .expect("valid request");
    let resp = match admin_router.clone().oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    match resp.status().as_u16() {
        204 => Ok(()),
        s => Err(LabError::node("dependency", format!("fault injection answered {s}"))),
    }
}

/// Checks the bounds every 100 ms of virtual time; ends only with the error of a bound passed.
async fn guard(
    in_flight: &InFlight,
    v: VirtualParams,
    start: tokio::time::Instant,
    wall: std::time::Instant,
) -> LabError {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let n = in_flight.now.load(Ordering::Relaxed);
        if n > v.budget.max_in_flight {
            return LabError::bad_input(
                "--virtual",
                format!(
                    "{n} requests in flight at {:.1} s, over the budget of {}: this scenario \
                     would not fit in memory; lower --rate or --duration",
                    start.elapsed().as_secs_f64(),
                    v.budget.max_in_flight
                ),
            );
        }
        if wall.elapsed() > v.budget.max_wall {
            return LabError::bad_input(
                "--virtual",
                format!(
                    "the run took over {} s of wall time by {:.1} s of virtual time; lower --rate or --duration",
                    v.budget.max_wall.as_secs(),
                    start.elapsed().as_secs_f64()
                ),
            );
        }
    }
}

/// Each node's `at_s` counts from the first reading in this process; from this run's first
/// reading instead, so the figures do not depend on what ran before in the same process.
fn rebase(ticks: &mut [Vec<StatsSnapshot>]) {
    for tier in 0..ticks.first().map_or(0, Vec::len) {
        let origin = ticks[0][tier].at_s;
        for row in ticks.iter_mut() {
            row[tier].at_s -= origin;
        }
    }
}

/// A current-thread runtime with a paused clock, for [`run_stack`] (through
/// [`crate::Launcher::Virtual`] and [`crate::run_lab`]).
pub fn runtime() -> Result<tokio::runtime::Runtime, LabError> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?)
}
