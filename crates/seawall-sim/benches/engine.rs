//! Engine speed: events per second on catalog scenarios (a bench binary, not criterion: each
//! figure is one full run, and the SimPy anchor is timed by `benches/run.sh` in the same run).
//!
//! `cargo bench -p seawall-sim --bench engine [-- SCENARIO[:SECONDS][@POLICY]...]`
//!
//! `events` counts the events that did something (the figure in results.json), `popped` every
//! event taken from the calendar, stale timers included (see `EngineStats`); events per second
//! is the former over the wall time.
//!
//! Each figure is the median of up to seven runs; `cpu_s` is the run's CPU time (see
//! `benches/cpu/mod.rs`), which `run.sh` compares with SimPy's.

use std::time::Instant;

mod cpu;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let names: Vec<String> = if args.is_empty() {
        vec!["bronson".into(), "verify".into(), "reconnect-herd".into()]
    } else {
        args
    };
    println!(
        "{:<16} {:<12} {:>12} {:>12} {:>10} {:>14} {:>12} {:>12} {:>10}",
        "scenario",
        "policy",
        "events",
        "popped",
        "wall_s",
        "events_per_s",
        "peak_calls",
        "peak_jobs",
        "cpu_s"
    );
    for name in &names {
        // `NAME:SECONDS` runs a catalog scenario for another duration (longer runs time better);
        // `NAME@POLICY` only that policy (one process per run, for its CPU time and peak RSS).
        let (name, only) = match name.split_once('@') {
            Some((n, p)) => (n, Some(p)),
            None => (name.as_str(), None),
        };
        let (file, sets) = match name.split_once(':') {
            Some((n, d)) => (n, vec![format!("duration_s={d}")]),
            None => (name, vec![]),
        };
        let s = match seawall_sim::load(file, &sets) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        };
        let policies = match only {
            Some(p) => vec![p.to_string()],
            None => s.default_policies.clone(),
        };
        for p in &policies {
            // Median of up to 7 runs (at least one, stopping after 2 s of total wall time): short
            // scenarios run in milliseconds and the first run pays for cold caches.
            let (mut walls, mut cpus) = (Vec::new(), Vec::new());
            let mut last = None;
            while walls.len() < 7 && (walls.is_empty() || walls.iter().sum::<f64>() < 2.0) {
                let (t0, c0) = (Instant::now(), cpu::thread_cpu_s());
                last = Some(seawall_sim::run_policy(&s, p, 1, &mut |_| {}).expect("catalog runs"));
                cpus.push(cpu::thread_cpu_s() - c0);
                walls.push(t0.elapsed().as_secs_f64());
            }
            walls.sort_by(f64::total_cmp);
            cpus.sort_by(f64::total_cmp);
            let (wall, cpu) = (walls[walls.len() / 2], cpus[cpus.len() / 2]);
            let (run, st) = last.expect("at least one run");
            println!(
                "{:<16} {:<12} {:>12} {:>12} {:>10.3} {:>14.0} {:>12} {:>12} {:>10.4}",
                name,
                run.policy,
                st.events,
                st.popped,
                wall,
                st.events as f64 / wall,
                st.peak_calls,
                st.peak_jobs,
                cpu
            );
        }
    }
}
