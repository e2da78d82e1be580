//! The self-contained HTML report (being built).

use crate::Results;

/// Renders `results` as one self-contained HTML page (no external assets).
pub fn render_html(results: &Results) -> String {
    format!("<!doctype html><title>{}</title><pre>{}</pre>", results.scenario, results.to_json())
}
