//! Measurement beside prediction: a lab run and the simulator's run of the same parameters.
//!
//! The lab's report has a `sim` column: for each measured policy, the simulator's prediction
//! stands right next to it, on the same axes, and a table gives the gap. A prediction that is
//! far off is a finding in itself — the model or the lab is missing something.

use std::fmt::Write;

use super::{Col, columns, esc, page, text, x_max};
use crate::table;
use crate::{Results, Run};

/// Renders a measured run (usually `seawall lab`) beside a prediction (usually `seawall
/// simulate` with the same parameters) as one self-contained HTML page.
///
/// Each measured policy's column is followed by the predicted column of the same policy name
/// (or, when no name matches, the predicted run at the same position); predicted runs left over
/// follow at the end. All columns share the time axis and y-scales. A table gives, per policy,
/// the measured and predicted figures and the gap between them. Deterministic, like
/// [`render_html`](super::render_html).
pub fn render_html_compare(measured: &Results, predicted: &Results) -> String {
    let pairs = pair(measured, predicted);
    let tag = |r: &Results| match r.source {
        crate::Source::Simulation => "sim",
        crate::Source::Lab => "lab",
    };
    let mut cols: Vec<Col<'_>> = Vec::new();
    for (m, p) in &pairs {
        if let Some(m) = m {
            cols.push(Col::new(m, measured, Some(tag(measured))));
        }
        if let Some(p) = p {
            cols.push(Col::new(p, predicted, Some(tag(predicted))));
        }
    }
    let mut body = text::header(measured, Some(predicted));
    body.push_str(&columns(&cols, x_max(&[measured, predicted], &cols)));
    body.push_str(r#"<section class="after"><div>"#);
    body.push_str(r#"<h2 class="sec">Measured vs predicted</h2>"#);
    body.push_str(&gap_table(&pairs));
    body.push_str("</div>");
    body.push_str(&text::how_to_read());
    body.push_str("</section>");
    page(&format!("seawall · {} (measured vs predicted)", measured.scenario), &body)
}

type Pair<'a> = (Option<&'a Run>, Option<&'a Run>);

/// Measured runs in order, each with its prediction; unmatched predictions at the end.
fn pair<'a>(measured: &'a Results, predicted: &'a Results) -> Vec<Pair<'a>> {
    let mut used = vec![false; predicted.runs.len()];
    let mut out = Vec::new();
    for (i, m) in measured.runs.iter().enumerate() {
        let by_name = predicted.runs.iter().position(|p| p.policy == m.policy);
        // Fall back to position only if that prediction's name is not claimed by another run.
        let by_pos = Some(i).filter(|&i| {
            i < predicted.runs.len()
                && !measured.runs.iter().any(|o| o.policy == predicted.runs[i].policy)
        });
        let j = by_name.or(by_pos).filter(|&j| !used[j]);
        if let Some(j) = j {
            used[j] = true;
        }
        out.push((Some(m), j.map(|j| &predicted.runs[j])));
    }
    for (j, p) in predicted.runs.iter().enumerate() {
        if !used[j] {
            out.push((None, Some(p)));
        }
    }
    out
}

/// How a figure prints, and how its gap does.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// "yes, 1.8 s" / "no"; the gap is the difference in recovery time.
    Recovered,
    /// A multiplier, `27.0×`; the gap too, `+3.2×`.
    Times,
    /// A plain number with two decimals.
    Plain,
    /// A fraction as a percentage; the gap in percentage points, `-12 pp`.
    Fraction,
}

/// A compared figure: its name, how it prints, and its value in a run.
type Figure = (&'static str, Kind, fn(&Run) -> f64);

/// The figures compared, in table order.
const FIGURES: [Figure; 6] = [
    ("recovered", Kind::Recovered, |r| r.recovery_s().unwrap_or(f64::NAN)),
    ("peak amplification", Kind::Times, |r| r.peak_amplification),
    ("attempts per call", Kind::Plain, |r| r.attempts_per_call),
    ("goodput during fault", Kind::Fraction, |r| r.goodput_during),
    ("goodput after fault", Kind::Fraction, |r| r.goodput_after),
    ("wasted work", Kind::Fraction, |r| r.wasted_work),
];

/// Per policy: each figure measured, predicted, and measured minus predicted.
fn gap_table(pairs: &[Pair<'_>]) -> String {
    let mut s = String::from(
        "<table><thead><tr><th>policy</th><th>figure</th><th>measured</th><th>predicted</th>\
         <th>gap</th></tr></thead><tbody>",
    );
    for (m, p) in pairs {
        let name = m.or(*p).map(|r| r.policy.as_str()).unwrap_or_default();
        for (k, (figure, kind, value)) in FIGURES.into_iter().enumerate() {
            let show = |r: Option<&Run>| match (r, kind) {
                (None, _) => "—".to_string(),
                (Some(r), Kind::Recovered) => table::recovered(r),
                (Some(r), Kind::Times) => table::times(value(r)),
                (Some(r), Kind::Plain) => table::number(value(r), 2),
                (Some(r), Kind::Fraction) => table::pct(value(r)),
            };
            let gap = m.zip(*p).map(|(m, p)| value(m) - value(p)).filter(|d| d.is_finite());
            let gap = match (gap, kind) {
                (None, _) => "—".to_string(),
                (Some(d), _) if d.abs() >= table::HUGE => table::huge(d),
                (Some(d), Kind::Recovered) => format!("{d:+.1} s"),
                (Some(d), Kind::Times) => format!("{d:+.1}×"),
                (Some(d), Kind::Plain) => format!("{d:+.2}"),
                (Some(d), Kind::Fraction) => format!("{:+.0} pp", d * 100.0),
            };
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if k == 0 { esc(name) } else { String::new() },
                esc(figure),
                esc(&show(*m)),
                esc(&show(*p)),
                esc(&gap)
            );
        }
    }
    s.push_str("</tbody></table>");
    s
}
