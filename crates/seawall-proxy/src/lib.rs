//! # seawall-proxy — a fault-injecting proxy in front of one dependency
//!
//! The library behind `seawall proxy`.
//!
//! # Why
//!
//! A retry storm starts when a dependency fails and ends — or does not — when it comes back.
//! Neither moment can be tested by load alone: something has to make the dependency fail on
//! cue, in the ways real dependencies fail (refusing, hanging, slowing down, coming back cold),
//! and something has to count what the callers then send it. This proxy does both from
//! between a service and its dependency, without touching either: point the service at the
//! proxy, the proxy at the dependency.
//!
//! It speaks raw TCP (for databases: PostgreSQL's statements are recognised on the wire) or
//! HTTP (HTTP/1.1 and HTTP/2 with prior knowledge, so gRPC too). It counts, per second, the
//! connections and requests that pass, their attempt numbers (`Request-Attempt`,
//! `grpc-previous-rpc-attempts`) and the most copies of one request in flight at once — a
//! storm's signature, "many copies of the same statement" — and serves them as Prometheus text.
//!
//! # Faults
//!
//! `KIND:SECONDS[@START][,KEY=VALUE…]`: `SECONDS` long, starting `START` seconds after the proxy
//! starts (default 0; a fault posted live starts `START` seconds after it is posted). The names
//! follow toxiproxy's toxics where one exists.
//!
//! | kind | does | unit (TCP mode / HTTP mode) | keys |
//! |---|---|---|---|
//! | `fail` | refuses: connection refused (the listener closes), TCP reset or close; HTTP 503, or gRPC UNAVAILABLE (status 14) | connection / request | `mode=refuse\|reset\|close\|503` (default: reset in TCP mode, 503 in HTTP) |
//! | `partial` | `fail` for a share only | connection / request | `pct=P` (required), `mode` |
//! | `hang` | accepts and holds; nothing passes until the fault ends | connection / request | `max=S` the longest hold, then a reset (default 30) |
//! | `slow` | adds latency before each request | share: connection / request; latency: each statement / request | `latency=MS` (default 100), `jitter=MS`, `dist=fixed\|uniform\|exp` |
//! | `restart-cold` | refuses for `SECONDS` (listener closed, open connections closed), then serves a share growing linearly to 100 % | connection / request | `warmup=S` (default 10), `floor=P` the share at first (default 10) |
//! | `bandwidth` | at most `rate` KB/s per connection and direction (TCP mode) | every connection | `rate=KB/s` (required) |
//!
//! Every kind takes `pct=P`, the share of the unit it touches (toxiproxy's `toxicity`, in
//! percent). `slow` with `jitter` is uniform in latency ± jitter (toxiproxy's latency toxic);
//! `dist=exp` is exponential with mean `latency`, cut at 10× the mean.
//!
//! **The unit.** In HTTP mode every request is decided on its own: `partial:10,pct=50` fails
//! half the requests. In TCP mode the unit is the connection — for PostgreSQL, a session: each
//! connection draws once per fault whether it is in that fault's share ([`schedule::Draws`]),
//! and every statement it sends meets that same draw, so `pct=50` fails half the sessions (each
//! at its first statement while the fault acts), not some statement of most of them. A fault
//! that starts after a connection opened still reaches it at its next statement (or, for other
//! protocols, its next write), as a server going away would. A `restart-cold` or a
//! `fail:…,mode=refuse` closes the listener and every open connection with it.
//!
//! # What the proxy can and cannot see
//!
//! - **TLS is passed through, unread.** A PostgreSQL client that negotiates TLS (libpq's
//!   default `sslmode=prefer` against a server with `ssl=on`, as Debian's is) is forwarded
//!   byte for byte, but its statements are invisible: no requests, no attempts, no identical
//!   statements in flight, and faults act per connection and per client write. Connect through
//!   the proxy with `sslmode=disable` (`PGSSLMODE=disable`) to have statements counted. HTTPS is
//!   not read in HTTP mode: put the proxy where the traffic is plain HTTP.
//! - **Attempt numbers are what the client says.** They come from `Request-Attempt` (seawall's
//!   layers) or `grpc-previous-rpc-attempts` (gRPC); a retrier that sends neither (HAProxy,
//!   nginx, most SDKs) has every request counted as `attempt="1"`, since the proxy cannot tell
//!   its retries from first attempts. Compare the proxy's request rate with the edge's instead.
//! - **Counters a mode does not measure are absent**, not 0: `seawall_proxy_bytes_total` exists
//!   in TCP mode only. `seawall_proxy_faulted_total{fault}` counts what each kind acted on:
//!   refused or dropped (`fail`, `partial`, `restart-cold`, `refuse`), held (`hang`, once per
//!   hold) or delayed (`slow`).
//!
//! # Control
//!
//! With a control address, a small HTTP API on its own loopback listener:
//! `GET /state` (JSON: time, faults, per-second series), `POST /faults` with a fault as the body
//! (starts now, or `@START` seconds from now), `DELETE /faults` (clears all, scheduled too),
//! `GET /metrics` (Prometheus text, `seawall_proxy_*`). Changing the faults takes
//! `Authorization: Bearer <token>` with the token of [`ProxyConfig::control_auth`] — the
//! scheme of `seawall-tower`'s admin endpoints ([`AdminAuth`]) — and is refused with `401`
//! otherwise: any local process could reach the listener.
//!
//! # Bounds
//!
//! Connections ([`Limits::max_connections`]; beyond, a new connection is reset), held
//! connections or requests ([`Limits::max_held`]; beyond, refused), the copy buffer per
//! direction ([`Limits::buffer`]), an HTTP request body ([`Limits::max_body`]; beyond, 413),
//! the connect to the upstream ([`Limits::connect_timeout`]), faults ([`schedule::MAX_FAULTS`]).
//! Listen and control addresses must be loopback.
//!
//! # Limits of the reading
//!
//! HTTP request bodies are read whole before forwarding (to key identical requests), so a
//! client-streaming or bidirectional gRPC call that never ends its request stream is not
//! proxied; unary and server-streaming calls are.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use seawall::time::SystemClock;
//! use seawall_proxy::{AdminAuth, AdminToken, Mode, Proxy, ProxyConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // PostgreSQL behind the proxy: refuse for 10 s from 5 s on, then come back cold.
//! let mut config = ProxyConfig::new("127.0.0.1:7000", "127.0.0.1:5432", Mode::Tcp)?;
//! config.faults = vec!["fail:10@5".parse()?, "restart-cold:5@20,warmup=20".parse()?];
//! config.control = Some("127.0.0.1:7001".parse().unwrap());
//! config.control_auth = Some(AdminAuth::Bearer(AdminToken::from_env("SEAWALL_ADMIN_TOKEN")?));
//! let proxy = Proxy::start(config, Arc::new(SystemClock)).await?;
//! println!("metrics at http://{}/metrics", proxy.control_addr().unwrap());
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod accept;
mod control;
pub mod error;
pub mod fault;
mod gate;
mod http;
pub mod pgwire;
mod run;
pub mod schedule;
pub mod stats;
mod tcp;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use seawall::rng::{SeedSource, SeededRng};
use seawall::time::{Clock, Instant};
pub use seawall_tower::admin::{AdminAuth, AdminToken};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

