//! `edge.arrivals`: Poisson (the default) bunches and overflows a small queue below capacity;
//! evenly spaced arrivals (a paced load generator) at the same rate do not.

mod common;

use common::{run_file, scenario_file};

/// 160 rps into 4 workers of 20 ms (80 % of 200 rps) with a queue of 2: the lab's seawall
/// dependency.
const SMALL_QUEUE: &str = r#"
name = "small-queue"
description = "80 % of capacity into a queue of two"
duration_s = 20

[edge]
rate = 160
deadline_ms = 1000

[[tier]]
name = "db"
workers = 4
queue_limit = 2
service = { p50_ms = 20, p99_ms = 20.2 }
"#;

#[test]
fn uniform_arrivals_are_evenly_spaced_and_never_overflow_a_small_queue() {
    let path = scenario_file("small-queue", SMALL_QUEUE);
    let poisson = run_file(&path, "naive", &[]);
    let uniform = run_file(&path, "naive", &["edge.arrivals=uniform"]);
    // Exactly the rate every second, where Poisson's counts wander.
    assert!(uniform.series.edge_rps.iter().all(|&x| x == 160.0), "{:?}", uniform.series.edge_rps);
    assert!(poisson.series.edge_rps.iter().any(|&x| x != 160.0));
    let good = |r: &seawall_report::Run| {
        r.series.goodput_rps.iter().sum::<f64>() / r.series.edge_rps.iter().sum::<f64>()
    };
    assert_eq!(good(&uniform), 1.0, "{:?}", uniform.series.goodput_rps);
    assert!(good(&poisson) < 0.99, "{}", good(&poisson));
}
