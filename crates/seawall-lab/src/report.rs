//! Turning measurements into the shared [`Results`] (source `Lab`), plus the lab's own figures.

use seawall_report::{Fault, Results, Run, Series, Source};

use crate::config::LabParams;
use crate::node::Role;
use crate::node::stats::StatsSnapshot;
use crate::pg::PgSample;
use crate::run::Measured;
use crate::saturation::Saturation;

/// Seconds at the start of the fault left out of [`LabFigures::amplification_during`]: the
/// time a baseline retry chain takes to reach its full fan-out (3 × (3 × 250 ms + 200 ms)).
pub const SETTLE_S: usize = 3;

/// Figures the lab reports beyond [`Run`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabFigures {
    /// Attempts reaching the dependency per edge request during the fault, after
    /// [`SETTLE_S`] seconds of settling (0 without a fault).
    pub amplification_during: f64,
    /// Goodput in requests per second over the whole run.
    pub goodput_rps: f64,
    /// Offered edge requests per second over the whole run.
    pub offered_rps: f64,
    /// Retries refused by the budget over the run.
    pub budget_refusals: u64,
    /// Requests shed or dropped as doomed, all tiers, over the run.
    pub shed: u64,
    /// The load generator's worst lag behind its schedule, seconds.
    pub max_lag_s: f64,
    /// Attempts each tier's client layer sent over the run (edge, gateway, order), from the
    /// layers' own Prometheus counters (`seawall_client_attempt_started_total`).
    pub client_attempts: [u64; 3],
    /// With `--backend`: the peak of the `pg_stat_activity` query over the fault —
    /// most identical order statements active at once, and the oldest one's age.
    pub pg_peak: Option<PgSample>,
    /// The lab's own saturation over the run: when it was capped by the machine, the
    /// amplification and attempts figures are lower bounds.
    pub saturation: Saturation,
}

/// What `f` counted at `tier` in each second of the run: its cumulative count at whole seconds
/// of the node's own clock ([`StatsSnapshot::at_s`], from its first reading), interpolated
/// between the readings around each, then differenced. The parent scrapes each node once a
/// second, but a node swamped by a storm answers late (the order service's and the dependency's
/// readings came up to 1.3 s after the tick in a debug build on 2 cores): differenced as read,
/// one "second" then covered 1.3 s and the next 0.7, and the worst second's amplification read
/// 33× against the 27 that three tiers of 3 attempts allow.
fn deltas(m: &Measured, tier: usize, f: impl Fn(&StatsSnapshot) -> u64) -> Vec<f64> {
    let readings: Vec<(f64, f64)> =
        m.ticks.iter().map(|row| (row[tier].at_s, f(&row[tier]) as f64)).collect();
    on_grid(&readings).windows(2).map(|w| (w[1] - w[0]).max(0.0)).collect()
}

/// `(time, cumulative count)` readings, one per tick, resampled at the first reading's time
/// plus 0, 1, 2, … seconds (as many points as readings). Readings without a time (a node that
/// does not stamp them) or going back in time are taken as they are.
pub(crate) fn on_grid(readings: &[(f64, f64)]) -> Vec<f64> {
    let timed =
        readings.iter().all(|&(t, _)| t > 0.0) && readings.windows(2).all(|w| w[1].0 >= w[0].0);
    let Some(&(t0, _)) = readings.first().filter(|_| timed) else {
        return readings.iter().map(|&(_, c)| c).collect();
    };
    (0..readings.len())
        .map(|k| {
            let t = t0 + k as f64;
            match readings.iter().position(|&(at, _)| at >= t) {
                Some(0) => readings[0].1,
                Some(i) => {
                    let ((ta, ca), (tb, cb)) = (readings[i - 1], readings[i]);
                    if tb > ta { ca + (cb - ca) * (t - ta) / (tb - ta) } else { cb }
                }
                None => readings[readings.len() - 1].1,
            }
        })
        .collect()
}

/// The fault window of `params`, in the report's terms.
pub fn fault_of(params: &LabParams) -> Option<Fault> {
    params.fault.map(|f| {
        let start_s = params.at.as_secs_f64();
        Fault {
            kind: format!(
                "{} of the dependency for {} s",
                f.kind.as_str(),
                f.duration.as_secs_f64()
            ),
            start_s,
            end_s: start_s + f.duration.as_secs_f64(),
        }
    })
}

