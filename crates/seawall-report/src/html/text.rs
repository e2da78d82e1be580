//! The words of the page: header, per-policy verdicts, summary table and "How to read this".

use std::fmt::Write;

use super::{Col, esc};
use crate::table::{self, HEADERS};
use crate::verdict::words::{self, Tone};
use crate::{Results, Source};

/// "simulation" or "lab".
pub(super) fn source_name(s: Source) -> &'static str {
    match s {
        Source::Simulation => "simulation",
        Source::Lab => "lab",
    }
}

/// Title, description and the facts of the run. `versus` (for comparisons) adds the second
/// source and its seed.
pub(super) fn header(r: &Results, versus: Option<&Results>) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<header><h1>{}</h1><p class="desc">{}</p><dl class="meta">"#,
        esc(&r.scenario),
        esc(&r.description)
    );
    let mut fact = |k: &str, v: String| {
        let _ = write!(s, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(&v));
    };
    match versus {
        None => {
            fact("source", source_name(r.source).into());
            fact("seed", r.seed.to_string());
        }
        Some(v) => {
            let (a, b) = (source_name(r.source), source_name(v.source));
            fact("sources", format!("{a} (measured) vs {b} (predicted)"));
            fact("seeds", format!("{} / {}", r.seed, v.seed));
        }
    }
    fact("duration", table::secs(r.duration_s));
    match &r.fault {
        Some(f) => fact(
            "fault",
            format!("{}, from {} to {}", f.kind, table::secs(f.start_s), table::secs(f.end_s)),
        ),
        None => fact("fault", "none injected".into()),
    }
    if !r.tiers.is_empty() {
        fact("tiers", r.tiers.join(" → "));
    }
    s.push_str("</dl></header>");
    s
}

/// The verdict for a run in one plain sentence ([`crate::verdict::words`]), and its tone.
pub(super) fn verdict(col: &Col<'_>) -> (Tone, String) {
    (words::tone(col.run.verdict), col.run.sentence())
}

/// The label of the recovery mark on the goodput chart.
pub(super) fn mark(recovery_s: f64) -> String {
    if recovery_s < 0.05 {
        "recovered".into()
    } else {
        format!("recovered +{}", table::secs(recovery_s))
    }
}

/// A number and its unit kept on one line: "0 %" must not break into "0" and "%".
fn nb(s: String) -> String {
    s.replace(' ', "\u{a0}")
}

