//! The results of a simulation or a lab run, the one judgement of them, and the report people
//! read.
//!
//! `seawall simulate` and `seawall lab` produce the same [`Results`], so the two can be laid side
//! by side: same JSON (`results.json`), same terminal table, same HTML report. A sweep
//! (`seawall simulate --sweep`) has its own [`sweep::Sweep`] (`sweep.json`), table and page, a
//! phase diagram of recovered and stuck over the grid with the boundary found.
#![warn(missing_docs)]

pub mod results;
pub mod sweep;
pub mod verdict;

pub use html::{
    Chart, ChartLine, ExtraTable, Page, render_html, render_html_compare, render_html_with,
    render_page, render_sweep_html,
};
pub use results::{Fault, Hedging, Results, Run, Series, Source};
pub use table::{render_hedging, render_notes, render_table};
pub use verdict::{Judgement, NotJudged, Verdict, judge};
pub mod html;
mod numbers;
pub mod table;
