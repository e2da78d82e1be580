//! The sweep in the terminal: one aligned row per grid point and policy, then the boundaries.

use super::Sweep;
use super::boundary::show;
use crate::table::{pct, printable, secs, times};

/// The table's cells, header first: the very cells the HTML page shows.
pub(crate) fn rows(sweep: &Sweep) -> Vec<Vec<String>> {
    let mut header: Vec<String> = sweep.axes.iter().map(|a| printable(&a.path)).collect();
    let fixed = ["policy", "recovered", "recovery", "peak amp", "after", "wasted"];
    header.extend(fixed.iter().map(|s| s.to_string()));
    let mut rows = vec![header];
    for p in &sweep.points {
        let mut row: Vec<String> = sweep
            .axes
            .iter()
            .map(|a| p.at.get(&a.path).map_or_else(|| "—".to_string(), |v| show(*v)))
            .collect();
        let mut recovered = match p.runs.len() {
            1 if p.recovered => "yes".to_string(),
            1 => "no".to_string(),
            n => format!("{}/{n}", p.recovered_seeds),
        };
        match (p.late_seeds, p.runs.len()) {
            (0, _) => {}
            (_, 1) => recovered.push_str(" (late)"),
            (k, _) => recovered.push_str(&format!(" ({k} late)")),
        }
        row.extend([
            printable(&p.policy),
            recovered,
            p.recovery_s.map_or_else(|| "—".to_string(), secs),
            times(p.peak_amplification),
            pct(p.goodput_after),
            pct(p.wasted_work),
        ]);
        rows.push(row);
    }
    rows
}

/// Renders a sweep as plain text: a row per grid point and policy (the swept values, how many
/// seeds recovered, the median recovery time, peak amplification, goodput after the fault and
/// wasted work), then one sentence per boundary found.
pub fn render_sweep_table(sweep: &Sweep) -> String {
    let rows = rows(sweep);
    let (axes, names) = (sweep.axes.len(), sweep.axes.len() + 2);
    // Values and figures line up on their last digit; names and verdicts read left.
    let mut out = crate::table::columns_by(&rows, |i| i >= axes && i < names);
    if sweep.seeds > 1 {
        out.push_str(&format!(
            "\n{} seeds per point; recovery is the median over the seeds that recovered.\n",
            sweep.seeds
        ));
    }
    if sweep.points.iter().any(|p| p.late_seeds > 0) {
        out.push_str(
            "\nlate: healed by the end of the run, but only after losing most of the requests \
             after the fault; a longer --duration shows whether it recovers.\n",
        );
    }
    out.push('\n');
    for b in &sweep.boundaries {
        out.push_str(&printable(&b.words));
        out.push('\n');
    }
    out
}
