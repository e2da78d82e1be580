//! The one judgement: what "recovered", "stays down", "degraded" and "not judged" mean, for
//! every tool.
//!
//! `seawall simulate`, `seawall lab` (its own tiers and `--target`), `seawall load` and
//! `seawall detect --replay` of a `results.json` all call [`judge`] on the same per-second
//! series, so two tools can never read one file two ways. Every verdict sentence a report or a
//! table prints comes from [`Verdict`] through [`words`].
//!
//! # Why a window, and why relative to the run itself
//!
//! Recovery is a claim about the system, not about one second. A service at 93 % of its
//! capacity loses a few percent of its requests in a second now and then from the arrivals
//! alone (a Poisson burst queues for a moment), fault or no fault. A rule that asks every
//! second after the fault to be healthy restarts its clock at each such dip and reports
//! "recovered 23 s after the fault" for a run whose goodput came back one second after it. So
//! the judgement asks for goodput to come back *and stay back* for a window, and ignores dips
//! shorter than that window:
//!
//! - the **level** is the run's own goodput before the fault (the share of edge requests
//!   answered within their deadline), not a constant: a stack that answers 97 % normally is
//!   healthy at 97 %. It is the median of the seconds before the fault, so one bad second
//!   there (a burst of arrivals, a cold start) does not lower it;
//! - a second is **healthy** when its goodput is at least [`TOLERANCE`] (90 %) of that level;
//!   a second without edge requests is healthy (nothing was asked);
//! - a **relapse** is [`SUSTAIN_S`] (5) or more consecutive seconds after the fault's end that
//!   are not healthy; shorter dips are noise;
//! - goodput **came back** at the first healthy second after the fault's end and after the last
//!   relapse, if at least [`SUSTAIN_S`] healthy seconds follow from there (the return was seen
//!   to last); `recovery_s` counts from the fault's end to that second;
//! - the run **recovered** there when goodput from that second to the end of the run is at
//!   least [`TOLERANCE`] of the level (otherwise it came back only partly: **degraded**) and
//!   goodput over everything after the fault at least [`MOST`] of it (otherwise it **healed
//!   late**, after losing most of the requests that followed the fault: a herd refused within
//!   one second is one bad second but most of the requests);
//! - without any such stretch it **stays down** when goodput after the fault is below
//!   [`MOST`] of the level, and is **degraded** otherwise.
//!
//! # What it will not judge
//!
//! Recovery is relative to a level, so it needs one: the judgement says *not judged*, with
//! the reason, when no fault was injected (nothing to recover from), when fewer than
//! [`MIN_REQUESTS_BEFORE`] edge requests came before the fault, when the level is below [`MOST`]
//! (the stack never served, or had already fallen over: there is no healthy level to return
//! to), and
//! when the run ends less than [`SUSTAIN_S`] after the fault (too soon to see a sustained
//! return).
//!
//! ```
//! use seawall_report::verdict::{Verdict, judge};
//! use seawall_report::{Fault, Series};
//!
//! // 100 requests a second; the fault (2–4 s) takes goodput to 0; back one second after it,
//! // then a two-second dip that the window ignores.
//! let good = [100., 100., 0., 0., 40., 100., 100., 70., 70., 100., 100., 100., 100., 100.];
//! let series = Series {
//!     t: (0..good.len()).map(|i| i as f64).collect(),
//!     edge_rps: vec![100.0; good.len()],
//!     goodput_rps: good.to_vec(),
//!     ..Series::default()
//! };
//! let fault = Fault { kind: "outage".into(), start_s: 2.0, end_s: 4.0 };
//! let j = judge(&series, Some(&fault));
//! assert_eq!(j.verdict, Verdict::Recovered { recovery_s: 1.0 });
//! assert_eq!(j.sentence(), "recovered 1.0\u{a0}s after the fault");
//! ```

mod compare;
pub mod words;

use serde::{Deserialize, Serialize};

use crate::{Fault, Series};

pub use compare::compare;

/// A second is healthy when its goodput is at least this share of the pre-fault level: 90 %,
/// the share a retry budget's 10 % leaves (Google SRE, "Handling Overload": retries at most
/// 10 % of requests) and the usual "nine in ten" of a service-level objective's first nine.
pub const TOLERANCE: f64 = 0.9;

/// Seconds of a sustained return, and the shortest relapse that counts: 5. Longer than the dips
/// a service near its capacity shows from its arrivals alone (two seconds in the catalog's
/// Bronson run at 93 % utilisation), and short enough to see in a lab run of half a minute after
/// its fault. Also the classic "5 of 5 scrapes" of an alert's `for:` at 1 s resolution.
pub const SUSTAIN_S: f64 = 5.0;

