//! Verdicts a sweep can be built on: "recovered" never sits beside a goodput after the fault
//! where most requests failed.

use seawall_sim::{load, simulate};

#[test]
fn a_refused_reconnect_herd_is_not_recovery() {
    // reconnect-herd under fixed-1s with a herd of 1 M (not 5 M, to keep the debug build quick):
    // every second after the herd's is healthy, but most of the herd is refused. The old
    // per-second rule read "recovered, 1.0 s" beside a goodput after of about a quarter.
    let s = load("reconnect-herd", &["edge.herd.0.clients=1000000".into(), "duration_s=40".into()])
        .unwrap();
    let r = simulate(&s, &["fixed-1s".into(), "jitter-60s".into()], 1, &mut |_, _| {}).unwrap();
    let (fixed, jitter) = (&r.runs[0], &r.runs[1]);
    assert!(fixed.goodput_after < 0.5, "{}", fixed.goodput_after);
    assert!(
        !fixed.recovered(),
        "fixed-1s reads recovered with goodput after {}",
        fixed.goodput_after
    );
    assert_eq!(fixed.recovery_s(), None);
    // It did heal — late, after losing most requests — and the table says so.
    let table = seawall_report::render_table(&r);
    assert!(table.lines().nth(1).unwrap().starts_with("fixed-1s    no (late)"), "{table}");
    // The same herd spread over 60 s is answered, and reads recovered.
    assert!(jitter.recovered() && jitter.goodput_after > 0.9, "{}", jitter.goodput_after);
}
