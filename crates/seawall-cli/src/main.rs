//! `seawall`: see what your retry settings do when everything fails at once.
//!
//! A thin binary: each subcommand parses its flags into typed arguments, validates them into the
//! library's objects, and hands them to the crate that does the work. `anyhow` lives here only.
//! Exit codes: 0 success, 1 findings/failure of the checked property, 2 unusable input.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod alerts;
mod audit;
mod detect;
mod escape;
mod lab;
mod load;
mod node;
mod proxy;
mod simulate;
mod token;

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

/// The command line as clap sees it: every subcommand reads `-10` after a flag as the number
/// -10 (then range-checked by the flag's parser or validation), not as an unknown flag `-1`.
fn command() -> clap::Command {
    Cli::command().mut_subcommands(|c| c.allow_negative_numbers(true))
}

fn main() -> ExitCode {
    let cli = Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit());
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
            eprintln!("seawall: error: {}", message(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes on one line, each cause once: a library error that prints its
/// source in its own message (an I/O error after a file name, say) is not repeated.
fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if out.contains(&s) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&s);
    }
    out
}

#[cfg(test)]
mod tests {
    /// A cause already in the message is not printed again. Mutation checked: printing the
    /// chain as `{e:#}` repeats the OS error.
    #[test]
    fn each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        #[derive(Debug)]
        struct Wraps(std::io::Error);
        impl std::fmt::Display for Wraps {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "x.toml: cannot read: {}", self.0)
            }
        }
        impl std::error::Error for Wraps {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = anyhow::Error::new(Wraps(io)).context("cannot audit x.toml");
        assert_eq!(super::message(&e), "cannot audit x.toml: x.toml: cannot read: No such file");
    }

    /// A negative number after a numeric flag is read as a number and refused by its range
    /// check, naming the flag, rather than taken for an unknown flag `-1` with clap's tip to
    /// write `-- -1`. Mutation checked: without `allow_negative_numbers` the error is
    /// `UnknownArgument` and both assertions fail.
    #[test]
    fn negative_numbers_parse_as_numbers() {
        let e = super::command().try_get_matches_from(["seawall", "simulate", "--seed", "-1"]);
        let e = e.unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{e}");
        assert!(e.to_string().contains("--seed"), "{e}");
        let m = super::command()
            .try_get_matches_from(["seawall", "load", "http://127.0.0.1:1/", "--rate", "-10"])
            .unwrap();
        let (_, sub) = m.subcommand().unwrap();
        assert_eq!(sub.get_one::<f64>("rate"), Some(&-10.0));
    }
}
