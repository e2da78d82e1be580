//! The verdict for each interval: healthy, traffic spike, retry storm, metastable, degraded.
//!
//! The classifier learns a baseline (edge rate, attempts per call, goodput) over a warm-up — from
//! full rate windows only — then follows it slowly through healthy intervals only, so a storm
//! cannot teach it that a storm is normal; an edge that holds a new level without errors or
//! amplification for a minute becomes the new baseline. Each interval it asks three questions against the baseline — did the edge rise? did
//! attempts per call jump? did goodput fall? — and remembers, for the current episode, which of
//! them turned first. The order is the evidence: a spike moves the edge first, a storm moves
//! errors and amplification while the edge stays flat.

use serde::Serialize;

use crate::sample::Sample;

/// What the classifier concluded for one interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum VerdictKind {
    /// Still learning the baseline.
    Learning,
    /// Nothing abnormal.
    Healthy,
    /// Edge traffic rose and attempts per call stayed near the baseline.
    TrafficSpike,
    /// Attempts per call (dependency-to-edge ratio) jumped; the edge did not explain it.
    RetryStorm,
    /// The trigger is over (or the storm has outlasted any plausible trigger) and goodput has
    /// not returned.
    Metastable,
    /// Goodput fell without amplification or an edge rise: the dependency is failing and retries
    /// are contained.
    Degraded,
    /// Healthy again for fewer than three intervals after an episode.
    Recovering,
    /// Too little traffic in the interval to judge a ratio (see [`Thresholds::min_requests`]).
    Quiet,
}

impl VerdictKind {
    /// A stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Learning => "learning",
            VerdictKind::Healthy => "healthy",
            VerdictKind::TrafficSpike => "traffic_spike",
            VerdictKind::RetryStorm => "retry_storm",
            VerdictKind::Metastable => "metastable",
            VerdictKind::Degraded => "degraded",
            VerdictKind::Recovering => "recovering",
            VerdictKind::Quiet => "quiet",
        }
    }
}

/// One interval's verdict and the evidence for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Start of the interval, seconds.
    pub t: f64,
    /// The verdict.
    pub verdict: VerdictKind,
    /// Why, in plain sentences.
    pub evidence: Vec<String>,
    /// Edge requests per second.
    pub edge_rps: f64,
    /// Edge rate as a multiple of the baseline.
    pub edge_vs_baseline: f64,
    /// Attempts at the dependency per edge request.
    pub attempts_per_call: f64,
    /// The baseline attempts per edge request.
    pub baseline_attempts_per_call: f64,
    /// Fraction of edge requests answered in time.
    pub goodput: f64,
    /// Oldest queued request at the dependency, seconds.
    pub queue_age_s: f64,
    /// Retries refused by budgets per second.
    pub refusals_rps: f64,
}

/// The classifier's thresholds. Defaults and their sources are on each field's docs.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Seconds of samples used to learn the baseline before judging (default 5). Five one-second
    /// intervals pin a rate of ~100 rps to within a few percent, and the catalog's `layered`
    /// scenario starts its fault at 5 s: a longer warm-up would learn the storm as the baseline
    /// (it did with 10 s: a baseline of 14 attempts per call).
    pub warmup_s: f64,
    /// Seconds after the first sample that are neither learned from nor judged (default 0). A
    /// source whose rates are averages over a window sets it to that window: Prometheus's
    /// `rate(x[1m])` of a series 20 s old averages 20 s of data, not 60, and a baseline learned
    /// from such under-filled windows is wrong for the whole run.
    pub settle_s: f64,
    /// Edge ≥ this × baseline is a rise (default 1.5).
    pub edge_rise: f64,
    /// The edge is "flat" within `1/edge_flat ..= edge_flat` × baseline (default 1.3, both
    /// sides: a client that stops is not a flat edge).
    pub edge_flat: f64,
    /// Attempts per call ≥ this × baseline is amplification (default 1.5: a healthy
    /// client sits near 1.0, a 10 % retry budget caps it near 1.1). Judged over the last two
    /// intervals as well as over this one, so a counter flushed in batches (grpcio exports attempts and calls at
    /// different moments) does not read as a jump.
    pub amplification: f64,
    /// Goodput < this × baseline is a fall (default 0.9, the same 90 % as "recovered").
    pub goodput_fall: f64,
    /// An edge off its baseline (outside the flat band) without errors or amplification for this
    /// long is a new level, learned as the baseline (default 60 s: longer than a burst, shorter
    /// than a deploy's or a daily cycle's step).
    pub relearn_after_s: f64,
    /// Fewer edge requests *and* fewer dependency attempts than this in one interval is too
    /// little traffic to judge (default 10: below that, one request more or less moves a ratio
    /// by 10 %).
    pub min_requests: f64,
    /// Seconds after the trigger's end that goodput may take to return before the state is
    /// called metastable (default 10).
    pub grace_s: f64,
    /// Without a known trigger end, a storm older than this is called metastable (default
    /// `None`: metastability is a failure outliving its trigger, so without knowing when the
    /// trigger ended — `--trigger-end`, a recorded fault window — a long storm stays a storm,
    /// with its age in the evidence).
    pub metastable_after_s: Option<f64>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            warmup_s: 5.0,
            settle_s: 0.0,
            edge_rise: 1.5,
            edge_flat: 1.3,
            amplification: 1.5,
            goodput_fall: 0.9,
            relearn_after_s: 60.0,
            min_requests: 10.0,
            grace_s: 10.0,
            metastable_after_s: None,
        }
    }
}

