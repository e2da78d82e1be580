//! The short terminal table (being built).

use crate::Results;

/// Renders the summary of every run as a plain-text table.
pub fn render_table(results: &Results) -> String {
    let mut s = String::new();
    for r in &results.runs {
        s.push_str(&format!("{} recovered={}\n", r.policy, r.recovered));
    }
    s
}