/// "Most": goodput after the fault below this share of the level is "stays down", and a run
/// whose goodput came back but lost more than this share of its post-fault requests "healed
/// late". Also the least goodput before the fault that counts as a level at all.
pub const MOST: f64 = 0.5;

/// Fewest edge requests before the fault for a level to mean anything: 20 (at 20 requests a
/// single failure moves the level by 5 %, half the tolerance).
pub const MIN_REQUESTS_BEFORE: f64 = 20.0;

/// The verdict on one run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verdict {
    /// Goodput came back to its pre-fault level and stayed there (see the module docs).
    Recovered {
        /// Seconds from the fault's end to the first second of the sustained return.
        recovery_s: f64,
    },
    /// Goodput came back to its level and stayed, but only after most of the requests that
    /// followed the fault were lost (a refused reconnect herd); a longer run may read
    /// recovered.
    HealedLate {
        /// Seconds from the fault's end to the first second of the sustained return.
        healthy_from_s: f64,
    },
    /// Neither recovered nor down: goodput after the fault at least [`MOST`] of its level but
    /// never back to it for good (partly back, or relapsing).
    Degraded,
    /// Goodput after the fault below [`MOST`] of its level, never back for good.
    StaysDown,
    /// Recovery cannot be judged on this run, for the reason given.
    NotJudged {
        /// Why not.
        because: NotJudged,
    },
}

/// Why a run's recovery was not judged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum NotJudged {
    /// No fault was injected: there is nothing to recover from.
    NoFault,
    /// Fewer than [`MIN_REQUESTS_BEFORE`] edge requests before the fault.
    TooLittleTraffic {
        /// Edge requests before the fault.
        requests_before: f64,
    },
    /// The level before the fault (the median second's goodput) is below [`MOST`]: the stack
    /// never served, or had fallen over before the fault, so there is no healthy level to
    /// return to.
    UnhealthyBefore {
        /// The level: the median second's goodput before the fault.
        level: f64,
    },
    /// The run ends less than [`SUSTAIN_S`] after the fault.
    EndedTooSoon {
        /// Seconds of the run after the fault's end.
        after_fault_s: f64,
    },
}

impl Verdict {
    /// Recovered (and only then).
    pub fn is_recovered(self) -> bool {
        matches!(self, Verdict::Recovered { .. })
    }

    /// Seconds from the fault's end to recovery, for a recovered run.
    pub fn recovery_s(self) -> Option<f64> {
        match self {
            Verdict::Recovered { recovery_s } => Some(recovery_s),
            _ => None,
        }
    }

    /// Seconds from the fault's end to the sustained return, recovered or healed late.
    pub fn healthy_from_s(self) -> Option<f64> {
        match self {
            Verdict::Recovered { recovery_s: s } | Verdict::HealedLate { healthy_from_s: s } => {
                Some(s)
            }
            _ => None,
        }
    }

    /// Whether the verdict was reached at all.
    pub fn is_judged(self) -> bool {
        !matches!(self, Verdict::NotJudged { .. })
    }
}

/// A run's verdict and the figures it rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judgement {
    /// The verdict.
    pub verdict: Verdict,
    /// Goodput before the fault (the whole run without one): the share of edge requests
    /// answered within their deadline.
    pub goodput_before: f64,
    /// Goodput while the fault lasted (0 without a fault or without requests).
    pub goodput_during: f64,
    /// Goodput from the fault's end to the end of the run (0 without a fault or requests).
    pub goodput_after: f64,
    /// Attempts reaching the bottom tier per edge request in the same second, at most, over the
    /// fault and after it (the whole run without a fault).
    pub peak_amplification: f64,
}

fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 { num / den } else { 0.0 }
}

