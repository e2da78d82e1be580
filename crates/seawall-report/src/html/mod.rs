//! The self-contained HTML report: one file, inline CSS and SVG, no script, no external assets.
//!
//! # What the page says, top to bottom
//!
//! A retry storm is recognised by the shape of a few lines over time, compared between a policy
//! that storms and one that does not. So the page is built for comparison at a glance:
//!
//! 1. a header: scenario, description, seed, source, duration, fault window, tiers;
//! 2. **one column per policy**, each headed by a plain verdict ("stays down — goodput 0 % after
//!    the fault" / "recovered 1.8 s after the fault") and its key numbers;
//! 3. under the headings, rows of charts — load and goodput, attempts per tier, amplification,
//!    queue age, refusals and shedding, breaker state — on the **same time axis and the same
//!    y-scale across columns**, with the fault window shaded on each. A row is left out when no
//!    run has anything to draw in it;
//! 4. the summary table (the very cells of [`render_table`](crate::render_table)), the hedging
//!    table when a run hedges (those of [`render_hedging`](crate::render_hedging)), and a short
//!    "How to read this".
//!
//! Nothing in the page depends on the time of rendering or on hash order: the same [`Results`]
//! give the same bytes. Every text that comes from the results is escaped, and no input (empty
//! runs, mismatched series lengths, NaN or infinite values) makes rendering panic.

mod chart;
mod compare;
mod page;
mod phase;
mod style;
mod svg;
mod text;

use std::fmt::Write;

use crate::{Fault, Results, Run};

pub use compare::render_html_compare;
pub use page::{Chart, ChartLine, Page, render_page};
pub use phase::render_sweep_html;

/// One column of the page: a run and what its charts need to know about it.
#[derive(Debug)]
struct Col<'a> {
    /// The heading (the policy's name).
    title: String,
    /// Where the run came from, shown next to the title when pages compare sources.
    tag: Option<&'static str>,
    run: &'a Run,
    fault: Option<&'a Fault>,
    tiers: &'a [String],
}

impl<'a> Col<'a> {
    fn new(run: &'a Run, results: &'a Results, tag: Option<&'static str>) -> Self {
        Col {
            title: run.policy.clone(),
            tag,
            run,
            fault: results.fault.as_ref(),
            tiers: &results.tiers,
        }
    }
}

/// Renders `results` as one self-contained HTML page (no external assets, no script).
///
/// The page tells the story of the scenario at a glance: a verdict per policy, the policies side
/// by side in columns of charts on shared axes, the fault window shaded, then the summary table
/// and how to read it. Deterministic: equal results give byte-identical pages.
pub fn render_html(results: &Results) -> String {
    render_html_with(results, &[])
}

/// A table of figures the shared [`Results`] have no field for (a load test's latency, say),
/// shown under the summary. Every text is escaped when rendered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExtraTable {
    /// Its heading.
    pub title: String,
    /// A sentence under the heading: what the figures are and how they were measured.
    pub note: String,
    /// Column headings.
    pub header: Vec<String>,
    /// The cells, row by row.
    pub rows: Vec<Vec<String>>,
}

/// [`render_html`] with `extra` tables after the summary table, in order.
pub fn render_html_with(results: &Results, extra: &[ExtraTable]) -> String {
    let cols: Vec<Col<'_>> = results.runs.iter().map(|r| Col::new(r, results, None)).collect();
    let mut body = text::header(results, None);
    body.push_str(&columns(&cols, x_max(&[results], &cols)));
    body.push_str(r#"<section class="after"><div>"#);
    body.push_str(r#"<h2 class="sec">Summary</h2>"#);
    body.push_str(&text::summary_table(results));
    body.push_str(&text::hedging_table(results));
    for t in extra {
        body.push_str(&text::extra_table(t));
    }
    body.push_str("</div>");
    body.push_str(&text::how_to_read());
    body.push_str("</section>");
    page(&format!("seawall · {}", results.scenario), &body)
}

/// The whole document around `body`, rendered from results.json.
fn page(title: &str, body: &str) -> String {
    page_from(title, body, "results.json")
}

/// The whole document around `body`; `from` names the file the footer says it came from.
fn page_from(title: &str, body: &str, from: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{}</style></head>\n<body>\n{}\n<footer>Rendered by seawall-report \
         from {}. The same results always give this same page.</footer>\n</body></html>\n",
        esc(title),
        style::CSS,
        body,
        esc(from)
    )
}

/// The grid: a heading per column, then the chart rows.
fn columns(cols: &[Col<'_>], x_max: f64) -> String {
    if cols.is_empty() {
        return r#"<p class="verdict">These results hold no runs: nothing to chart.</p>"#.into();
    }
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<section class="charts{}" style="grid-template-columns: repeat({}, minmax(0, 1fr))">"#,
        // Four or more columns: the numbers under each verdict stack two by two.
        if cols.len() > 3 { " narrow" } else { "" },
        cols.len()
    );
    for col in cols {
        s.push_str(&text::column_head(col));
    }
    s.push_str(&chart::rows(cols, x_max));
    s.push_str("</section>");
    s
}

/// The common time axis: long enough for every run's duration and every sample.
fn x_max(results: &[&Results], cols: &[Col<'_>]) -> f64 {
    let durations = results.iter().map(|r| r.duration_s);
    let samples = cols.iter().flat_map(|c| c.run.series.t.iter().copied());
    let fault_ends = cols.iter().filter_map(|c| c.fault.map(|f| f.end_s));
    durations.chain(samples).chain(fault_ends).filter(|v| v.is_finite()).fold(1.0, f64::max)
}

/// Escapes text for HTML element content and attribute values alike.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters are not allowed in HTML text; show that something was there.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_special_character() {
        assert_eq!(esc(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(esc("a\u{0}b"), "a\u{FFFD}b");
    }
}
