//! Honest scale: whether the machine running the lab capped the storm it measured.
//!
//! A retry storm measured on one small machine is only as big as that machine lets it be: when
//! the load generator falls behind its schedule, or drops requests it could not send, or the
//! CPU is busy to the last cycle, the stack was offered less than asked and its retries
//! multiplied less than they would elsewhere. The lab measures its own saturation — the load
//! generator's lag and drops, the machine's CPU from `/proc/stat` once a second, and how late
//! each node's runtime wakes a timer (every per-try timeout and backoff is one) — and when any
//! passes its bound, the run's amplification and attempts figures are **lower bounds**, and the
//! report says so in words.
//!
//! The timers are the direct measure. A debug build of the lab at 100 rps on a 50 rps
//! dependency, all nodes in one process on 2 cores, measured the baseline's storm at 14.7× (CPU
//! 89 %, under its bound) and 4.4× (timers 39 ms late) where the release build, or the same
//! debug lab at 30 rps on 15, measures the 27× the simulator predicts.

use std::time::Duration;

/// Lag behind the schedule beyond which the offered load is no longer the one asked.
pub const LAG_BOUND: Duration = Duration::from_millis(100);
/// Share of requests dropped by the generator beyond which the load was not the one asked.
pub const DROP_BOUND: f64 = 0.01;
/// Mean lateness of a node's timer over one second beyond which its per-try timeouts and
/// backoffs ran late enough to thin the storm: a tenth of a baseline per-try timeout (250 ms).
pub const TIMER_BOUND: Duration = Duration::from_millis(25);
/// Machine CPU busy share, averaged over the run, at or beyond which the machine is
/// saturated (the mean, not one busy second: a neighbour's burst is not a capped run).
pub const CPU_BOUND: f64 = 0.9;

/// The machine's CPU counters (`/proc/stat`, first line), in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// All time.
    pub total: u64,
    /// Time neither idle nor waiting for I/O.
    pub busy: u64,
}

impl CpuTimes {
    /// Parses the aggregate `cpu  user nice system idle iowait irq softirq steal …` line of
    /// `/proc/stat` (strictly: `None` when it is not there or not numbers).
    ///
    /// ```
    /// use seawall_lab::saturation::CpuTimes;
    /// let t = CpuTimes::parse("cpu  10 0 5 80 5 0 0 0 0 0\ncpu0 1 2 3 4\n").unwrap();
    /// assert_eq!((t.total, t.busy), (100, 15));
    /// assert_eq!(CpuTimes::parse("cpu0 1 2 3 4\n"), None);
    /// ```
    pub fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().next()?.strip_prefix("cpu ")?;
        let v: Vec<u64> =
            line.split_whitespace().take(8).map(str::parse).collect::<Result<_, _>>().ok()?;
        if v.len() < 4 {
            return None;
        }
        let total = v.iter().fold(0u64, |a, x| a.saturating_add(*x));
        let idle = v[3].saturating_add(v.get(4).copied().unwrap_or(0));
        Some(CpuTimes { total, busy: total.saturating_sub(idle) })
    }

    /// Reads `/proc/stat` now (`None` off Linux or when unreadable).
    pub fn now() -> Option<CpuTimes> {
        let mut s = std::fs::read_to_string("/proc/stat").ok()?;
        s.truncate(4096);
        CpuTimes::parse(&s)
    }

    /// The busy share of the interval from `earlier` to `self`, in `[0, 1]`.
    pub fn busy_since(&self, earlier: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        let busy = self.busy.checked_sub(earlier.busy)?;
        (total > 0).then(|| (busy as f64 / total as f64).clamp(0.0, 1.0))
    }
}

/// Busy shares between consecutive readings (a missing reading leaves a gap).
pub fn busy_series(readings: &[Option<CpuTimes>]) -> Vec<f64> {
    readings
        .windows(2)
        .filter_map(|w| match (w[0], w[1]) {
            (Some(a), Some(b)) => b.busy_since(&a),
            _ => None,
        })
        .collect()
}

/// Reads the CPU counters at `start + k` seconds for `k` in `0..=secs` and returns the busy
/// share of each second (bounded: `secs + 1` readings).
pub async fn sample_each_second(start: tokio::time::Instant, secs: u64) -> Vec<f64> {
    let mut readings = Vec::with_capacity(secs as usize + 1);
    for k in 0..=secs {
        tokio::time::sleep_until(start + Duration::from_secs(k)).await;
        readings.push(CpuTimes::now());
    }
    busy_series(&readings)
}

/// What the lab measured of its own limits over one run.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Saturation {
    /// The load generator's worst lag behind its schedule, seconds.
    pub max_lag_s: f64,
    /// Requests the generator could not send (late or at its in-flight bound).
    pub dropped: u64,
    /// Requests it was asked to send.
    pub offered: u64,
    /// The machine's CPU busy share over the busiest second (`None`: not measured).
    pub cpu_peak: Option<f64>,
    /// Its mean over the run.
    pub cpu_mean: Option<f64>,
    /// The worst second's mean lateness of a timer at any node of the stack, seconds (`None`:
    /// not measured; see [`Saturation::with_timer_late`]).
    pub timer_late_s: Option<f64>,
}

