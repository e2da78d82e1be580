use super::*;

#[test]
fn reads_what_prometheus_client_writes() {
    let page = "# HELP seawall_client_call_started Logical calls started.\n\
                # TYPE seawall_client_call_started counter\n\
                seawall_client_call_started_total 12\n\
                seawall_client_attempt_started_total{attempt=\"1\"} 12\n\
                seawall_client_attempt_started_total{attempt=\"10+\",dependency=\"a\\\"b\\\\c\\n\"} 3.5e1\n\
                up{} -Inf 1700000000\n\
                x_bucket{le=\"+Inf\"} 4 # {trace_id=\"abc\"} 1.0 1.5\n\
                # EOF\n";
    let s = parse(page).unwrap();
    assert_eq!(s.len(), 5);
    assert_eq!(s[0].name, "seawall_client_call_started_total");
    assert_eq!(s[0].value, 12.0);
    assert_eq!(s[1].label("attempt"), Some("1"));
    assert_eq!(s[2].label("dependency"), Some("a\"b\\c\n"));
    assert_eq!(s[2].value, 35.0);
    assert_eq!(s[3].value, f64::NEG_INFINITY);
    assert_eq!(s[4].value, 4.0);
}

#[test]
fn rejects_malformed_lines_naming_them() {
    for bad in [
        "1abc 1",
        "a b",
        "a 1 2 3",
        "a{b=\"1\" 1",
        "a{b=1} 1",
        "a{b=\"1\\x\"} 1",
        "a{1b=\"1\"} 1",
        "a{b=\"1\"}1",
        "a inf",
        "a 1 nan",
        "a",
        "a{b=\"1\"c=\"2\"} 1",
    ] {
        let e = parse(&format!("ok 1\n{bad}\n")).unwrap_err();
        assert!(matches!(e, ParseError::Line { line: 2, .. }), "{bad:?}: {e}");
    }
}

#[test]
fn bounds_size_and_labels() {
    assert_eq!(parse(&"a 1\n".repeat(MAX_BYTES / 4 + 1)), Err(ParseError::TooLarge));
    let many: Vec<String> = (0..=MAX_LABELS).map(|i| format!("l{i}=\"x\"")).collect();
    assert!(parse(&format!("a{{{}}} 1", many.join(","))).is_err());
}

proptest::proptest! {
    #[test]
    fn never_panics_on_arbitrary_text(text in "\\PC{0,200}") {
        let _ = parse(&text);
    }

    #[test]
    fn never_panics_on_near_misses(
        name in "[a-z_:][a-z0-9_:]{0,8}",
        key in "[a-z_]{1,4}",
        val in "[ -~]{0,10}",
        num in "[-+0-9.eEInfNa]{1,8}",
        tail in "[ -~]{0,12}",
    ) {
        let line = format!("{name}{{{key}=\"{val}\"}} {num}{tail}");
        if let Ok(s) = parse(&line) {
            proptest::prop_assert_eq!(s.len(), 1);
            proptest::prop_assert_eq!(&s[0].name, &name);
        }
    }

    #[test]
    fn round_trips_well_formed_samples(
        name in "[a-z_][a-z0-9_]{0,12}",
        labels in proptest::collection::vec(("[a-z_][a-z0-9_]{0,6}", "[ -~\\n]{0,10}"), 0..4),
        value in proptest::num::f64::NORMAL | proptest::num::f64::ZERO,
    ) {
        let esc = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        let body: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", esc(v))).collect();
        let line = format!("{name}{{{}}} {value:e}\n", body.join(","));
        let s = parse(&line).unwrap();
        proptest::prop_assert_eq!(s[0].value, value);
        proptest::prop_assert_eq!(&s[0].labels, &labels);
    }
}
