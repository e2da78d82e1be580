//! The example stack of `crates/seawall-lab/stack/`, made of retriers nobody on this project
//! wrote: edge load → HAProxy (`retries`, `retry-on 503`) → nginx (`proxy_next_upstream
//! error timeout http_503`, `proxy_next_upstream_tries`) over several backends → `seawall
//! proxy --http` → the backends' shared dependency.
//!
//! While the proxy fails the dependency (503), the attempts reaching it per edge request are
//! measured from the proxy's `/metrics` and set beside the product of the configured
//! attempts; the same stack with HAProxy's and nginx's retries off (and the backend at one
//! attempt) is the control, ≈ 1. Over a dependency of bounded capacity, the before stays down
//! after a fault; the after — HAProxy's and nginx's retries off, the backends calling through
//! seawall's client layer, the one owner of retries — recovers. Ignored unless asked for
//! (`--ignored`): it needs haproxy and nginx.

mod stack;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use seawall::time::SystemClock;
use seawall_proxy::{Fault, Mode, Proxy, ProxyConfig};
use stack::procs::{Guard, Retries, free_port, start_haproxy, start_nginx};
use stack::servers::{Outcome, Server, backend, dependency, edge_load, seawall_backend};

/// Backend instances behind nginx (nginx's tries go to the next one, so it needs several).
const BACKENDS: usize = 3;

/// The "before": each layer retries as its documentation allows.
const BEFORE: Retries = Retries {
    haproxy_retries: 2,
    haproxy_retry_on: "503",
    nginx_next_upstream: "error timeout http_503",
    nginx_tries: 3,
};
/// The backend's own naive retry in the "before": 2 attempts.
const BEFORE_BACKEND_ATTEMPTS: u32 = 2;

/// The control: the same stack with every layer at one attempt.
const CONTROL: Retries = Retries {
    haproxy_retries: 0,
    haproxy_retry_on: "none",
    nginx_next_upstream: "off",
    nginx_tries: 1,
};

/// Edge load per phase: `WORKERS` loops of `EACH` requests.
const WORKERS: usize = 4;
const EACH: usize = 15;

/// The two tests run one after the other: each measures rates, the other's load would blur them.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn programs() -> (PathBuf, PathBuf) {
    (seawall_testkit::require_external("haproxy"), seawall_testkit::require_external("nginx"))
}

/// One running stack; dropping it stops HAProxy, nginx, the backends, the proxy and the
/// dependency (fields drop in order, edge first).
struct Stack {
    _haproxy: Guard,
    _nginx: Guard,
    _backends: Vec<Server>,
    proxy: Proxy,
    _dependency: Server,
    edge: String,
}

async fn start_stack(
    bins: &(PathBuf, PathBuf),
    r: &Retries,
    instances: usize,
    backend_attempts: u32,
) -> Stack {
    start_stack_over(
        bins,
        r,
        instances,
        backend_attempts,
        dependency().await,
        Duration::from_secs(2),
    )
    .await
}

/// How the backends call the dependency.
#[derive(Debug, Clone, Copy)]
enum Backends {
    /// A naive loop of this many attempts, each given up after the timeout.
    Naive(u32),
    /// seawall's client layer, the one owner of retries, the timeout as the call's deadline.
    Seawall,
}

async fn start_stack_over(
    bins: &(PathBuf, PathBuf),
    r: &Retries,
    instances: usize,
    backend_attempts: u32,
    dependency: Server,
    backend_timeout: Duration,
) -> Stack {
    let kind = Backends::Naive(backend_attempts);
    start_stack_with(bins, r, instances, kind, dependency, backend_timeout).await
}

