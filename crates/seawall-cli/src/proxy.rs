//! `seawall proxy`: a fault-injecting proxy in front of one dependency.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use seawall_proxy::{AdminAuth, AdminToken, Fault, Limits, Mode, ProxyConfig, run_blocking};

const ABOUT: &str = "\
Put this between a service and one dependency to break the dependency on cue and count what the
callers send it. TCP mode (default; for databases — PostgreSQL statements are recognised) or
HTTP mode (HTTP/1.1 and HTTP/2 with prior knowledge, so gRPC too).

The bound addresses are printed on stdout as `listening ADDR` and `control ADDR`.";

const AFTER: &str = "\
FAULTS: KIND:SECONDS[@START][,KEY=VALUE...]
  START is seconds after the proxy starts (default 0). Keys, defaults in brackets:
  fail          refuse: TCP reset or close; HTTP 503 or gRPC UNAVAILABLE
                  mode=refuse|reset|close|503  (refuse: the listener closes: ECONNREFUSED)
  partial       fail for a share only
                  pct=P (required), mode=...
  hang          accept and hold until the fault ends
                  max=S  the longest hold, then a reset [30]
  slow          added latency per request (TCP: per statement or write)
                  latency=MS [100]  jitter=MS  dist=fixed|uniform|exp
  restart-cold  refuse SECONDS (listener and open connections closed), then serve a share
                rising linearly to 100 %
                  warmup=S [10]  floor=P  the share served at first [10]
  bandwidth     KB/s per connection and direction (TCP mode only)
                  rate=KB/s (required)
  Every kind takes pct=P, the share of the unit it touches (toxiproxy's toxicity). The unit is
  the request in HTTP mode and the connection (a PostgreSQL session) in TCP mode: pct=50 fails
  half the sessions, each for all its statements while the fault acts.

WHAT IT CANNOT SEE:
  TLS is passed through unread: a PostgreSQL client that negotiates TLS (libpq's default
  sslmode=prefer against ssl=on) has no statements counted and faults act per connection and
  per write. Connect with PGSSLMODE=disable (sslmode=disable) to have statements counted.
  Attempt numbers come from Request-Attempt or grpc-previous-rpc-attempts: a retrier that
  sends neither (HAProxy, nginx, most SDKs) has every request counted as attempt=\"1\".
  seawall_proxy_bytes_total exists in TCP mode only (absent, not 0, in HTTP mode).

CONTROL API (--control, loopback; changing faults takes the bearer token of
--admin-token-file or $SEAWALL_ADMIN_TOKEN, as the admin endpoints of seawall's layers do):
  GET /state              time, faults, per-second series (JSON)
  POST /faults  BODY      add a fault, START counted from now
                          (curl -H 'Authorization: Bearer TOKEN' -d fail:10 ADDR/faults)
  DELETE /faults          clear every fault, scheduled ones too (token too)
  GET /metrics            Prometheus text: seawall_proxy_connections_total, _requests_total,
                          _attempts_total{attempt}, _faulted_total{fault} (refused, held or
                          delayed), _identical_in_flight, ...

EXAMPLES:
  seawall proxy --listen 127.0.0.1:7000 --upstream 127.0.0.1:5432 --fault fail:10@5
  SEAWALL_ADMIN_TOKEN=$(openssl rand -hex 16) seawall proxy --http --listen 127.0.0.1:7080 \\
      --upstream 127.0.0.1:8080 --control 127.0.0.1:7081 \\
      --fault 'restart-cold:5@10,warmup=20,floor=5' --fault 'slow:30@40,latency=200,dist=exp'

Exit codes: 0 stopped (Ctrl-C, SIGTERM or --duration), 2 bad input (address, fault, bound).";

/// Arguments of `seawall proxy`.
#[derive(Debug, clap::Args)]
#[command(about = "A fault-injecting proxy in front of a dependency (TCP or HTTP)", long_about = ABOUT, after_long_help = AFTER)]
pub(crate) struct Args {
    /// Where clients connect: HOST:PORT on loopback (port 0 picks a free one).
    #[arg(long, value_name = "ADDR")]
    listen: String,
    /// The dependency: HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    upstream: String,
    /// HTTP mode: HTTP/1.1 and HTTP/2 (gRPC) per request.
    #[arg(long, conflicts_with = "tcp")]
    http: bool,
    /// TCP mode (the default): a byte pipe; PostgreSQL statements are recognised.
    #[arg(long)]
    tcp: bool,
    /// A scheduled fault (repeatable), e.g. fail:10@5 (see FAULTS below, or --help).
    #[arg(long = "fault", value_name = "SPEC")]
    faults: Vec<String>,
    /// Serve the control API and /metrics here (loopback HOST:PORT). Changing faults through it
    /// takes a bearer token: --admin-token-file or $SEAWALL_ADMIN_TOKEN.
    #[arg(long, value_name = "ADDR")]
    control: Option<String>,
    /// File holding the control API's bearer token (at least 16 characters of letters, digits
    /// and -._~+/=; e.g. `openssl rand -hex 16 > token`). Default: $SEAWALL_ADMIN_TOKEN.
    #[arg(long, value_name = "PATH", requires = "control")]
    admin_token_file: Option<std::path::PathBuf>,
    /// Seed of the random draws (shares, latencies).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Connections open at once; beyond, a new one is reset.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Connections or requests held by `hang` at once; beyond, refused.
    #[arg(long, default_value_t = 1024)]
    max_held: usize,
    /// Stop after this many seconds (default: run until Ctrl-C; at most a day).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
}

fn config(args: &Args) -> anyhow::Result<(ProxyConfig, Option<Duration>)> {
    let mode = if args.http { Mode::Http } else { Mode::Tcp };
    let mut c = ProxyConfig::new(&args.listen, &args.upstream, mode)?;
    c.faults = args.faults.iter().map(|f| f.parse::<Fault>()).collect::<Result<_, _>>()?;
    c.control =
        args.control.as_deref().map(|a| seawall_proxy::parse_addr("--control", a)).transpose()?;
    if c.control.is_some() {
        let token = crate::token::admin_token(None, args.admin_token_file.as_deref())?.context(
            "--control needs a bearer token for changing faults: --admin-token-file PATH or \
                 $SEAWALL_ADMIN_TOKEN (at least 16 characters, e.g. `openssl rand -hex 16`)",
        )?;
        let token = AdminToken::new(&token).context("--admin-token-file / $SEAWALL_ADMIN_TOKEN")?;
        c.control_auth = Some(AdminAuth::Bearer(token));
    }
    c.seed = args.seed;
    c.limits = Limits {
        max_connections: args.max_connections,
        max_held: args.max_held,
        ..Limits::default()
    };
    c.validate()?;
    let limit = match args.duration {
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => anyhow::bail!("--duration: seconds in (0, 86400], got {s}"),
        None => None,
    };
    Ok((c, limit))
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (config, limit) = config(&args)?;
    let upstream = config.upstream;
    let metrics = run_blocking(config, limit, |p| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening {}", p.listen_addr());
        if let Some(c) = p.control_addr() {
            let _ = writeln!(out, "control {c}");
        }
        let _ = out.flush();
        eprintln!("seawall proxy: {} → {upstream}", p.listen_addr());
    })
    .map_err(|e| {
        if e.is_bad_input() {
            anyhow::anyhow!(e)
        } else {
            anyhow::anyhow!(e).context("proxy failed")
        }
    })
    .context("seawall proxy")?;
    let get = |n| seawall_lab::prom::counter(&metrics, n);
    eprintln!(
        "seawall proxy: stopped after {} connections, {} requests, {} faulted",
        get("seawall_proxy_connections_total"),
        get("seawall_proxy_requests_total"),
        get("seawall_proxy_faulted_total"),
    );
    Ok(ExitCode::SUCCESS)
}
