//! Escape for a mesh: turn the proxies' retries off, then ramp them back, with the mesh's own
//! switches.
//!
//! - **Istio**: a VirtualService's `http[].retries.attempts` (Istio retries twice by default
//!   when a route sets nothing). Off is `attempts: 0`; the ramp restores the attempts one at a
//!   time. Each change is a `kubectl patch --type=json` of one route, printed so it can be
//!   pasted, or run with `--apply`.
//! - **Envoy**: the runtime key `upstream.use_retry`, the percentage of requests eligible for a
//!   retry (Envoy's router docs, "Runtime"; default 100), set through the admin endpoint's
//!   `POST /runtime_modify?upstream.use_retry=N`. Off is 0; the ramp is the usual stages.
//!
//! Nothing is changed without `apply`; an unreachable target is reported with what would have
//! been done.
//!
//! [`run_plan`] carries a plan out. Given a way to read the edge's goodput share (goodput over
//! edge requests, through the dialect's own queries: `seawall escape --prometheus`), it watches
//! like the seawall actuators do: after retries are off it waits for goodput to return (at
//! least 90 %), then holds each ramp stage, and when goodput falls by more than 10 points it
//! sets the previous stage again and stops there.

use std::fmt;
use std::time::Duration;

/// One change to the mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MeshStep {
    /// A `kubectl` command line (program and arguments).
    Kubectl(Vec<String>),
    /// An Envoy admin `POST` URL.
    EnvoyRuntime(String),
}

impl fmt::Display for MeshStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MeshStep::Kubectl(args) => {
                let quoted: Vec<String> = args
                    .iter()
                    .map(|a| {
                        if a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:".contains(c)) {
                            a.clone()
                        } else {
                            format!("'{}'", a.replace('\'', "'\\''"))
                        }
                    })
                    .collect();
                write!(f, "{}", quoted.join(" "))
            }
            MeshStep::EnvoyRuntime(url) => write!(f, "curl -X POST '{url}'"),
        }
    }
}

/// `kubectl patch` of route `route` of VirtualService `name` to `attempts` retries.
pub fn istio_patch(namespace: &str, name: &str, route: usize, attempts: u32) -> MeshStep {
    let patch = format!(
        r#"[{{"op":"add","path":"/spec/http/{route}/retries","value":{{"attempts":{attempts}}}}}]"#
    );
    MeshStep::Kubectl(
        ["kubectl", "-n", namespace, "patch", "virtualservice", name, "--type=json", "-p", &patch]
            .map(String::from)
            .to_vec(),
    )
}

/// The admin URL setting `upstream.use_retry` to `percent` on the Envoy at `admin`.
pub fn envoy_runtime(admin: &str, percent: u8) -> MeshStep {
    MeshStep::EnvoyRuntime(format!(
        "{}/runtime_modify?upstream.use_retry={}",
        admin.trim_end_matches('/'),
        percent.min(100)
    ))
}

/// The Istio plan: attempts 0 on every route, then back one attempt at a time to `attempts`.
///
/// ```
/// let plan = seawall_escape::mesh::istio_plan("shop", "reviews", &[0], 2);
/// assert_eq!(plan.len(), 3);
/// assert!(plan[0][0].to_string().contains(r#""value":{"attempts":0}"#));
/// ```
pub fn istio_plan(
    namespace: &str,
    name: &str,
    routes: &[usize],
    attempts: u32,
) -> Vec<Vec<MeshStep>> {
    (0..=attempts)
        .map(|a| routes.iter().map(|&r| istio_patch(namespace, name, r, a)).collect())
        .collect()
}

/// The Envoy plan: 0 %, then each ramp stage.
pub fn envoy_plan(admins: &[String], ramp: &[u8]) -> Vec<Vec<MeshStep>> {
    std::iter::once(0)
        .chain(ramp.iter().copied())
        .map(|p| admins.iter().map(|a| envoy_runtime(a, p)).collect())
        .collect()
}