/// Judges one run from its per-second series and its fault window (see the module docs).
///
/// Never panics: series of unequal lengths are read up to the shortest, and non-finite or
/// negative values count as zero.
pub fn judge(series: &Series, fault: Option<&Fault>) -> Judgement {
    let n = [series.t.len(), series.edge_rps.len(), series.goodput_rps.len()]
        .into_iter()
        .min()
        .unwrap_or(0);
    let clean = |v: f64| if v.is_finite() && v > 0.0 { v } else { 0.0 };
    let (t, edge, good) = (
        |i: usize| series.t[i],
        |i: usize| clean(series.edge_rps[i]),
        |i: usize| clean(series.goodput_rps[i]).min(clean(series.edge_rps[i])),
    );
    let (fs, fe) = fault.map_or((f64::INFINITY, f64::INFINITY), |f| (f.start_s, f.end_s));
    let window = |from: f64, to: f64| {
        let (mut g, mut e) = (0.0, 0.0);
        for i in (0..n).filter(|&i| t(i) >= from && t(i) < to) {
            g += good(i);
            e += edge(i);
        }
        (g, e)
    };
    let (g0, e0) = window(f64::NEG_INFINITY, fs);
    let before = ratio(g0, e0);
    let during = if fault.is_some() { ratio_of(window(fs, fe)) } else { 0.0 };
    let after = if fault.is_some() { ratio_of(window(fe, f64::INFINITY)) } else { 0.0 };
    let from = if fault.is_some() { fs } else { f64::NEG_INFINITY };
    let peak_amplification = (0..n.min(series.bottom_attempts_rps.len()))
        .filter(|&i| t(i) >= from)
        .map(|i| ratio(clean(series.bottom_attempts_rps[i]), edge(i)))
        .fold(0.0, f64::max);
    let judgement = |verdict| Judgement {
        verdict,
        goodput_before: before,
        goodput_during: during,
        goodput_after: after,
        peak_amplification,
    };
    let not = |because| judgement(Verdict::NotJudged { because });
    if fault.is_none() {
        return not(NotJudged::NoFault);
    }
    if e0 < MIN_REQUESTS_BEFORE {
        return not(NotJudged::TooLittleTraffic { requests_before: e0 });
    }
    let level = median((0..n).filter(|&i| t(i) < fs && edge(i) > 0.0).map(|i| good(i) / edge(i)));
    if level < MOST {
        return not(NotJudged::UnhealthyBefore { level });
    }
    let post: Vec<usize> = (0..n).filter(|&i| t(i) >= fe).collect();
    let after_fault_s = post.last().map_or(0.0, |&i| t(i) + step(series, i) - fe);
    if after_fault_s < SUSTAIN_S - 1e-9 {
        return not(NotJudged::EndedTooSoon { after_fault_s: after_fault_s.max(0.0) });
    }
    let healthy: Vec<bool> =
        post.iter().map(|&i| edge(i) <= 0.0 || good(i) >= TOLERANCE * level * edge(i)).collect();
    let verdict = match sustained_return(&post, &healthy, t, |i| step(series, i)) {
        Some(at) => {
            let (gr, er) = window(at, f64::INFINITY);
            let from_s = (at - fe).max(0.0);
            if after < MOST * level {
                Verdict::HealedLate { healthy_from_s: from_s }
            } else if ratio(gr, er) < TOLERANCE * level {
                Verdict::Degraded
            } else {
                Verdict::Recovered { recovery_s: from_s }
            }
        }
        None if after < MOST * level => Verdict::StaysDown,
        None => Verdict::Degraded,
    };
    judgement(verdict)
}

fn ratio_of((g, e): (f64, f64)) -> f64 {
    ratio(g, e)
}

/// The median (the mean of the middle two for an even count), 0 for none.
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        k if k % 2 == 1 => v[k / 2],
        k => (v[k / 2 - 1] + v[k / 2]) / 2.0,
    }
}

/// The interval that sample `i` covers: the step to the next sample (1 s for the tools'
/// series), or the one before it for the last.
fn step(series: &Series, i: usize) -> f64 {
    let t = &series.t;
    let d = match (i.checked_sub(1), t.get(i + 1)) {
        (_, Some(next)) => next - t[i],
        (Some(prev), None) => t[i] - t[prev],
        (None, None) => 1.0,
    };
    if d.is_finite() && d > 0.0 { d } else { 1.0 }
}

/// When goodput came back for good, over the post-fault samples `post`: the first healthy
/// sample after the last relapse (unhealthy samples lasting [`SUSTAIN_S`] in a row), if healthy
/// samples lasting [`SUSTAIN_S`] in all follow from it.
fn sustained_return(
    post: &[usize],
    healthy: &[bool],
    t: impl Fn(usize) -> f64,
    step: impl Fn(usize) -> f64,
) -> Option<f64> {
    let mut from = 0;
    let mut bad = 0.0;
    for (k, &h) in healthy.iter().enumerate() {
        if h {
            bad = 0.0;
        } else {
            bad += step(post[k]);
            if bad >= SUSTAIN_S - 1e-9 {
                from = k + 1;
            }
        }
    }
    let first = (from..post.len()).find(|&k| healthy[k])?;
    let seen: f64 = (first..post.len()).filter(|&k| healthy[k]).map(|k| step(post[k])).sum();
    (seen >= SUSTAIN_S - 1e-9).then(|| t(post[first]))
}

#[cfg(test)]
mod tests;
