use super::*;
use proptest::prelude::*;

const CFG: &str = r#"{
  "methodConfig": [
    {"name": [{"service": "a.A"}], "retryPolicy": {"maxAttempts": 9, "initialBackoff": ".1s",
      "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE", 4],
      "perAttemptRecvTimeout": "0.25s"}},
    {"name": [{"service": "a.A", "method": "Get"}], "timeout": "1.5s"},
    {"name": [{}], "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.05s",
      "nonFatalStatusCodes": ["UNAVAILABLE"]}}
  ],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}"#;

fn err(text: &str) -> ServiceConfigError {
    ServiceConfig::from_json(text).unwrap_err()
}

#[test]
fn parses_clamps_and_looks_up() {
    let c = ServiceConfig::from_json(CFG).unwrap();
    let Some(Policy::Retry(r)) = &c.lookup("a.A", "Put").unwrap().policy else { panic!() };
    assert_eq!((r.max_attempts, r.configured_max_attempts), (5, 9), "A6 clamps to 5");
    assert_eq!(r.initial_backoff, Duration::from_millis(100));
    assert_eq!(r.max_backoff, Duration::from_secs(1));
    assert_eq!(r.backoff_multiplier, 2.0);
    assert_eq!(r.retryable, CodeSet::of(&[Code::UNAVAILABLE, Code::DEADLINE_EXCEEDED]));
    assert_eq!(r.per_attempt_recv_timeout, Some(Duration::from_millis(250)));
    let get = c.lookup_path("/a.A/Get").unwrap();
    assert_eq!(get.timeout, Some(Duration::from_millis(1500)));
    assert_eq!(get.policy, None, "the exact entry wins over the service-wide one");
    let Some(Policy::Hedging(h)) = &c.lookup("b.B", "X").unwrap().policy else { panic!() };
    assert_eq!((h.max_attempts, h.hedging_delay), (3, Duration::from_millis(50)));
    assert_eq!(c.lookup_path("not a path").unwrap().names, [Name::Default]);
    assert_eq!(c.throttling(), Some(Throttling { max_tokens: 10, token_ratio: 0.1 }));
    assert_eq!(c.throttling().unwrap().throttle().tokens(), 10.0);
}

#[test]
fn no_default_means_no_config() {
    let c = ServiceConfig::from_json(r#"{"methodConfig": [{"name": [{"service": "a.A"}]}]}"#);
    assert_eq!(c.unwrap().lookup("b.B", "X"), None);
    assert_eq!(ServiceConfig::from_json("{}").unwrap(), ServiceConfig::default());
}

#[test]
fn case_insensitive_keys_as_grpc_go() {
    let c = ServiceConfig::from_json(
        r#"{"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"MaxAttempts": 4,
        "InitialBackoff": ".01s", "MaxBackoff": ".01s", "BackoffMultiplier": 1.0,
        "RetryableStatusCodes": ["UNAVAILABLE"]}}]}"#,
    )
    .unwrap();
    assert!(
        matches!(&c.lookup("s", "m").unwrap().policy, Some(Policy::Retry(r)) if r.max_attempts == 4)
    );
}

