//! `seawall simulate SCENARIO --sweep PATH=RANGE …`: the grid, its table, sweep.json and the
//! phase-diagram report.

use std::io::IsTerminal;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use seawall_sim::sweep::{Plan, parse_axis};

use super::{Args, print};

pub(super) fn run(args: &Args, sets: &[String]) -> anyhow::Result<ExitCode> {
    let axes = args.sweeps.iter().map(|s| parse_axis(s)).collect::<Result<Vec<_>, _>>()?;
    let seeds = args.seeds.unwrap_or(1);
    let plan = Plan::new(&args.scenario, sets, axes, &args.policies, args.seed, seeds)?;
    let jobs = args
        .jobs
        .or_else(|| std::thread::available_parallelism().ok())
        .unwrap_or(NonZeroUsize::MIN);

    let bar = progress_bar(plan.runs(), !args.json);
    let sweep = plan.run(jobs, &|done, _| bar.set_position(done as u64))?;
    bar.finish_and_clear();

    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out").join(format!("{}-sweep", sweep.scenario)));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let json = sweep.to_json();
    let json_path = out.join("sweep.json");
    std::fs::write(&json_path, &json)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let html_path = out.join("report.html");
    std::fs::write(&html_path, seawall_report::render_sweep_html(&sweep))
        .with_context(|| format!("writing {}", html_path.display()))?;
    let text = if args.json {
        json
    } else {
        let (j, h) = (json_path.display(), html_path.display());
        format!("{}wrote {j} and {h}\n", seawall_report::sweep::render_sweep_table(&sweep))
    };
    print(&text)
}

/// A bar over every run of the grid, drawn only on a terminal and never beside --json.
fn progress_bar(runs: usize, wanted: bool) -> ProgressBar {
    let bar = ProgressBar::new(runs as u64);
    if wanted && std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
        if let Ok(style) =
            ProgressStyle::with_template("sweeping {bar:40} {pos}/{len} runs, {eta} left")
        {
            bar.set_style(style);
        }
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}