pub use error::ProxyError;
pub use fault::{Delay, FailMode, Fault, FaultKind};
pub use run::{MAX_RUNTIME, run_blocking};
pub use schedule::{Action, Faults};
pub use stats::Stats;

/// Which protocol the proxy reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Raw TCP; PostgreSQL statements are recognised when the stream is PostgreSQL.
    Tcp,
    /// HTTP/1.1 and HTTP/2 (prior knowledge, as gRPC uses it).
    Http,
}

/// The proxy's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once (default 1024).
    pub max_connections: usize,
    /// Connections or requests held by `hang` at once (default 1024).
    pub max_held: usize,
    /// Copy buffer per direction and connection, bytes (default 16 KiB).
    pub buffer: usize,
    /// Largest HTTP request body, bytes (default 4 MiB): bodies are read whole to key them.
    pub max_body: usize,
    /// Time to connect to the upstream (default 5 s).
    pub connect_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_held: 1024,
            buffer: 16 * 1024,
            max_body: 4 << 20,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// What to proxy, and how to break it.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Where clients connect (loopback; port 0 picks a free one).
    pub listen: SocketAddr,
    /// The dependency.
    pub upstream: SocketAddr,
    /// TCP or HTTP.
    pub mode: Mode,
    /// The schedule.
    pub faults: Vec<Fault>,
    /// Where the control API listens (loopback), if anywhere.
    pub control: Option<SocketAddr>,
    /// Who may change the faults through the control API (`POST`/`DELETE /faults`): a bearer
    /// token, as the admin endpoints of `seawall-tower` take it, or
    /// [`AdminAuth::unauthenticated`] spelled out. Required with [`control`](Self::control);
    /// `GET /state` and `GET /metrics` are read-only and open, like any metrics endpoint.
    pub control_auth: Option<AdminAuth>,
    /// Seed of every random draw (shares, latencies).
    pub seed: u64,
    /// Bounds.
    pub limits: Limits,
}