async fn start_stack_with(
    bins: &(PathBuf, PathBuf),
    r: &Retries,
    instances: usize,
    kind: Backends,
    dependency: Server,
    backend_timeout: Duration,
) -> Stack {
    let mut config =
        ProxyConfig::new("127.0.0.1:0", &dependency.addr.to_string(), Mode::Http).unwrap();
    config.control = Some("127.0.0.1:0".parse().unwrap());
    // Only /metrics is read here; nothing else reaches this loopback listener.
    config.control_auth = Some(seawall_proxy::AdminAuth::unauthenticated());
    let proxy = Proxy::start(config, Arc::new(SystemClock)).await.unwrap();
    let mut backends = Vec::new();
    for i in 0..instances {
        let dep = proxy.listen_addr();
        backends.push(match kind {
            Backends::Naive(n) => backend(dep, n, backend_timeout).await,
            Backends::Seawall => seawall_backend(dep, backend_timeout, i as u64 + 1).await,
        });
    }
    let addrs: Vec<SocketAddr> = backends.iter().map(|b| b.addr).collect();
    let (nginx_port, edge_port) = (free_port(), free_port());
    let (haproxy_bin, nginx_bin) = bins.clone();
    let r2 = *r;
    let (nginx, haproxy) = tokio::task::spawn_blocking(move || {
        let nginx = start_nginx(&nginx_bin, nginx_port, &addrs, &r2);
        let haproxy = start_haproxy(&haproxy_bin, edge_port, nginx_port, &r2);
        (nginx, haproxy)
    })
    .await
    .unwrap();
    Stack {
        _haproxy: haproxy,
        _nginx: nginx,
        _backends: backends,
        proxy,
        _dependency: dependency,
        edge: format!("http://127.0.0.1:{edge_port}/checkout"),
    }
}

impl Stack {
    /// HAProxy's and nginx's process ids.
    fn pids(&self) -> [u32; 2] {
        [self._haproxy.pid(), self._nginx.pid()]
    }
}

/// Panics if a process in `pids` is still there (`/proc` on Linux; elsewhere not checked).
fn assert_stopped(pids: [u32; 2]) {
    for pid in pids {
        let p = std::path::Path::new("/proc").join(pid.to_string());
        assert!(!p.exists() || !std::path::Path::new("/proc/self").exists(), "pid {pid} survived");
    }
}

/// `seawall_proxy_requests_total` from the proxy's `/metrics` (parsed strictly).
async fn requests_at_dependency(control: SocketAddr) -> u64 {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let r = client.get(format!("http://{control}/metrics").parse().unwrap()).await.unwrap();
    let body = r.into_body().collect().await.unwrap().to_bytes();
    let text = std::str::from_utf8(&body).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("seawall_proxy_requests_total "))
        .unwrap_or_else(|| panic!("no seawall_proxy_requests_total in\n{text}"));
    line.trim().parse().unwrap()
}

/// One phase of edge load and what reached the dependency meanwhile.
#[derive(Debug)]
struct Phase {
    edge: Outcome,
    at_dependency: u64,
    secs: f64,
}

impl Phase {
    fn multiplier(&self) -> f64 {
        self.at_dependency as f64 / self.edge.sent().max(1) as f64
    }
}

async fn phase(s: &Stack) -> Phase {
    phase_with(s, http::Method::GET).await
}

async fn phase_with(s: &Stack, method: http::Method) -> Phase {
    let control = s.proxy.control_addr().unwrap();
    let before = requests_at_dependency(control).await;
    let t = Instant::now();
    let edge = edge_load(&s.edge, method, WORKERS, EACH).await;
    let secs = t.elapsed().as_secs_f64();
    let at_dependency = requests_at_dependency(control).await - before;
    Phase { edge, at_dependency, secs }
}

/// Healthy, then while the proxy answers 503 for everything: GETs, then POSTs.
async fn healthy_then_fault(s: &Stack) -> (Phase, Phase, Phase) {
    let healthy = phase(s).await;
    s.proxy.add_fault("fail:600".parse::<Fault>().unwrap()).unwrap();
    let fault = phase(s).await;
    let post = phase_with(s, http::Method::POST).await;
    s.proxy.clear_faults();
    (healthy, fault, post)
}

