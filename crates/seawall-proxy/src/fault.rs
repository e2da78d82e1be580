//! The fault grammar: `KIND:SECONDS[@START][,KEY=VALUE…]`, parsed strictly.
//!
//! The names follow toxiproxy's toxics where one exists (`latency` and `jitter` in
//! milliseconds, `rate` in KB/s, a share of the traffic affected like its `toxicity`), and add
//! the two a retry-storm test needs that toxiproxy has not: `fail` answering the way an
//! overloaded server does (503, gRPC UNAVAILABLE) and `restart-cold`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::ProxyError;

/// The longest fault, start offset or hold the grammar accepts: one day.
pub const MAX_SECONDS: f64 = 86_400.0;
/// The longest added latency: a minute (longer is a `hang`).
pub const MAX_LATENCY_MS: u64 = 60_000;

/// How a failed connection or request ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailMode {
    /// Connection refused: the listener is closed for the fault's duration (toxiproxy's
    /// disabled proxy), so the kernel answers new connections with a reset (`ECONNREFUSED`);
    /// open connections are reset when next used. Takes no `pct`.
    Refuse,
    /// A TCP reset (`SO_LINGER` 0): the client sees "connection reset by peer". TCP default.
    Reset,
    /// A clean close (FIN) before any byte from upstream.
    Close,
    /// `503 Service Unavailable`, or gRPC status 14 UNAVAILABLE for gRPC requests: the default
    /// (no `mode`, or `mode=503`). In TCP mode it is a reset.
    Status,
}

/// How long `slow` delays each request.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Delay {
    /// Always this long.
    Fixed(Duration),
    /// Uniform in `[latency - jitter, latency + jitter]` (toxiproxy's `latency` + `jitter`).
    Uniform {
        /// The centre.
        latency: Duration,
        /// The half-width (at most `latency`).
        jitter: Duration,
    },
    /// Exponential with this mean, cut at 10× the mean (a long tail, bounded).
    Exponential(Duration),
}

impl Delay {
    /// A delay drawn from `u`, a uniform number in `[0, 1)` (the caller's injected RNG).
    ///
    /// ```
    /// use seawall_proxy::fault::Delay;
    /// use std::time::Duration;
    /// let d = Delay::Uniform { latency: Duration::from_millis(100), jitter: Duration::from_millis(50) };
    /// assert_eq!(d.sample(0.0), Duration::from_millis(50));
    /// assert_eq!(d.sample(0.5), Duration::from_millis(100));
    /// ```
    pub fn sample(&self, u: f64) -> Duration {
        let u = if u.is_finite() { u.clamp(0.0, 1.0) } else { 0.0 };
        match *self {
            Delay::Fixed(d) => d,
            Delay::Uniform { latency, jitter } => {
                (latency - jitter).saturating_add(jitter.mul_f64(2.0 * u))
            }
            Delay::Exponential(mean) => {
                let x = -(1.0 - u).max(f64::MIN_POSITIVE).ln();
                mean.mul_f64(x.min(10.0))
            }
        }
    }
}

/// What a fault does while it is active.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum FaultKind {
    /// Refuse service: reset, close, or (HTTP) 503 / gRPC UNAVAILABLE.
    Fail(FailMode),
    /// Accept and hold: nothing passes until the fault ends, each hold at most `max`; a hold
    /// that reaches `max` first ends in a reset (TCP) or a dropped connection (HTTP).
    Hang {
        /// The longest one request or connection is held.
        max: Duration,
    },
    /// Added latency before each request (TCP: each client write carrying a request).
    Slow(Delay),
    /// A restart with a cold cache: refuse connections for the fault's seconds (the listener is
    /// closed, as a restarting server's is), then serve a share of the traffic that grows
    /// linearly from `floor` to all of it over `warmup`.
    RestartCold {
        /// How long the share takes to reach 100 %.
        warmup: Duration,
        /// The share served right after the refusal, percent in `[0, 100]`.
        floor: f64,
    },
    /// At most this many bytes per second per connection and direction (TCP mode).
    Bandwidth {
        /// Bytes per second (the grammar's `rate` is KB/s, as toxiproxy's).
        bytes_per_s: u64,
    },
}

