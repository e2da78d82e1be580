//! From a [`QuerySet`]'s answers to the classifier's [`Sample`]s: one instant evaluation per live
//! interval, or one range query per signal for a past window.
//!
//! # Never a verdict as if sure on bad data
//!
//! An interval whose numbers cannot be trusted carries [`Problem`]s and must not be fed to the
//! classifier: a required signal without data, a value that is NaN, infinite or negative (a
//! division by zero or a typo'd `--query`), or a counter reset inside the rate window (a process
//! restarted: the rate over that window undercounts what it lost). A query that answers more
//! than one series is an error for the whole run: it is a question badly put, not bad data.

use std::fmt;

use super::{Answer, ApiError, PromApi};
use crate::dialect::{QuerySet, Signal};
use crate::sample::Sample;

/// Most steps one replay may have (Prometheus refuses more than 11,000 points per series).
pub const MAX_STEPS: usize = 11_000;

/// Why an interval's numbers are not to be trusted.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Problem {
    /// A required signal had no data (no series matched, or too few samples for `rate`).
    NoData(Signal),
    /// A value was NaN or infinite.
    NotFinite(Signal, f64),
    /// A value was negative (a rate cannot be).
    Negative(Signal, f64),
    /// The signal's counters reset inside the rate window (this many times).
    Reset(Signal, f64),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::NoData(s) => write!(f, "no data for {}", s.as_str()),
            Problem::NotFinite(s, v) => write!(f, "{} is {v} (not a number)", s.as_str()),
            Problem::Negative(s, v) => write!(f, "{} is negative ({v})", s.as_str()),
            Problem::Reset(s, n) => write!(
                f,
                "counter reset in {} ({n} in the window: a process restarted; the rate undercounts)",
                s.as_str()
            ),
        }
    }
}

/// Why the source could not be read at all.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SourceError {
    /// The API failed for one signal's query.
    Api {
        /// The signal.
        signal: Signal,
        /// The failure.
        error: ApiError,
    },
    /// A required signal matched no series at all.
    NoMatch {
        /// The signal.
        signal: Signal,
        /// The query that matched nothing.
        query: String,
    },
    /// A query answered several series where one number was needed.
    NotOneSeries {
        /// The signal.
        signal: Signal,
        /// How many series came back.
        series: usize,
        /// The query.
        query: String,
    },
    /// The window holds more than [`MAX_STEPS`] steps, or is empty.
    Window(String),
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Api { signal, error } => write!(f, "{}: {error}", signal.as_str()),
            SourceError::NoMatch { signal, query } => {
                write!(
                    f,
                    "{}: no series match `{query}`: check the selector and the dialect \
                     (`seawall detect --explain` prints every query)",
                    signal.as_str()
                )?;
                if query.contains(crate::dialect::GRPC_CALL_DURATION_COUNT) {
                    write!(f, "; {}", crate::dialect::GRPC_CALL_DURATION_FIX)?;
                }
                Ok(())
            }
            SourceError::NotOneSeries { signal, series, query } => write!(
                f,
                "{}: `{query}` answered {series} series where one number is needed: wrap it in \
                 sum(…)",
                signal.as_str()
            ),
            SourceError::Window(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for SourceError {}

/// One interval read from Prometheus.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Evaluation time, Unix seconds.
    pub unix: f64,
    /// The classifier's sample (`t` relative to the start); only meaningful without problems.
    pub sample: Sample,
    /// Why this interval must not be judged; empty when it can be.
    pub problems: Vec<Problem>,
}

/// A Prometheus server and the questions to ask it.
#[derive(Debug)]
pub struct PromSource {
    api: PromApi,
    queries: QuerySet,
}

fn one<'a>(s: Signal, q: &str, a: &'a Answer) -> Result<Option<&'a super::Series>, SourceError> {
    match a.series.len() {
        0 => Ok(None),
        1 => Ok(a.series.first()),
        n => Err(SourceError::NotOneSeries { signal: s, series: n, query: q.to_string() }),
    }
}

/// Folds one interval's values (`None`: no data) into a point.
fn point(
    unix: f64,
    t0: f64,
    q: &QuerySet,
    values: &[(Signal, Option<f64>)],
    resets: &[(Signal, f64)],
) -> Point {
    let mut problems = Vec::new();
    let mut get = |s: Signal| -> f64 {
        match values.iter().find(|(x, _)| *x == s).map(|(_, v)| *v) {
            Some(Some(v)) if !v.is_finite() => {
                problems.push(Problem::NotFinite(s, v));
                0.0
            }
            Some(Some(v)) if v < -1e-9 => {
                problems.push(Problem::Negative(s, v));
                0.0
            }
            Some(Some(v)) => v.max(0.0),
            Some(None) if s.required() => {
                problems.push(Problem::NoData(s));
                0.0
            }
            _ => 0.0,
        }
    };
    let edge_rps = get(Signal::Edge);
    let dependency_rps = get(Signal::Dependency);
    let goodput_rps =
        if q.query(Signal::Goodput).is_some() { get(Signal::Goodput) } else { edge_rps };
    let refusals_rps = get(Signal::Overflow);
    let queue_age_s = get(Signal::QueueAge);
    for &(s, n) in resets {
        if n > 0.0 {
            problems.push(Problem::Reset(s, n));
        }
    }
    let sample =
        Sample { t: unix - t0, edge_rps, goodput_rps, dependency_rps, queue_age_s, refusals_rps };
    Point { unix, sample, problems }
}

