//! What the classifier looks at each interval, and where samples come from.

use std::fmt;

use seawall_report::{Results, Run};
use serde::Serialize;

/// One interval's view of a call path: the edge and the dependency under watch.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Sample {
    /// Start of the interval, seconds.
    pub t: f64,
    /// Logical requests arriving at the edge per second.
    pub edge_rps: f64,
    /// Edge requests answered successfully within their deadline, per second.
    pub goodput_rps: f64,
    /// Attempts reaching the dependency per second.
    pub dependency_rps: f64,
    /// Age of the oldest queued request at the dependency, seconds (0 if unknown).
    pub queue_age_s: f64,
    /// Retries refused by budgets per second (0 if unknown).
    pub refusals_rps: f64,
}

impl Sample {
    /// Attempts at the dependency per edge request (the amplification); 0 without traffic.
    pub fn ratio(&self) -> f64 {
        if self.edge_rps > 0.0 { self.dependency_rps / self.edge_rps } else { 0.0 }
    }

    /// Fraction of edge requests answered in time (1 without traffic: nothing was asked).
    pub fn goodput_fraction(&self) -> f64 {
        if self.edge_rps > 0.0 { (self.goodput_rps / self.edge_rps).clamp(0.0, 1.0) } else { 1.0 }
    }

    fn is_finite(&self) -> bool {
        [
            self.t,
            self.edge_rps,
            self.goodput_rps,
            self.dependency_rps,
            self.queue_age_s,
            self.refusals_rps,
        ]
        .iter()
        .all(|v| v.is_finite() && *v >= 0.0)
    }
}

/// Why a recorded series could not be read.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SampleError {
    /// The results hold no run with that policy name.
    NoSuchRun {
        /// The name asked for.
        policy: String,
        /// The names present.
        available: Vec<String>,
    },
    /// A CSV line could not be parsed.
    Csv {
        /// 1-based line number.
        line: usize,
        /// What was expected.
        expected: String,
    },
}

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SampleError::NoSuchRun { policy, available } => {
                write!(f, "no run named {policy:?}; the file has: {}", available.join(", "))
            }
            SampleError::Csv { line, expected } => write!(f, "line {line}: expected {expected}"),
        }
    }
}

impl std::error::Error for SampleError {}

/// The samples of one run of a `results.json` (from `seawall simulate` or `seawall lab`).
/// Series shorter than `t` are read as zeros; non-finite or negative values are clamped to 0.
pub fn samples_from_run(run: &Run) -> Vec<Sample> {
    let s = &run.series;
    let at = |v: &Vec<f64>, i: usize| {
        v.get(i).copied().filter(|x| x.is_finite() && *x >= 0.0).unwrap_or(0.0)
    };
    (0..s.t.len())
        .map(|i| Sample {
            t: at(&s.t, i),
            edge_rps: at(&s.edge_rps, i),
            goodput_rps: at(&s.goodput_rps, i),
            dependency_rps: at(&s.bottom_attempts_rps, i),
            queue_age_s: at(&s.queue_age_s, i),
            refusals_rps: at(&s.budget_refusals_rps, i),
        })
        .collect()
}

/// The columns of the CSV form, in order (a header line naming them is required).
pub const CSV_COLUMNS: [&str; 6] =
    ["t", "edge_rps", "goodput_rps", "dependency_rps", "queue_age_s", "refusals_rps"];

/// Parses the CSV form: a header line with [`CSV_COLUMNS`] (the last two may be omitted), then one
/// line per interval. Blank lines and lines starting with `#` are skipped.
pub fn samples_from_csv(text: &str) -> Result<Vec<Sample>, SampleError> {
    let mut lines =
        text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
    let Some((hno, header)) = lines.next() else {
        return Ok(Vec::new());
    };
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    if cols.len() < 4 || cols.len() > 6 || cols[..] != CSV_COLUMNS[..cols.len()] {
        return Err(SampleError::Csv {
            line: hno + 1,
            expected: format!(
                "a header line `{}` (the last two columns optional)",
                CSV_COLUMNS.join(",")
            ),
        });
    }
    let mut out = Vec::new();
    for (no, line) in lines {
        let mut v = [0.0f64; 6];
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != cols.len() {
            return Err(SampleError::Csv {
                line: no + 1,
                expected: format!("{} comma-separated numbers", cols.len()),
            });
        }
        for (i, f) in fields.iter().enumerate() {
            v[i] =
                f.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| {
                    SampleError::Csv {
                        line: no + 1,
                        expected: format!(
                            "a finite non-negative number for `{}`, got {f:?}",
                            cols[i]
                        ),
                    }
                })?;
        }
        let s = Sample {
            t: v[0],
            edge_rps: v[1],
            goodput_rps: v[2],
            dependency_rps: v[3],
            queue_age_s: v[4],
            refusals_rps: v[5],
        };
        debug_assert!(s.is_finite());
        out.push(s);
    }
    Ok(out)
}

/// Picks the run named `policy` (or the only / first run when `None`) from `results`.
pub fn replay<'a>(results: &'a Results, policy: Option<&str>) -> Result<&'a Run, SampleError> {
    let found = match policy {
        Some(p) => results.runs.iter().find(|r| r.policy == p),
        None => results.runs.first(),
    };
    found.ok_or_else(|| SampleError::NoSuchRun {
        policy: policy.unwrap_or("(any)").to_string(),
        available: results.runs.iter().map(|r| r.policy.clone()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round() {
        let s = samples_from_csv(
            "t,edge_rps,goodput_rps,dependency_rps\n0,100,100,100\n# note\n1,100,0,300\n",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].ratio(), 3.0);
        assert_eq!(s[1].goodput_fraction(), 0.0);
    }

    #[test]
    fn csv_errors_name_the_line() {
        let e = samples_from_csv("t,edge_rps,goodput_rps,dependency_rps\n0,1,1\n").unwrap_err();
        assert!(matches!(e, SampleError::Csv { line: 2, .. }), "{e}");
        let e = samples_from_csv("t,edge_rps,goodput_rps,dependency_rps\n0,1,1,NaN\n").unwrap_err();
        assert!(e.to_string().contains("dependency_rps"), "{e}");
        assert!(samples_from_csv("time,edge\n").is_err());
    }
}
