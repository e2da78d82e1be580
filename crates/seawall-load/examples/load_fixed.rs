//! One `seawall load` run at a fixed rate, for profiling the generator (e.g. under
//! `valgrind --tool=callgrind`): prints what was offered, sent and answered.
//!
//! ```text
//! cargo run --release -p seawall-load --example load_fixed -- URL RATE SECONDS MAX_IN_FLIGHT [THREADS]
//! ```

use std::time::Duration;

use seawall_load::{LoadSpec, Schedule, Target, run_blocking};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let (url, rate, secs, conns, threads) = match &a[..] {
        [u, r, s, c] => (u, r, s, c, None),
        [u, r, s, c, t] => (u, r, s, c, Some(t.parse()?)),
        _ => return Err("usage: load_fixed URL RATE SECONDS MAX_IN_FLIGHT [THREADS]".into()),
    };
    let schedule = Schedule::constant(rate.parse()?, Duration::from_secs(secs.parse()?))?;
    let mut spec = LoadSpec::new(
        Target::parse(url)?,
        "GET",
        vec![],
        "",
        schedule,
        Duration::from_millis(1000),
        conns.parse()?,
        Duration::from_millis(100),
    )?;
    spec.threads = threads.unwrap_or(spec.threads);
    let t = run_blocking(&spec, url, |_| {})?.load.totals;
    println!("offered {} sent {} good {} dropped {}", t.offered, t.sent, t.good, t.dropped());
    Ok(())
}
