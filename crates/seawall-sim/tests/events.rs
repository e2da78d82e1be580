//! What the engine counts as an event: one that did something, not every calendar pop.
//!
//! A timer whose attempt was already answered, the service end of a cancelled job and the
//! backoff of an abandoned call do nothing when they fire, so `events` (the figure in
//! results.json) leaves them out and `popped` counts them: the engine may skip scheduling them
//! without changing any result.

use seawall_sim::{EngineStats, Scenario, run_policy};

/// One tier that answers every request well within the edge's 1 s deadline: 100 requests a
/// second for 10 s, evenly spaced, the edge making one attempt.
const QUIET: &str = r#"
name = "quiet"
description = "every request answered well within its deadline"
duration_s = 10
[edge]
rate = 100
arrivals = "uniform"
deadline_ms = 1000
[[tier]]
name = "db"
workers = 100
service = { mean_ms = 5 }
"#;

fn run(text: &str, sets: &[&str]) -> (f64, EngineStats) {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = Scenario::parse("quiet", text, &sets).unwrap();
    let (run, stats) = run_policy(&s, "naive", 1, &mut |_| {}).unwrap();
    (run.series.edge_rps.iter().sum(), stats)
}

/// Each request is an arrival and a service end; its attempt's timeout fires after the answer
/// and does nothing, so it is popped but not counted. Counting every pop (an earlier definition)
/// turns this red: 3 events per request instead of 2.
#[test]
fn a_timer_of_an_answered_attempt_is_not_an_event() {
    let (requests, st) = run(QUIET, &[]);
    assert_eq!(requests, 1000.0);
    let ticks = 10;
    assert_eq!(st.events, 2 * 1000 + ticks, "{st:?}");
    assert_eq!(st.popped, 3 * 1000 + ticks, "{st:?}");
}

/// The same tier failing every request at once for the whole run: each attempt is answered
/// before its timer could fire, so the engine schedules no timer at all and pops only events
/// that do something. Setting the timer before the attempt reaches its server (as before issue
/// 17) turns this red: one stale pop per request.
#[test]
fn an_attempt_answered_at_once_leaves_no_timer() {
    let failing = format!(
        "{QUIET}[[fault]]\nkind = \"outage\"\nmode = \"fail\"\ntier = \"db\"\nstart_s = 0\n\
         duration_s = 20\n"
    );
    let (requests, st) = run(&failing, &[]);
    assert_eq!(requests, 1000.0);
    assert_eq!(st.popped, st.events, "{st:?}");
    assert_eq!(st.events, 1000 + 10, "{st:?}");
}
