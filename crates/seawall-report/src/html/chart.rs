//! The six chart rows: which series each draws, one y-scale shared by every column, and which
//! rows to leave out because no run has anything to show in them.

use std::fmt::Write;

use super::svg::{self, Line, Plot, Style, Unit};
use super::{Col, esc, style, text};

/// Above this many points a line is thinned to the minimum and maximum of each bucket, so spikes
/// survive and a day-long run still makes a page a browser opens quickly.
const MAX_POINTS: usize = 1600;

/// One chart row.
#[derive(Debug)]
struct Spec {
    title: &'static str,
    unit_label: &'static str,
    why: &'static str,
    unit: Unit,
    lines: fn(&Col<'_>) -> Vec<Line>,
    /// The y-axis reaches at least this far (so 1× amplification sits mid-chart, not on its
    /// top edge).
    min_top: f64,
    /// A dashed horizontal reference line.
    reference: Option<f64>,
    /// Mark the moment of recovery on this chart.
    mark_recovery: bool,
}

const SPECS: [Spec; 6] = [
    Spec {
        title: "Offered load and goodput at the edge",
        unit_label: "requests / s",
        why: "Goodput counts only answers that arrived in time. In a storm it stays near zero \
              after the fault is gone, though the offered load never changed.",
        unit: Unit::Rps,
        lines: load_lines,
        min_top: 0.0,
        reference: None,
        mark_recovery: true,
    },
    Spec {
        title: "Attempts arriving at each tier",
        unit_label: "attempts / s",
        why: "Retries multiply across layers: in a storm the bottom tier's line climbs after the \
              errors begin while the edge stays flat.",
        unit: Unit::Rps,
        lines: tier_lines,
        min_top: 0.0,
        reference: None,
        mark_recovery: false,
    },
    Spec {
        title: "Amplification: bottom-tier attempts per edge request",
        unit_label: "×",
        why: "1× (dotted) is one attempt per request; layers that retry multiply it. A second can \
              read above the layers' product: retries of earlier requests land in it too.",
        unit: Unit::Times,
        lines: amplification_lines,
        min_top: 2.0,
        reference: Some(1.0),
        mark_recovery: false,
    },
    Spec {
        title: "Age of the oldest queued request at the bottom tier",
        unit_label: "seconds",
        why: "Once it is older than the caller's deadline, everything served is already wasted.",
        unit: Unit::Seconds,
        lines: queue_lines,
        min_top: 0.0,
        reference: None,
        mark_recovery: false,
    },
    Spec {
        title: "Retries refused by a budget, and requests shed",
        unit_label: "per second",
        why: "Refusals rising during the fault mean the budget is working; shedding keeps the \
              queue short.",
        unit: Unit::Rps,
        lines: refusal_lines,
        min_top: 0.0,
        reference: None,
        mark_recovery: false,
    },
    Spec {
        title: "Clients with an open circuit breaker",
        unit_label: "% of clients",
        why: "An open breaker fails calls locally instead of adding load to a sick dependency.",
        unit: Unit::Fraction,
        lines: breaker_lines,
        min_top: 1.0,
        reference: None,
        mark_recovery: false,
    },
];

/// Renders every chart row that has something to show, each with one chart per column, all on
/// the time axis `[0, x_max]`.
pub(super) fn rows(cols: &[Col<'_>], x_max: f64) -> String {
    // About the width in pixels of a column on a 1400 px page, and a little flatter when wide.
    let w = (1300.0 / cols.len().max(1) as f64).clamp(220.0, 640.0);
    let size = (w, (w * 0.45).clamp(150.0, 200.0));
    let mut out = String::new();
    for spec in &SPECS {
        let lines: Vec<Vec<Line>> = cols.iter().map(|c| (spec.lines)(c)).collect();
        let all = || lines.iter().flatten().flat_map(|l| l.points.iter().map(|p| p.1));
        if !all().any(|v| v.is_finite() && v != 0.0) {
            continue;
        }
        let peak = all().filter(|v| v.is_finite()).fold(spec.min_top, f64::max);
        let y_max = match spec.unit {
            // A fraction's axis is always 0–100 %, whatever the data (which may stray past it).
            Unit::Fraction => 1.0,
            _ => svg::nice_max(peak).0,
        };
        let _ = write!(
            out,
            r#"<div class="rowhead"><h3>{} <span class="unit">({})</span></h3>{}<p class="why">{}</p></div>"#,
            esc(spec.title),
            esc(spec.unit_label),
            legend(&lines, cols.iter().any(|c| c.fault.is_some())),
            esc(spec.why)
        );
        for (col, lines) in cols.iter().zip(&lines) {
            let mark = col.fault.zip(col.run.recovery_s()).filter(|_| spec.mark_recovery);
            let mark = mark.map(|(f, r)| (f.end_s + r, text::mark(r)));
            let plot = Plot {
                size,
                x_max,
                y_max,
                unit: spec.unit,
                lines,
                band: col.fault.map(|f| (f.start_s, f.end_s, f.kind.as_str())),
                reference: spec.reference,
                mark,
                label: format!("{}: {}", col.title, spec.title),
            };
            let _ = write!(out, r#"<figure class="cell">{}</figure>"#, svg::render(&plot));
        }
    }
    out
}

/// The row's legend: every distinct line name in order of first appearance, and the fault band.
pub(super) fn legend(lines: &[Vec<Line>], fault: bool) -> String {
    let mut seen: Vec<(&str, Style)> = Vec::new();
    for l in lines.iter().flatten() {
        if !seen.iter().any(|(n, s)| *n == l.name && *s == l.style) {
            seen.push((&l.name, l.style));
        }
    }
    let mut s = String::from(r#"<span class="legend">"#);
    for (name, st) in seen {
        let dash = if st.dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{}""#, st.dash)
        };
        let _ = write!(
            s,
            r#"<span><svg width="26" height="10" aria-hidden="true"><line x1="1" y1="5" x2="25" y2="5" stroke="{}" stroke-width="{:.1}"{dash}/></svg>{}</span>"#,
            st.color,
            st.width,
            esc(name)
        );
    }
    if fault {
        s.push_str(r#"<span><i class="band-key"></i>fault window</span>"#);
    }
    s.push_str("</span>");
    s
}

/// A line from a series, zipped with the run's `t` (the shorter one decides the length).
fn line(col: &Col<'_>, name: &str, style: Style, v: &[f64], unit: &str) -> Line {
    let t = &col.run.series.t;
    let pts: Vec<(f64, f64)> = t.iter().zip(v).map(|(&t, &v)| (t, v)).collect();
    let peak = pts.iter().map(|p| p.1).filter(|v| v.is_finite()).fold(f64::NAN, f64::max);
    let tip = if peak.is_finite() {
        format!("{} — {name}: peak {} {unit}", col.title, svg::short(peak))
    } else {
        format!("{} — {name}", col.title)
    };
    Line { name: name.to_string(), tip, style, points: thin(steps(&pts)) }
}

/// Each per-second value drawn as a step over its interval `[t, next t)`, so a cliff sits exactly
/// on the second it happened (and on the fault band's edge), not half-way to its neighbour.
pub(super) fn steps(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(2 * pts.len());
    let mut dt = 1.0;
    for (i, &(x, y)) in pts.iter().enumerate() {
        if !x.is_finite() {
            out.push((f64::NAN, f64::NAN));
            continue;
        }
        let next = pts.get(i + 1).map(|p| p.0).filter(|n| n.is_finite() && *n > x);
        if let Some(n) = next {
            dt = n - x;
        }
        out.extend([(x, y), (next.unwrap_or(x + dt), y)]);
    }
    out
}

/// Min and max of each bucket, in time order, when there are more than [`MAX_POINTS`] points.
pub(super) fn thin(pts: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    if pts.len() <= MAX_POINTS {
        return pts;
    }
    let size = pts.len().div_ceil(MAX_POINTS / 2);
    let mut out = Vec::with_capacity(MAX_POINTS + 2);
    for chunk in pts.chunks(size) {
        let finite = || chunk.iter().enumerate().filter(|(_, p)| p.1.is_finite());
        let lo = finite().min_by(|a, b| a.1.1.total_cmp(&b.1.1));
        let hi = finite().max_by(|a, b| a.1.1.total_cmp(&b.1.1));
        match (lo, hi) {
            (Some(lo), Some(hi)) if lo.0 == hi.0 => out.push(*lo.1),
            (Some(lo), Some(hi)) if lo.0 < hi.0 => out.extend([*lo.1, *hi.1]),
            (Some(lo), Some(hi)) => out.extend([*hi.1, *lo.1]),
            // A bucket with no finite value stays a gap.
            _ => out.push((chunk[0].0, f64::NAN)),
        }
    }
    out
}

fn load_lines(c: &Col<'_>) -> Vec<Line> {
    let s = &c.run.series;
    vec![
        line(c, "offered", style::OFFERED, &s.edge_rps, "rps"),
        line(c, "goodput", style::GOODPUT, &s.goodput_rps, "rps"),
    ]
}

fn tier_lines(c: &Col<'_>) -> Vec<Line> {
    let tiers = &c.run.series.tier_attempts_rps;
    let n = tiers.len();
    // The bottom tier is drawn thickest and (listed last) under the others, so thinner upper
    // tiers carrying the same traffic (no amplification) stay visible on top of it.
    tiers
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let name = c.tiers.get(i).cloned().unwrap_or_else(|| format!("tier {}", i + 1));
            line(c, &name, style::tier(i, n), v, "attempts/s")
        })
        .collect()
}

fn amplification_lines(c: &Col<'_>) -> Vec<Line> {
    let s = &c.run.series;
    // No edge traffic in a second means no ratio for it: a gap, not a zero or an infinity.
    let amp: Vec<f64> = s
        .bottom_attempts_rps
        .iter()
        .zip(&s.edge_rps)
        .map(|(b, e)| if *e > 0.0 { b / e } else { f64::NAN })
        .collect();
    vec![line(c, "bottom attempts per edge request", style::AMPLIFICATION, &amp, "×")]
}

fn queue_lines(c: &Col<'_>) -> Vec<Line> {
    let s = &c.run.series.queue_age_s;
    vec![line(c, "oldest queued request", style::QUEUE_AGE, s, "s")]
}

fn refusal_lines(c: &Col<'_>) -> Vec<Line> {
    let s = &c.run.series;
    vec![
        line(c, "retries refused by budget", style::REFUSED, &s.budget_refusals_rps, "/s"),
        line(c, "shed or dropped as doomed", style::SHED, &s.shed_rps, "/s"),
    ]
}

fn breaker_lines(c: &Col<'_>) -> Vec<Line> {
    let s = &c.run.series.breaker_open;
    let mut l = line(c, "breaker open", style::BREAKER, s, "");
    // The tooltip speaks in percent, like the axis.
    let peak = s.iter().filter(|v| v.is_finite()).fold(f64::NAN, |a, b| a.max(*b));
    if peak.is_finite() {
        l.tip = format!("{} — breaker open: peak {}", c.title, crate::table::pct(peak));
    }
    vec![l]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_spikes_and_gaps() {
        let mut pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, 1.0)).collect();
        pts[5_000].1 = 99.0;
        pts[7_000].1 = f64::NAN;
        let out = thin(pts);
        assert!(out.len() <= MAX_POINTS + 2);
        assert!(out.iter().any(|p| p.1 == 99.0));
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn values_hold_over_their_interval() {
        let out = steps(&[(0.0, 1.0), (1.0, 2.0), (f64::NAN, 3.0), (5.0, f64::NAN)]);
        assert_eq!(out[..4], [(0.0, 1.0), (1.0, 1.0), (1.0, 2.0), (2.0, 2.0)]);
        assert!(out[4].0.is_nan());
        assert_eq!(out[5].0, 5.0);
        assert_eq!(out[6].0, 6.0);
    }

    #[test]
    fn short_input_is_untouched() {
        let pts = vec![(0.0, 1.0), (1.0, f64::NAN)];
        assert_eq!(thin(pts.clone()).len(), pts.len());
    }
}
