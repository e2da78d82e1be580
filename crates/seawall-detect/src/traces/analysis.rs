//! Spans → per-interval samples and the signals only traces carry.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::{Kind, Span};
use crate::Sample;

/// One interval of a trace analysis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    /// The classifier's input: edge calls (root server spans starting in the interval), goodput
    /// (those that did not fail), attempts at the dependency (its client spans).
    pub sample: Sample,
    /// Start of the interval, nanoseconds since the Unix epoch (wall clock, for the evidence).
    pub start_unix_ns: u64,
    /// Parent spans starting here with two or more attempts to the dependency.
    pub staircases: u64,
    /// Client spans starting here with `http.request.resend_count` ≥ 1.
    pub resends: u64,
    /// Of the time the dependency's server spans starting here ran, the share after their
    /// caller's span had ended (0 without such spans).
    pub wasted_share: f64,
}

/// One staircase: a parent call's attempts at one dependency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Staircase {
    /// The trace, as hex.
    pub trace: String,
    /// The dependency.
    pub peer: String,
    /// Attempts under the one parent.
    pub attempts: u32,
    /// When two or more of its failed attempts lasted the same time (within 5 %, at least
    /// 50 ms): that time, seconds — the caller's timeout.
    pub at_timeout_s: Option<f64>,
}

/// What the whole input shows that metrics do not.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceSignals {
    /// Parent calls with two or more attempts at the dependency.
    pub staircases: u64,
    /// Of those, the ones whose failed attempts all end at one duration (a timeout).
    pub at_timeout: u64,
    /// The longest staircase (ties: the first).
    pub example: Option<Staircase>,
    /// Client spans carrying `http.request.resend_count` ≥ 1.
    pub resends: u64,
    /// Client spans to the dependency.
    pub attempts: u64,
    /// Seconds the dependency's server spans (those whose caller's span is in the input) ran.
    pub server_s: f64,
    /// Of those, seconds after the caller's span had ended.
    pub wasted_s: f64,
}

/// A trace analysis: the dependency chosen, the intervals and the totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    /// The dependency whose attempts are counted (`None` when no client span was seen).
    pub dependency: Option<String>,
    /// Every peer seen, with its client spans (most first).
    pub peers: Vec<(String, u64)>,
    /// The intervals, from the first span's start.
    pub intervals: Vec<Interval>,
    /// The totals.
    pub signals: TraceSignals,
}

impl Analysis {
    /// Analyses `spans` in intervals of `interval_s` seconds (clamped to 0.1 s .. 1 h). The
    /// dependency is the peer containing `dependency` when given, else the peer with the most
    /// client spans.
    pub fn of(spans: &[Span], interval_s: f64, dependency: Option<&str>) -> Analysis {
        Self::since(spans, None, interval_s, dependency)
    }

