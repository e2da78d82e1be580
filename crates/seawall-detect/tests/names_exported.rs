//! Every metric name `detect`, `alerts` and `escape` read is one the layers really export: the
//! client and server metrics registered in a real registry, as a seawall service exposes them.

use std::time::Duration;

use prometheus_client::registry::Registry;
use seawall_detect::{alerts, names, prom};
use seawall_tower::client::{ClientMetrics, metrics_text};
use seawall_tower::server::ServerMetrics;

/// The text a seawall service exposes: its client registry and its server metrics, after one
/// arrival from a named caller (a family without samples is not on the page).
fn exported_page() -> String {
    let mut registry = Registry::default();
    ClientMetrics::new().register(&mut registry);
    let server = ServerMetrics::new();
    server.arrival(2);
    server.caller("checkout");
    server.register(&mut registry);
    metrics_text(&registry)
}

/// The page `seawall proxy` serves, after one retried request from one caller.
fn proxy_page() -> String {
    let stats = seawall_proxy::stats::Stats::default();
    stats.request(Duration::from_millis(10), 2, "127.0.0.2");
    stats.prometheus()
}

#[test]
fn every_proxy_name_read_is_exported() {
    let page = proxy_page();
    let samples = prom::parse(&page).unwrap();
    for name in names::PROXY {
        assert!(samples.iter().any(|s| s.name == name), "{name} not exported:\n{page}");
    }
}

#[test]
fn every_name_read_is_exported_and_the_page_parses() {
    let page = exported_page();
    let samples = prom::parse(&page).unwrap();
    for name in names::ALL {
        assert!(samples.iter().any(|s| s.name == name), "{name} not exported:\n{page}");
    }
}

#[test]
fn every_name_in_the_alerts_and_dashboard_is_exported() {
    let page = exported_page() + &proxy_page();
    let exported: Vec<String> = prom::parse(&page).unwrap().into_iter().map(|s| s.name).collect();
    let cfg = alerts::AlertConfig::default();
    for text in [alerts::prometheus_rules(&cfg), alerts::grafana_dashboard(&cfg)] {
        let used = alerts::metric_names_in(&text);
        assert!(used.len() >= 4, "{used:?}");
        for name in used {
            assert!(exported.contains(&name), "{name} is used but not exported:\n{page}");
        }
    }
}