impl FaultKind {
    /// The grammar's name of the kind (also the `fault` label of the metrics).
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::Fail(_) => "fail",
            FaultKind::Hang { .. } => "hang",
            FaultKind::Slow(_) => "slow",
            FaultKind::RestartCold { .. } => "restart-cold",
            FaultKind::Bandwidth { .. } => "bandwidth",
        }
    }
}

/// One fault: what, when (from the proxy's start), for how long, and to what share of traffic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fault {
    /// What it does.
    pub kind: FaultKind,
    /// When it starts, measured from the proxy's start.
    pub start: Duration,
    /// How long it lasts (for `restart-cold`: the refusal; the warm-up follows).
    pub duration: Duration,
    /// The share of connections or requests it touches, percent in `(0, 100]`.
    pub percent: f64,
}

impl Fault {
    /// When the fault stops acting (for `restart-cold`, the end of its warm-up).
    pub fn end(&self) -> Duration {
        match self.kind {
            FaultKind::RestartCold { warmup, .. } => self.start + self.duration + warmup,
            _ => self.start + self.duration,
        }
    }

    /// Whether the fault acts at `t` (half-open: `[start, end)`).
    pub fn active_at(&self, t: Duration) -> bool {
        self.start <= t && t < self.end()
    }

    /// The same fault moved to start `by` later (a live fault posted at `by` with `@0`).
    pub fn shifted(mut self, by: Duration) -> Fault {
        self.start = self.start.saturating_add(by);
        self
    }
}

fn bad(detail: impl Into<String>) -> ProxyError {
    ProxyError::bad_input("--fault", detail)
}

fn seconds(what: &str, s: &str) -> Result<Duration, ProxyError> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=MAX_SECONDS).contains(&v) => {
            Ok(Duration::from_secs_f64(v))
        }
        _ => Err(bad(format!("{what}: seconds in [0, {MAX_SECONDS}], got {s:?}"))),
    }
}

fn millis(what: &str, s: &str) -> Result<Duration, ProxyError> {
    match s.parse::<u64>() {
        Ok(v) if v <= MAX_LATENCY_MS => Ok(Duration::from_millis(v)),
        _ => Err(bad(format!("{what}: whole milliseconds in [0, {MAX_LATENCY_MS}], got {s:?}"))),
    }
}

fn percent(what: &str, s: &str, zero_ok: bool) -> Result<f64, ProxyError> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && v <= 100.0 && (v > 0.0 || (zero_ok && v == 0.0)) => Ok(v),
        _ => Err(bad(format!("{what}: a percentage in (0, 100], got {s:?}"))),
    }
}

impl FromStr for Fault {
    type Err = ProxyError;

