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

fn door(page: &str) -> Totals {
    Totals::from_samples(&parse(page).unwrap())
}

fn server_door(first: u64, retries: u64, good: u64, callers: &[(&str, u64)]) -> Totals {
    let mut text = format!(
        "seawall_server_arrivals_total{{attempt=\"1\"}} {first}\n\
         seawall_server_arrivals_total{{attempt=\"2\"}} {retries}\n\
         seawall_server_throughput_total {good}\n\
         seawall_server_goodput_total {good}\n"
    );
    for (c, n) in callers {
        text.push_str(&format!("seawall_server_caller_arrivals_total{{caller=\"{c}\"}} {n}\n"));
    }
    door(&text)
}

#[test]
fn one_server_alone_is_judged_by_its_attempt_numbers() {
    // 100 first attempts/s and 200 retries/s: two thirds of the door is retries, so three
    // attempts reach it per first attempt.
    let (p, c) = ([server_door(0, 0, 0, &[])], [server_door(100, 200, 50, &[])]);
    let r = [rates("s", &p[0], &c[0], 1.0)];
    assert_eq!((r[0].door_rps, r[0].retry_share), (Some(300.0), Some(2.0 / 3.0)));
    let s = fold(1.0, &r, &p, &c, 1.0);
    assert_eq!((s.edge_rps, s.dependency_rps, s.goodput_rps), (100.0, 300.0, 50.0));
    assert_eq!(s.ratio(), 3.0);
}

#[test]
fn a_server_without_attempt_numbers_is_not_read_as_amplifying_or_silent() {
    let plain = |served: u64| door(&format!("seawall_server_throughput_total {served}\n"));
    let (p, c) = ([plain(0)], [plain(80)]);
    let r = [rates("s", &p[0], &c[0], 1.0)];
    assert_eq!((r[0].door_rps, r[0].retry_share), (None, None));
    let s = fold(1.0, &r, &p, &c, 1.0);
    assert_eq!((s.edge_rps, s.dependency_rps), (80.0, 80.0));
}

#[test]
fn the_proxy_page_has_no_goodput_so_only_amplification_is_judged() {
    let proxy = |a1: u64, a2: u64, a3: u64| {
        door(&format!(
            "seawall_proxy_attempts_total{{attempt=\"1\"}} {a1}\n\
             seawall_proxy_attempts_total{{attempt=\"2\"}} {a2}\n\
             seawall_proxy_attempts_total{{attempt=\"3\"}} {a3}\n\
             seawall_proxy_caller_requests_total{{caller=\"127.0.0.1\"}} {}\n",
            a1 + a2 + a3
        ))
    };
    let (p, c) = ([proxy(10, 0, 0)], [proxy(50, 30, 20)]);
    assert_eq!((c[0].first_arrivals, c[0].retry_arrivals), (Some(50.0), Some(50.0)));
    let r = [rates("p", &p[0], &c[0], 2.0)];
    assert_eq!(r[0].retry_share, Some(50.0 / 90.0));
    let s = fold(2.0, &r, &p, &c, 2.0);
    assert_eq!((s.edge_rps, s.dependency_rps, s.goodput_rps), (20.0, 45.0, 20.0));
    assert_eq!(r[0].top_callers[0].caller, "127.0.0.1");
    assert_eq!((r[0].top_callers[0].rps, r[0].top_callers[0].share), (45.0, 1.0));
}

#[test]
fn the_server_door_wins_over_a_proxy_on_the_same_page() {
    let t = door(
        "seawall_server_arrivals_total{attempt=\"1\"} 7\n\
         seawall_proxy_attempts_total{attempt=\"1\"} 100\n\
         seawall_proxy_attempts_total{attempt=\"4\"} 100\n",
    );
    assert_eq!((t.first_arrivals, t.retry_arrivals), (Some(7.0), Some(0.0)));
}

#[test]
fn caller_rates_skip_callers_new_to_the_table_or_whose_count_fell() {
    let prev = server_door(0, 0, 0, &[("a", 100), ("b", 50), ("evicted", 900)]);
    let cur = server_door(
        100,
        0,
        100,
        &[("a", 160), ("b", 70), ("evicted", 20), ("new", 400), ("c", 10)],
    );
    let r = rates("s", &prev, &cur, 2.0);
    let got: Vec<_> = r.top_callers.iter().map(|c| (c.caller.as_str(), c.rps, c.share)).collect();
    assert_eq!(got, [("a", 30.0, 0.6), ("b", 10.0, 0.2)]);
}

#[test]
fn top_callers_are_the_heaviest_few_in_order() {
    let names: Vec<String> = (0..9).map(|i| format!("c{i}")).collect();
    let zero: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 0)).collect();
    let grown: Vec<(&str, u64)> =
        names.iter().enumerate().map(|(i, n)| (n.as_str(), i as u64 + 1)).collect();
    let r = rates("s", &server_door(0, 0, 0, &zero), &server_door(45, 0, 45, &grown), 1.0);
    let got: Vec<_> = r.top_callers.iter().map(|c| c.caller.as_str()).collect();
    assert_eq!(got, ["c8", "c7", "c6", "c5", "c4"]);
}

#[test]
fn hostile_door_pages_are_bounded_and_cleaned() {
    let mut text = String::from(
        "seawall_server_arrivals_total{attempt=\"1\"} NaN\n\
         seawall_server_arrivals_total{attempt=\"2\"} -5\n\
         seawall_server_arrivals_total 1e300\n",
    );
    for i in 0..1000 {
        text.push_str(&format!("seawall_server_caller_arrivals_total{{caller=\"x{i}\\\"\"}} 1\n"));
    }
    let t = door(&text);
    assert_eq!((t.first_arrivals, t.retry_arrivals), (Some(0.0), Some(0.0)));
    assert_eq!(t.callers.len(), super::totals::MAX_PAGE_CALLERS);
    assert!(t.callers.iter().all(|(n, _)| !n.contains('"') && !n.contains('\\')), "cleaned");
}

proptest::proptest! {
    #[test]
    fn caller_parsing_is_bounded_for_any_labels(
        callers in proptest::collection::vec(("[ -~]{0,40}", 0u32..1000), 0..400)
    ) {
        let mut text = String::new();
        for (c, n) in &callers {
            let esc = c.replace('\\', "\\\\").replace('"', "\\\"");
            text.push_str(&format!("seawall_proxy_caller_requests_total{{caller=\"{esc}\"}} {n}\n"));
        }
        let t = door(&text);
        proptest::prop_assert!(t.callers.len() <= super::totals::MAX_PAGE_CALLERS);
        let r = rates("p", &Totals::default(), &t, 1.0);
        proptest::prop_assert!(r.top_callers.len() <= super::totals::TOP_CALLERS_SHOWN);
        proptest::prop_assert!(r.top_callers.iter().all(|c| c.share <= 1.0 && c.rps.is_finite()));
    }
}
