//! The boundary between healing and staying down along one axis of a sweep.
//!
//! Along a line of the grid (every axis but the first held fixed) each point has the share of
//! its seeds that recovered. The boundary is where that share crosses one half, interpolated
//! linearly between the two grid points around the crossing; its uncertainty is the interval
//! from the last point where *every* seed recovered to the first where *none* did (or the other
//! way round), which covers both the grid's step and the seeds' spread.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Axis, Point, json_number};

/// What a line of the grid shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BoundaryKind {
    /// Recovers at low values and stays down at high ones (load, fault length).
    HealsBelow,
    /// Stays down at low values and recovers at high ones (capacity, workers).
    HealsAbove,
    /// Every point recovered (in most seeds).
    HealsEverywhere,
    /// No point recovered (in most seeds).
    StuckEverywhere,
    /// The verdict changes more than once along the line: no single boundary.
    NotMonotone,
}

/// The boundary found along the first axis, for one policy and one value of the other axes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Boundary {
    /// The policy.
    pub policy: String,
    /// The axis the boundary lies along (the first).
    pub along: String,
    /// The other axes' values on this line, by dotted path (at the top level in JSON).
    #[serde(flatten, serialize_with = "super::whole_numbers")]
    pub at: BTreeMap<String, f64>,
    /// What the line shows.
    pub kind: BoundaryKind,
    /// The estimated boundary (half the seeds recover), for `heals_below` / `heals_above`.
    pub value: Option<f64>,
    /// Lower end of the uncertainty interval.
    pub low: Option<f64>,
    /// Upper end of the uncertainty interval.
    pub high: Option<f64>,
    /// The finding in one sentence ("naive heals by itself below ≈ 155 QPS …").
    pub words: String,
}

/// The boundaries of a sweep: one per policy and per combination of the axes after the first,
/// found along the first axis.
pub fn boundaries(axes: &[Axis], policies: &[String], points: &[Point]) -> Vec<Boundary> {
    let Some((first, rest)) = axes.split_first() else { return Vec::new() };
    let mut out = Vec::new();
    for policy in policies {
        for fixed in combinations(rest) {
            let mut line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| &p.policy == policy)
                .filter(|p| fixed.iter().all(|(k, v)| p.at.get(k) == Some(v)))
                .filter_map(|p| Some((*p.at.get(&first.path)?, p.share())))
                .filter(|(v, _)| v.is_finite())
                .collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            if line.is_empty() {
                continue;
            }
            out.push(along(policy, &first.path, fixed, &line));
        }
    }
    out
}

/// Every combination of the axes' values, the first axis varying fastest.
fn combinations(axes: &[Axis]) -> Vec<BTreeMap<String, f64>> {
    let mut all = vec![BTreeMap::new()];
    for axis in axes {
        let mut next = Vec::with_capacity(all.len() * axis.values.len());
        for v in &axis.values {
            for m in &all {
                let mut m: BTreeMap<String, f64> = m.clone();
                m.insert(axis.path.clone(), *v);
                next.push(m);
            }
        }
        all = next;
    }
    all
}

