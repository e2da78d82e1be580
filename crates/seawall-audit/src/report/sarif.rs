//! SARIF 2.1.0 for code scanning: one run, the rules as `tool.driver.rules`, findings as results.
//!
//! Code scanning needs a physical location for every result. Findings located at `file:line`
//! point there; findings about a hop or a path (`a → b → c`) point at the graph file's first
//! line and carry the hop or path as a logical location.

use serde_json::{Value, json};

use super::{Report, Severity};
use crate::rules::RULES;

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// Splits `file:line` into its parts, when the text after the last colon is a line number.
fn file_line(location: &str) -> Option<(&str, usize)> {
    let (file, line) = location.rsplit_once(':')?;
    let line = line.parse::<usize>().ok().filter(|&l| l > 0)?;
    (!file.is_empty()).then_some((file, line))
}

/// `PascalCase` from `kebab-case`, as SARIF rule names are conventionally written.
fn pascal(kebab: &str) -> String {
    kebab
        .split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// Renders the report as a SARIF 2.1.0 log. `graph_file` is where hop and path findings point.
pub fn render(report: &Report, graph_file: &str) -> String {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": pascal(r.name),
                "shortDescription": {"text": r.help},
                "defaultConfiguration": {"level": level(r.severity)},
            })
        })
        .collect();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let index = RULES.iter().position(|r| r.id == f.rule).unwrap_or(0);
            let (file, line, logical) = match file_line(&f.location) {
                Some((file, line)) => (file, line, None),
                None => (graph_file, 1, Some(f.location.as_str())),
            };
            let mut location = json!({
                "physicalLocation": {
                    "artifactLocation": {"uri": file.replace('\\', "/")},
                    "region": {"startLine": line},
                }
            });
            if let Some(name) = logical {
                location["logicalLocations"] = json!([{"name": name, "kind": "module"}]);
            }
            json!({
                "ruleId": f.rule,
                "ruleIndex": index,
                "level": level(f.severity),
                "message": {"text": format!("{} Fix: {}", f.message, f.fix)},
                "locations": [location],
            })
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "seawall-audit",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
        }],
    });
    serde_json::to_string_pretty(&log).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_and_names() {
        assert_eq!(file_line("a/b.yaml:12"), Some(("a/b.yaml", 12)));
        assert_eq!(file_line("orders → db"), None);
        assert_eq!(file_line(":3"), None);
        assert_eq!(pascal("retries-at-several-layers"), "RetriesAtSeveralLayers");
    }
}