/// Carries out one step: runs `kubectl`, or POSTs to the admin URL (5 s timeout).
pub fn apply(step: &MeshStep) -> Result<String, String> {
    match step {
        MeshStep::Kubectl(args) => {
            let out = std::process::Command::new(&args[0])
                .args(&args[1..])
                .output()
                .map_err(|e| format!("cannot run {}: {e}", args[0]))?;
            let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() {
                Ok(text)
            } else {
                Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
            }
        }
        MeshStep::EnvoyRuntime(url) => post(url),
    }
}

fn post(url: &str) -> Result<String, String> {
    use http_body_util::{BodyExt, Empty, Limited};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let uri: http::Uri = url.parse().map_err(|_| format!("{url}: not a URL"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!("{url}: expected http://HOST:PORT (the Envoy admin listener)"));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
        let req = http::Request::post(uri).body(Empty::new()).map_err(|e| e.to_string())?;
        let call = async {
            let resp = client.request(req).await.map_err(|e| format!("{url}: {e}"))?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), 64 << 10)
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            let body = String::from_utf8_lossy(&body.to_bytes()).trim().to_string();
            if status.is_success() {
                Ok(body)
            } else {
                Err(format!("{url}: status {status}: {body}"))
            }
        };
        tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .map_err(|_| format!("{url}: no answer within 5 s"))?
    })
}

/// Goodput share (of edge requests) at which the dependency counts as back.
const RECOVERED: f64 = 0.9;
/// A fall in goodput share this large during a ramp stage is a regression.
const REGRESSION: f64 = 0.1;
/// Failed reads in a row that end the watch (the ramp does not go on blind).
const MAX_FAILED_READS: u32 = 3;

/// How [`run_plan`] watches goodput between the stages.
pub struct RampWatch<'a> {
    /// The edge's goodput share now, in [0, 1]; `Err` when it cannot be read.
    pub goodput: &'a mut dyn FnMut() -> Result<f64, String>,
    /// Seconds between reads.
    pub interval: Duration,
    /// How long to wait for goodput to return once retries are off.
    pub max_wait: Duration,
}

/// How a mesh plan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MeshOutcome {
    /// Dry run: nothing was changed.
    DryRun,
    /// Every stage was applied (and, when watched, held).
    Completed,
    /// Stopped with the mesh left at stage `stage` of the plan (0: retries off).
    Stopped {
        /// The stage left in place.
        stage: usize,
        /// Why.
        reason: String,
    },
}

impl fmt::Debug for RampWatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RampWatch")
            .field("interval", &self.interval)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

fn intervals(d: Duration, every: Duration) -> u32 {
    let n = d.as_secs_f64() / every.as_secs_f64().max(1e-3);
    (n.ceil() as u32).max(1)
}