/// The peak readings (copies and age, each its own maximum) at the seconds within the fault.
fn pg_peak(params: &LabParams, samples: &[PgSample]) -> Option<PgSample> {
    let f = params.fault?;
    if samples.is_empty() {
        return None;
    }
    let a = params.at.as_secs_f64().floor() as usize;
    let b = (params.at + f.duration).as_secs_f64().ceil() as usize;
    let window = &samples[a.min(samples.len())..(b + 1).min(samples.len())];
    Some(window.iter().fold(PgSample::default(), |p, s| PgSample {
        running_copies: p.running_copies.max(s.running_copies),
        oldest_s: p.oldest_s.max(s.oldest_s),
    }))
}

/// Wasted work: the share of the dependency's busy time spent on requests whose answer reached
/// no user in time. Every request answered 2xx within its deadline at the load generator took
/// exactly one piece of work at the dependency, whose length came back with the answer
/// ([`SERVICE_HEADER`](crate::node::stats::SERVICE_HEADER)), summed in `good_busy`; the rest of
/// the dependency's busy time (`busy`, every request's service, whole or cut short) was for a
/// caller — at some tier, or the user — who had gone. The simulator weighs the same thing
/// (service time of work whose chain of callers up to the edge had been abandoned), so the two
/// compare. By time, not by count: the storm's wasted requests are served up to 3× slower and
/// cost that much more capacity.
fn wasted_work(good_busy: f64, busy: f64) -> f64 {
    if busy <= 0.0 { 0.0 } else { (1.0 - good_busy / busy).clamp(0.0, 1.0) }
}

/// The worst second's mean lateness of a timer at any node (see
/// [`crate::node::stats::probe_timers`]), seconds; `None` when no node probed (a node of an
/// older build). A second in which a node's probe woke only once counts like any other: a
/// runtime stalled for most of a second wakes its probe once, very late.
fn worst_timer_late(m: &Measured, n: usize) -> Option<f64> {
    (0..tiers_of(m))
        .flat_map(|t| {
            let late = deltas(m, t, |s| s.timer_late_us);
            let probes = deltas(m, t, |s| s.timer_probes);
            late.into_iter()
                .zip(probes)
                .take(n)
                .filter(|&(_, p)| p >= 1.0)
                .map(|(l, p)| l / p / 1e6)
        })
        .reduce(f64::max)
}

/// The tiers each reading holds: the lab's four, or fewer for a service of the user's
/// ([`crate::vlab::run_service`]: the dependency alone).
fn tiers_of(m: &Measured) -> usize {
    m.ticks.first().map_or(Role::ALL.len(), Vec::len).max(1)
}