fn along(policy: &str, path: &str, at: BTreeMap<String, f64>, line: &[(f64, f64)]) -> Boundary {
    let heals = |s: f64| s >= 0.5;
    let crossings: Vec<usize> =
        (0..line.len() - 1).filter(|&i| heals(line[i].1) != heals(line[i + 1].1)).collect();
    let (first, last) = (line[0].0, line[line.len() - 1].0);
    // Whether the interval's ends are points where every seed went one way (else they are the
    // grid's ends and the sentence must not claim "every" or "none" there).
    let mut exact = (false, false);
    let (kind, value, low, high) = match crossings.as_slice() {
        [] if heals(line[0].1) => (BoundaryKind::HealsEverywhere, None, None, None),
        [] => (BoundaryKind::StuckEverywhere, None, None, None),
        &[i] => {
            let ((v0, s0), (v1, s1)) = (line[i], line[i + 1]);
            let value = v0 + (s0 - 0.5) / (s0 - s1) * (v1 - v0);
            let below = heals(s0);
            // The last point before the crossing that is all one way, the first after it that
            // is all the other way.
            let (lo_share, hi_share) = if below { (1.0, 0.0) } else { (0.0, 1.0) };
            let low = line[..=i].iter().rev().find(|p| p.1 == lo_share);
            let high = line[i + 1..].iter().find(|p| p.1 == hi_share);
            exact = (low.is_some(), high.is_some());
            let (low, high) = (low.map_or(first, |p| p.0), high.map_or(last, |p| p.0));
            let kind = if below { BoundaryKind::HealsBelow } else { BoundaryKind::HealsAbove };
            (kind, Some(value), Some(low), Some(high))
        }
        _ => (BoundaryKind::NotMonotone, None, None, None),
    };
    let mixed = line.iter().any(|p| p.1 > 0.0 && p.1 < 1.0);
    let words = words(policy, path, &at, kind, (value, low, high), exact, (first, last), mixed);
    Boundary {
        policy: policy.to_string(),
        along: path.to_string(),
        at,
        kind,
        value,
        low,
        high,
        words,
    }
}

/// A number as a reader wants it: `155`, `12.5`, `0.25`.
pub(crate) fn show(v: f64) -> String {
    json_number((v * 1000.0).round() / 1000.0).to_string()
}

/// An estimate, rounded to what it can claim: 0.1 at 10 and above, three significant digits
/// below (`149.3`, `2.35`).
fn approx(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return show(v);
    }
    let step = if v.abs() >= 10.0 { 0.1 } else { 10f64.powf(v.abs().log10().floor() - 2.0) };
    json_number(((v / step).round() * step * 1e9).round() / 1e9).to_string()
}