/// Carries out `plan` (stage 0: retries off; then the ramp), one stage per `hold`.
///
/// `act` applies one step ([`apply`] for real); `wait` sleeps (injected, so tests run without a clock). Without
/// `apply` every step is printed and nothing is touched. With a `watch`, see the [module
/// docs](self). A step that fails ends the run: the error, after printing every step not made.
#[allow(clippy::too_many_arguments)]
pub fn run_plan(
    plan: &[Vec<MeshStep>],
    what: &str,
    hold: Duration,
    apply: bool,
    act: &mut dyn FnMut(&MeshStep) -> Result<String, String>,
    mut watch: Option<RampWatch<'_>>,
    wait: &mut dyn FnMut(Duration),
    say: &mut dyn FnMut(&str),
) -> Result<MeshOutcome, String> {
    let all: Vec<&MeshStep> = plan.iter().flatten().collect();
    let mut done = 0usize;
    let mut set = |stage: usize, done: &mut usize, say: &mut dyn FnMut(&str)| {
        for step in &plan[stage] {
            say(&format!("  {step}"));
            if !apply {
                continue;
            }
            if let Err(e) = act(step) {
                say(&format!("  FAILED: {e}"));
                say("not done (what would have been done):");
                for rest in &all[(*done).min(all.len())..] {
                    say(&format!("  {rest}"));
                }
                return Err(format!("the mesh could not be changed: {e}"));
            }
            *done += 1;
        }
        Ok(())
    };
    let watching = if watch.is_some() { ", watching goodput" } else { "" };
    let mut before = None;
    for (i, _) in plan.iter().enumerate() {
        if i == 0 {
            say(&format!("step 1: retries off ({what})"));
        } else {
            say(&format!(
                "step {}: ramp back, stage {i} of {}; hold {:.0} s{watching}",
                i + 1,
                plan.len() - 1,
                hold.as_secs_f64()
            ));
        }
        set(i, &mut done, say)?;
        if !apply {
            continue;
        }
        let Some(w) = watch.as_mut() else {
            if i + 1 < plan.len() {
                wait(hold);
            }
            continue;
        };
        let result = if i == 0 {
            until_recovered(w, wait, say)
        } else {
            hold_stage(w, intervals(hold, w.interval), before, wait, say)
        };
        match result {
            Ok(share) => before = Some(share),
            Err(reason) if i == 0 => return Ok(stopped(say, 0, reason)),
            Err(reason) => {
                say(&format!(
                    "step {}: regression: {reason}; setting stage {} again",
                    i + 1,
                    i - 1
                ));
                set(i - 1, &mut done, say)?;
                return Ok(stopped(say, i - 1, reason));
            }
        }
    }
    if !apply {
        say("dry run: nothing was changed");
        return Ok(MeshOutcome::DryRun);
    }
    Ok(MeshOutcome::Completed)
}

fn stopped(say: &mut dyn FnMut(&str), stage: usize, reason: String) -> MeshOutcome {
    say(&format!("STOPPED at stage {stage} (0: retries off): {reason}"));
    MeshOutcome::Stopped { stage, reason }
}

/// One read, printed; counts failures in a row.
fn read(
    w: &mut RampWatch<'_>,
    label: &str,
    failed: &mut u32,
    say: &mut dyn FnMut(&str),
) -> Result<Option<f64>, String> {
    match (w.goodput)() {
        Ok(g) if g.is_finite() => {
            *failed = 0;
            let g = g.clamp(0.0, 1.0);
            say(&format!("        {label}: goodput {:.0} % of edge requests", 100.0 * g));
            Ok(Some(g))
        }
        Ok(g) => Err(format!("goodput is {g}")),
        Err(e) => {
            *failed += 1;
            say(&format!("        {label}: cannot read goodput: {e}"));
            if *failed >= MAX_FAILED_READS {
                return Err(format!("{failed} goodput reads in a row failed (last: {e})"));
            }
            Ok(None)
        }
    }
}

fn until_recovered(
    w: &mut RampWatch<'_>,
    wait: &mut dyn FnMut(Duration),
    say: &mut dyn FnMut(&str),
) -> Result<f64, String> {
    say(&format!("        hold until goodput returns (at most {:.0} s)", w.max_wait.as_secs_f64()));
    let mut failed = 0;
    for _ in 0..intervals(w.max_wait, w.interval) {
        wait(w.interval);
        if let Some(g) = read(w, "waiting", &mut failed, say)?
            && g >= RECOVERED
        {
            return Ok(g);
        }
    }
    Err(format!(
        "goodput did not return within {:.0} s; retries stay off",
        w.max_wait.as_secs_f64()
    ))
}

fn hold_stage(
    w: &mut RampWatch<'_>,
    n: u32,
    before: Option<f64>,
    wait: &mut dyn FnMut(Duration),
    say: &mut dyn FnMut(&str),
) -> Result<f64, String> {
    let mut failed = 0;
    let mut last = before;
    for _ in 0..n {
        wait(w.interval);
        let Some(g) = read(w, "holding", &mut failed, say)? else { continue };
        if let Some(b) = before
            && g < b - REGRESSION
        {
            return Err(format!("goodput fell from {:.0} % to {:.0} %", 100.0 * b, 100.0 * g));
        }
        last = Some(g);
    }
    last.ok_or_else(|| "no goodput read while holding the stage".to_string())
}