/// Parses `HOST:PORT` into one address (`localhost` and IP literals resolve without a network).
pub fn parse_addr(what: &'static str, s: &str) -> Result<SocketAddr, ProxyError> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| ProxyError::bad_input(what, format!("{s:?}: expected HOST:PORT")))?;
    if host.is_empty() || port.parse::<u16>().is_err() || s.len() > 255 {
        return Err(ProxyError::bad_input(what, format!("{s:?}: expected HOST:PORT")));
    }
    s.to_socket_addrs()
        .map_err(|e| ProxyError::bad_input(what, format!("{s:?}: {e}")))?
        .next()
        .ok_or_else(|| ProxyError::bad_input(what, format!("{s:?}: resolves to no address")))
}

fn loopback(what: &'static str, a: SocketAddr) -> Result<SocketAddr, ProxyError> {
    if a.ip().is_loopback() {
        Ok(a)
    } else {
        Err(ProxyError::bad_input(what, format!("{a}: only loopback addresses (127.0.0.0/8, ::1)")))
    }
}

impl ProxyConfig {
    /// A proxy from `listen` (loopback) to `upstream`, no faults, seed 1, default bounds.
    pub fn new(listen: &str, upstream: &str, mode: Mode) -> Result<Self, ProxyError> {
        let listen = loopback("--listen", parse_addr("--listen", listen)?)?;
        let upstream = parse_addr("--upstream", upstream)?;
        if upstream.port() == 0 {
            return Err(ProxyError::bad_input(
                "--upstream",
                "port 0 is not an address to connect to",
            ));
        }
        Ok(ProxyConfig {
            listen,
            upstream,
            mode,
            faults: Vec::new(),
            control: None,
            control_auth: None,
            seed: 1,
            limits: Limits::default(),
        })
    }

    /// Checks what [`new`](Self::new) cannot: the control address, the faults against the mode,
    /// the bounds.
    pub fn validate(&self) -> Result<(), ProxyError> {
        loopback("--listen", self.listen)?;
        if let Some(c) = self.control {
            loopback("--control", c)?;
            if self.control_auth.is_none() {
                return Err(ProxyError::bad_input(
                    "--control",
                    "the control API changes faults, so it needs a bearer token \
                     (--admin-token-file or $SEAWALL_ADMIN_TOKEN, at least 16 characters)",
                ));
            }
        }
        for f in &self.faults {
            check_fault(self.mode, f)?;
        }
        if self.faults.len() > schedule::MAX_FAULTS {
            return Err(ProxyError::bad_input(
                "--fault",
                format!("at most {}", schedule::MAX_FAULTS),
            ));
        }
        let l = &self.limits;
        if l.max_connections == 0 || l.max_held == 0 || l.buffer < 512 || l.max_body == 0 {
            return Err(ProxyError::bad_input(
                "limits",
                "every bound must be positive (buffer ≥ 512 bytes)",
            ));
        }
        Ok(())
    }
}

/// Whether `fault` makes sense in `mode` (bandwidth is TCP-only).
fn check_fault(mode: Mode, f: &Fault) -> Result<(), ProxyError> {
    if mode == Mode::Http && matches!(f.kind, FaultKind::Bandwidth { .. }) {
        return Err(ProxyError::bad_input("--fault", "bandwidth: TCP mode only (--tcp)"));
    }
    Ok(())
}

