//! `seawall`: see what your retry settings do when everything fails at once.
//!
//! A thin binary: each subcommand parses its flags into typed arguments, validates them into the
//! library's objects, and hands them to the crate that does the work. `anyhow` lives here only.
//! Exit codes: 0 success, 1 findings/failure of the checked property, 2 unusable input.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod alerts;
mod audit;
mod detect;
mod escape;
mod lab;
mod load;
mod node;
mod proxy;
mod simulate;

/// seawall stops retry storms: simulate them, audit configs for them, and test the cure.
#[derive(Debug, Parser)]
#[command(name = "seawall", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Simulate a retry storm under several retry policies, side by side (deterministic).
    Simulate(simulate::Args),
    /// Audit a call graph's retry settings: worst-case amplification and findings.
    Audit(audit::Args),
    /// Tell a retry storm from a traffic spike, from a recorded series or live metrics.
    Detect(detect::Args),
    /// Print Prometheus alerting rules and a Grafana dashboard for seawall's metrics.
    Alerts(alerts::Args),
    /// The storm runbook as a command: retries off, admission cut, then a watched ramp back.
    Escape(escape::Args),
    /// Load-test the recovery: real tiers on loopback, an injected fault, before and after.
    Lab(lab::Args),
    /// Open-loop HTTP load on a loopback target: per-second goodput, errors, honest latency.
    Load(load::Args),
    /// A fault-injecting proxy in front of a dependency (TCP or HTTP), with counters.
    Proxy(proxy::Args),
    /// One process of the example stack for `lab --target --config`: a backend or a dependency.
    Node(node::Args),
    /// One tier of a lab stack (started by `seawall lab`; not for direct use).
    #[command(hide = true)]
    LabNode(lab::NodeArgs),
    /// Stops a `seawall lab --target` configuration's process group once the lab exits (started
    /// by the lab; not for direct use).
    #[command(hide = true)]
    LabReaper(lab::ReaperArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate(args) => simulate::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Detect(args) => detect::run(args),
        Command::Alerts(args) => alerts::run(args),
        Command::Escape(args) => escape::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Load(args) => load::run(args),
        Command::LabNode(args) => lab::run_node(args),
        Command::LabReaper(args) => lab::run_reaper(args),
        Command::Proxy(args) => proxy::run(args),
        Command::Node(args) => node::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("seawall: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