    /// [`Analysis::of`] with intervals counted from `origin_unix_ns` (a live receiver's start)
    /// instead of the first span's start; spans that started earlier count in the first.
    pub fn since(
        spans: &[Span],
        origin_unix_ns: Option<u64>,
        interval_s: f64,
        dependency: Option<&str>,
    ) -> Analysis {
        let interval_s = if interval_s.is_finite() { interval_s.clamp(0.1, 3600.0) } else { 1.0 };
        let step_ns = (interval_s * 1e9) as u64;
        let by_id: HashMap<(u128, u64), &Span> =
            spans.iter().map(|s| ((s.trace, s.id), s)).collect();
        let mut peers: HashMap<&str, u64> = HashMap::new();
        for s in spans.iter().filter(|s| s.kind == Kind::Client) {
            if let Some(p) = &s.peer {
                *peers.entry(p.as_str()).or_default() += 1;
            }
        }
        let mut peer_list: Vec<(String, u64)> =
            peers.iter().map(|(p, n)| (p.to_string(), *n)).collect();
        peer_list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let chosen = match dependency {
            Some(want) => peer_list.iter().find(|(p, _)| p.contains(want)).map(|(p, _)| p.clone()),
            None => peer_list.first().map(|(p, _)| p.clone()),
        };
        let Some(origin) = origin_unix_ns.or_else(|| spans.iter().map(|s| s.start_ns).min()) else {
            return Analysis {
                dependency: chosen,
                peers: peer_list,
                intervals: Vec::new(),
                signals: TraceSignals::default(),
            };
        };
        let last = spans.iter().map(|s| s.start_ns).max().unwrap_or(origin).max(origin);
        let n = usize::try_from((last - origin) / step_ns + 1).unwrap_or(usize::MAX).min(1_000_000);
        let slot = |ns: u64| {
            usize::try_from((ns.saturating_sub(origin)) / step_ns).unwrap_or(usize::MAX).min(n - 1)
        };
        #[derive(Default, Clone)]
        struct Acc {
            edge: u64,
            good: u64,
            attempts: u64,
            staircases: u64,
            resends: u64,
            server_ns: u64,
            wasted_ns: u64,
        }
        let mut acc = vec![Acc::default(); n];
        // Edge calls: root server spans (or, without any server span at the root, every root).
        let is_root = |s: &Span| s.parent.is_none_or(|p| !by_id.contains_key(&(s.trace, p)));
        let server_roots = spans.iter().any(|s| is_root(s) && s.kind == Kind::Server);
        for s in spans.iter().filter(|s| is_root(s) && (!server_roots || s.kind == Kind::Server)) {
            let a = &mut acc[slot(s.start_ns)];
            a.edge += 1;
            a.good += u64::from(!s.error);
        }
        let mut signals = TraceSignals::default();
        let mut groups: BTreeMap<(u128, u64), Vec<&Span>> = BTreeMap::new();
        for s in spans.iter().filter(|s| s.kind == Kind::Client) {
            if s.resend_count.is_some_and(|n| n >= 1) {
                acc[slot(s.start_ns)].resends += 1;
                signals.resends += 1;
            }
            if s.peer.is_some() && s.peer == chosen {
                acc[slot(s.start_ns)].attempts += 1;
                signals.attempts += 1;
                if let Some(p) = s.parent {
                    groups.entry((s.trace, p)).or_default().push(s);
                }
            }
            // Work nobody used: the callee's server spans that outlive this client span.
        }
        for s in spans.iter().filter(|s| s.kind == Kind::Server) {
            let Some(caller) = s.parent.and_then(|p| by_id.get(&(s.trace, p))) else { continue };
            if caller.kind != Kind::Client || caller.peer != chosen {
                continue;
            }
            let ran = s.end_ns - s.start_ns;
            let wasted = s.end_ns.saturating_sub(caller.end_ns.max(s.start_ns));
            let a = &mut acc[slot(s.start_ns)];
            a.server_ns += ran;
            a.wasted_ns += wasted;
            signals.server_s += ran as f64 / 1e9;
            signals.wasted_s += wasted as f64 / 1e9;
        }
        for ((trace, _), mut tries) in groups {
            if tries.len() < 2 {
                continue;
            }
            tries.sort_by_key(|s| s.start_ns);
            let first = tries[0];
            acc[slot(first.start_ns)].staircases += 1;
            signals.staircases += 1;
            let failed: Vec<f64> = tries
                .iter()
                .filter(|s| s.error || s.end_ns == s.start_ns)
                .map(|s| s.duration_s())
                .collect();
            let at_timeout = same_duration(&failed);
            signals.at_timeout += u64::from(at_timeout.is_some());
            let attempts = u32::try_from(tries.len()).unwrap_or(u32::MAX);
            if signals.example.as_ref().is_none_or(|e| attempts > e.attempts) {
                signals.example = Some(Staircase {
                    trace: format!("{trace:032x}"),
                    peer: first.peer.clone().unwrap_or_default(),
                    attempts,
                    at_timeout_s: at_timeout,
                });
            }
        }
        let intervals = acc
            .into_iter()
            .enumerate()
            .map(|(k, a)| Interval {
                sample: Sample {
                    t: k as f64 * interval_s,
                    edge_rps: a.edge as f64 / interval_s,
                    goodput_rps: a.good as f64 / interval_s,
                    dependency_rps: a.attempts as f64 / interval_s,
                    queue_age_s: 0.0,
                    refusals_rps: 0.0,
                },
                start_unix_ns: origin + k as u64 * step_ns,
                staircases: a.staircases,
                resends: a.resends,
                wasted_share: if a.server_ns > 0 {
                    a.wasted_ns as f64 / a.server_ns as f64
                } else {
                    0.0
                },
            })
            .collect();
        Analysis { dependency: chosen, peers: peer_list, intervals, signals }
    }
}

/// Two or more durations of at least 50 ms within 5 % of their median: that median.
pub(super) fn same_duration(d: &[f64]) -> Option<f64> {
    if d.len() < 2 {
        return None;
    }
    let mut v = d.to_vec();
    v.sort_by(f64::total_cmp);
    let median = v[v.len() / 2];
    (median >= 0.05 && v.iter().all(|x| (x - median).abs() <= 0.05 * median)).then_some(median)
}