fn words(
    policy: &str,
    path: &str,
    at: &BTreeMap<String, f64>,
    kind: BoundaryKind,
    (value, low, high): (Option<f64>, Option<f64>, Option<f64>),
    (low_exact, high_exact): (bool, bool),
    (first, last): (f64, f64),
    mixed: bool,
) -> String {
    // The edge's rate is the hidden capacity itself; anything else is named by its path.
    let is_rate = path == "edge.rate";
    let unit = if is_rate {
        " QPS"
    } else if path.ends_with("_s") {
        " s"
    } else {
        ""
    };
    let what = if is_rate { String::new() } else { format!("{path} ") };
    let every = if is_rate { "rate ".to_string() } else { what.clone() };
    let with: Vec<String> = at.iter().map(|(k, v)| format!("{k} = {}", show(*v))).collect();
    let with = if with.is_empty() { String::new() } else { format!(" with {}", with.join(", ")) };
    let range = format!("{}–{}{unit}", show(first), show(last));
    let most = if mixed { " (in most seeds)" } else { "" };
    match (kind, value, low, high) {
        (BoundaryKind::HealsBelow | BoundaryKind::HealsAbove, Some(v), Some(lo), Some(hi)) => {
            let side = if kind == BoundaryKind::HealsBelow { "below" } else { "above" };
            let below = kind == BoundaryKind::HealsBelow;
            let ((yes, yes_exact), (no, no_exact)) = if below {
                ((lo, low_exact), (hi, high_exact))
            } else {
                ((hi, high_exact), (lo, low_exact))
            };
            let cmp = |heal: bool| if below == heal { "≤" } else { "≥" };
            // Say only what the grid shows: "every seed" and "none" where a point had them,
            // otherwise that most seeds did.
            let yes = if yes_exact {
                format!("every seed recovers at {what}{} {}", cmp(true), show(yes))
            } else {
                format!("most seeds recover at {what}{} {}", cmp(true), show(yes))
            };
            let no = if no_exact {
                format!("none at {} {}", cmp(false), show(no))
            } else {
                format!(
                    "most stay down at {} {}, though some seed recovers at every point swept",
                    cmp(false),
                    show(no)
                )
            };
            format!(
                "{policy} heals by itself {what}{side} ≈ {}{unit}{with} ({yes}, {no})",
                approx(v)
            )
        }
        (BoundaryKind::HealsEverywhere, ..) => {
            format!("{policy} heals by itself at every {every}swept ({range}){with}{most}")
        }
        (BoundaryKind::StuckEverywhere, ..) => {
            format!("{policy} stays down at every {every}swept ({range}){with}{most}")
        }
        _ => format!(
            "{policy}: recovery is not monotone in {path} over {range}{with}; no single boundary"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(shares: &[(f64, f64)]) -> Boundary {
        along("naive", "edge.rate", BTreeMap::new(), shares)
    }

    #[test]
    fn a_sharp_boundary_sits_between_the_two_points() {
        let b = line(&[(140.0, 1.0), (150.0, 1.0), (160.0, 0.0), (170.0, 0.0)]);
        assert_eq!(b.kind, BoundaryKind::HealsBelow);
        assert_eq!((b.value, b.low, b.high), (Some(155.0), Some(150.0), Some(160.0)));
        assert!(b.words.starts_with("naive heals by itself below ≈ 155 QPS"), "{}", b.words);
        assert!(b.words.ends_with("(every seed recovers at ≤ 150, none at ≥ 160)"), "{}", b.words);
    }

    #[test]
    fn the_sentence_claims_only_what_the_grid_shows() {
        // 1 of 3 seeds still recovers at the last point: not "none at ≥ 300".
        let b = line(&[(260.0, 1.0), (280.0, 1.0), (300.0, 1.0 / 3.0)]);
        assert!(
            b.words.ends_with(
                "(every seed recovers at ≤ 280, most stay down at ≥ 300, though some seed recovers at \
                 every point swept)"
            ),
            "{}",
            b.words
        );
        let b = line(&[(100.0, 2.0 / 3.0), (120.0, 0.0)]);
        assert!(b.words.ends_with("(most seeds recover at ≤ 100, none at ≥ 120)"), "{}", b.words);
    }

    #[test]
    fn mixed_seeds_widen_the_interval_and_move_the_estimate() {
        let b = line(&[(140.0, 1.0), (150.0, 2.0 / 3.0), (160.0, 1.0 / 3.0), (170.0, 0.0)]);
        assert_eq!((b.low, b.high), (Some(140.0), Some(170.0)));
        assert!((b.value.unwrap() - 155.0).abs() < 1e-9);
        let b = line(&[(140.0, 1.0), (150.0, 1.0), (160.0, 1.0 / 3.0), (170.0, 0.0)]);
        // A third of the seeds still healing at 160 pulls the estimate towards it.
        assert_eq!(b.value, Some(157.5));
    }

    #[test]
    fn estimates_are_rounded_to_what_they_can_claim() {
        assert_eq!(approx(149.333_333), "149.3");
        assert_eq!(approx(155.0), "155");
        assert_eq!(approx(2.3456), "2.35");
        assert_eq!(approx(0.012_34), "0.0123");
    }

    #[test]
    fn capacity_axes_heal_above_and_flat_lines_say_so() {
        let b = along("naive", "tier.db.workers", BTreeMap::new(), &[(10.0, 0.0), (20.0, 1.0)]);
        assert_eq!(b.kind, BoundaryKind::HealsAbove);
        assert!(b.words.contains("tier.db.workers above ≈ 15"), "{}", b.words);
        assert_eq!(line(&[(1.0, 1.0), (2.0, 1.0)]).kind, BoundaryKind::HealsEverywhere);
        assert_eq!(line(&[(1.0, 0.0), (2.0, 0.0)]).kind, BoundaryKind::StuckEverywhere);
        let b = line(&[(1.0, 1.0), (2.0, 0.0), (3.0, 1.0)]);
        assert_eq!((b.kind, b.value), (BoundaryKind::NotMonotone, None));
    }
}
