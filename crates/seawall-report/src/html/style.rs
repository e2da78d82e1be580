//! The page's inline stylesheet and its colour-blind-safe palette.
//!
//! Colours are the Okabe–Ito palette (safe for the common colour-vision deficiencies); lines that
//! share a chart also differ in dash pattern, so nothing is told apart by colour alone.

use super::svg::Style;

/// Offered load at the edge: a dark dashed line, the baseline everything is read against.
pub(super) const OFFERED: Style = Style { color: "#555555", dash: "5 3", width: 1.6 };
/// Goodput: bluish green, the line a reader follows first.
pub(super) const GOODPUT: Style = Style { color: "#009E73", dash: "", width: 2.4 };
/// Amplification at the bottom tier.
pub(super) const AMPLIFICATION: Style = Style { color: "#D55E00", dash: "", width: 2.0 };
/// Queue age at the bottom tier.
pub(super) const QUEUE_AGE: Style = Style { color: "#CC79A7", dash: "", width: 2.0 };
/// Retries refused by a budget.
pub(super) const REFUSED: Style = Style { color: "#0072B2", dash: "", width: 2.0 };
/// Requests shed or dropped as doomed.
pub(super) const SHED: Style = Style { color: "#E69F00", dash: "4 2", width: 2.0 };
/// Fraction of clients with an open breaker.
pub(super) const BREAKER: Style = Style { color: "#56B4E9", dash: "", width: 2.0 };

/// Styles of the tiers, top (edge side) first; past the list they repeat with a dash pattern.
const TIER_COLORS: [&str; 6] = ["#0072B2", "#E69F00", "#CC79A7", "#D55E00", "#56B4E9", "#009E73"];
const TIER_DASHES: [&str; 3] = ["", "6 3", "2 2"];

/// The style of tier `i` of `n`: the bottom tier, where a storm lands, is always drawn thickest.
pub(super) fn tier(i: usize, n: usize) -> Style {
    let color = TIER_COLORS[i % TIER_COLORS.len()];
    let dash = TIER_DASHES[(i / TIER_COLORS.len()) % TIER_DASHES.len()];
    let width = if i + 1 == n { 2.4 } else { 1.6 };
    Style { color, dash, width }
}

