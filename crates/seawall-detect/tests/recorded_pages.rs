//! The recorded Envoy and Istio pages (`tests/recorded/*.prom`, in the exact format those
//! proxies export) are valid Prometheus text to seawall's strict parser, and hold the series the
//! dialects' queries select.

use seawall_detect::prom;

#[test]
fn recorded_pages_parse_and_hold_the_dialects_series() {
    let envoy = prom::parse(include_str!("recorded/envoy.prom")).unwrap();
    let orders = |name: &str| {
        envoy
            .iter()
            .filter(|s| s.name == name && s.label("envoy_cluster_name") == Some("orders"))
            .count()
    };
    for name in [
        "envoy_cluster_upstream_rq_total",
        "envoy_cluster_upstream_rq_retry",
        "envoy_cluster_upstream_rq_retry_overflow",
    ] {
        assert_eq!(orders(name), 1, "{name}");
    }
    assert_eq!(orders("envoy_cluster_upstream_rq_xx"), 2);
    let istio = prom::parse(include_str!("recorded/istio.prom")).unwrap();
    let requests: Vec<_> = istio.iter().filter(|s| s.name == "istio_requests_total").collect();
    assert_eq!(requests.len(), 4);
    for s in &requests {
        assert_eq!(s.label("reporter"), Some("destination"));
        for l in ["source_workload", "destination_workload", "response_code", "response_flags"] {
            assert!(s.label(l).is_some(), "{l}");
        }
    }
}
