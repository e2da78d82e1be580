//! Tables for a terminal: one layout for every seawall table ([`columns`]), and the summary
//! table, one aligned plain-text row per policy.
//!
//! The HTML report's summary table shows the very same cells (`summary_rows`), so a number
//! read in the terminal can be found again, character for character, in the report.

pub(crate) use crate::numbers::{HUGE, huge, number, pct, printable, secs, times};
use crate::verdict::words;
use crate::{Fault, Results, Run};

/// Column headers of the summary, left to right.
pub(crate) const HEADERS: [&str; 8] = [
    "policy",
    "recovered",
    "peak amp",
    "attempts/call",
    "goodput before",
    "during",
    "after",
    "wasted",
];

/// Longest policy name shown in the terminal before it is cut (keeps rows within 100 columns).
const MAX_NAME: usize = 20;

/// Renders the summary of every run as a plain-text table that fits in 100 columns.
///
/// One row per policy: the verdict ([`crate::verdict`]: `yes, 1.0 s` after the fault's end,
/// `no`, `no (late)`, `partly`, `not judged`), peak amplification, attempts at the bottom tier
/// per call, goodput before / during / after the fault, and wasted work. Without a fault the
/// during / after columns show `—`. An empty `results.runs` gives just the header line.
/// [`render_notes`] says what the verdict cells mean; print it under the table.
pub fn render_table(results: &Results) -> String {
    let mut rows: Vec<[String; 8]> = vec![HEADERS.map(String::from)];
    for run in &results.runs {
        let mut row = summary_row(run, results.fault.as_ref());
        row[0] = clip(&row[0], MAX_NAME);
        rows.push(row);
    }
    columns(&rows, 2)
}

/// The lines under [`render_table`], within 100 columns: what the verdict cells mean (for a
/// run with a fault), why a run was not judged, and what the verdicts alone do not say
/// ([`crate::verdict::compare`]: a "before" that served more while the fault lasted). Empty
/// when there is nothing to say.
pub fn render_notes(results: &Results) -> String {
    let mut out = String::new();
    if results.fault.is_some() && !results.runs.is_empty() {
        out.push_str(&words::legend());
    }
    for run in results.runs.iter().filter(|r| !r.verdict.is_judged()) {
        let name = clip(&printable(&run.policy), MAX_NAME);
        out.push_str(&wrap(&format!("{name}: {}", run.sentence()), 100));
    }
    for c in crate::verdict::compare(results) {
        out.push_str(&wrap(&c, 100));
    }
    out
}

/// `text` in lines of at most `width` characters, broken at spaces (a non-breaking space, which
/// keeps a number with its unit, prints as a plain one), later lines indented by two.
pub(crate) fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let (mut line, mut empty) = (String::new(), true);
    for word in printable(text).split(' ').filter(|w| !w.is_empty()) {
        let word = word.replace('\u{a0}', " ");
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            (line, empty) = ("  ".to_string(), true);
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(&word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// Column headers of the hedging table, left to right.
pub(crate) const HEDGING_HEADERS: [&str; 6] =
    ["policy", "hedged layer", "hedges sent", "won", "cancelled", "refused"];

/// Renders what each hedging client layer did, one row per run and layer — hedges (copies after
/// the first) sent, won (answered first with a success), cancelled (losers stopped) and refused
/// by the budget — under a title line; an empty string when no run hedges, so a report of a
/// scenario without hedging shows nothing of it.
pub fn render_hedging(results: &Results) -> String {
    let body = hedging_rows(results);
    if body.is_empty() {
        return String::new();
    }
    let mut rows: Vec<[String; 6]> = vec![HEDGING_HEADERS.map(String::from)];
    rows.extend(body.into_iter().map(|mut r| {
        r[0] = clip(&r[0], MAX_NAME);
        r[1] = clip(&r[1], 2 * MAX_NAME);
        r
    }));
    format!("hedging (a hedge is a copy of a call after the first)\n{}", columns(&rows, 2))
}

/// The hedging cells of every run, in [`HEDGING_HEADERS`] order (names unclipped, not escaped).
pub(crate) fn hedging_rows(results: &Results) -> Vec<[String; 6]> {
    let mut rows = Vec::new();
    for run in &results.runs {
        for h in &run.hedging {
            rows.push([
                printable(&run.policy),
                printable(&format!("{} → {}", h.caller, h.tier)),
                h.sent.to_string(),
                h.won.to_string(),
                h.cancelled.to_string(),
                h.refused.to_string(),
            ]);
        }
    }
    rows
}

/// Any table for a terminal, the way every seawall table is laid out: `rows` (the header
/// first) padded to each column's widest cell, the first `left` columns read left to right,
/// the others (numbers) lined up on their last character, two spaces between columns.
/// Control characters in cells print as `?`. Rows shorter than the header are padded.
pub fn columns<R: AsRef<[String]>>(rows: &[R], left: usize) -> String {
    columns_by(rows, |i| i < left)
}

/// [`columns`] with the left-reading columns chosen by `is_left(index)`.
pub(crate) fn columns_by<R: AsRef<[String]>>(
    rows: &[R],
    is_left: impl Fn(usize) -> bool,
) -> String {
    let n = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut v: Vec<String> = r.as_ref().iter().map(|c| printable(c)).collect();
            v.resize(n, String::new());
            v
        })
        .collect();
    let mut widths = vec![0usize; n];
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &cells {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - cell.chars().count());
            if is_left(i) {
                line.push_str(cell);
                line.push_str(&pad);
            } else {
                line.push_str(&pad);
                line.push_str(cell);
            }
            line.push_str("  ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The summary cells of every run, in [`HEADERS`] order (names unclipped, not escaped).
pub(crate) fn summary_rows(results: &Results) -> Vec<[String; 8]> {
    results.runs.iter().map(|r| summary_row(r, results.fault.as_ref())).collect()
}

/// One run's summary cells, in [`HEADERS`] order.
pub(crate) fn summary_row(run: &Run, fault: Option<&Fault>) -> [String; 8] {
    let (during, after) = if fault.is_some() {
        (pct(run.goodput_during), pct(run.goodput_after))
    } else {
        ("—".to_string(), "—".to_string())
    };
    [
        printable(&run.policy),
        recovered(run),
        times(run.peak_amplification),
        number(run.attempts_per_call, 2),
        pct(run.goodput_before),
        during,
        after,
        pct(run.wasted_work),
    ]
}

/// The verdict's cell ([`words::cell`]).
pub(crate) fn recovered(run: &Run) -> String {
    words::cell(run.verdict)
}

/// At most `max` characters, the cut marked with `…`.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_do_not_round_to_none_or_all() {
        assert_eq!(pct(0.0), "0 %");
        assert_eq!(pct(0.004), "<1 %");
        assert_eq!(pct(0.999), ">99 %");
        assert_eq!(pct(1.0), "100 %");
        assert_eq!(pct(f64::NAN), "—");
        assert_eq!(pct(-0.0001), "0 %");
    }

    #[test]
    fn multipliers_and_seconds() {
        assert_eq!(times(27.0), "27.0×");
        assert_eq!(times(243.4), "243×");
        assert_eq!(times(f64::INFINITY), "—");
        assert_eq!(secs(1.75), "1.8 s");
        assert_eq!(times(1e300), "1.0e300×");
        assert_eq!(pct(1e300), "1.0e302 %");
        assert_eq!(number(-2.5e9, 2), "-2.5e9");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(printable("a\nb"), "a?b");
    }
}