/// One configuration's [`Run`] and [`LabFigures`].
pub fn to_run(params: &LabParams, m: &Measured) -> (Run, LabFigures) {
    let n = m.load.offered.len().min(m.ticks.len().saturating_sub(1));
    let tiers = tiers_of(m);
    let bottom = tiers - 1;
    let sum_tiers = |f: &dyn Fn(&StatsSnapshot) -> u64| -> Vec<f64> {
        (0..n).map(|k| (0..tiers).map(|t| deltas(m, t, f)[k]).sum()).collect()
    };
    let mut series = Series {
        t: (0..n).map(|k| k as f64).collect(),
        edge_rps: m.load.offered[..n].iter().map(|&x| x as f64).collect(),
        goodput_rps: m.load.good[..n].iter().map(|&x| x as f64).collect(),
        bottom_attempts_rps: deltas(m, bottom, |s| s.received)[..n].to_vec(),
        tier_attempts_rps: (0..tiers).map(|t| deltas(m, t, |s| s.received)[..n].to_vec()).collect(),
        queue_age_s: (1..=n).map(|k| m.ticks[k][bottom].queue_age_s).collect(),
        budget_refusals_rps: sum_tiers(&|s| s.budget_refusals),
        shed_rps: sum_tiers(&|s| s.shed + s.doomed),
        breaker_open: vec![0.0; n],
    };
    series.t.truncate(n);
    let fault = fault_of(params);
    let total = |v: &[f64]| v.iter().sum::<f64>();
    let offered = total(&series.edge_rps);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let amplification_during = fault.as_ref().map_or(0.0, |f| {
        let (a, b) = (f.start_s as usize + SETTLE_S, (f.end_s as usize).min(n));
        let a = a.min(b);
        ratio(total(&series.bottom_attempts_rps[a..b]), total(&series.edge_rps[a..b]))
    });
    let last = m.ticks.last().map(|r| r[bottom]).unwrap_or_default();
    let figures = LabFigures {
        amplification_during,
        goodput_rps: ratio(total(&series.goodput_rps), n as f64),
        offered_rps: ratio(offered, n as f64),
        budget_refusals: total(&series.budget_refusals_rps) as u64,
        shed: total(&series.shed_rps) as u64,
        max_lag_s: m.load.max_lag.as_secs_f64(),
        client_attempts: [0, 1, 2].map(|t| {
            let at = |row: Option<&Vec<StatsSnapshot>>| {
                row.and_then(|r| r.get(t)).map_or(0, |s| s.attempts_sent)
            };
            at(m.ticks.get(n)).saturating_sub(at(m.ticks.first()))
        }),
        pg_peak: pg_peak(params, &m.pg),
        // The synthetic lab's generator sends a late backlog rather than dropping it: its lag
        // is the measure.
        saturation: Saturation::new(m.load.max_lag, 0, offered as u64, &m.cpu)
            .with_timer_late(worst_timer_late(m, n)),
    };
    let mut run = Run::judged(m.stack.map_or("?", |s| s.as_str()), series, fault.as_ref());
    run.wasted_work = wasted_work(m.load.good_busy.as_secs_f64(), last.busy_s);
    run.events = offered as u64;
    (run, figures)
}

/// The [`Results`] of a lab run.
pub fn to_results(params: &LabParams, runs: Vec<Run>) -> Results {
    let tiers = Role::ALL
        .iter()
        .map(|r| match r {
            Role::Dependency if params.backend.is_some() => "postgres".to_string(),
            r => r.as_str().to_string(),
        })
        .collect();
    results(params, "lab", "real tiers on 127.0.0.1:", tiers, runs)
}

/// The [`Results`] of runs under `params`: `scenario` names them, `what` starts the
/// description (the rate, the dependency and the fault follow), `tiers` names the series' tiers.
pub(crate) fn results(
    params: &LabParams,
    scenario: &str,
    what: &str,
    tiers: Vec<String>,
    runs: Vec<Run>,
) -> Results {
    Results {
        scenario: scenario.into(),
        description: format!(
            "{what} {} rps offered to a {} rps dependency{}",
            params.rate,
            params.capacity,
            params
                .fault
                .map_or(String::new(), |f| format!(", fault {f} at {} s", params.at.as_secs_f64())),
        ),
        seed: params.seed,
        source: Source::Lab,
        duration_s: params.duration.as_secs_f64(),
        fault: fault_of(params),
        tiers,
        runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_readings_are_resampled_at_whole_seconds() {
        // 1,000 a second from t = 10; the readings at 11 and 12 came 0.3 s and 0.9 s late.
        let late = [(10.0, 0.0), (11.3, 1300.0), (12.9, 2900.0), (13.0, 3000.0)];
        let grid = on_grid(&late);
        assert_eq!(grid.len(), 4);
        for (k, c) in grid.iter().enumerate() {
            assert!((c - 1000.0 * k as f64).abs() < 1e-6, "{grid:?}");
        }
        // A missed scrape (the reading repeated) is bridged by the ones around it.
        let missed = [(10.0, 0.0), (11.0, 1000.0), (11.0, 1000.0), (13.0, 3000.0)];
        assert!((on_grid(&missed)[2] - 2000.0).abs() < 1e-6);
        // Past the last reading: its count. Without times: as read.
        assert_eq!(on_grid(&[(1.0, 5.0), (1.5, 9.0)]), vec![5.0, 9.0]);
        assert_eq!(on_grid(&[(0.0, 5.0), (0.0, 9.0)]), vec![5.0, 9.0]);
    }
}
