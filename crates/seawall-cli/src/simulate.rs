//! `seawall simulate`: run a scenario under several retry policies, side by side.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use seawall_sim::policy::{BackoffKind, BudgetKind, Preset};
use seawall_sim::{PolicySpec, catalog};

mod sweep;

/// Arguments of `seawall simulate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A catalog scenario (see --list) or a scenario TOML file.
    #[arg(default_value = catalog::DEFAULT)]
    scenario: String,
    /// Run under this policy; repeat to compare side by side [default: the scenario's pair].
    #[arg(long = "policy", value_name = "NAME")]
    policies: Vec<String>,
    /// Seed of the run: the same seed gives byte-identical results.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated seconds (overrides the scenario's duration_s).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Override a scenario field by dotted path, e.g. --set edge.rate=140 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Run a grid instead of one run: PATH=START..END:STEP or PATH=V1,V2,… over any --set path,
    /// e.g. --sweep edge.rate=100..300:10 (repeat once more for a 2-D grid).
    #[arg(long = "sweep", value_name = "PATH=RANGE")]
    sweeps: Vec<String>,
    /// Seeds per grid point, so the boundary comes with its uncertainty (with --sweep).
    #[arg(long, value_name = "K", requires = "sweeps",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    seeds: Option<u32>,
    /// Threads running the grid [default: the machine's cores] (with --sweep).
    #[arg(long, value_name = "N", requires = "sweeps")]
    jobs: Option<std::num::NonZeroUsize>,
    /// Folder for results.json and report.html [default: out/SCENARIO, out/SCENARIO-sweep].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print results.json to stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// List the catalog and the policy presets, then exit.
    #[arg(long)]
    list: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.list {
        let _ = std::io::stdout().lock().write_all(list()?.as_bytes());
        return Ok(ExitCode::SUCCESS);
    }
    let mut sets = args.sets.clone();
    if let Some(d) = args.duration {
        sets.push(format!("duration_s={d}"));
    }
    if !args.sweeps.is_empty() {
        return sweep::run(&args, &sets);
    }
    let scenario = seawall_sim::load(&args.scenario, &sets)?;
    let policies =
        if args.policies.is_empty() { scenario.default_policies.clone() } else { args.policies };
    for p in &policies {
        scenario.policy(p)?;
    }

    let bar = progress_bar(policies.len());
    let mut on_progress = |i: usize, f: f64| bar.set_position(((i as f64 + f) * 100.0) as u64);
    let results = seawall_sim::simulate(&scenario, &policies, args.seed, &mut on_progress)?;
    bar.finish_and_clear();

    let out = args.out.unwrap_or_else(|| PathBuf::from("out").join(&scenario.name));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let json = results.to_json();
    let json_path = out.join("results.json");
    std::fs::write(&json_path, &json)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let html_path = out.join("report.html");
    std::fs::write(&html_path, seawall_report::render_html(&results))
        .with_context(|| format!("writing {}", html_path.display()))?;

    let text = if args.json {
        json
    } else {
        let (j, h) = (json_path.display(), html_path.display());
        let hedging = seawall_report::render_hedging(&results);
        let hedging = if hedging.is_empty() { hedging } else { format!("\n{hedging}") };
        let (table, notes) =
            (seawall_report::render_table(&results), seawall_report::render_notes(&results));
        format!("{table}\n{notes}{hedging}wrote {j} and {h}\n")
    };
    print(&text)
}

/// Writes `text` to stdout; a closed pipe (`| head`) is the reader's choice, not an error.
fn print(text: &str) -> anyhow::Result<ExitCode> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// A bar over all runs (100 steps each), drawn only on a terminal.
fn progress_bar(runs: usize) -> ProgressBar {
    let bar = ProgressBar::new(runs as u64 * 100);
    if std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("simulating {bar:40} {percent:>3}%") {
            bar.set_style(style);
        }
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}

fn list() -> anyhow::Result<String> {
    let mut s = String::from("scenarios (default first):\n");
    for e in catalog::CATALOG {
        let sc = seawall_sim::Scenario::parse(e.name, e.text, &[])?;
        s.push_str(&format!(
            "  {:<16} {}\n  {:<16} policies: {}\n",
            e.name,
            sc.description,
            "",
            sc.default_policies.join(" vs ")
        ));
    }
    s.push_str("\npolicy presets (--policy NAME; attempts include the first):\n");
    for p in Preset::ALL {
        s.push_str(&format!("  {:<12} {}\n", p.as_str(), describe(&PolicySpec::of(p))));
    }
    Ok(s)
}

/// A preset in words: attempts, waits, budget, and what else it turns on.
fn describe(spec: &PolicySpec) -> String {
    let ms = |d: std::time::Duration| format!("{} ms", d.as_millis());
    let waits = match spec.backoff {
        BackoffKind::None => "retries at once".to_string(),
        BackoffKind::Constant => format!("waits {} between attempts", ms(spec.base)),
        BackoffKind::Exponential => {
            format!("waits doubling from {} (no jitter, at most {})", ms(spec.base), ms(spec.cap))
        }
        BackoffKind::FullJitter => format!(
            "waits a random share of a ceiling doubling from {} (full jitter, at most {})",
            ms(spec.base),
            ms(spec.cap)
        ),
        BackoffKind::EqualJitter => format!("equal-jitter waits from {}", ms(spec.base)),
        BackoffKind::Decorrelated => format!("decorrelated-jitter waits from {}", ms(spec.base)),
    };
    let budget = match spec.budget {
        BudgetKind::None => "no retry budget",
        BudgetKind::Grpc => "gRPC's retry token bucket (10 tokens, 0.1 per success)",
        BudgetKind::Aws => "the AWS SDK retry quota",
        BudgetKind::Ratio => "retries at most 10 % of requests",
        BudgetKind::Envoy => "Envoy's concurrent-retry budget",
        BudgetKind::Adaptive => "SRE adaptive throttling",
    };
    let mut out = format!("{} attempts, {waits}, {budget}", spec.attempts);
    if spec.single_owner {
        out.push_str("; one layer owns retries, deadlines travel, servers shed");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_names_every_scenario_and_preset() {
        let text = list().unwrap();
        for name in catalog::names() {
            assert!(text.contains(&format!("  {name} ")), "{name}");
        }
        for p in seawall_sim::policy::PRESETS {
            assert!(text.contains(&format!("  {p} ")), "{p}");
        }
        // Words, not Rust's debug output of the types.
        for debug in ["None", "Grpc", "FullJitter", "0ns", "ms,", "Constant"] {
            assert!(!text.contains(debug), "{debug:?} in\n{text}");
        }
        assert!(
            text.contains("naive        3 attempts, retries at once, no retry budget"),
            "{text}"
        );
    }
}