/// The stylesheet, inlined into the page's `<head>`.
pub(super) const CSS: &str = r#"
:root { --ink: #1b1f24; --muted: #5b6470; --rule: #d9dde3; --bad: #b3261e; --good: #0b6e4f; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1600px; padding: 24px 28px 48px; color: var(--ink);
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: #fff; }
h1 { font-size: 28px; margin: 0 0 4px; }
.desc { font-size: 17px; margin: 0 0 10px; color: var(--ink); }
.meta { display: flex; flex-wrap: wrap; gap: 4px 22px; margin: 0 0 20px; padding: 0;
  color: var(--muted); font-size: 14px; }
.meta div { display: flex; gap: 6px; } .meta dt { font-weight: 600; } .meta dd { margin: 0; }
.charts { display: grid; gap: 4px 18px; align-items: start; }
.colhead { border-top: 6px solid var(--muted); padding: 10px 2px 12px; }
.colhead.bad { border-color: var(--bad); } .colhead.good { border-color: var(--good); }

.colhead h2 { margin: 0; font-size: 22px; overflow-wrap: anywhere; }
.colhead .tag { font-size: 13px; font-weight: 600; color: var(--muted); margin-left: 6px;
  text-transform: uppercase; letter-spacing: .05em; }
.verdict { font-size: 20px; font-weight: 700; margin: 4px 0 10px; line-height: 1.25; }
.sub { margin: -6px 0 10px; color: var(--muted); font-size: 15px; }
.sub.warn { color: var(--bad); font-weight: 600; }
.bad .verdict { color: var(--bad); } .good .verdict { color: var(--good); }
.stats { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 8px;
  margin: 0; }
.narrow .stats { grid-template-columns: 1fr 1fr; } .narrow .verdict { font-size: 17px; }
.stats div { background: #f4f6f8; border-radius: 6px; padding: 6px 8px; }
.stats dt { font-size: 12px; color: var(--muted); } .stats dd { margin: 0; font-size: 19px;
  font-weight: 700; font-variant-numeric: tabular-nums; }
.rowhead { grid-column: 1 / -1; display: flex; flex-wrap: wrap; align-items: center;
  gap: 2px 18px; margin: 16px 0 0; padding-top: 8px; border-top: 1px solid var(--rule); }
.rowhead h3 { margin: 0; font-size: 16px; }
.rowhead .unit { color: var(--muted); font-weight: 400; }
.rowhead .why { color: var(--muted); font-size: 13px; flex-basis: 100%; margin: 0; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 13px; font-weight: 400; }
.legend span { white-space: nowrap; display: inline-flex; align-items: center; gap: 5px; }
.cell { margin: 0; }
svg { display: block; width: 100%; height: auto; overflow: visible; }
svg polyline { fill: none; stroke-linejoin: round; stroke-linecap: round; }
svg .fault { fill: #d55e00; fill-opacity: .13; }
svg .grid { stroke: #e6e9ed; stroke-width: 1; } svg .axis { stroke: #9aa3ad; stroke-width: 1; }
svg .ref { stroke: #555; stroke-width: 1; stroke-dasharray: 2 3; }
svg .mark { stroke: var(--good); stroke-width: 1.5; stroke-dasharray: 4 2; }
svg text { font: 10px system-ui, sans-serif; fill: var(--muted); }
svg .yt { text-anchor: end; } svg .xt { text-anchor: middle; }
svg .mk { fill: var(--good); font-weight: 700; paint-order: stroke; stroke: #fff;
  stroke-width: 3px; stroke-linejoin: round; }
.band-key { display: inline-block; width: 22px; height: 12px; background: rgba(213,94,0,.18); }
table { border-collapse: collapse; margin: 8px 0 0; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 12px; border-bottom: 1px solid var(--rule); text-align: right; }
td { white-space: nowrap; }
th:first-child, td:first-child, th:nth-child(2), td:nth-child(2) { text-align: left; }
th { font-size: 13px; color: var(--muted); font-weight: 600; }
section.after { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 28px;
  margin-top: 32px; }
.howto { background: #f4f6f8; border-radius: 8px; padding: 4px 18px 10px; font-size: 14px; }
.howto dt { font-weight: 700; margin-top: 8px; } .howto dd { margin: 0; }
h2.sec { font-size: 18px; margin: 0 0 4px; }
h2.sec.extra { margin-top: 20px; } p.note { color: var(--muted); font-size: 13px; margin: 0 0 6px; }
section.phase { margin: 0 0 22px; } section.phase .verdict { font-size: 18px; }
svg.phase .cl { font-size: 11px; text-anchor: middle; fill: #1b1f24; font-weight: 600; }
svg.phase .cl.on { fill: #fff; }
svg.phase .xl, svg.phase .xt { text-anchor: middle; } svg.phase .yt { text-anchor: end; }
svg.phase .xl, svg.phase .yl { font-size: 12px; font-weight: 600; fill: var(--ink); }
svg.phase .edge { stroke: #1b1f24; stroke-width: 2.5; stroke-dasharray: 5 3; }
svg.phase .mk { fill: #1b1f24; }
.phase-key { margin: 0 0 8px; } .sw { display: inline-block; width: 16px; height: 12px; }
.sw.edge-key { border-left: 3px dashed #1b1f24; width: 6px; }
footer { margin-top: 28px; color: var(--muted); font-size: 12px; }
@media (max-width: 900px) { section.after { grid-template-columns: 1fr; } }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  .rowhead, .cell, .colhead, section.after { break-inside: avoid; }
  .stats div, .howto { background: none; border: 1px solid var(--rule); }
}
"#;
