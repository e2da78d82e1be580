use super::*;

#[test]
fn selectors_are_checked() {
    for ok in
        ["", r#"job="gateway""#, r#"a="x", b=~"y.*",c!="q\"z""#, r#"envoy_cluster_name="orders""#]
    {
        check_selector(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for bad in [
        r#"{job="x"}"#,
        r#"job=x"#,
        r#"job="x" b="y""#,
        r#"job="x"#,
        r#"1a="x""#,
        r#"job="x"}) or vector(1"#,
        "job",
    ] {
        assert!(check_selector(bad).is_err(), "accepted {bad}");
    }
}

#[test]
fn every_dialect_has_the_required_signals_and_reset_checks() {
    for d in Dialect::ALL {
        let q = QuerySet::new(d, r#"job="e""#, r#"job="d""#, "30s").unwrap();
        for s in [Signal::Edge, Signal::Dependency, Signal::Goodput] {
            let expr = q.query(s).unwrap_or_else(|| panic!("{d:?} lacks {s:?}"));
            assert!(expr.contains("[30s]"), "{expr}");
        }
        assert!(q.resets.iter().any(|(s, _)| *s == Signal::Edge), "{d:?}");
        let explain = q.explain();
        assert!(explain.contains(d.as_str()));
        // A dialect that lacks a signal says what is weaker.
        for s in Signal::ALL {
            if q.query(s).is_none() {
                assert!(q.weaknesses().iter().any(|w| w.signal == Some(s)), "{d:?} {s:?}");
                assert!(explain.contains(&format!("{}: (not exported", s.as_str())));
            }
        }
    }
}

#[test]
fn single_client_dialects_share_the_selector() {
    let q = QuerySet::new(Dialect::Envoy, "", r#"envoy_cluster_name="orders""#, "1m").unwrap();
    assert_eq!(
        q.query(Signal::Edge).unwrap(),
        "sum(rate(envoy_cluster_upstream_rq_total{envoy_cluster_name=\"orders\"}[1m])) - \
         (sum(rate(envoy_cluster_upstream_rq_retry{envoy_cluster_name=\"orders\"}[1m])) or vector(0))"
    );
}

#[test]
fn overrides_replace_and_drop_the_reset_check() {
    let mut q = QuerySet::new(Dialect::Istio, "", "", "1m").unwrap();
    q.override_with("edge=sum(rate(my_requests_total[1m]))").unwrap();
    q.override_with("overflow = sum(rate(my_refusals_total[1m]))").unwrap();
    assert_eq!(q.query(Signal::Edge), Some("sum(rate(my_requests_total[1m]))"));
    assert!(!q.resets.iter().any(|(s, _)| *s == Signal::Edge));
    assert!(!q.weaknesses().iter().any(|w| w.signal == Some(Signal::Overflow)));
    assert!(q.explain().contains("edge (--query)"));
    assert!(q.override_with("edges=x").is_err());
    assert!(q.override_with("edge=").is_err());
    assert!(q.override_with("edge").is_err());
    assert!(QuerySet::new(Dialect::Grpc, "", "", "1 minute").is_err());
}

#[test]
fn otel_http_reads_the_stable_names_or_else_the_older_ones() {
    let q = QuerySet::new(Dialect::OtelHttp, r#"job="e""#, r#"job="d""#, "1m").unwrap();
    assert_eq!(
        q.query(Signal::Goodput).unwrap(),
        "(sum(rate(http_server_request_duration_seconds_count{job=\"e\",\
         http_response_status_code=~\"[1-4]..\"}[1m])) or \
         sum(rate(http_server_duration_milliseconds_count{job=\"e\",\
         http_status_code=~\"[1-4]..\"}[1m])))"
    );
    let dep = q.query(Signal::Dependency).unwrap();
    assert!(dep.contains("http_client_request_duration_seconds_count{job=\"d\"}"), "{dep}");
    assert!(
        dep.contains(" or sum(rate(http_client_duration_milliseconds_count{job=\"d\"}"),
        "{dep}"
    );
}

#[test]
fn a_caller_makes_the_seawall_dependency_the_larger_count() {
    let (e, d, c) = (r#"job="e""#, r#"job="d""#, r#"job="orders", tier!="test""#);
    let plain = QuerySet::new(Dialect::Seawall, e, d, "30s").unwrap();
    let q = QuerySet::with_caller(Dialect::Seawall, e, d, c, "30s").unwrap();
    let received = plain.query(Signal::Dependency).unwrap();
    assert_eq!(
        q.query(Signal::Dependency).unwrap(),
        format!(
            "max(({received}) or label_replace(sum(rate(seawall_client_attempt_started_total\
             {{job=\"orders\", tier!=\"test\"}}[30s])), \"from\", \"caller\", \"\", \"\"))"
        )
    );
    // The other signals are untouched; a reset of the caller's counter makes an interval unsure.
    for s in [Signal::Edge, Signal::Goodput, Signal::Overflow, Signal::QueueAge] {
        assert_eq!(q.query(s), plain.query(s), "{s:?}");
    }
    let dep_resets = q.resets.iter().find(|(s, _)| *s == Signal::Dependency).unwrap();
    assert!(dep_resets.1.contains("resets(seawall_client_attempt_started_total{job=\"orders\""));
    // The blind spot is named without --caller (with the fix), and gone with it.
    let blind = plain.weaknesses();
    assert!(blind.iter().any(|w| w.text.contains("--caller")), "{blind:?}");
    assert!(plain.explain().contains("--caller MATCHERS"));
    assert!(q.weaknesses().is_empty());
    assert!(!q.explain().contains("weaker"));
    assert!(q.explain().contains("dependency (with --caller):\n  max(("));
    // An empty caller is the plain set.
    assert_eq!(QuerySet::with_caller(Dialect::Seawall, e, d, "  ", "30s").unwrap(), plain);
}

#[test]
fn a_caller_is_parsed_strictly_and_only_for_seawall() {
    for bad in [r#"{job="x"}"#, "job=x", r#"job="x"}) or vector(1e9"#, "job"] {
        let err = QuerySet::with_caller(Dialect::Seawall, "", "", bad, "1m").unwrap_err();
        assert!(matches!(err, DialectError::Selector { .. }), "{bad}: {err}");
    }
    for d in [Dialect::Grpc, Dialect::Envoy, Dialect::Istio, Dialect::OtelHttp] {
        let err = QuerySet::with_caller(d, "", "", r#"job="x""#, "1m").unwrap_err();
        assert_eq!(err, DialectError::Caller(d.as_str()));
        assert!(err.to_string().contains("--metrics seawall"), "{err}");
        assert!(QuerySet::with_caller(d, "", "", "", "1m").is_ok());
    }
}

proptest::proptest! {
    /// Any `--caller` text: accepted exactly when it is a selector, and then it lands in the
    /// dependency query inside the braces of the caller's attempts, never anywhere else.
    #[test]
    fn any_caller_text_is_a_selector_or_an_error(s in "[a-z_=!~\", {}()\\\\.*]{0,24}") {
        let r = QuerySet::with_caller(Dialect::Seawall, "", "", &s, "1m");
        proptest::prop_assert_eq!(r.is_ok(), check_selector(&s).is_ok());
        if let Ok(q) = r {
            let dep = q.query(Signal::Dependency).unwrap();
            let inner = format!("seawall_client_attempt_started_total{{{}}}[1m]", s.trim());
            proptest::prop_assert_eq!(dep.contains(&inner), !s.trim().is_empty());
        }
    }
}
