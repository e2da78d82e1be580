//! Audit call graphs (seawall-audit's TOML schema) and the analysis of what parses: never panic,
//! and every multiplier the analysis reports is at least 1.
//!
//! Graphs that import files are skipped: an import reads a path named in the input, which a
//! fuzzer must not be let loose on (the importers have targets of their own).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use seawall_audit::{analysis, graph};

fn imports_files(text: &str) -> bool {
    let Ok(table) = toml::from_str::<toml::Table>(text) else { return false };
    let Some(toml::Value::Array(calls)) = table.get("calls") else { return false };
    calls.iter().any(|c| c.as_table().is_some_and(|c| c.contains_key("import")))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if imports_files(text) {
        return;
    }
    let Ok(g) = graph::parse(Path::new("fuzz/graph.toml"), text) else { return };
    let report = analysis::analyse(&g);
    for p in &report.paths {
        assert!(p.worst_case_attempts >= 1, "{:?}", p.path);
    }
});