/// State every connection task shares.
#[derive(Debug)]
struct Shared {
    faults: Faults,
    stats: Arc<Stats>,
    clock: Arc<dyn Clock>,
    start: Instant,
    seeds: SeedSource,
    limits: Limits,
    upstream: SocketAddr,
    mode: Mode,
    held: Arc<Semaphore>,
    control_auth: AdminAuth,
    /// Bumped each time the listener closes for a refusal (`fail` with `mode=refuse`, the down
    /// phase of `restart-cold`): every open connection is closed then, as a server that goes
    /// away closes its own.
    restarts: tokio::sync::watch::Sender<u64>,
}

impl Shared {
    fn now(&self) -> Duration {
        self.clock.now() - self.start
    }

    fn rng(&self) -> SeededRng {
        self.seeds.stream()
    }

    /// How long until `t` (time since start), from now.
    fn until(&self, t: Duration) -> Duration {
        t.saturating_sub(self.now())
    }

    /// Fail modes as one connection or request meets them: in TCP a status is a reset, and a
    /// refusal (the listener is closed) resets what is already connected.
    fn fail_mode(&self, m: FailMode) -> FailMode {
        match (self.mode, m) {
            (Mode::Tcp, FailMode::Status) | (_, FailMode::Refuse) => FailMode::Reset,
            (_, m) => m,
        }
    }
}

/// A running proxy. Dropping it stops the listeners and every connection.
#[derive(Debug)]
pub struct Proxy {
    listen: SocketAddr,
    control: Option<SocketAddr>,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Proxy {
    /// Binds the listeners and starts serving. `clock` times the schedule (its zero is now).
    pub async fn start(config: ProxyConfig, clock: Arc<dyn Clock>) -> Result<Proxy, ProxyError> {
        config.validate()?;
        let bind = |what: &'static str, a: SocketAddr| async move {
            tokio::net::TcpListener::bind(a)
                .await
                .map_err(|e| ProxyError::bad_input(what, format!("{a}: cannot listen: {e}")))
        };
        let listener = bind("--listen", config.listen).await?;
        let control = match config.control {
            Some(a) => Some(bind("--control", a).await?),
            None => None,
        };
        let start = clock.now();
        let shared = Arc::new(Shared {
            faults: Faults::new(config.faults),
            // Bytes are counted only where they are read one by one: in TCP mode.
            stats: Arc::new(Stats::new(config.mode == Mode::Tcp)),
            clock,
            start,
            seeds: SeedSource::new(config.seed),
            limits: config.limits,
            upstream: config.upstream,
            mode: config.mode,
            held: Arc::new(Semaphore::new(config.limits.max_held)),
            control_auth: config.control_auth.unwrap_or_else(AdminAuth::unauthenticated),
            restarts: tokio::sync::watch::Sender::new(0),
        });
        let listen = listener.local_addr()?;
        let mut tasks = vec![match config.mode {
            Mode::Tcp => tokio::spawn(tcp::serve(listener, shared.clone())),
            Mode::Http => tokio::spawn(http::serve(listener, shared.clone())),
        }];
        let control_addr = match control {
            Some(l) => {
                let a = l.local_addr()?;
                tasks.push(tokio::spawn(control::serve(l, shared.clone())));
                Some(a)
            }
            None => None,
        };
        Ok(Proxy { listen, control: control_addr, shared, tasks })
    }

    /// Where clients connect.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
    }

    /// Where the control API listens.
    pub fn control_addr(&self) -> Option<SocketAddr> {
        self.control
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Adds a fault now (its start is taken from now); `BadInput` if the mode cannot run it or
    /// the proxy holds [`schedule::MAX_FAULTS`] already.
    pub fn add_fault(&self, fault: Fault) -> Result<(), ProxyError> {
        control::add(&self.shared, fault)
    }

    /// Removes every fault, scheduled and live.
    pub fn clear_faults(&self) -> usize {
        self.shared.faults.clear()
    }

    /// Time since the proxy started, on its clock.
    pub fn elapsed(&self) -> Duration {
        self.shared.now()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
