//! The Istio, Envoy, gRPC and AWS examples from those projects' documentation parse and give the
//! multipliers their documentation implies (see `testdata/README.md`).

use std::path::{Path, PathBuf};

use seawall_audit::import::{self, Format, Select};
use seawall_audit::model::{Budget, RetryLayer};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)
}

fn load(format: Format, file: &str, select: Select) -> Vec<RetryLayer> {
    import::load(format, &data(file), &select).unwrap_or_else(|e| panic!("{e}"))
}

fn named(name: &str) -> Select {
    Select { name: Some(name.into()), ..Select::default() }
}

#[test]
fn istio_reference_example_is_four_attempts() {
    let l = &load(Format::Istio, "istio-retries.yaml", named("ratings-route"))[0];
    assert_eq!(l.attempts, 4, "attempts: 3 means 3 retries after the first try");
    assert_eq!(l.per_try_timeout, Some(std::time::Duration::from_secs(2)));
    assert!(!l.implicit);
    assert!(l.source.ends_with("istio-retries.yaml:19"), "{}", l.source);
}

#[test]
fn istio_route_without_retries_gets_the_mesh_default() {
    let l = &load(Format::Istio, "istio-retries.yaml", named("reviews"))[0];
    assert_eq!((l.attempts, l.implicit), (3, true), "Istio retries twice by default");
    assert_eq!(l.timeout, Some(std::time::Duration::from_millis(500)));
}

#[test]
fn istio_attempts_zero_disables() {
    let l = &load(Format::Istio, "istio-retries.yaml", named("orders"))[0];
    assert_eq!(l.attempts, 1);
    let worst = &load(Format::Istio, "istio-retries.yaml", Select::default())[0];
    assert_eq!(worst.attempts, 4, "unselected: the worst route in the stream");
}

#[test]
fn envoy_route_policy_and_retry_budget() {
    let route = |r: &str| Select { route: Some(r.into()), ..Select::default() };
    let api = &load(Format::Envoy, "envoy-retry-policy.yaml", route("api"))[0];
    assert_eq!(api.attempts, 4);
    assert_eq!(api.budget, Some(Budget::Envoy { percent: 20.0, min_concurrency: 3 }));
    assert!((api.bounded() - 1.2).abs() < 1e-9);
    let st = &load(Format::Envoy, "envoy-retry-policy.yaml", route("static"))[0];
    assert_eq!((st.attempts, st.implicit, st.budget), (2, true, None), "num_retries defaults to 1");
    assert_eq!(st.timeout, Some(std::time::Duration::from_secs(15)), "route timeout default");
}

#[test]
fn grpc_documented_policy_with_throttling() {
    let echo = Select {
        service: Some("grpc.examples.echo.Echo".into()),
        method: Some("UnaryEcho".into()),
        ..Select::default()
    };
    let layers = load(Format::Grpc, "grpc-service-config.json", echo);
    assert_eq!(layers[0].attempts, 4);
    assert!((layers[0].bounded() - 1.1).abs() < 1e-9, "1 + tokenRatio");
    assert!(
        layers[1].implicit && layers[1].attempts == 1,
        "transparent retries listed, not counted"
    );
    let stream = Select {
        service: Some("grpc.examples.echo.Echo".into()),
        method: Some("BidirectionalStreamingEcho".into()),
        ..Select::default()
    };
    assert_eq!(
        load(Format::Grpc, "grpc-service-config.json", stream)[0].attempts,
        1,
        "the exact method wins"
    );
    assert_eq!(load(Format::Grpc, "grpc-go-retry-example.json", Select::default())[0].attempts, 4);
}

#[test]
fn aws_modes_and_defaults() {
    let profile = |p: &str| Select { profile: Some(p.into()), ..Select::default() };
    let d = &load(Format::Aws, "aws-config", Select::default())[0];
    assert_eq!((d.attempts, d.implicit, d.budget), (3, true, Some(Budget::AwsQuota)));
    assert_eq!(load(Format::Aws, "aws-config", profile("batch"))[0].attempts, 5);
    let old = &load(Format::Aws, "aws-config", profile("old"))[0];
    assert_eq!((old.attempts, old.budget), (3, None));
}

#[test]
fn worked_examples_audit_as_documented() {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let storm = seawall_audit::audit_file(&ex.join("checkout.toml")).unwrap();
    let db =
        storm.paths.iter().find(|p| p.path.last().map(String::as_str) == Some("database")).unwrap();
    assert_eq!(db.worst_case_attempts, 27);
    assert_eq!(db.survives_cold, Some(false));
    assert_eq!(storm.worst_severity(), Some(seawall_audit::Severity::Error));
    let fixed = seawall_audit::audit_file(&ex.join("checkout-fixed.toml")).unwrap();
    let db =
        fixed.paths.iter().find(|p| p.path.last().map(String::as_str) == Some("database")).unwrap();
    assert_eq!(
        (db.worst_case_attempts, db.bounded_attempts, db.bounded_peak_rps),
        (3, Some(1.1), Some(2200.0))
    );
    assert_eq!(db.survives_cold, Some(true));
    assert!(fixed.findings.is_empty(), "{:#?}", fixed.findings);
}
