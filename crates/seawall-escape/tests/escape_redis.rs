//! `escape --apply` against Redis on 127.0.0.1:6379 (a unique key per test) and a metrics
//! server on 127.0.0.1 whose service follows the real fleet switch (`fleet::follow`): it is in a
//! storm until retries are switched off, healthy while retries stay at or below `tolerates` %,
//! and in a storm again above it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use seawall::control::Control;
use seawall_escape::{self as escape, EscapeConfig, Fleet, Outcome};
use seawall_tower::client::fleet::{self, FleetKey};

const REDIS: &str = "redis://127.0.0.1:6379";

fn unique_key(name: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    format!("seawall:test:escape:{name}:{}:{}", std::process::id(), nanos.as_nanos())
}

/// Totals of the edge's page: served, goodput; whether retries were ever switched off.
#[derive(Default)]
struct State {
    served: u64,
    goodput: u64,
    escaped: bool,
}

fn page(state: &Mutex<State>, control: &Control, tolerates: u8) -> String {
    let mut s = state.lock().unwrap();
    let p = control.percent();
    s.escaped |= p == 0;
    let healthy = s.escaped && p <= tolerates;
    s.served += 100;
    s.goodput += if healthy { 100 } else { 5 };
    format!(
        "seawall_server_throughput_total {}\nseawall_server_goodput_total {}\n\
         seawall_server_oldest_queued_seconds {}\n",
        s.served,
        s.goodput,
        if healthy { 0.0 } else { 4.0 }
    )
}

/// Starts the follower and the metrics server on a thread of their own; returns the URL.
fn serve(key: &str, tolerates: u8) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    let key = key.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let control = Arc::new(Control::new());
            let client = redis::Client::open(REDIS).unwrap();
            let _follow =
                fleet::follow(client, FleetKey::new(&key), control.clone()).await.unwrap();
            let state = Arc::new(Mutex::new(State::default()));
            let app = Router::new().route(
                "/metrics",
                get(move || {
                    let (state, control) = (state.clone(), control.clone());
                    async move { page(&state, &control, tolerates) }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}/metrics", rx.recv_timeout(Duration::from_secs(10)).unwrap())
}

fn config(key: &str, url: String) -> EscapeConfig {
    EscapeConfig {
        redis: Some(REDIS.into()),
        key: key.into(),
        scrape: vec![url],
        interval: Duration::from_millis(50),
        hold: Duration::from_millis(300),
        max_wait: Duration::from_secs(5),
        apply: true,
        ..EscapeConfig::default()
    }
}

#[test]
#[ignore = "needs Redis on 127.0.0.1:6379"]
fn apply_switches_retries_off_then_ramps_to_100_as_goodput_holds() {
    seawall_testkit::require_service("Redis", "127.0.0.1:6379".parse().unwrap());
    let key = unique_key("ok");
    let cfg = config(&key, serve(&key, 100));
    let mut lines = Vec::new();
    let out = escape::run(&cfg, &mut |l| lines.push(l.to_string())).unwrap();
    let text = lines.join("\n");
    assert_eq!(out, Outcome::Completed, "{text}");
    assert!(text.contains("step 1: retries → 0 % fleet-wide"), "{text}");
    assert!(text.contains("done (was unset)"), "{text}");
    assert!(text.contains("now: goodput 5 % of served"), "the storm is seen first: {text}");
    for (step, p) in [(5, 10), (6, 25), (7, 50), (8, 100)] {
        assert!(text.contains(&format!("step {step}: retries → {p} %")), "{text}");
    }
    assert!(text.contains("MANUAL (no --admission-url): admission → 30 %"), "{text}");
    assert_eq!(Fleet::connect(REDIS, &key).unwrap().get().unwrap(), Some(100));
}

#[test]
#[ignore = "needs Redis on 127.0.0.1:6379"]
fn a_regression_steps_the_ramp_back_and_stops() {
    seawall_testkit::require_service("Redis", "127.0.0.1:6379".parse().unwrap());
    let key = unique_key("regress");
    let cfg = config(&key, serve(&key, 10));
    let mut lines = Vec::new();
    let out = escape::run(&cfg, &mut |l| lines.push(l.to_string())).unwrap();
    let text = lines.join("\n");
    assert!(matches!(out, Outcome::Stopped { retry_percent: 10, .. }), "{out:?}\n{text}");
    assert!(text.contains("step 6: regression at 25 %"), "{text}");
    assert!(!text.contains("retries → 50 %"), "{text}");
    assert_eq!(Fleet::connect(REDIS, &key).unwrap().get().unwrap(), Some(10));
}

#[test]
fn unreachable_redis_is_an_error_before_anything_changes() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = EscapeConfig {
        redis: Some(format!("redis://127.0.0.1:{port}")),
        apply: true,
        ..EscapeConfig::default()
    };
    let mut lines = Vec::new();
    let e = escape::run(&cfg, &mut |l| lines.push(l.to_string())).unwrap_err();
    assert!(matches!(e, escape::EscapeError::Redis(_)), "{e}");
    assert!(lines.is_empty(), "{lines:?}");
}