impl PromSource {
    /// A source asking `api` the questions in `queries`.
    pub fn new(api: PromApi, queries: QuerySet) -> PromSource {
        PromSource { api, queries }
    }

    /// The questions.
    pub fn queries(&self) -> &QuerySet {
        &self.queries
    }

    /// The server.
    pub fn api(&self) -> &PromApi {
        &self.api
    }

    /// Evaluates every signal at `unix` (instant queries); `t0` is the watch's start.
    pub fn at(&self, unix: f64, t0: f64) -> Result<Point, SourceError> {
        let ask = |s: Signal, q: &str| -> Result<Option<f64>, SourceError> {
            let a =
                self.api.instant(q, unix).map_err(|error| SourceError::Api { signal: s, error })?;
            Ok(one(s, q, &a)?.and_then(|x| x.points.first()).map(|p| p.1))
        };
        let mut values = Vec::new();
        for (s, q) in &self.queries.queries {
            values.push((*s, ask(*s, q)?));
        }
        let mut resets = Vec::new();
        for (s, q) in &self.queries.resets {
            if let Some(n) = ask(*s, q)? {
                resets.push((*s, n));
            }
        }
        Ok(point(unix, t0, &self.queries, &values, &resets))
    }

    /// Evaluates every signal from `start` to `end` every `step` seconds (range queries), one
    /// point per step.
    pub fn range(&self, start: f64, end: f64, step: f64) -> Result<Vec<Point>, SourceError> {
        if !(step > 0.0 && end > start) {
            return Err(SourceError::Window(
                "the window is empty (--from must be before --to)".into(),
            ));
        }
        let steps = ((end - start) / step).floor() as usize + 1;
        if steps > MAX_STEPS {
            return Err(SourceError::Window(format!(
                "{steps} steps of {step} s: at most {MAX_STEPS}; use a larger --interval or a shorter window"
            )));
        }
        let ask = |s: Signal, q: &str| -> Result<Vec<(f64, f64)>, SourceError> {
            let a = self
                .api
                .range(q, start, end, step)
                .map_err(|error| SourceError::Api { signal: s, error })?;
            Ok(one(s, q, &a)?.map(|x| x.points.clone()).unwrap_or_default())
        };
        let mut series = Vec::new();
        for (s, q) in &self.queries.queries {
            let pts = ask(*s, q)?;
            if pts.is_empty() && s.required() {
                return Err(SourceError::NoMatch { signal: *s, query: q.clone() });
            }
            series.push((*s, pts));
        }
        let mut reset_series = Vec::new();
        for (s, q) in &self.queries.resets {
            reset_series.push((*s, ask(*s, q)?));
        }
        // Prometheus evaluates at start + k·step exactly; match within a millisecond.
        let at =
            |pts: &[(f64, f64)], t: f64| pts.iter().find(|p| (p.0 - t).abs() < 1e-3).map(|p| p.1);
        Ok((0..steps)
            .map(|k| {
                let t = start + k as f64 * step;
                let values: Vec<(Signal, Option<f64>)> =
                    series.iter().map(|(s, p)| (*s, at(p, t))).collect();
                let resets: Vec<(Signal, f64)> =
                    reset_series.iter().filter_map(|(s, p)| at(p, t).map(|n| (*s, n))).collect();
                point(t, start, &self.queries, &values, &resets)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;

    #[test]
    fn bad_values_become_problems_not_numbers() {
        let q = QuerySet::new(Dialect::Seawall, "", "", "1m").unwrap();
        let p = point(
            10.0,
            0.0,
            &q,
            &[
                (Signal::Edge, Some(f64::NAN)),
                (Signal::Dependency, None),
                (Signal::Goodput, Some(-3.0)),
            ],
            &[(Signal::Edge, 1.0)],
        );
        assert_eq!(p.problems.len(), 4, "{:?}", p.problems);
        assert!(matches!(p.problems[0], Problem::NotFinite(Signal::Edge, _)));
        assert_eq!(p.problems[1], Problem::NoData(Signal::Dependency));
        assert_eq!(p.problems[2], Problem::Negative(Signal::Goodput, -3.0));
        assert_eq!(p.problems[3], Problem::Reset(Signal::Edge, 1.0));
        let ok = point(
            10.0,
            4.0,
            &q,
            &[
                (Signal::Edge, Some(100.0)),
                (Signal::Dependency, Some(300.0)),
                (Signal::Overflow, None),
            ],
            &[(Signal::Edge, 0.0)],
        );
        assert!(ok.problems.is_empty());
        assert_eq!(ok.sample.t, 6.0);
        assert_eq!(ok.sample.ratio(), 3.0);
    }
}
