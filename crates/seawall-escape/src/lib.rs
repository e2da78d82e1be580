//! # seawall-escape — the storm runbook as code
//!
//! Retries off fleet-wide, admission cut, then a watched ramp back: the library behind
//! `seawall escape`.
//!
//! # Why this order
//!
//! Restarting, scaling and relaxing timeouts during a storm each add energy to the feedback loop;
//! what ends it is turning retries off fleet-wide and bringing them back in a staged rollout.
//! The other half of the escape:
//! cut load hard at the edge (a cut that leaves load above the hidden capacity achieves
//! nothing), drop queued work older than the callers' timeouts, then ramp back 10 → 25 → 50 →
//! 100 % watching goodput and queue age. [`run`] does exactly that, one printed step at a time:
//!
//! 1. retries to 0 % through the fleet switch (`seawall_tower::client::fleet`, Redis);
//! 2. admission cut to a fraction on each shedding layer's admin URL (`POST URL?percent=N`) —
//!    or, with no URL, printed as a manual step with the value to set;
//! 3. queued work older than the callers' timeout: dropped through `--flush-url`s, else printed as
//!    a check (`DeadlineLayer` drops it on seawall servers);
//! 4. hold until goodput returns and the queue is younger than the callers' timeout;
//! 5. each ramp stage sets retries to the stage and admission proportionally, holds, and checks
//!    goodput and queue age; a regression steps back to the previous stage and stops.
//!
//! Without `apply` nothing is contacted: every step prints what it would change.
#![warn(missing_docs)]

mod act;
pub mod mesh;
mod watch;

use std::fmt;
use std::time::Duration;

pub use act::Fleet;

use seawall_detect::scrape::ScrapeError;

/// What `escape` does and against what.
#[derive(Debug, Clone, PartialEq)]
pub struct EscapeConfig {
    /// Redis URL of the fleet switch (`redis://127.0.0.1:6379`); `None`: printed as manual.
    pub redis: Option<String>,
    /// The fleet switch's key and channel (default `seawall:retries`).
    pub key: String,
    /// Admin URLs of the shedding layers' admission knob (`POST URL?percent=N`).
    pub admission_urls: Vec<String>,
    /// Admission while escaping, percent of normal (default 30).
    pub admission_percent: u8,
    /// Admin URLs that drop queued work older than a given age (`POST URL?older_than_ms=N`),
    /// for servers without a `DeadlineLayer`; empty: step 3 is a printed check.
    pub flush_urls: Vec<String>,
    /// Sent as `Authorization: Bearer <token>` with every admission and flush `POST` (the
    /// endpoints of `seawall_tower::admin` want it); checked before anything is contacted.
    pub admin_token: Option<String>,
    /// Ramp stages, percent of retries (default 10, 25, 50, 100).
    pub ramp: Vec<u8>,
    /// How long each stage is held and watched.
    pub hold: Duration,
    /// How long to wait for goodput to return before the ramp (then stop, retries still off).
    pub max_wait: Duration,
    /// Metrics endpoints, edge first (see [`seawall_detect::scrape`]); empty: ramp on time alone.
    pub scrape: Vec<String>,
    /// Seconds between scrapes while watching.
    pub interval: Duration,
    /// The callers' timeout, seconds: queued work older than this is dead.
    pub caller_timeout_s: f64,
    /// Act; otherwise print what would be done.
    pub apply: bool,
}

impl Default for EscapeConfig {
    fn default() -> Self {
        EscapeConfig {
            redis: None,
            key: "seawall:retries".into(),
            admission_urls: Vec::new(),
            admission_percent: 30,
            flush_urls: Vec::new(),
            admin_token: None,
            ramp: seawall::control::RAMP.to_vec(),
            hold: Duration::from_secs(30),
            max_wait: Duration::from_secs(120),
            scrape: Vec::new(),
            interval: Duration::from_secs(1),
            caller_timeout_s: 1.0,
            apply: false,
        }
    }
}

/// How an escape ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Outcome {
    /// Dry run: nothing was changed.
    DryRun,
    /// Every stage held: retries and admission are back to 100 %.
    Completed,
    /// The escape stopped; the fleet is left at `retry_percent`.
    Stopped {
        /// Retries percentage left in place.
        retry_percent: u8,
        /// Why it stopped.
        reason: String,
    },
}