/// A column's heading: policy, verdict, and the numbers that tell a storm from a blip.
pub(super) fn column_head(col: &Col<'_>) -> String {
    let (tone, sentence) = verdict(col);
    let run = col.run;
    let tag =
        col.tag.map(|t| format!(r#"<span class="tag">{}</span>"#, esc(t))).unwrap_or_default();
    let (class, sign) = match tone {
        Tone::Good => ("good", "✓"),
        Tone::Bad => ("bad", "✗"),
        _ => ("neutral", "–"),
    };
    let mut s = format!(
        r#"<div class="colhead {class}"><h2>{}{tag}</h2><p class="verdict">{sign} {}</p>"#,
        esc(&col.title),
        esc(&sentence)
    );
    s.push_str(&amplification_line(col));
    s.push_str(r#"<dl class="stats">"#);
    let during = if col.fault.is_some() { table::pct(run.goodput_during) } else { "—".into() };
    for (k, v) in [
        ("peak amplification", table::times(run.peak_amplification)),
        ("attempts per call", table::number(run.attempts_per_call, 2)),
        ("goodput during fault", during),
        ("wasted work", table::pct(run.wasted_work)),
    ] {
        let _ = write!(s, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(&nb(v)));
    }
    s.push_str("</dl></div>");
    s
}

/// The second headline: how many times the edge's traffic reached the bottom tier. A run can
/// recover and still have hit its database with 27 attempts per request while the fault lasted.
fn amplification_line(col: &Col<'_>) -> String {
    let amp = col.run.peak_amplification;
    if !amp.is_finite() {
        return String::new();
    }
    let bottom = col.tiers.last().map_or("the bottom tier", String::as_str);
    // Below 1.5× retries are a trickle (a 10 % retry budget keeps them near 1.1×); above, they
    // multiply load.
    let (class, words) = if amp >= 1.5 {
        ("sub warn", format!("{bottom} took {} the edge's requests at the peak", table::times(amp)))
    } else {
        ("sub", format!("{bottom} took at most {} the edge's requests", table::times(amp)))
    };
    format!(r#"<p class="{class}">{}</p>"#, esc(&words))
}

/// A `<table>` of `header` and `rows`, every text escaped.
fn cells_table<H: AsRef<str>, C: AsRef<str>>(
    header: impl IntoIterator<Item = H>,
    rows: impl IntoIterator<Item = impl IntoIterator<Item = C>>,
) -> String {
    let mut s = String::from("<table><thead><tr>");
    for h in header {
        let _ = write!(s, "<th>{}</th>", esc(h.as_ref()));
    }
    s.push_str("</tr></thead><tbody>");
    for row in rows {
        s.push_str("<tr>");
        for cell in row {
            let _ = write!(s, "<td>{}</td>", esc(cell.as_ref()));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// The summary of every run: the cells of the terminal table.
pub(super) fn summary_table(r: &Results) -> String {
    cells_table(HEADERS, table::summary_rows(r))
}

/// One [`ExtraTable`](super::ExtraTable): heading, note and cells, all escaped.
pub(super) fn extra_table(t: &super::ExtraTable) -> String {
    let mut s = format!(r#"<h2 class="sec extra">{}</h2>"#, esc(&t.title));
    if !t.note.is_empty() {
        let _ = write!(s, r#"<p class="note">{}</p>"#, esc(&t.note));
    }
    s.push_str(&cells_table(&t.header, &t.rows));
    s
}

/// What each hedging layer did (the cells of [`render_hedging`](crate::render_hedging)); empty
/// when no run hedges.
pub(super) fn hedging_table(r: &Results) -> String {
    let rows = table::hedging_rows(r);
    if rows.is_empty() {
        return String::new();
    }
    format!(r#"<h2 class="sec">Hedging</h2>{}"#, cells_table(table::HEDGING_HEADERS, rows))
}

/// The definitions a reader needs, in the words of the results format.
pub(super) fn how_to_read() -> String {
    let items = [
        (
            "Goodput, not throughput",
            "Throughput counts requests handled; goodput counts only edge requests answered \
             successfully within their deadline. In a storm servers stay busy (throughput looks \
             healthy) while goodput is near zero: the answers arrive after the caller has gone.",
        ),
        (
            "Amplification",
            "Attempts reaching the bottom tier per edge request in the same second. 1× means \
             every request tried once; layers that each retry multiply (three layers of three \
             attempts: 3 × 3 × 3 = 27×). The peak is taken over the fault and after it, second by \
             second, so it can exceed the product of the layers' attempts: a request's retries \
             take seconds (each waits out a timeout), and the attempts of requests sent in \
             earlier seconds land in the same second as the new ones. Attempts per call, over \
             the whole run, is the figure per request.",
        ),
        (
            "Recovered",
            "Goodput (per second) came back to at least 90 % of its own pre-fault level and \
             stayed there for 5 seconds in a row, with no relapse of 5 seconds or more after \
             it; dips shorter than that are noise (a service near its capacity has them fault or \
             no fault). The seconds count from the fault's end. From then on goodput must be at \
             least 90 % of the level (otherwise: partly), and over everything after the fault \
             at least half of it (otherwise the run healed late, after losing most requests). \
             Not judged: no fault, too little traffic before it, a stack that never served, or a \
             run that ends too soon after the fault. A storm that outlives its trigger never \
             recovers by itself.",
        ),
        (
            "Wasted work",
            "The share of work servers completed for callers that had already given up.",
        ),
        (
            "The shaded band",
            "The fault window. Compare the columns after it ends: that is where a storm and a \
             cure differ.",
        ),
    ];
    let mut s = String::from(r#"<aside class="howto"><h2 class="sec">How to read this</h2><dl>"#);
    for (k, v) in items {
        let _ = write!(s, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    s.push_str("</dl></aside>");
    s
}
