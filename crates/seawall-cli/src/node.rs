//! `seawall node`: one process of the example stack (crates/seawall-lab/stack/), for a
//! `seawall lab --target --config NAME='…'` command to start.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use seawall_lab::example::{self, BackendClient, BackendConfig, BoundedConfig, ExampleNode};

/// Arguments of `seawall node`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    role: Role,
    /// Exit after this many seconds whatever happens (1 to 86400); SIGTERM and Ctrl-C stop it
    /// sooner.
    #[arg(long, global = true, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    max_runtime: u64,
}

#[derive(Debug, clap::Subcommand)]
enum Role {
    /// A backend: each request (any method, any path) makes one logical call to --upstream and
    /// is answered 200 if it succeeded, 503 if not.
    Backend {
        /// Where it listens (loopback).
        #[arg(long, value_name = "ADDR")]
        listen: SocketAddr,
        /// The URL it calls, http://IP:PORT/PATH on loopback.
        #[arg(long, value_name = "URL")]
        upstream: String,
        /// naive: --attempts GETs, the next at once after a failure, each given up after
        /// --timeout-ms. seawall: seawall's RetryLayer (at most 3 attempts, full jitter, token
        /// budget) with --timeout-ms as the call's deadline.
        #[arg(long, value_enum)]
        client: ClientKind,
        /// Attempts in all of the naive client (1 to 10).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=10))]
        attempts: u32,
        /// Per attempt (naive) or per call (seawall), milliseconds (1 to 60000).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
        timeout_ms: u64,
        /// Seed of the seawall client's jitter.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// A dependency of bounded capacity (workers / service time): a FIFO queue of --queue
    /// requests (beyond: 503 at once); a queued request is worked on even if its caller left.
    Dependency {
        /// Where it listens (loopback).
        #[arg(long, value_name = "ADDR")]
        listen: SocketAddr,
        /// Requests worked on at once (1 to 1024).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
        workers: u32,
        /// Time per request, milliseconds (1 to 10000).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        service_ms: u64,
        /// Requests that may wait for a worker (1 to 100000).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        queue: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ClientKind {
    Naive,
    Seawall,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let max = Duration::from_secs(args.max_runtime);
    let (node, listen, what) = match args.role {
        Role::Backend { listen, upstream, client, attempts, timeout_ms, seed } => {
            let client = match client {
                ClientKind::Naive => BackendClient::Naive {
                    attempts: NonZeroU32::new(attempts).context("--attempts: at least 1")?,
                },
                ClientKind::Seawall => BackendClient::Seawall { seed },
            };
            let cfg = BackendConfig::new(&upstream, client, Duration::from_millis(timeout_ms))?;
            (ExampleNode::Backend(cfg), listen, format!("backend calling {upstream}"))
        }
        Role::Dependency { listen, workers, service_ms, queue } => {
            let cfg = BoundedConfig::new(workers, Duration::from_millis(service_ms), queue)?;
            (ExampleNode::Dependency(cfg), listen, "dependency".to_string())
        }
    };
    example::run_blocking(node, listen, max, |a| eprintln!("seawall node: {what}, on {a}"))?;
    Ok(ExitCode::SUCCESS)
}
