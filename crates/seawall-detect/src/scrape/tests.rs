use super::totals::{Totals, fold, rates};
use super::*;
use crate::prom::parse;

fn page(calls: u64, attempts: u64, served: u64, good: u64, overflow: u64, age: f64) -> Totals {
    let text = format!(
        "seawall_client_call_started_total {calls}\n\
         seawall_client_attempt_started_total{{attempt=\"1\"}} {calls}\n\
         seawall_client_attempt_started_total{{attempt=\"2\"}} {}\n\
         seawall_client_retry_overflow_total {overflow}\n\
         seawall_server_throughput_total {served}\n\
         seawall_server_goodput_total {good}\n\
         seawall_server_rejected_total{{reason=\"queue_full\"}} 0\n\
         seawall_server_oldest_queued_seconds {age}\n",
        attempts - calls
    );
    Totals::from_samples(&parse(&text).unwrap())
}

#[test]
fn edge_first_dependency_last() {
    // edge: 100 arrivals/s, calls its dependency 100/s with 250 attempts/s; the dependency
    // sees the 250.
    let prev = [page(0, 0, 0, 0, 0, 0.0), page(0, 0, 0, 0, 0, 0.0)];
    let cur = [page(200, 500, 200, 50, 10, 0.0), page(0, 0, 500, 100, 0, 1.5)];
    let targets: Vec<_> = ["e", "d"]
        .iter()
        .zip(prev.iter().zip(&cur))
        .map(|(u, (p, c))| rates(u, p, c, 2.0))
        .collect();
    assert_eq!(targets[0].attempts_per_call, Some(2.5));
    assert_eq!(targets[1].attempts_per_call, None, "no calls: no ratio");
    let s = fold(4.0, &targets, &prev, &cur, 2.0);
    assert_eq!((s.t, s.edge_rps, s.dependency_rps, s.goodput_rps), (4.0, 100.0, 250.0, 25.0));
    assert_eq!((s.queue_age_s, s.refusals_rps), (1.5, 5.0));
    assert_eq!(s.ratio(), 2.5);
}

#[test]
fn client_only_target_uses_its_own_counters_and_resets_count_from_zero() {
    let only = |c: u64, a: u64| {
        let text = format!(
            "seawall_client_call_started_total {c}\nseawall_client_attempt_started_total{{attempt=\"1\"}} {a}\n\
             seawall_client_call_duration_seconds_count {c}\n"
        );
        Totals::from_samples(&parse(&text).unwrap())
    };
    let (p, c) = ([only(1000, 1000)], [only(10, 30)]); // restarted: counters back near zero
    let r = [rates("x", &p[0], &c[0], 1.0)];
    let s = fold(0.0, &r, &p, &c, 1.0);
    assert_eq!((s.edge_rps, s.dependency_rps, s.goodput_rps), (10.0, 30.0, 10.0));
}

#[test]
fn hostile_values_are_clamped() {
    let t = Totals::from_samples(
        &parse("seawall_server_goodput_total NaN\nseawall_server_oldest_queued_seconds -Inf\n")
            .unwrap(),
    );
    assert_eq!((t.goodput, t.oldest_queued_s), (Some(0.0), Some(0.0)));
}

#[test]
fn urls_are_checked() {
    assert_eq!(normalize_url("http://127.0.0.1:9").unwrap().path(), "/metrics");
    assert_eq!(normalize_url("http://127.0.0.1:9/m").unwrap().path(), "/m");
    assert!(normalize_url("https://127.0.0.1:9/").is_err());
    assert!(normalize_url("127.0.0.1:9").is_err());
    assert!(normalize_url("not a url").is_err());
}
