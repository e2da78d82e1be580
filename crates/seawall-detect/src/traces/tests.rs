use proptest::prelude::*;

use super::*;

/// An OTLP JSON line: a server root span `edge` calling `dep` twice (the first attempt times out
/// at 500 ms, the second succeeds), and the dependency's server span for the first attempt
/// running on for 1.5 s after its caller left.
fn storm_json() -> String {
    let span = |id: &str,
                parent: &str,
                name: &str,
                kind: u8,
                start_ms: u64,
                end_ms: u64,
                extra: &str| {
        format!(
            r#"{{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"{id}","parentSpanId":"{parent}","name":"{name}","kind":{kind},"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{extra}],"status":{{}}}}"#,
            1_700_000_000_000_000_000u64 + start_ms * 1_000_000,
            1_700_000_000_000_000_000u64 + end_ms * 1_000_000
        )
    };
    let addr = r#"{"key":"server.address","value":{"stringValue":"orders"}},{"key":"server.port","value":{"intValue":"8080"}}"#;
    let edge = vec![
        span("00f067aa0ba902b7", "", "GET /checkout", 2, 0, 700, ""),
        span(
            "00f067aa0ba902b8",
            "00f067aa0ba902b7",
            "GET",
            3,
            10,
            510,
            &format!(
                r#"{addr},{{"key":"http.response.status_code","value":{{"intValue":"504"}}}}"#
            ),
        ),
        span(
            "00f067aa0ba902b9",
            "00f067aa0ba902b7",
            "GET",
            3,
            520,
            690,
            &format!(r#"{addr},{{"key":"http.request.resend_count","value":{{"intValue":"1"}}}}"#),
        ),
    ];
    let dep = vec![span("00f067aa0ba902c1", "00f067aa0ba902b8", "GET /orders", 2, 20, 2010, "")];
    let rs = |service: &str, spans: Vec<String>| {
        format!(
            r#"{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"{service}"}}}}]}},"scopeSpans":[{{"spans":[{}]}}]}}"#,
            spans.join(",")
        )
    };
    format!(r#"{{"resourceSpans":[{},{}]}}"#, rs("edge", edge), rs("orders", dep))
}

#[test]
fn otlp_json_reads_kinds_ids_peers_and_the_resend_count() {
    let p = parse_otlp_json(storm_json().as_bytes(), Limits::default()).unwrap();
    assert_eq!(p.spans.len(), 4);
    assert_eq!(p.dropped, 0);
    let client: Vec<&Span> = p.spans.iter().filter(|s| s.kind == Kind::Client).collect();
    assert_eq!(client.len(), 2);
    assert_eq!(client[0].peer.as_deref(), Some("orders:8080"));
    assert!(client[0].error, "a 504 is an error");
    assert_eq!(client[1].resend_count, Some(1));
    assert_eq!(p.spans[3].service, "orders");
}

#[test]
fn the_staircase_the_resend_and_the_work_nobody_used_are_found() {
    let p = parse_otlp_json(storm_json().as_bytes(), Limits::default()).unwrap();
    let a = Analysis::of(&p.spans, 1.0, None);
    assert_eq!(a.dependency.as_deref(), Some("orders:8080"));
    assert_eq!(a.signals.staircases, 1);
    assert_eq!(a.signals.example.as_ref().unwrap().attempts, 2);
    assert_eq!(a.signals.resends, 1);
    assert_eq!(a.signals.attempts, 2);
    // The dependency ran 1.99 s for a caller that left at 0.51 s: 1.5 s of it unused.
    assert!((a.signals.wasted_s - 1.5).abs() < 1e-6, "{}", a.signals.wasted_s);
    let s = a.intervals[0].sample;
    assert_eq!((s.edge_rps, s.goodput_rps, s.dependency_rps), (1.0, 1.0, 2.0));
}

#[test]
fn a_file_of_lines_and_protobuf_read_the_same_spans() {
    let json = storm_json();
    let lines = format!("{json}\n{json}\n");
    assert_eq!(parse_otlp_json(lines.as_bytes(), Limits::default()).unwrap().spans.len(), 8);
    let req: ExportTraceServiceRequest = serde_json::from_str(&json).unwrap();
    let bytes = req.encode_to_vec();
    let from_proto = parse_otlp_protobuf(&bytes, Limits::default()).unwrap();
    assert_eq!(from_proto, parse_otlp_json(json.as_bytes(), Limits::default()).unwrap());
    assert_eq!(parse_any(&bytes, Limits::default()).unwrap(), from_proto);
}

#[test]
fn jaeger_json_reads_the_same_shape() {
    let j = r#"{"data":[{"traceID":"0af7651916cd43dd8448eb211c80319c","spans":[
      {"traceID":"0af7651916cd43dd8448eb211c80319c","spanID":"00f067aa0ba902b7","operationName":"GET /checkout","references":[],"startTime":1700000000000000,"duration":700000,"tags":[{"key":"span.kind","type":"string","value":"server"}],"processID":"p1"},
      {"traceID":"0af7651916cd43dd8448eb211c80319c","spanID":"00f067aa0ba902b8","operationName":"GET","references":[{"refType":"CHILD_OF","traceID":"0af7651916cd43dd8448eb211c80319c","spanID":"00f067aa0ba902b7"}],"startTime":1700000000010000,"duration":500000,"tags":[{"key":"span.kind","type":"string","value":"client"},{"key":"error","type":"bool","value":true},{"key":"net.peer.name","type":"string","value":"orders"}],"processID":"p1"},
      {"traceID":"0af7651916cd43dd8448eb211c80319c","spanID":"00f067aa0ba902b9","operationName":"GET","references":[{"refType":"CHILD_OF","traceID":"0af7651916cd43dd8448eb211c80319c","spanID":"00f067aa0ba902b7"}],"startTime":1700000000520000,"duration":170000,"tags":[{"key":"span.kind","type":"string","value":"client"},{"key":"net.peer.name","type":"string","value":"orders"}],"processID":"p1"}],
      "processes":{"p1":{"serviceName":"edge","tags":[]}}}]}"#;
    let p = parse_any(j.as_bytes(), Limits::default()).unwrap();
    assert_eq!(p.spans.len(), 3);
    let a = Analysis::of(&p.spans, 1.0, Some("orders"));
    assert_eq!(a.signals.staircases, 1);
    assert_eq!(a.intervals[0].sample.dependency_rps, 2.0);
}

