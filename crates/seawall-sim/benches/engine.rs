//! Engine speed: events per second on catalog scenarios (a bench binary, not criterion: each
//! figure is one full run, and the SimPy anchor is timed by `benches/run.sh` in the same run).
//!
//! `cargo bench -p seawall-sim --bench engine [-- SCENARIO...]`

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let names: Vec<String> = if args.is_empty() {
        vec!["bronson".into(), "verify".into(), "reconnect-herd".into()]
    } else {
        args
    };
    println!(
        "{:<16} {:<12} {:>12} {:>10} {:>14} {:>12}",
        "scenario", "policy", "events", "wall_s", "events_per_s", "peak_calls"
    );
    for name in &names {
        let s = match seawall_sim::load(name, &[]) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        };
        for p in &s.default_policies {
            let t0 = Instant::now();
            let (run, st) = seawall_sim::run_policy(&s, p, 1, &mut |_| {}).expect("catalog runs");
            let wall = t0.elapsed().as_secs_f64();
            println!(
                "{:<16} {:<12} {:>12} {:>10.3} {:>14.0} {:>12}",
                name,
                run.policy,
                st.events,
                wall,
                st.events as f64 / wall,
                st.peak_calls
            );
        }
    }
}