impl Saturation {
    /// From the generator's figures and the per-second CPU shares.
    pub fn new(max_lag: Duration, dropped: u64, offered: u64, cpu: &[f64]) -> Saturation {
        let peak = cpu.iter().copied().reduce(f64::max);
        let mean = (!cpu.is_empty()).then(|| cpu.iter().sum::<f64>() / cpu.len() as f64);
        Saturation {
            max_lag_s: max_lag.as_secs_f64(),
            dropped,
            offered,
            cpu_peak: peak,
            cpu_mean: mean,
            timer_late_s: None,
        }
    }

    /// With the stack's timer lateness: the worst second's mean lateness of a timer at any
    /// node, seconds. The most direct of the measures: a storm is made of per-try timeouts
    /// and backoffs, and a node that wakes them late sends its retries late and fewer of them.
    pub fn with_timer_late(self, late_s: Option<f64>) -> Saturation {
        Saturation { timer_late_s: late_s, ..self }
    }

    /// The reasons the run was capped by the machine, in words (empty: it was not).
    pub fn reasons(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.max_lag_s > LAG_BOUND.as_secs_f64() {
            out.push(format!(
                "the load generator fell {:.0} ms behind its schedule",
                self.max_lag_s * 1000.0
            ));
        }
        if self.offered > 0 && self.dropped as f64 > DROP_BOUND * self.offered as f64 {
            out.push(format!("it could not send {} of {} requests", self.dropped, self.offered));
        }
        if let Some(t) = self.timer_late_s.filter(|t| *t > TIMER_BOUND.as_secs_f64()) {
            out.push(format!(
                "a node's timers woke {:.0} ms late on average in its worst second",
                t * 1000.0
            ));
        }
        if let Some(m) = self.cpu_mean.filter(|m| *m >= CPU_BOUND) {
            out.push(format!("the machine's CPU was {:.0} % busy over the run", m * 100.0));
        }
        out
    }

    /// Whether the run's storm figures are lower bounds.
    pub fn is_lower_bound(&self) -> bool {
        !self.reasons().is_empty()
    }

    /// One sentence for the report: `policy`'s figures are lower bounds because …, or empty.
    ///
    /// It says "may be higher", not "a bigger storm": a configuration whose retries a budget
    /// bounds measures about the same amplification on any machine, and a capped run of it is
    /// a lower bound only in that sense. The worst second is another matter: on a starved
    /// machine timers fire late and then together, so attempts leave one second and bunch into
    /// the next (a debug lab at 100 % CPU counted 603, 813 and 1,028 attempts in three seconds
    /// of a steady 810 a second; `lab_agrees` prints each second's count); its peak can read high as well as low.
    pub fn sentence(&self, policy: &str) -> String {
        let r = self.reasons();
        if r.is_empty() {
            return String::new();
        }
        format!(
            " {policy}: capped by this machine ({}), so its attempts per edge request and \
             amplification are lower bounds: with CPU to spare they may be higher. Its worst \
             second may read high as well: late timers fire together.",
            r.join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_mark_a_lower_bound() {
        let ok = Saturation::new(Duration::from_millis(5), 0, 1000, &[0.3, 0.5]);
        assert!(!ok.is_lower_bound());
        assert_eq!(ok.cpu_peak, Some(0.5));
        assert!(ok.sentence("x").is_empty());
        let lag = Saturation { max_lag_s: 0.2, ..ok };
        assert!(lag.is_lower_bound());
        assert!(lag.sentence("baseline").contains("200 ms behind"), "{}", lag.sentence("b"));
        assert!(Saturation { dropped: 11, ..ok }.is_lower_bound());
        assert!(!Saturation { dropped: 10, ..ok }.is_lower_bound());
        assert!(!Saturation { cpu_peak: Some(1.0), ..ok }.is_lower_bound(), "one busy second");
        assert!(Saturation { cpu_mean: Some(0.92), ..ok }.is_lower_bound());
        assert!(!ok.with_timer_late(Some(0.025)).is_lower_bound(), "at the bound");
        let late = ok.with_timer_late(Some(0.040));
        assert!(late.sentence("baseline").contains("timers woke 40 ms late"), "{late:?}");
    }

    #[test]
    fn cpu_shares_between_readings() {
        let a = CpuTimes { total: 100, busy: 10 };
        let b = CpuTimes { total: 200, busy: 60 };
        assert_eq!(busy_series(&[Some(a), Some(b), None, Some(b)]), vec![0.5]);
        assert_eq!(a.busy_since(&b), None, "a counter going back is no reading");
        assert!(CpuTimes::now().is_none_or(|t| t.total >= t.busy));
        assert_eq!(CpuTimes::parse("cpu  a b c d"), None);
    }
}