#[test]
fn invalid_configs_name_the_field() {
    let cases = [
        ("\"maxAttempts\": 9", "\"maxAttempts\": 1", "methodConfig[0].retryPolicy.maxAttempts"),
        ("\"maxAttempts\": 9", "\"maxAttempts\": 2.0", "methodConfig[0].retryPolicy.maxAttempts"),
        ("\".1s\"", "\"0s\"", "methodConfig[0].retryPolicy.initialBackoff"),
        ("\".1s\"", "\"100ms\"", "methodConfig[0].retryPolicy.initialBackoff"),
        ("\"1s\",", "\"-1s\",", "methodConfig[0].retryPolicy.maxBackoff"),
        (
            "\"backoffMultiplier\": 2",
            "\"backoffMultiplier\": 0",
            "methodConfig[0].retryPolicy.backoffMultiplier",
        ),
        ("[\"UNAVAILABLE\", 4]", "[]", "methodConfig[0].retryPolicy.retryableStatusCodes"),
        (
            "[\"UNAVAILABLE\", 4]",
            "[\"unavailable \"]",
            "methodConfig[0].retryPolicy.retryableStatusCodes",
        ),
        (
            "[\"UNAVAILABLE\", 4]",
            "[\"UNAVAIL\"]",
            "methodConfig[0].retryPolicy.retryableStatusCodes",
        ),
        ("[\"UNAVAILABLE\", 4]", "[17]", "methodConfig[0].retryPolicy.retryableStatusCodes"),
        ("\"0.25s\"", "\"0s\"", "methodConfig[0].retryPolicy.perAttemptRecvTimeout"),
        ("\"1.5s\"", "\"soon\"", "methodConfig[1].timeout"),
        ("\"0.05s\"", "\"-0.05s\"", "methodConfig[2].hedgingPolicy.hedgingDelay"),
        ("\"maxAttempts\": 3", "\"maxAttempts\": 1", "methodConfig[2].hedgingPolicy.maxAttempts"),
        ("\"maxTokens\": 10", "\"maxTokens\": 0", "retryThrottling.maxTokens"),
        ("\"maxTokens\": 10", "\"maxTokens\": 10.5", "retryThrottling.maxTokens"),
        ("\"tokenRatio\": 0.1", "\"tokenRatio\": 0", "retryThrottling.tokenRatio"),
        (
            "{\"service\": \"a.A\", \"method\": \"Get\"}",
            "{\"method\": \"Get\"}",
            "methodConfig[1].name[0]",
        ),
        (
            "{\"service\": \"a.A\", \"method\": \"Get\"}",
            "{\"service\": 1}",
            "methodConfig[1].name[0]",
        ),
    ];
    for (from, to, path) in cases {
        assert!(CFG.contains(from), "{from}");
        let e = err(&CFG.replacen(from, to, 1));
        assert_eq!(e.path(), path, "{from} -> {to}: {e}");
        assert!(matches!(e.kind(), ErrorKind::Invalid { .. }), "{e}");
    }
    let e =
        err(&CFG.replace("{\"service\": \"a.A\", \"method\": \"Get\"}", "{\"service\": \"a.A\"}"));
    assert_eq!((e.path(), e.kind()), ("methodConfig[1].name[0]", &ErrorKind::DuplicateName));
    assert_eq!(e.method_config(), Some(1));
    let both = CFG.replace(
        "\"timeout\": \"1.5s\"",
        "\"timeout\": \"1.5s\", \"retryPolicy\": {}, \"hedgingPolicy\": {}",
    );
    assert_eq!(err(&both).path(), "methodConfig[1].hedgingPolicy");
    assert!(matches!(err("{\n  \"methodConfig\": [\n").kind(), ErrorKind::Syntax { line: 3, .. }));
    assert_eq!(err("[]").path(), "");
    assert!(err("[]").to_string().contains("a JSON object"));
    // An entry without names applies to no method: refused, not silently unused.
    for names in ["", "\"name\": [], ", "\"name\": null, "] {
        let text = format!(
            "{{\"methodConfig\": [{{{names}\"retryPolicy\": {{\"maxAttempts\": 2, \
             \"initialBackoff\": \"1s\", \"maxBackoff\": \"1s\", \"backoffMultiplier\": 1, \
             \"retryableStatusCodes\": [14]}}}}]}}"
        );
        let e = err(&text);
        assert_eq!(e.path(), "methodConfig[0].name", "{names}: {e}");
        assert!(e.to_string().contains("applies to no method"), "{e}");
    }
}

fn duration_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..5, 0u32..1000).prop_map(|(s, ms)| format!("{s}.{ms:03}s")),
        Just(".1s".to_owned()),
        "[-+.0-9a-z ]{0,8}",
    ]
}

fn code_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"UNAVAILABLE\"".to_owned()),
        Just("\"CANCELLED\"".to_owned()),
        Just("\"unavailable\"".to_owned()),
        (-2i64..20).prop_map(|n| n.to_string()),
    ]
}