    /// Parses `KIND:SECONDS[@START][,KEY=VALUE…]`; see the [module docs](super) for the keys.
    fn from_str(s: &str) -> Result<Self, ProxyError> {
        if s.len() > 256 {
            return Err(bad("longer than 256 bytes"));
        }
        let mut parts = s.split(',');
        let head = parts.next().unwrap_or_default();
        let (kind, when) = head
            .split_once(':')
            .ok_or_else(|| bad(format!("{s:?}: expected KIND:SECONDS[@START], e.g. fail:10@5")))?;
        let (dur, start) = when.split_once('@').unwrap_or((when, "0"));
        let (duration, start) = (seconds("SECONDS", dur)?, seconds("START", start)?);
        let mut opts: Vec<(&str, &str)> = Vec::new();
        for p in parts {
            let (k, v) =
                p.split_once('=').ok_or_else(|| bad(format!("{p:?}: expected KEY=VALUE")))?;
            if opts.iter().any(|(seen, _)| *seen == k) {
                return Err(bad(format!("{k}: given twice")));
            }
            opts.push((k, v));
        }
        fn take<'a>(key: &str, opts: &mut Vec<(&str, &'a str)>) -> Option<&'a str> {
            opts.iter().position(|(k, _)| *k == key).map(|i| opts.remove(i).1)
        }
        let pct_key = take("pct", &mut opts);
        let pct = pct_key.map(|v| percent("pct", v, false)).transpose()?.unwrap_or(100.0);
        let kind = match kind {
            "fail" | "partial" => {
                if kind == "partial" && pct_key.is_none() {
                    return Err(bad("partial: needs pct=P (the share that fails)"));
                }
                FaultKind::Fail(match take("mode", &mut opts) {
                    None => FailMode::Status,
                    Some("refuse") if pct < 100.0 => {
                        return Err(bad("mode=refuse closes the listener: it takes no pct"));
                    }
                    Some("refuse") => FailMode::Refuse,
                    Some("reset") => FailMode::Reset,
                    Some("close") => FailMode::Close,
                    Some("503" | "status") => FailMode::Status,
                    Some(m) => return Err(bad(format!("mode: refuse|reset|close|503, got {m:?}"))),
                })
            }
            "hang" => FaultKind::Hang {
                max: take("max", &mut opts)
                    .map_or(Ok(Duration::from_secs(30)), |v| seconds("max", v))?,
            },
            "slow" => {
                let latency = millis("latency", take("latency", &mut opts).unwrap_or("100"))?;
                let jitter = take("jitter", &mut opts).map(|v| millis("jitter", v)).transpose()?;
                FaultKind::Slow(match (take("dist", &mut opts), jitter) {
                    (None | Some("fixed"), None) => Delay::Fixed(latency),
                    (None | Some("uniform"), j) => {
                        let jitter = j.unwrap_or(latency).min(latency);
                        Delay::Uniform { latency, jitter }
                    }
                    (Some("exp"), None) => Delay::Exponential(latency),
                    (Some(d), _) => {
                        return Err(bad(format!(
                            "dist: fixed|uniform|exp (jitter only with uniform), got {d:?}"
                        )));
                    }
                })
            }
            "restart-cold" | "cold" => FaultKind::RestartCold {
                warmup: take("warmup", &mut opts)
                    .map_or(Ok(Duration::from_secs(10)), |v| seconds("warmup", v))?,
                floor: take("floor", &mut opts).map_or(Ok(10.0), |v| percent("floor", v, true))?,
            },
            "bandwidth" => {
                let rate =
                    take("rate", &mut opts).ok_or_else(|| bad("bandwidth: needs rate=KB/s"))?;
                match rate.parse::<u64>() {
                    Ok(kb) if (1..=10_000_000).contains(&kb) => {
                        FaultKind::Bandwidth { bytes_per_s: kb * 1000 }
                    }
                    _ => return Err(bad(format!("rate: KB/s in [1, 10000000], got {rate:?}"))),
                }
            }
            k => {
                return Err(bad(format!(
                    "unknown kind {k:?}: fail, partial, hang, slow, restart-cold, bandwidth"
                )));
            }
        };
        if let Some((k, _)) = opts.first() {
            return Err(bad(format!("{k}: not a key of {}", kind.name())));
        }
        Ok(Fault { kind, start, duration, percent: pct })
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}@{}",
            self.kind.name(),
            self.duration.as_secs_f64(),
            self.start.as_secs_f64()
        )?;
        match self.kind {
            // No `mode` is the mode's own default (reset in TCP, 503 in HTTP).
            FaultKind::Fail(FailMode::Status) => {}
            FaultKind::Fail(m) => write!(
                f,
                ",mode={}",
                match m {
                    FailMode::Refuse => "refuse",
                    FailMode::Reset => "reset",
                    _ => "close",
                }
            )?,
            FaultKind::Hang { max } => write!(f, ",max={}", max.as_secs_f64())?,
            FaultKind::Slow(Delay::Fixed(d)) => write!(f, ",latency={}", d.as_millis())?,
            FaultKind::Slow(Delay::Uniform { latency, jitter }) => {
                write!(f, ",latency={},jitter={}", latency.as_millis(), jitter.as_millis())?
            }
            FaultKind::Slow(Delay::Exponential(d)) => {
                write!(f, ",latency={},dist=exp", d.as_millis())?
            }
            FaultKind::RestartCold { warmup, floor } => {
                write!(f, ",warmup={},floor={floor}", warmup.as_secs_f64())?
            }
            FaultKind::Bandwidth { bytes_per_s } => write!(f, ",rate={}", bytes_per_s / 1000)?,
        }
        if self.percent < 100.0 {
            write!(f, ",pct={}", self.percent)?;
        }
        Ok(())
    }
}
