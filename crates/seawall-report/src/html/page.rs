//! A page of charts and tables for a tool whose figures are not the simulator's: a heading,
//! the facts of the run, a sentence on what is judged, rows of line charts over one time axis
//! and tables, with the shared report's look (palette, scales, escaping, determinism).
//!
//! `seawall load` draws its page with it: a black-box target has no tiers, amplification,
//! queue age or breaker to chart, so it does not reuse [`render_html`](super::render_html)'s
//! rows, which would be flat lines that mean nothing.

use std::fmt::Write;

use super::svg::{self, Line, Plot, Unit};
use super::{ExtraTable, chart, esc, page_from, style, text};

/// One line of a [`Chart`]: its legend name and its points, `t` in seconds from the start.
/// A non-finite value is a gap.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChartLine {
    /// The name in the legend.
    pub name: String,
    /// Seconds from the start of the run, one per value; each value holds until the next `t`.
    pub t: Vec<f64>,
    /// The values.
    pub v: Vec<f64>,
}

/// One row of a [`Page`]: a chart with its heading, unit and a sentence on how to read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chart {
    /// The heading.
    pub title: String,
    /// What the y axis counts (`requests / s`, `ms`).
    pub unit: String,
    /// How to read it, in one sentence.
    pub why: String,
    /// The lines, drawn in the palette's order.
    pub lines: Vec<ChartLine>,
}

/// A whole page: [`render_page`] turns it into one self-contained HTML file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    /// The `<h1>` and the document's title.
    pub title: String,
    /// A paragraph under the title.
    pub description: String,
    /// The facts of the run, `(name, value)`, shown under the description.
    pub facts: Vec<(String, String)>,
    /// What the page judges, in one sentence (shown above the charts); empty: nothing.
    pub verdict: String,
    /// The chart rows, top to bottom, on one time axis `[0, duration_s]`.
    pub charts: Vec<Chart>,
    /// Seconds the time axis spans (at least every line's last point).
    pub duration_s: f64,
    /// Tables under the charts.
    pub tables: Vec<ExtraTable>,
    /// The file the footer says the page was rendered from.
    pub from: String,
}

/// Renders `page` as one self-contained HTML document (inline CSS and SVG, no script). Equal
/// pages give byte-identical documents; every text is escaped; no input makes it panic.
pub fn render_page(page: &Page) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        r#"<header><h1>{}</h1><p class="desc">{}</p><dl class="meta">"#,
        esc(&page.title),
        esc(&page.description)
    );
    for (k, v) in &page.facts {
        let _ = write!(body, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(v));
    }
    body.push_str("</dl></header>");
    if !page.verdict.is_empty() {
        let _ = write!(body, r#"<p class="verdict">{}</p>"#, esc(&page.verdict));
    }
    let x_max = page
        .charts
        .iter()
        .flat_map(|c| c.lines.iter().flat_map(|l| l.t.iter().map(|t| t + 1.0)))
        .chain([page.duration_s])
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max);
    body.push_str(
        r#"<section class="charts" style="grid-template-columns: repeat(1, minmax(0, 1fr))">"#,
    );
    for c in &page.charts {
        let n = c.lines.len();
        let lines: Vec<Line> = c
            .lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let pts: Vec<(f64, f64)> = l.t.iter().zip(&l.v).map(|(&t, &v)| (t, v)).collect();
                let peak =
                    pts.iter().map(|p| p.1).filter(|v| v.is_finite()).fold(f64::NAN, f64::max);
                let tip = if peak.is_finite() {
                    format!("{}: peak {} {}", l.name, svg::short(peak), c.unit)
                } else {
                    l.name.clone()
                };
                let style = style::tier(i, n + 1);
                Line { name: l.name.clone(), tip, style, points: chart::thin(chart::steps(&pts)) }
            })
            .collect();
        let peak =
            lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).filter(|v| v.is_finite());
        let y_max = svg::nice_max(peak.fold(0.0, f64::max)).0;
        let _ = write!(
            body,
            r#"<div class="rowhead"><h3>{} <span class="unit">({})</span></h3>{}<p class="why">{}</p></div>"#,
            esc(&c.title),
            esc(&c.unit),
            chart::legend(std::slice::from_ref(&lines), false),
            esc(&c.why)
        );
        let plot = Plot {
            size: (1300.0, 220.0),
            x_max,
            y_max,
            unit: Unit::Rps,
            lines: &lines,
            band: None,
            reference: None,
            mark: None,
            label: c.title.clone(),
        };
        let _ = write!(body, r#"<figure class="cell">{}</figure>"#, svg::render(&plot));
    }
    body.push_str("</section>");
    body.push_str(r#"<section class="after"><div>"#);
    for t in &page.tables {
        body.push_str(&text::extra_table(t));
    }
    body.push_str("</div></section>");
    page_from(&page.title, &body, &page.from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Page {
        Page {
            title: "load <x>".into(),
            description: "d".into(),
            facts: vec![("rate".into(), "10 rps".into())],
            verdict: "no fault injected".into(),
            charts: vec![Chart {
                title: "Requests".into(),
                unit: "requests / s".into(),
                why: "w".into(),
                lines: vec![
                    ChartLine { name: "offered".into(), t: vec![0.0, 1.0], v: vec![10.0, 10.0] },
                    ChartLine { name: "good".into(), t: vec![0.0, 1.0], v: vec![9.0, f64::NAN] },
                ],
            }],
            duration_s: 2.0,
            tables: vec![ExtraTable { title: "T".into(), ..ExtraTable::default() }],
            from: "results.json".into(),
        }
    }

    /// The page holds each chart's title, legend and an SVG, escapes text, and is deterministic.
    #[test]
    fn charts_and_tables_are_drawn() {
        let html = render_page(&page());
        assert_eq!(html, render_page(&page()));
        assert!(html.contains("load &lt;x&gt;"), "escaped title");
        assert_eq!(html.matches("<svg viewBox").count(), 1, "one chart");
        for s in
            ["Requests", "offered", "good", "no fault injected", "<h2 class=\"sec extra\">T</h2>"]
        {
            assert!(html.contains(s), "{s}");
        }
        assert!(!html.contains("Amplification"), "none of the simulator's rows");
    }

    #[test]
    fn empty_and_odd_input_does_not_panic() {
        let mut p = Page::default();
        render_page(&p);
        p.charts.push(Chart {
            lines: vec![ChartLine {
                name: "x".into(),
                t: vec![f64::NAN, 1.0],
                v: vec![f64::INFINITY],
            }],
            ..Chart::default()
        });
        render_page(&p);
    }
}
