//! `seawall load`: open-loop HTTP load against a loopback target, latency without coordinated
//! omission.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use seawall_load::{
    self as load, LoadSpec, Progress, Schedule, Target, parse_duration, parse_header, parse_stage,
};

/// Arguments of `seawall load`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The target, http://HOST[:PORT]/PATH; HOST must be loopback (127.0.0.0/8, ::1, localhost).
    url: String,
    /// Requests per second: the constant rate, or the start rate of --ramp (default 0 then).
    #[arg(long, value_name = "RPS")]
    rate: Option<f64>,
    /// A ramp stage, DURATION:RPS (k6's stages; e.g. --ramp 10s:1000 --ramp 20s:1000 --ramp
    /// 5s:0): the rate moves linearly to RPS over DURATION. Repeatable; the run lasts their sum.
    #[arg(long, value_name = "DURATION:RPS")]
    ramp: Vec<String>,
    /// Length of a constant-rate run (30s, 500ms, 2m, or seconds; default 10 s); at most 600 s.
    #[arg(long, value_name = "DURATION")]
    duration: Option<String>,
    /// Each request's deadline, from its scheduled send time, ms (sent as Request-Timeout-Ms;
    /// the client gives up at it).
    #[arg(long, default_value_t = 1000)]
    deadline_ms: u64,
    /// The request method.
    #[arg(long, default_value = "GET")]
    method: String,
    /// An extra header, 'Name: value' (repeatable).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// The request body: a string, or @FILE to read it from a file.
    #[arg(long, value_name = "STRING|@FILE")]
    body: Option<String>,
    /// Most requests outstanding at once, and so most connections (HTTP/1.1 carries one request
    /// at a time). A request due while this many are outstanding waits for the first to end
    /// (wrk2's correction: its latency still runs from its scheduled time); it is dropped and
    /// counted only if it waits longer than --max-lateness-ms. Split evenly between the
    /// generator's threads (one per two cores: the target shares the machine). Connections are
    /// opened as needed and reused, the one that came free last first, so a low rate keeps a
    /// few warm.
    #[arg(long, default_value_t = seawall_load::DEFAULT_MAX_IN_FLIGHT)]
    max_in_flight: usize,
    /// A request not sent within this of its scheduled time — waiting for a free slot, or the
    /// generator being off the CPU — is dropped and counted (k6's dropped iterations), not sent
    /// so late; a shorter wait only adds to its latency. Below --deadline-ms.
    #[arg(long, default_value_t = 100)]
    max_lateness_ms: u64,
    /// Generator threads, each with its own runtime, connections and share of the arrivals, in
    /// [1, 8]. Default: half the cores (one on 2 cores), because the loopback target runs on the
    /// same cores and a generator thread per core takes CPU from it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=load::MAX_THREADS as i64))]
    threads: Option<u8>,
    /// Write results.json and report.html here.
    #[arg(long, default_value = "out/load")]
    out: PathBuf,
    /// Print results.json to stdout (the table goes to stderr).
    #[arg(long)]
    json: bool,
}

fn body(arg: Option<&str>) -> anyhow::Result<Vec<u8>> {
    let Some(b) = arg else { return Ok(Vec::new()) };
    let Some(path) = b.strip_prefix('@') else { return Ok(b.as_bytes().to_vec()) };
    let f = std::fs::File::open(path).with_context(|| format!("--body @{path}"))?;
    let mut buf = Vec::new();
    let limit = load::spec::MAX_BODY as u64;
    f.take(limit + 1).read_to_end(&mut buf).with_context(|| format!("--body @{path}"))?;
    anyhow::ensure!(buf.len() as u64 <= limit, "--body @{path}: larger than {limit} bytes");
    Ok(buf)
}

fn spec(args: &Args) -> anyhow::Result<LoadSpec> {
    let target = Target::parse(&args.url)?;
    let schedule = if args.ramp.is_empty() {
        let rate = args.rate.context("--rate RPS is required (or --ramp DURATION:RPS)")?;
        let d = args.duration.as_deref().map_or(Ok(Duration::from_secs(10)), parse_duration)?;
        Schedule::constant(rate, d)?
    } else {
        anyhow::ensure!(
            args.duration.is_none(),
            "--duration and --ramp exclude each other: a ramp lasts the sum of its stages"
        );
        let stages = args.ramp.iter().map(|s| parse_stage(s)).collect::<Result<Vec<_>, _>>()?;
        Schedule::ramp(args.rate.unwrap_or(0.0), stages)?
    };
    let headers = args.headers.iter().map(|h| parse_header(h)).collect::<Result<Vec<_>, _>>()?;
    let mut spec = LoadSpec::new(
        target,
        &args.method,
        headers,
        body(args.body.as_deref())?,
        schedule,
        Duration::from_millis(args.deadline_ms),
        args.max_in_flight,
        Duration::from_millis(args.max_lateness_ms),
    )?;
    if let Some(n) = args.threads.and_then(|n| std::num::NonZeroUsize::new(n.into())) {
        spec.threads = n;
    }
    Ok(spec)
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let spec = spec(&args)?;
    // A target nothing listens on is a run that cannot say anything: refuse it before it starts
    // rather than count every request as a connect error and exit 0.
    if let Err(e) = std::net::TcpStream::connect_timeout(&spec.target.addr, Duration::from_secs(2))
    {
        eprintln!(
            "seawall: error: cannot connect to {}: {e} (is the target running?)",
            spec.target.addr
        );
        return Ok(ExitCode::from(1));
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let tty = std::io::stderr().is_terminal();
    let progress = |p: &Progress| {
        if tty {
            eprint!(
                "\r\x1b[2K{:>4} s  offered {:>7}  sent {:>7}  dropped {:>6}  good so far {:>9}  in flight {:>5}",
                p.second + 1,
                p.offered,
                p.sent,
                p.dropped,
                p.good,
                p.in_flight
            );
            let _ = std::io::stderr().flush();
        }
    };
    let out = load::run_blocking(&spec, &args.url, progress)?;
    if tty {
        eprint!("\r\x1b[2K");
    }
    let json = out.to_json();
    std::fs::write(args.out.join("results.json"), &json).context("writing results.json")?;
    let html = out.render_html();
    std::fs::write(args.out.join("report.html"), html).context("writing report.html")?;
    if args.json {
        print!("{json}");
        eprint!("{}", out.render_table());
    } else {
        print!("{}", out.render_table());
        println!("wrote {}", args.out.join("results.json").display());
    }
    let t = &out.load.totals;
    if t.sent > 0 && t.connect == t.sent {
        eprintln!(
            "seawall: error: no request reached {}: all {} connects failed",
            spec.target.addr, t.sent
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn spec_of(argv: &[&str]) -> anyhow::Result<LoadSpec> {
        let cli = Cli::try_parse_from(std::iter::once("load").chain(argv.iter().copied()))?;
        spec(&cli.args)
    }

    /// `--threads` reaches the spec, the default is the library's, and out-of-range values are
    /// refused by the parser. Mutation checked: dropping the assignment to `spec.threads` fails
    /// the first assertion.
    #[test]
    fn threads_flag_sets_the_generator_threads() {
        let url = "http://127.0.0.1:8080/";
        let s = spec_of(&[url, "--rate", "10", "--threads", "3"]).unwrap();
        assert_eq!(s.threads.get(), 3);
        let s = spec_of(&[url, "--rate", "10"]).unwrap();
        assert_eq!(s.threads, load::default_threads());
        for bad in ["0", "9", "-1", "two"] {
            assert!(spec_of(&[url, "--rate", "10", "--threads", bad]).is_err(), "{bad}");
        }
    }
}