/// What normal looks like: the edge's rate, attempts per call, goodput.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline {
    /// Edge requests per second.
    pub edge: f64,
    /// Attempts at the dependency per edge request.
    pub ratio: f64,
    /// Fraction of edge requests answered in time.
    pub goodput: f64,
}

impl Baseline {
    /// The baseline of `samples` (their mean rates); `None` without edge traffic.
    pub fn of(samples: &[Sample]) -> Option<Baseline> {
        let mut sums = Sums::default();
        for s in samples {
            sums.add(s);
        }
        sums.baseline()
    }
}

/// Running sums of samples, to learn a baseline from.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    edge: f64,
    dependency: f64,
    goodput: f64,
    n: usize,
}

impl Sums {
    fn add(&mut self, s: &Sample) {
        self.edge += s.edge_rps;
        self.dependency += s.dependency_rps;
        self.goodput += s.goodput_rps;
        self.n += 1;
    }

    fn baseline(&self) -> Option<Baseline> {
        (self.n > 0 && self.edge > 0.0).then(|| Baseline {
            edge: self.edge / self.n as f64,
            ratio: (self.dependency / self.edge).max(f64::MIN_POSITIVE),
            goodput: (self.goodput / self.edge).clamp(0.0, 1.0),
        })
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Episode {
    edge_onset: Option<f64>,
    error_onset: Option<f64>,
    amp_onset: Option<f64>,
}

/// An edge off its baseline without errors or amplification: since when, and its sums.
#[derive(Debug, Clone, Copy)]
struct Shift {
    since: f64,
    sums: Sums,
}

/// Classifies a stream of samples. Feed it in time order with [`Classifier::push`].
#[derive(Debug, Clone)]
pub struct Classifier {
    th: Thresholds,
    first_t: Option<f64>,
    prev: Option<Sample>,
    warm: Sums,
    baseline: Option<Baseline>,
    episode: Option<Episode>,
    shift: Option<Shift>,
    healthy_streak: u32,
    trigger_end: Option<f64>,
    origin_unix: Option<f64>,
}

/// Weight of one healthy interval in the slowly-following baseline.
const FOLLOW: f64 = 0.05;

/// Without a known trigger end, a storm this old says how to judge metastability.
const ASK_TRIGGER_AFTER_S: f64 = 120.0;

impl Classifier {
    /// A classifier with `thresholds`.
    pub fn new(thresholds: Thresholds) -> Self {
        Classifier {
            th: thresholds,
            first_t: None,
            prev: None,
            warm: Sums::default(),
            baseline: None,
            episode: None,
            shift: None,
            healthy_streak: 0,
            trigger_end: None,
            origin_unix: None,
        }
    }

    /// Tells the classifier when the trigger ended (e.g. the fault window of a recorded run, or
    /// `--trigger-end`), so it can call a persisting failure metastable.
    pub fn set_trigger_end(&mut self, t: f64) {
        self.trigger_end = Some(t);
    }

    /// Gives the baseline instead of learning it (e.g. `--baseline FROM..TO`).
    pub fn set_baseline(&mut self, b: Baseline) {
        self.baseline = Some(b);
    }

    /// The Unix time of `t = 0`, so the evidence names wall-clock times as well.
    pub fn set_origin_unix(&mut self, unix: f64) {
        self.origin_unix = Some(unix);
    }

    fn at(&self, t: Option<f64>) -> String {
        match (t, self.origin_unix) {
            (None, _) => "—".to_string(),
            (Some(t), None) => format!("t={t:.0}s"),
            (Some(t), Some(o)) => {
                format!("t={t:.0}s ({})", crate::prometheus::time::format_rfc3339(o + t))
            }
        }
    }

    /// Classifies the next interval.
    pub fn push(&mut self, s: Sample) -> Verdict {
        let first = *self.first_t.get_or_insert(s.t);
        let prev = self.prev.replace(s);
        // An interval's length is the step from the previous sample (1 s for a recorded series,
        // the scrape interval live); the first one is taken as 1 s.
        let dt = prev.map_or(1.0, |p| s.t - p.t).max(f64::MIN_POSITIVE);
        if s.t - first < self.th.settle_s {
            let ev = format!(
                "the rate window is not full yet ({:.0} of {:.0} s of data)",
                s.t - first,
                self.th.settle_s
            );
            return self.verdict(s, VerdictKind::Learning, vec![ev], None);
        }
        if s.edge_rps * dt < self.th.min_requests && s.dependency_rps * dt < self.th.min_requests {
            let ev = format!(
                "too little traffic to judge: {:.0} edge requests and {:.0} dependency attempts \
                 in the interval (at least {:.0} needed)",
                s.edge_rps * dt,
                s.dependency_rps * dt,
                self.th.min_requests
            );
            return self.verdict(s, VerdictKind::Quiet, vec![ev], self.baseline);
        }
        let Some(b) = self.baseline else {
            self.warm.add(&s);
            // At least two samples, to know the intervals' length.
            let covered = s.t - first + dt;
            if self.warm.n >= 2 && covered >= self.th.settle_s + self.th.warmup_s {
                self.baseline = self.warm.baseline();
            }
            return self.verdict(
                s,
                VerdictKind::Learning,
                vec!["learning the baseline".into()],
                None,
            );
        };
        self.judge(s, prev, b)
    }

    fn judge(&mut self, s: Sample, prev: Option<Sample>, b: Baseline) -> Verdict {
        let th = &self.th;
        let edge_x = if b.edge > 0.0 { s.edge_rps / b.edge } else { 0.0 };
        // Attempts per call over this interval and the previous one: a batch of attempts
        // flushed a moment before its calls does not read as a jump.
        let (edge2, dep2) = prev.map_or((s.edge_rps, s.dependency_rps), |p| {
            (s.edge_rps + p.edge_rps, s.dependency_rps + p.dependency_rps)
        });
        let ratio2 = if edge2 > 0.0 { dep2 / edge2 } else { 0.0 };
        // Amplified when both this interval and the last two are: a storm shows at once in
        // both, a late batch only in one, and recovery shows at once in this one.
        let amp_x = ratio2.min(s.ratio()) / b.ratio;
        let edge_up = edge_x >= th.edge_rise;
        let edge_down = edge_x * th.edge_flat < 1.0;
        // Below its baseline the edge makes any ratio look large (a client stopping: the last
        // attempts counted after the last calls); amplification must then also be load, more
        // attempts than the baseline's amplified.
        let load_up = s.dependency_rps >= th.amplification * b.edge * b.ratio;
        let amplified = s.edge_rps > 0.0 && amp_x >= th.amplification && (!edge_down || load_up);
        let errors = s.goodput_fraction() < th.goodput_fall * b.goodput;

        if !(amplified || errors) && (edge_up || edge_down) {
            let shift = self.shift.get_or_insert(Shift { since: s.t, sums: Sums::default() });
            shift.sums.add(&s);
            let held = s.t - shift.since;
            if held >= th.relearn_after_s {
                let learned = shift.sums.baseline();
                self.shift = None;
                if let Some(nb) = learned {
                    self.baseline = Some(nb);
                    self.episode = None;
                    self.healthy_streak = 3;
                    let ev = format!(
                        "the edge has held at {edge_x:.2}× the baseline for {held:.0} s without \
                         errors or amplification: a new level, now the baseline ({:.1} rps)",
                        nb.edge
                    );
                    return self.verdict(s, VerdictKind::Healthy, vec![ev], Some(nb));
                }
            }
        } else {
            self.shift = None;
        }
        if !(edge_up || amplified || errors) {
            self.healthy_streak += 1;
            if edge_down {
                // Less traffic, served: healthy, but not a level to follow (see the shift).
                let ev = format!("edge at {edge_x:.2}× the baseline: less traffic, all served");
                return self.verdict(s, VerdictKind::Healthy, vec![ev], Some(b));
            }
            // Follow slow drift, from healthy intervals only.
            let bl = self.baseline.as_mut().expect("baseline set above");
            bl.edge += FOLLOW * (s.edge_rps - bl.edge);
            if s.edge_rps > 0.0 {
                bl.ratio += FOLLOW * (s.ratio() - bl.ratio);
                bl.goodput += FOLLOW * (s.goodput_fraction() - bl.goodput);
            }
            if self.episode.is_some() && self.healthy_streak < 3 {
                let ev = vec![format!(
                    "healthy for {} interval(s) after an episode",
                    self.healthy_streak
                )];
                return self.verdict(s, VerdictKind::Recovering, ev, Some(b));
            }
            self.episode = None;
            return self.verdict(s, VerdictKind::Healthy, vec![], Some(b));
        }
        self.healthy_streak = 0;
        let ep = self.episode.get_or_insert(Episode::default());
        if edge_up {
            ep.edge_onset.get_or_insert(s.t);
        }
        if errors {
            ep.error_onset.get_or_insert(s.t);
        }
        if amplified {
            ep.amp_onset.get_or_insert(s.t);
        }
        let ep = *ep;
        let th = &self.th;
        let mut ev = Vec::new();
        // Metastable is the trigger's own episode outliving it: an episode that began after the
        // system had come back from the trigger is a new one, whatever it turns out to be.
        let began =
            [ep.edge_onset, ep.error_onset, ep.amp_onset].into_iter().flatten().fold(s.t, f64::min);
        let after_trigger =
            self.trigger_end.is_some_and(|end| s.t >= end + th.grace_s && began < end + th.grace_s);
        let kind = if amplified {
            ev.push(format!(
                "attempts per call {:.2} = {amp_x:.1}× the baseline {:.2}",
                ratio2.min(s.ratio()),
                b.ratio
            ));
            let spike_first = ep.edge_onset.is_some_and(|e| {
                e <= ep.error_onset.unwrap_or(f64::INFINITY)
                    && e <= ep.amp_onset.unwrap_or(f64::INFINITY)
            });
            if spike_first {
                ev.push(format!(
                    "edge rose first ({}), then amplification: a spike tipped it into a storm",
                    self.at(ep.edge_onset)
                ));
            } else if !edge_up && !edge_down {
                ev.push(format!("edge flat at {edge_x:.2}× the baseline"));
            } else if edge_down {
                ev.push(format!(
                    "edge at {edge_x:.2}× the baseline, yet {:.0} attempts/s reach the \
                     dependency ({:.1}× its baseline load)",
                    s.dependency_rps,
                    s.dependency_rps / (b.edge * b.ratio)
                ));
            } else {
                ev.push(format!("edge at {edge_x:.2}× the baseline, after the errors began"));
            }
            ev.push(format!(
                "errors began {}, amplification {}",
                self.at(ep.error_onset),
                self.at(ep.amp_onset)
            ));
            let storm_for = s.t - ep.amp_onset.unwrap_or(s.t);
            if errors && after_trigger {
                ev.push("the trigger is over and goodput has not returned".into());
                VerdictKind::Metastable
            } else if self.trigger_end.is_none()
                && th.metastable_after_s.is_some_and(|after| storm_for >= after)
            {
                ev.push(format!(
                    "the storm has lasted {storm_for:.0} s, longer than a trigger plausibly does"
                ));
                VerdictKind::Metastable
            } else {
                if self.trigger_end.is_none() && storm_for >= ASK_TRIGGER_AFTER_S {
                    ev.push(format!(
                        "lasting {storm_for:.0} s; give the trigger's end (`--trigger-end`) to \
                         judge whether it outlives it (metastable)"
                    ));
                }
                VerdictKind::RetryStorm
            }
        } else if edge_up {
            ev.push(format!(
                "edge at {edge_x:.2}× the baseline, attempts per call {:.2} (≈ baseline)",
                s.ratio()
            ));
            VerdictKind::TrafficSpike
        } else if after_trigger {
            ev.push(
                "the trigger is over and goodput has not returned, without amplification".into(),
            );
            VerdictKind::Metastable
        } else {
            ev.push(format!(
                "goodput {:.0} % (baseline {:.0} %) with attempts per call {:.2} and no edge \
                 rise: the dependency is failing, retries are contained",
                100.0 * s.goodput_fraction(),
                100.0 * b.goodput,
                s.ratio()
            ));
            VerdictKind::Degraded
        };
        if s.queue_age_s > 0.0 {
            ev.push(format!("oldest queued request {:.2} s old", s.queue_age_s));
        }
        if s.refusals_rps > 0.0 {
            ev.push(format!("budgets refused {:.0} retries/s", s.refusals_rps));
        }
        self.verdict(s, kind, ev, Some(b))
    }

    fn verdict(
        &self,
        s: Sample,
        kind: VerdictKind,
        evidence: Vec<String>,
        b: Option<Baseline>,
    ) -> Verdict {
        let b = b.unwrap_or(Baseline { edge: 0.0, ratio: 0.0, goodput: 0.0 });
        Verdict {
            t: s.t,
            verdict: kind,
            evidence,
            edge_rps: s.edge_rps,
            edge_vs_baseline: if b.edge > 0.0 { s.edge_rps / b.edge } else { 0.0 },
            attempts_per_call: s.ratio(),
            baseline_attempts_per_call: b.ratio,
            goodput: s.goodput_fraction(),
            queue_age_s: s.queue_age_s,
            refusals_rps: s.refusals_rps,
        }
    }
}

#[cfg(test)]
mod tests;
