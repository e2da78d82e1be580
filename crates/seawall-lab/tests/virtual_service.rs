//! The guide's example service (`examples/virtual_service.rs`) through a retry storm on the
//! virtual lab: the client teams write first keeps the dependency down after the fault; the
//! same service with seawall's client and a `DeadlineLayer` recovers. On virtual time, so the
//! figures are the same on every run and machine.

#[path = "../examples/virtual_service.rs"]
#[allow(dead_code)] // main, and what only main uses
mod example;

use seawall_lab::LabParams;

#[test]
fn the_guides_service_stays_down_with_a_naive_client_and_recovers_with_seawall() {
    let params = LabParams::default();
    let runs = example::storm(&params);
    let (naive, seawall) = (&runs[0], &runs[1]);
    let peak =
        |r: &seawall_report::Run| r.series.bottom_attempts_rps.iter().copied().fold(0.0, f64::max);
    // 160 rps, three attempts each while the dependency fails: 480 a second at the dependency.
    assert!(peak(naive) >= 0.9 * 3.0 * params.rate, "naive peak {}", peak(naive));
    assert!(!naive.recovered(), "naive: {:?}", naive.verdict);
    assert!(naive.goodput_after < 0.1, "naive after the fault: {}", naive.goodput_after);
    // seawall's budget holds the retries near 10 % of the calls.
    assert!(peak(seawall) <= 1.15 * params.rate, "seawall peak {}", peak(seawall));
    assert!(seawall.recovered(), "seawall: {:?}", seawall.verdict);
    assert!(seawall.goodput_after > 0.95, "seawall after the fault: {}", seawall.goodput_after);
    // The results a user writes from these runs are the labs' own.
    let results = seawall_lab::vlab::service_results(&params, "checkout", runs.clone());
    assert_eq!(results.tiers, ["dependency"]);
    assert_eq!(results.runs[0].series.tier_attempts_rps.len(), 1);
}