/// Why `escape` could not carry on.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EscapeError {
    /// The configuration is unusable (e.g. an empty or decreasing ramp).
    Config(String),
    /// Redis could not be reached or refused a command.
    Redis(String),
    /// An admission admin URL failed.
    Admission {
        /// The URL.
        url: String,
        /// What happened.
        message: String,
    },
    /// A flush admin URL failed.
    Flush {
        /// The URL.
        url: String,
        /// What happened.
        message: String,
    },
    /// The first scrape of the watched endpoints failed.
    Scrape(ScrapeError),
}

impl fmt::Display for EscapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EscapeError::Config(m) => write!(f, "{m}"),
            EscapeError::Redis(m) => write!(f, "redis: {m}"),
            EscapeError::Admission { url, message } => write!(f, "admission {url}: {message}"),
            EscapeError::Flush { url, message } => write!(f, "flush {url}: {message}"),
            EscapeError::Scrape(e) => write!(f, "scrape: {e}"),
        }
    }
}

impl std::error::Error for EscapeError {}

/// Admission at a ramp stage: from the cut back to 100 % in proportion to the stage.
pub fn admission_at(cut: u8, stage: u8) -> u8 {
    let (cut, stage) = (u32::from(cut.min(100)), u32::from(stage.min(100)));
    (cut + (100 - cut) * stage / 100) as u8
}

/// Runs the escape, handing every printed line to `say`.
pub fn run(cfg: &EscapeConfig, say: &mut dyn FnMut(&str)) -> Result<Outcome, EscapeError> {
    if cfg.ramp.is_empty()
        || cfg.ramp.windows(2).any(|w| w[0] >= w[1])
        || cfg.ramp.iter().any(|&p| p > 100)
    {
        return Err(EscapeError::Config("the ramp must rise strictly, within 0–100 %".into()));
    }
    if !(cfg.caller_timeout_s.is_finite() && cfg.caller_timeout_s > 0.0) {
        return Err(EscapeError::Config("the callers' timeout must be positive".into()));
    }
    let mut ex = act::Executor::new(cfg)?;
    let mut watch = watch::Watch::new(cfg, ex.apply())?;
    let mode = if cfg.apply { "APPLY" } else { "DRY RUN (add --apply to act)" };
    say(&format!("seawall escape — {mode}"));
    let before = watch.observe(say, "now", cfg.interval);

    ex.retries(say, 1, 0)?;
    ex.admission(say, 2, cfg.admission_percent)?;
    ex.flush(say, 3, cfg.caller_timeout_s, before.map(|b| b.queue_age_s))?;
    say(&format!(
        "step 4: hold until goodput returns (at most {:.0} s)",
        cfg.max_wait.as_secs_f64()
    ));
    let mut last = match watch.until_recovered(say, cfg.max_wait) {
        Ok(seen) => seen,
        Err(reason) => return Ok(stop(say, 0, reason)),
    };
    let mut prev = 0u8;
    for (i, &stage) in cfg.ramp.iter().enumerate() {
        let step = 5 + i;
        ex.retries(say, step, stage)?;
        ex.admission(say, step, admission_at(cfg.admission_percent, stage))?;
        match watch.hold(say, cfg.hold, last.as_ref()) {
            Ok(seen) => last = seen.or(last),
            Err(reason) => {
                say(&format!("step {step}: regression at {stage} %: {reason}; stepping back"));
                ex.retries(say, step, prev)?;
                ex.admission(say, step, admission_at(cfg.admission_percent, prev))?;
                return Ok(stop(say, prev, reason));
            }
        }
        prev = stage;
    }
    if !cfg.apply {
        say("dry run: nothing was changed");
        return Ok(Outcome::DryRun);
    }
    say("done: retries and admission are back to 100 %; keep watching `seawall detect`");
    Ok(Outcome::Completed)
}

fn stop(say: &mut dyn FnMut(&str), retry_percent: u8, reason: String) -> Outcome {
    say(&format!("STOPPED with retries at {retry_percent} %: {reason}"));
    Outcome::Stopped { retry_percent, reason }
}

#[cfg(test)]
mod tests;
