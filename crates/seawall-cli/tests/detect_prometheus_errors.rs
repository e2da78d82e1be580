//! `seawall detect --prometheus` on answers no real Prometheus should give (an HTML page, an
//! error body, an empty match, NaN, not JSON) and on no server at all: each exits 2 with a
//! message naming the problem, and never prints a verdict. `--explain` prints each dialect's
//! queries.

mod detect_support;

use detect_support::{Server, free_port, seawall, text};

const HTML: &str = "<!DOCTYPE html><html><body>Grafana login</body></html>";
const ERROR: &str = r#"{"status":"error","errorType":"bad_data","error":"1:14: parse error: unclosed left parenthesis"}"#;
const EMPTY: &str = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
const NAN: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"NaN"]}]}}"#;

fn detect(url: &str) -> std::process::Output {
    seawall(&[
        "detect",
        "--prometheus",
        url,
        "--caller",
        "job=\"orders\"",
        "--max-intervals",
        "1",
        "--interval",
        "0.1",
    ])
}

#[test]
fn bad_answers_exit_2_with_the_reason() {
    let server = Server::start(vec![
        ("/html/", 200, "text/html", HTML),
        ("/err/", 400, "application/json", ERROR),
        ("/empty/", 200, "application/json", EMPTY),
        ("/nan/", 200, "application/json", NAN),
        ("/text/", 200, "text/plain", "hello"),
        ("/gone/", 502, "text/plain", ""),
    ]);
    let base = format!("http://{}", server.addr);
    for (prefix, want) in [
        ("html", "answered HTML"),
        ("err", "refused the query (bad_data): 1:14: parse error"),
        ("empty", "no series match"),
        ("nan", "edge is NaN"),
        ("text", "not JSON"),
        ("gone", "HTTP 502"),
    ] {
        let out = detect(&format!("{base}/{prefix}"));
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{prefix}: {t}");
        assert!(t.contains(want), "{prefix}: want {want:?} in {t}");
        for verdict in ["healthy", "retry_storm", "learning", "traffic_spike"] {
            assert!(!t.contains(verdict), "{prefix}: printed a verdict: {t}");
        }
    }
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let out = detect(&nobody);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("Prometheus unreachable"), "{}", text(&out));
    for bad_flags in [
        vec!["--edge", "{job=\"x\"}"],
        vec!["--query", "edges=up"],
        vec!["--rate-window", "fast"],
        vec!["--from", "yesterday", "--to", "2026-01-01T00:00:00Z"],
        vec!["--last", "1y"],
    ] {
        let mut a = vec!["detect", "--prometheus", &base, "--caller", "job=\"orders\""];
        a.extend(bad_flags.iter().copied());
        let out = seawall(&a);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {}", text(&out));
        assert!(!text(&out).contains("cannot judge"), "{a:?}: {}", text(&out));
    }
    // seawall's own names without the callers' series cannot show a storm's abandoned
    // attempts: no verdict, the reason and the fix instead (before any query is sent).
    let out =
        seawall(&["detect", "--prometheus", &format!("{base}/empty"), "--max-intervals", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("cannot judge retry storms") && text(&out).contains("--caller"));
}

#[test]
fn explain_prints_each_dialects_queries_and_weaknesses() {
    for (dialect, names) in [
        (
            "seawall",
            &["seawall_server_throughput_total", "seawall_server_oldest_queued_seconds"][..],
        ),
        ("grpc", &["grpc_client_attempt_started_total", "grpc_client_call_duration_seconds_count"]),
        ("envoy", &["envoy_cluster_upstream_rq_total", "envoy_cluster_upstream_rq_retry_overflow"]),
        ("istio", &["istio_requests_total", "reporter=\"destination\""]),
        (
            "otel-http",
            &[
                "http_client_request_duration_seconds_count",
                "http_server_request_duration_seconds_count",
            ],
        ),
    ] {
        let out =
            seawall(&["detect", "--explain", "--metrics", dialect, "--dependency", "job=\"db\""]);
        let t = text(&out);
        assert!(out.status.success(), "{t}");
        for n in names {
            assert!(t.contains(n), "{dialect}: {n} missing from {t}");
        }
        assert!(t.contains("weaker:"), "{t}");
        if dialect == "seawall" {
            assert!(t.contains("seawall_client_attempt_started_total"), "{t}");
        }
    }
}

#[test]
fn explain_with_a_caller_prints_the_larger_count_and_no_blind_spot() {
    let base = ["detect", "--explain", "--metrics", "seawall", "--dependency", "job=\"db\""];
    let out = seawall(&base);
    let t = text(&out);
    assert!(t.contains("requests its callers abandon") && t.contains("--caller MATCHERS"), "{t}");
    let with = |caller: &str| {
        let mut a = base.to_vec();
        a.extend(["--caller", caller]);
        seawall(&a)
    };
    let out = with("job=\"orders\"");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains(
            "dependency (with --caller):\n  max((sum(rate(seawall_server_throughput_total{job=\"db\"}[1m]))"
        ) && t.contains(
            "or label_replace(sum(rate(seawall_client_attempt_started_total{job=\"orders\"}[1m])), \"from\", \"caller\", \"\", \"\"))"
        ),
        "{t}"
    );
    assert!(!t.contains("weaker"), "{t}");
    // Strict: a malformed selector, another dialect, or a source that takes no selector: exit 2.
    for (out, says) in [
        (with("job=orders"), "double quotes"),
        (with("{job=\"orders\"}"), "without braces"),
        (
            seawall(&["detect", "--explain", "--metrics", "grpc", "--caller", "job=\"o\""]),
            "--metrics seawall",
        ),
        (
            seawall(&["detect", "--scrape", "http://127.0.0.1:9/m", "--caller", "job=\"o\""]),
            "cannot be used with",
        ),
    ] {
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(says), "{says}: {}", text(&out));
    }
}
