//! The operator's admission knob on `ShedLayer`: a cut turns the given share of requests away at
//! the door (503 + `Retry-After`, reason `admission_cut`) before the handler sees them, and the
//! admin endpoint drives it as `seawall escape` does.
#![cfg(feature = "server")]

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::{Request, Response, StatusCode};
use seawall::control::Control;
use seawall_tower::admin::{AdminAuth, AdminToken};
use seawall_tower::server::{RejectReason, ServerMetrics, ShedLayer, admission_response};
use tower::{Layer, Service, ServiceExt, service_fn};

type Body = String;

async fn run(knob: &Arc<Control>, n: u64) -> (u64, u64, ServerMetrics) {
    let handled = Arc::new(AtomicU64::new(0));
    let h = handled.clone();
    let metrics = ServerMetrics::new();
    let layer = ShedLayer::new(NonZeroUsize::new(1024).unwrap())
        .with_seed(7)
        .with_admission(knob.clone())
        .with_metrics(metrics.clone());
    let mut svc = layer.layer(service_fn(move |_req: Request<Body>| {
        h.fetch_add(1, Ordering::Relaxed);
        async { Ok::<_, std::convert::Infallible>(Response::new(Body::new())) }
    }));
    let mut rejected = 0;
    for _ in 0..n {
        let resp = svc.ready().await.unwrap().call(Request::new(Body::new())).await.unwrap();
        if resp.status() == StatusCode::SERVICE_UNAVAILABLE {
            assert!(resp.headers().contains_key(http::header::RETRY_AFTER));
            // A problem body a client can act on, with its stable type URI.
            assert_eq!(resp.headers()[http::header::CONTENT_TYPE], "application/problem+json");
            assert!(resp.body().contains("problem/index.html#overloaded"), "{}", resp.body());
            rejected += 1;
        }
    }
    (handled.load(Ordering::Relaxed), rejected, metrics)
}

#[tokio::test]
async fn a_cut_turns_away_its_share_before_the_handler() {
    let knob = Arc::new(Control::new());
    let (handled, rejected, _) = run(&knob, 1000).await;
    assert_eq!((handled, rejected), (1000, 0), "100 %: the knob costs nothing");

    knob.set_percent(25).unwrap();
    let (handled, rejected, metrics) = run(&knob, 4000).await;
    assert_eq!(handled + rejected, 4000);
    assert!((800..1200).contains(&handled), "about 25 % admitted, got {handled}");
    assert_eq!(metrics.snapshot().rejected(RejectReason::AdmissionCut), rejected);

    knob.disable();
    let (handled, _, _) = run(&knob, 200).await;
    assert_eq!(handled, 0, "0 %: nothing gets in");
}

#[test]
fn the_admin_endpoint_drives_the_knob() {
    const TOKEN: &str = "admission-test-token-0123";
    let auth = AdminAuth::Bearer(AdminToken::new(TOKEN).unwrap());
    let knob = Control::new();
    let call = |method: &str, uri: &str| {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(())
            .unwrap();
        let r = admission_response(&knob, &auth, &req);
        (r.status().as_u16(), r.into_body())
    };
    assert_eq!(call("GET", "/"), (200, r#"{"admit_percent":100}"#.to_string()));
    assert_eq!(call("POST", "/?percent=30"), (200, r#"{"admit_percent":30}"#.to_string()));
    assert_eq!(call("POST", "/?action=ramp"), (200, r#"{"admit_percent":50}"#.to_string()));
    assert_eq!(call("POST", "/?percent=250").0, 400);
    assert_eq!(knob.percent(), 50);
}
