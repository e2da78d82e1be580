//! `seawall audit GRAPH --simulate FAULT`: hand the audited paths to the simulator and show what
//! the fault does over time, under the graph's own settings and under seawall's.
//!
//! The bridge (which paths, their scenarios, the "as configured" policy) is
//! `seawall_audit::simulate`; this is the glue: run each scenario, write and print the results.

use std::path::Path;

use anyhow::Context as _;
use seawall_audit::model::Graph;
use seawall_report::Results;

use seawall_audit::simulate::{self as bridge, CONFIGURED, Fault, PathScenario};

/// What one command asks for.
pub(crate) struct Request<'a> {
    /// The fault, as given.
    pub(crate) fault: &'a str,
    /// Only the worst path into this service.
    pub(crate) dependency: Option<&'a str>,
    /// Simulated seconds.
    pub(crate) duration_s: f64,
    /// Seed of every run.
    pub(crate) seed: u64,
    /// Folder for `DEP/results.json` and `DEP/report.html`.
    pub(crate) out: Option<&'a Path>,
    /// Print the results as a JSON array instead of tables.
    pub(crate) json: bool,
}

/// Runs the request; returns the text to print.
pub(crate) fn run(graph: &Graph, req: &Request<'_>) -> anyhow::Result<String> {
    let fault = Fault::parse(req.fault).map_err(anyhow::Error::msg)?;
    if fault.start_s >= req.duration_s {
        anyhow::bail!(
            "--simulate {}: the fault starts at {} s, after the {} s run; lengthen --duration",
            req.fault,
            fault.start_s,
            req.duration_s
        );
    }
    let paths = bridge::choose(graph, req.dependency);
    if paths.is_empty() {
        match req.dependency {
            Some(d) => anyhow::bail!("--dependency {d}: no path from an entry point reaches it"),
            None => anyhow::bail!("the graph has no call path to simulate"),
        }
    }
    let policies = [CONFIGURED.to_string(), "seawall".to_string()];
    let mut text = String::new();
    let mut jsons = Vec::new();
    for p in &paths {
        let ps = bridge::build(graph, p, &fault, req.duration_s)
            .context("the path has no hops to simulate")?;
        let sc = seawall_sim::Scenario::new(ps.file.clone())
            .with_context(|| format!("cannot simulate {}", ps.label))?;
        let results = seawall_sim::simulate(&sc, &policies, req.seed, &mut |_, _| {})
            .with_context(|| format!("simulating {}", ps.label))?;
        let written = match req.out {
            Some(dir) => Some(write(&dir.join(folder(&ps.dependency)), &results)?),
            None => None,
        };
        jsons.push(results.to_json());
        text.push_str(&section(&ps, &fault, &results, req, written.as_deref()));
    }
    Ok(if req.json { format!("[{}]\n", jsons.join(",")) } else { text })
}

/// A dependency's name as a folder name: anything but `[A-Za-z0-9._-]` becomes `_`.
fn folder(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with('.') { format!("_{s}") } else { s }
}

fn write(dir: &Path, results: &Results) -> anyhow::Result<String> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join("results.json");
    std::fs::write(&json, results.to_json())
        .with_context(|| format!("writing {}", json.display()))?;
    let html = dir.join("report.html");
    std::fs::write(&html, seawall_report::render_html(results))
        .with_context(|| format!("writing {}", html.display()))?;
    Ok(format!("wrote {} and {}", json.display(), html.display()))
}

fn section(
    ps: &PathScenario,
    fault: &Fault,
    results: &Results,
    req: &Request<'_>,
    written: Option<&str>,
) -> String {
    let mut s = format!("simulated {}\n", ps.label);
    s.push_str(&format!(
        "  fault at {}: {} ({} s run, seed {})\n",
        ps.dependency, fault, req.duration_s, req.seed
    ));
    s.push_str(&format!(
        "  audited worst case: {} attempts per request at {}; the simulated layers multiply to {}\n\n",
        ps.audited_worst, ps.dependency, ps.simulated_worst
    ));
    let table = seawall_report::render_table(results) + &seawall_report::render_notes(results);
    for line in table.lines() {
        s.push_str("  ");
        s.push_str(line);
        s.push('\n');
    }
    if !ps.notes.is_empty() {
        s.push_str("  approximations:\n");
        for n in &ps.notes {
            s.push_str(&format!("    - {n}\n"));
        }
    }
    if let Some(w) = written {
        s.push_str(&format!("  {w}\n"));
    }
    s.push('\n');
    s
}