proptest! {
    /// Whatever the values, parsing never panics, and what it accepts obeys A6: attempts in
    /// 2..=5 (the configured value kept), positive backoffs, positive finite multiplier,
    /// non-empty codes.
    #[test]
    fn accepted_configs_obey_a6(attempts in -3i64..12, init in duration_text(), max in duration_text(),
                                mult in prop_oneof![Just("2".to_owned()), Just("0".to_owned()),
                                                    Just("-1.5".to_owned()), Just("1e308".to_owned()),
                                                    Just("\"2\"".to_owned())],
                                codes in proptest::collection::vec(code_text(), 0..3),
                                tokens in -1i64..1100, ratio in prop_oneof![Just(0.0), Just(0.1), Just(2000.0)]) {
        let text = format!(
            r#"{{"methodConfig": [{{"name": [{{}}], "retryPolicy": {{"maxAttempts": {attempts},
            "initialBackoff": "{init}", "maxBackoff": "{max}", "backoffMultiplier": {mult},
            "retryableStatusCodes": [{}]}}}}],
            "retryThrottling": {{"maxTokens": {tokens}, "tokenRatio": {ratio}}}}}"#,
            codes.join(",")
        );
        match ServiceConfig::from_json(&text) {
            Ok(c) => {
                let Some(Policy::Retry(r)) = &c.lookup("x", "y").unwrap().policy else {
                    return Err(TestCaseError::fail("policy lost"));
                };
                prop_assert!((2..=5).contains(&r.max_attempts));
                prop_assert_eq!(u64::from(r.max_attempts), (attempts as u64).min(5));
                prop_assert_eq!(r.configured_max_attempts, attempts as u64);
                prop_assert!(!r.initial_backoff.is_zero() && !r.max_backoff.is_zero());
                prop_assert!(r.backoff_multiplier.is_finite() && r.backoff_multiplier > 0.0);
                prop_assert!(!r.retryable.is_empty());
                let t = c.throttling().unwrap();
                prop_assert!((1..=1000).contains(&t.max_tokens));
            }
            Err(e) => {
                prop_assert!(!e.to_string().is_empty());
                let bad_attempts = attempts < 2;
                let bad_tokens = !(1..=1000).contains(&tokens) || ratio != 0.1;
                let bad_codes = codes.is_empty() || codes.iter().any(|c| {
                    c.contains('u') || c.parse::<i64>().is_ok_and(|n| !(0..=16).contains(&n))
                });
                let bad_dur = |d: &str| parse_duration(d).map_or(true, |d| d.is_zero());
                prop_assert!(bad_attempts || bad_tokens || bad_codes || bad_dur(&init)
                    || bad_dur(&max) || mult != "2", "refused a valid config: {}", e);
            }
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = ServiceConfig::from_json(&text);
    }
}

/// A6: "`retryableStatusCodes` … may be specified in the integer form or the case-insensitive
/// string form (eg. [14], ["UNAVAILABLE"] or ["unavailable"])". Breaks if names are matched in
/// upper case only (as grpc-go and grpc-java match them) or numbers are refused.
#[test]
fn status_codes_in_integer_and_any_case_form() {
    let with = |codes: &str| {
        let json = format!(
            r#"{{"methodConfig": [{{"name": [{{}}], "retryPolicy": {{"maxAttempts": 2,
              "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 1,
              "retryableStatusCodes": {codes}}}}}]}}"#
        );
        match ServiceConfig::from_json(&json).unwrap().lookup("a.A", "m").unwrap().policy.clone() {
            Some(Policy::Retry(p)) => p.retryable,
            other => panic!("{other:?}"),
        }
    };
    let unavailable = CodeSet::of(&[Code::UNAVAILABLE]);
    for form in ["[14]", r#"["UNAVAILABLE"]"#, r#"["unavailable"]"#, r#"["Unavailable"]"#] {
        assert_eq!(with(form), unavailable, "{form}");
    }
    assert_eq!(with(r#"["deadline_exceeded", 14]"#), unavailable.with(Code::DEADLINE_EXCEEDED));
}
