//! The fleet kill switch through Redis on 127.0.0.1:6379: two "processes" — two `Control`s,
//! each following the key over its own Redis connections — switch retries off within a second.
//! (One test process with separate connections per follower; Redis cannot tell the difference.)
#![cfg(feature = "redis-control")]

mod common_client;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common_client::{Reqwest, get, reply, serve};
use seawall::budget::Unlimited;
use seawall::control::Control;
use seawall::policy::{GiveUpReason, PolicyConfig, RetryPolicy};
use seawall_tower::client::RetryLayer;
use seawall_tower::client::fleet::{self, FleetKey};
use tower::{Layer, ServiceExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_switch_turns_retries_off_across_processes() {
    let client = redis::Client::open("redis://127.0.0.1:6379").unwrap();
    let at = FleetKey::new(&format!("seawall:test:retries:{}", std::process::id()));
    let (a, b) = (Arc::new(Control::new()), Arc::new(Control::new()));
    let task_a = fleet::follow(client.clone(), at.clone(), a.clone()).await.unwrap();
    let task_b = fleet::follow(client.clone(), at.clone(), b.clone()).await.unwrap();

    let addr =
        serve(axum::Router::new().route("/", axum::routing::any(|| async { reply(503, &[]) })))
            .await;
    let policy = RetryPolicy::new(PolicyConfig::default(), Unlimited).with_control(b.clone());
    let layer = RetryLayer::from_policy(policy);
    let e = layer.layer(Reqwest::new()).oneshot(get(addr, "/")).await.unwrap_err();
    assert_eq!(e.attempts(), 3, "retries on before the switch");

    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let t0 = Instant::now();
    fleet::publish(&mut admin, &at, 0).await.unwrap();
    while (a.percent(), b.percent()) != (0, 0) {
        assert!(t0.elapsed() < Duration::from_secs(1), "not switched within a second");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let e = layer.layer(Reqwest::new()).oneshot(get(addr, "/")).await.unwrap_err();
    assert_eq!((e.attempts(), e.reason()), (1, GiveUpReason::RetriesDisabled));

    // A follower that starts later reads the current value at once; garbage is ignored.
    let c = Arc::new(Control::new());
    let task_c = fleet::follow(client.clone(), at.clone(), c.clone()).await.unwrap();
    assert_eq!(c.percent(), 0);
    redis::cmd("PUBLISH")
        .arg(&at.channel)
        .arg("lots")
        .query_async::<i64>(&mut admin)
        .await
        .unwrap();
    fleet::publish(&mut admin, &at, 25).await.unwrap();
    let t0 = Instant::now();
    while c.percent() != 25 {
        assert!(t0.elapsed() < Duration::from_secs(1));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    redis::cmd("DEL").arg(&at.key).query_async::<i64>(&mut admin).await.unwrap();
    for t in [task_a, task_b, task_c] {
        t.abort();
    }
}