#[test]
fn staircases_at_one_duration_name_the_timeout() {
    assert_eq!(super::analysis_same_duration(&[0.5, 0.501, 0.499]), Some(0.5));
    assert_eq!(super::analysis_same_duration(&[0.5, 0.9]), None);
    assert_eq!(
        super::analysis_same_duration(&[0.001, 0.001]),
        None,
        "fast failures are not a timeout"
    );
}

#[test]
fn bodies_over_the_limits_are_refused_before_any_span_is_kept() {
    let json = storm_json();
    let small = Limits { max_bytes: 100, max_spans: 100 };
    assert!(matches!(parse_any(json.as_bytes(), small), Err(TraceError::TooLarge { .. })));
    let few = Limits { max_bytes: 1 << 20, max_spans: 3 };
    assert_eq!(parse_otlp_json(json.as_bytes(), few), Err(TraceError::TooManySpans { limit: 3 }));
}

#[test]
fn malformed_spans_are_dropped_and_counted() {
    let bad = storm_json()
        .replace("00f067aa0ba902b9", "00f0")
        .replace(r#""endTimeUnixNano":"1700000002010000000""#, r#""endTimeUnixNano":"1""#);
    let p = parse_otlp_json(bad.as_bytes(), Limits::default()).unwrap();
    assert_eq!(p.dropped, 2, "a short span id and an end before the start");
    assert_eq!(p.spans.len(), 2);
}

proptest! {
    /// Whatever bytes arrive, the parsers answer Ok or Err, never panic, and keep within limits.
    #[test]
    fn arbitrary_bodies_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let limits = Limits { max_bytes: 1024, max_spans: 50 };
        if let Ok(p) = parse_any(&bytes, limits) {
            prop_assert!(p.spans.len() <= 50);
            let _ = Analysis::of(&p.spans, 1.0, None);
        }
    }

    /// Mutated OTLP JSON (one byte changed) never panics either.
    #[test]
    fn mutated_json_never_panics(at in 0usize..4000, b in any::<u8>()) {
        let mut json = storm_json().into_bytes();
        let i = at % json.len();
        json[i] = b;
        if let Ok(p) = parse_any(&json, Limits::default()) {
            let _ = Analysis::of(&p.spans, 0.5, None);
        }
    }
}
