//! The verdict for each interval: healthy, traffic spike, retry storm, metastable, degraded.
//!
//! The classifier learns a baseline (edge rate, attempts per call, goodput) over a warm-up, then
//! follows it slowly through healthy intervals only, so a storm cannot teach it that a storm is
//! normal. Each interval it asks three questions against the baseline — did the edge rise? did
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

/// The classifier's thresholds. Defaults and their sources are on each field's setter docs.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Seconds of samples used to learn the baseline before judging (default 5). Five one-second
    /// intervals pin a rate of ~100 rps to within a few percent, and the catalog's `layered`
    /// scenario starts its fault at 5 s: a longer warm-up would learn the storm as the baseline
    /// (it did with 10 s: a baseline of 14 attempts per call).
    pub warmup_s: f64,
    /// Edge ≥ this × baseline is a rise (default 1.5).
    pub edge_rise: f64,
    /// Edge ≤ this × baseline is "flat" (default 1.3).
    pub edge_flat: f64,
    /// Attempts per call ≥ this × baseline is amplification (default 1.5: a healthy
    /// client sits near 1.0, a 10 % retry budget caps it near 1.1).
    pub amplification: f64,
    /// Goodput < this × baseline is a fall (default 0.9, the same 90 % as "recovered").
    pub goodput_fall: f64,
    /// Seconds after the trigger's end (when known) that goodput may take to return before the
    /// state is called metastable (default 10).
    pub grace_s: f64,
    /// With no known trigger end, a storm older than this is called metastable (default 120 s:
    /// longer than common triggers — a 90 s GC pause, a 10 s outage).
    pub metastable_after_s: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            warmup_s: 5.0,
            edge_rise: 1.5,
            edge_flat: 1.3,
            amplification: 1.5,
            goodput_fall: 0.9,
            grace_s: 10.0,
            metastable_after_s: 120.0,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Baseline {
    edge: f64,
    ratio: f64,
    goodput: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Episode {
    edge_onset: Option<f64>,
    error_onset: Option<f64>,
    amp_onset: Option<f64>,
}

/// Classifies a stream of samples. Feed it in time order with [`Classifier::push`].
#[derive(Debug, Clone)]
pub struct Classifier {
    th: Thresholds,
    first_t: Option<f64>,
    /// Warm-up sums: edge, dependency, goodput; the last sample's `t`; the count.
    warm: (f64, f64, f64, f64, usize),
    baseline: Option<Baseline>,
    episode: Option<Episode>,
    healthy_streak: u32,
    trigger_end: Option<f64>,
}

/// Weight of one healthy interval in the slowly-following baseline.
const FOLLOW: f64 = 0.05;

fn fmt_t(t: Option<f64>) -> String {
    t.map_or_else(|| "—".to_string(), |t| format!("t={t:.0}s"))
}

impl Classifier {
    /// A classifier with `thresholds`.
    pub fn new(thresholds: Thresholds) -> Self {
        Classifier {
            th: thresholds,
            first_t: None,
            warm: (0.0, 0.0, 0.0, 0.0, 0),
            baseline: None,
            episode: None,
            healthy_streak: 0,
            trigger_end: None,
        }
    }

    /// Tells the classifier when the trigger ended (e.g. the fault window of a recorded run), so
    /// it can call a persisting failure metastable rather than wait for `metastable_after_s`.
    pub fn set_trigger_end(&mut self, t: f64) {
        self.trigger_end = Some(t);
    }

    /// Classifies the next interval.
    pub fn push(&mut self, s: Sample) -> Verdict {
        let first = *self.first_t.get_or_insert(s.t);
        let Some(b) = self.baseline else {
            let w = &mut self.warm;
            w.0 += s.edge_rps;
            w.1 += s.dependency_rps;
            w.2 += s.goodput_rps;
            // The warm-up covers the intervals seen so far, the last one included: its length
            // is the step from the previous sample (1 s for a recorded series, the scrape
            // interval live), so at least two samples are needed to know it.
            let covered = s.t - first + (s.t - w.3);
            w.3 = s.t;
            w.4 += 1;
            if w.4 >= 2 && covered >= self.th.warmup_s && w.0 > 0.0 {
                let n = w.4 as f64;
                self.baseline = Some(Baseline {
                    edge: w.0 / n,
                    ratio: (w.1 / w.0).max(f64::MIN_POSITIVE),
                    goodput: (w.2 / w.0).clamp(0.0, 1.0),
                });
            }
            return self.verdict(
                s,
                VerdictKind::Learning,
                vec!["learning the baseline".into()],
                None,
            );
        };
        let edge_x = if b.edge > 0.0 { s.edge_rps / b.edge } else { 0.0 };
        let amp_x = s.ratio() / b.ratio;
        let edge_up = edge_x >= self.th.edge_rise;
        let amplified = s.edge_rps > 0.0 && amp_x >= self.th.amplification;
        let errors = s.goodput_fraction() < self.th.goodput_fall * b.goodput;

        if !(edge_up || amplified || errors) {
            self.healthy_streak += 1;
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
        let mut ev = Vec::new();
        // Metastable is the trigger's own episode outliving it: an episode that began after the
        // system had come back from the trigger is a new one, whatever it turns out to be.
        let began =
            [ep.edge_onset, ep.error_onset, ep.amp_onset].into_iter().flatten().fold(s.t, f64::min);
        let after_trigger = self
            .trigger_end
            .is_some_and(|end| s.t >= end + self.th.grace_s && began < end + self.th.grace_s);
        let kind = if amplified {
            ev.push(format!(
                "attempts per call {:.2} = {:.1}× the baseline {:.2}",
                s.ratio(),
                amp_x,
                b.ratio
            ));
            let spike_first = ep.edge_onset.is_some_and(|e| {
                e <= ep.error_onset.unwrap_or(f64::INFINITY)
                    && e <= ep.amp_onset.unwrap_or(f64::INFINITY)
            });
            if spike_first {
                ev.push(format!(
                    "edge rose first ({}), then amplification: a spike tipped it into a storm",
                    fmt_t(ep.edge_onset)
                ));
            } else if edge_x <= self.th.edge_flat {
                ev.push(format!("edge flat at {edge_x:.2}× the baseline"));
            } else {
                ev.push(format!("edge at {edge_x:.2}× the baseline, after the errors began"));
            }
            ev.push(format!(
                "errors began {}, amplification {}",
                fmt_t(ep.error_onset),
                fmt_t(ep.amp_onset)
            ));
            let storm_for = s.t - ep.amp_onset.unwrap_or(s.t);
            if errors && after_trigger {
                ev.push("the trigger is over and goodput has not returned".into());
                VerdictKind::Metastable
            } else if self.trigger_end.is_none() && storm_for >= self.th.metastable_after_s {
                ev.push(format!(
                    "the storm has lasted {storm_for:.0} s, longer than a trigger plausibly does"
                ));
                VerdictKind::Metastable
            } else {
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
                "goodput {:.0} % (baseline {:.0} %) with attempts per call {:.2} and a flat edge: \
                 the dependency is failing, retries are contained",
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