fn print(name: &str, product: u32, healthy: &Phase, fault: &Phase) {
    eprintln!(
        "{name}: configured product {product}; healthy: {} edge requests ({} ok) → {} at the \
         dependency ({:.2}×); fault: {} edge requests ({} ok) → {} at the dependency ({:.2}×), \
         {:.0} edge req/s → {:.0} dependency req/s",
        healthy.edge.sent(),
        healthy.edge.ok,
        healthy.at_dependency,
        healthy.multiplier(),
        fault.edge.sent(),
        fault.edge.ok,
        fault.at_dependency,
        fault.multiplier(),
        fault.edge.sent() as f64 / fault.secs,
        fault.at_dependency as f64 / fault.secs,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy and nginx"]
async fn third_party_retriers_multiply_at_the_dependency_and_the_control_does_not() {
    let bins = programs();
    let _serial = SERIAL.lock().await;
    let edge = (WORKERS * EACH) as u64;

    // Before: HAProxy 1 + retries, × nginx tries (over BACKENDS ≥ tries instances), × backend.
    let product = (1 + BEFORE.haproxy_retries) * BEFORE.nginx_tries * BEFORE_BACKEND_ATTEMPTS;
    let (healthy, fault, post, pids) = {
        let s = start_stack(&bins, &BEFORE, BACKENDS, BEFORE_BACKEND_ATTEMPTS).await;
        let (h, f, p) = healthy_then_fault(&s).await;
        (h, f, p, s.pids())
    };
    assert_stopped(pids);
    print("before", product, &healthy, &fault);
    // nginx does not pass a POST to the next server once sent (no `non_idempotent`); HAProxy
    // 2.6's `retry-on 503` retries it all the same.
    let post_product = (1 + BEFORE.haproxy_retries) * BEFORE_BACKEND_ATTEMPTS;
    eprintln!("before, POST during the fault: {:.2}× (expected {post_product})", post.multiplier());
    let m = post.multiplier();
    assert!(
        m >= 0.8 * f64::from(post_product) && m <= f64::from(post_product) + 0.01,
        "POST: {m:.2}×, expected {post_product} (HAProxy retries it, nginx does not)"
    );
    assert_eq!(healthy.edge.ok, edge, "healthy: every edge request answered");
    assert_eq!(healthy.at_dependency, edge, "healthy: one dependency request per edge request");
    assert_eq!(fault.edge.failed, edge, "during the fault no edge request succeeds");
    let m = fault.multiplier();
    // Each layer's cap is exact and every try fails, so the product is reached unless a layer
    // gives up early; 0.8 leaves room for one layer cutting a try short now and then.
    assert!(
        m >= 0.8 * f64::from(product) && m <= f64::from(product) + 0.01,
        "measured {m:.2}× at the dependency per edge request, configured product {product}"
    );

    // nginx retries on the NEXT server: over one backend instance its tries stop at one.
    let single = (1 + BEFORE.haproxy_retries) * BEFORE_BACKEND_ATTEMPTS;
    let (_, fault, _) = {
        let s = start_stack(&bins, &BEFORE, 1, BEFORE_BACKEND_ATTEMPTS).await;
        healthy_then_fault(&s).await
    };
    eprintln!("before, one backend instance: {:.2}× (expected {single})", fault.multiplier());
    let m = fault.multiplier();
    assert!(
        m >= 0.8 * f64::from(single) && m <= f64::from(single) + 0.01,
        "one instance: {m:.2}×, expected {single} (nginx has no next server)"
    );

    // Control: every layer at one attempt.
    let control_product = (1 + CONTROL.haproxy_retries) * CONTROL.nginx_tries;
    let (healthy, fault, post) = {
        let s = start_stack(&bins, &CONTROL, BACKENDS, 1).await;
        healthy_then_fault(&s).await
    };
    print("control", control_product, &healthy, &fault);
    let m = post.multiplier();
    assert!((0.9..=1.1).contains(&m), "control, POST: {m:.2}×, expected ≈ 1");
    assert_eq!(healthy.edge.ok, edge);
    assert_eq!(fault.edge.failed, edge);
    let m = fault.multiplier();
    assert!((0.9..=1.1).contains(&m), "control: {m:.2}× at the dependency, expected ≈ 1");
}

/// Edge load of the recovery run, per second, and its phases (seconds of the load).
const RATE: u32 = 20;
const HEALTHY_S: u32 = 3;
const FAULT_S: u32 = 3;
const AFTER_S: u32 = 6;

/// Goodput share (answered 2xx over sent) of the seconds `from..to` of the load.
fn goodput(seconds: &[stack::load::Second], from: u32, to: u32) -> f64 {
    let s = &seconds[from as usize..to as usize];
    let (ok, sent) = s.iter().fold((0, 0), |(o, n), x| (o + x.ok, n + x.sent));
    ok as f64 / sent.max(1) as f64
}

/// Runs the recovery load on a stack over a dependency of capacity 100 requests/s (2 workers,
/// 20 ms each, a queue of 100) whose callers give up after 100 ms; the proxy delays every
/// request by 90 ms for `FAULT_S` seconds, so every attempt then does its work at the
/// dependency and still times out.
async fn recovery(bins: &(PathBuf, PathBuf), r: &Retries, backends: Backends) -> Vec<f64> {
    let dep = stack::servers::limited_dependency(2, Duration::from_millis(20), 100).await;
    let s = start_stack_with(bins, r, BACKENDS, backends, dep, Duration::from_millis(100)).await;
    let fault = format!("slow:{FAULT_S}@{HEALTHY_S},latency=90");
    s.proxy.add_fault(fault.parse::<Fault>().unwrap()).unwrap();
    let start = s.proxy.elapsed().as_secs();
    let seconds = stack::load::open_loop(&s.edge, RATE, HEALTHY_S + FAULT_S + AFTER_S).await;
    let at_dep: Vec<u64> = s
        .proxy
        .stats()
        .series()
        .iter()
        .filter(|x| x.t >= start && x.t < start + u64::from(HEALTHY_S + FAULT_S + AFTER_S))
        .map(|x| x.requests)
        .collect();
    let shares: Vec<f64> = seconds.iter().map(|x| x.ok as f64 / x.sent.max(1) as f64).collect();
    eprintln!(
        "  goodput share per second: {:?}\n  requests/s at the dependency: {at_dep:?}",
        shares.iter().map(|g| (g * 100.0).round() / 100.0).collect::<Vec<_>>()
    );
    let (h, f, a) = (HEALTHY_S, HEALTHY_S + FAULT_S, HEALTHY_S + FAULT_S + AFTER_S);
    vec![goodput(&seconds, 0, h), goodput(&seconds, h, f), goodput(&seconds, a - 3, a)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy and nginx"]
async fn third_party_retriers_stay_down_after_the_fault_and_seawall_at_one_owner_recovers() {
    let bins = programs();
    let _serial = SERIAL.lock().await;
    eprintln!("before (HAProxy 3 × nginx 3 × backend 2 attempts):");
    let before = recovery(&bins, &BEFORE, Backends::Naive(BEFORE_BACKEND_ATTEMPTS)).await;
    // After: HAProxy's and nginx's retries off, the backends' calls through seawall's client
    // layer (budget, jitter, deadline): one owner of retries in the whole stack.
    eprintln!("after (proxies at one attempt, seawall's layer the one owner):");
    let after = recovery(&bins, &CONTROL, Backends::Seawall).await;
    eprintln!("goodput [healthy, fault, last 3 s after]: before {before:.2?}, after {after:.2?}");
    assert!(before[0] >= 0.9 && after[0] >= 0.9, "both serve before the fault");
    assert!(before[2] <= 0.2, "before: stays down {AFTER_S} s after the fault ({:.2})", before[2]);
    assert!(after[2] >= 0.9, "after: recovers after the fault ({:.2})", after[2]);
}
