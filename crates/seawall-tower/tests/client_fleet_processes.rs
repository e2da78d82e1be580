//! The fleet kill switch across two real OS processes: switching retries off through
//! Redis on 127.0.0.1:6379 from one process takes effect in another within a second, and
//! switching them back on does too.
//!
//! How it runs: the parent test [`kill_switch_reaches_another_process_within_a_second`]
//! re-executes this same test binary (`std::env::current_exe()`) with
//! `--exact fleet_child --nocapture --ignored` and `SEAWALL_FLEET_CHILD=<key>` in its
//! environment. [`fleet_child`] is `#[ignore]`d and returns at once without that variable, so
//! it never does anything in a normal `cargo test`. In the child: a `Control` followed with
//! `fleet::follow` on the key, a real `RetryLayer` (3 attempts, 2–10 ms backoff, unlimited
//! budget and no breaker, so the fleet switch is the only thing that can stop retries) around
//! reqwest, and an axum server on 127.0.0.1:0 that always answers 503. It prints `ready` once
//! `follow` has subscribed, then makes one call every ~20 ms (at most 15 s / 750 calls) and
//! prints `attempts=<n> reason=<GiveUpReason> t_ms=<ms since child start>` for each.
//!
//! The parent sees retries (3 attempts), calls `fleet::publish(.., 0)` over its own Redis
//! connection, and waits for the first `attempts=1` line; the delay is measured on the parent's
//! clock from just before the publish to when the parent's reader thread read that line, an
//! upper bound on the child's switching time (the clocks of the two processes are not compared).
//! Then `publish(.., 100)` must bring retries back within a second. The child is killed when the
//! parent ends, passing or panicking (a guard's `Drop`), and the key is deleted.
#![cfg(feature = "redis-control")]

mod common_client;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common_client::{Reqwest, get, reply, serve};
use seawall::backoff::{Backoff, Jitter};
use seawall::budget::Unlimited;
use seawall::control::Control;
use seawall::policy::{PolicyConfig, RetryPolicy};
use seawall_tower::client::RetryLayer;
use seawall_tower::client::fleet::{self, FleetKey};
use tokio::sync::mpsc;
use tower::{Layer, ServiceExt};

const REDIS: &str = "redis://127.0.0.1:6379";
const CHILD_ENV: &str = "SEAWALL_FLEET_CHILD";
const CHILD_TEST: &str = "fleet_child";

/// The child process: follows the key and reports the attempts of one failing call every ~20 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "child process of kill_switch_reaches_another_process_within_a_second"]
async fn fleet_child() {
    let Ok(key) = std::env::var(CHILD_ENV) else { return };
    let start = Instant::now();
    let client = redis::Client::open(REDIS).unwrap();
    let control = Arc::new(Control::new());
    let _follow = fleet::follow(client, FleetKey::new(&key), control.clone()).await.unwrap();

    let addr =
        serve(axum::Router::new().route("/", axum::routing::any(|| async { reply(503, &[]) })))
            .await;
    let backoff =
        Backoff::new(Jitter::Full, Duration::from_millis(2), Duration::from_millis(10), 2.0);
    let cfg = PolicyConfig::default().with_backoff(backoff.unwrap()).with_max_attempts(3).unwrap();
    let policy = RetryPolicy::new(cfg, Unlimited).with_control(control);
    let layer = RetryLayer::from_policy(policy);
    let http = Reqwest::new();

    let mut out = std::io::stdout();
    // A write error means the parent has gone: stop.
    if writeln!(out, "ready").and_then(|()| out.flush()).is_err() {
        return;
    }
    for _ in 0..750 {
        if start.elapsed() > Duration::from_secs(15) {
            break;
        }
        let call = layer.layer(http.clone()).oneshot(get(addr, "/"));
        let e = match tokio::time::timeout(Duration::from_secs(2), call).await {
            Ok(Err(e)) => e,
            Ok(Ok(r)) => panic!("a server that always answers 503 answered {}", r.status()),
            Err(_) => panic!("a call to the loopback server took over 2 s"),
        };
        let line = format!(
            "attempts={} reason={:?} t_ms={}",
            e.attempts(),
            e.reason(),
            start.elapsed().as_millis()
        );
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Kills the child when the parent test ends, whether it passes or panics; on a panic it also
/// deletes the key (best effort, 1 s timeout), which a passing test deletes itself.
#[derive(Debug)]
struct ChildGuard {
    child: Child,
    redis: redis::Client,
    key: String,
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking()
            && let Ok(mut conn) = self.redis.get_connection_with_timeout(Duration::from_secs(1))
        {
            let _ = redis::cmd("DEL").arg(&self.key).query::<i64>(&mut conn);
        }
    }
}

/// One line of the child's stdout and when the parent read it.
#[derive(Debug)]
struct Line {
    text: String,
    read_at: Instant,
}

impl Line {
    /// The `attempts=<n>` of a call line; `None` for anything else (libtest's own lines).
    fn attempts(&self) -> Option<u32> {
        self.text.strip_prefix("attempts=")?.split(' ').next()?.parse().ok()
    }
}

/// The next line within `until`, or a panic naming what was awaited.
async fn next_line(rx: &mut mpsc::UnboundedReceiver<Line>, until: Instant, what: &str) -> Line {
    let left = until.saturating_duration_since(Instant::now());
    match tokio::time::timeout(left, rx.recv()).await {
        Ok(Some(line)) => line,
        Ok(None) => panic!("child process ended (stdout closed) while waiting for {what}"),
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// The first call line with `attempts` matching `want`, read within `within` of `since`; call
/// lines that do not match are skipped (calls in flight at the switch).
async fn first_call(
    rx: &mut mpsc::UnboundedReceiver<Line>,
    since: Instant,
    within: Duration,
    what: &str,
    want: impl Fn(u32) -> bool,
) -> Line {
    loop {
        let line = next_line(rx, since + within, what).await;
        if line.attempts().is_some_and(&want) {
            return line;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_switch_reaches_another_process_within_a_second() {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let name = format!("seawall:test:fleet-processes:{}:{}", std::process::id(), stamp.as_nanos());
    let at = FleetKey::new(&name);
    let client = redis::Client::open(REDIS).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    fleet::publish(&mut admin, &at, 100).await.unwrap();

    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD_TEST, "--nocapture", "--ignored"])
        .env(CHILD_ENV, &name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = ChildGuard { child, redis: client.clone(), key: at.key.clone() };
    let stdout = child.child.stdout.take().unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Reads on its own thread so each line is stamped when it arrives; ends when the child does.
    std::thread::spawn(move || {
        for text in BufReader::new(stdout).lines() {
            let Ok(text) = text else { break };
            if tx.send(Line { text, read_at: Instant::now() }).is_err() {
                break;
            }
        }
    });

    let started = Instant::now();
    while next_line(&mut rx, started + Duration::from_secs(20), "`ready`").await.text != "ready" {}

    // Retries on: a few calls in a row make 3 attempts.
    let on = Instant::now();
    for _ in 0..3 {
        let line = next_line(&mut rx, on + Duration::from_secs(5), "calls with retries").await;
        let attempts = line.attempts();
        assert_eq!(attempts, Some(3), "retries on before the switch: {:?}", line.text);
    }

    // Off from this process; the child must stop retrying within a second.
    let t0 = Instant::now();
    fleet::publish(&mut admin, &at, 0).await.unwrap();
    let published = t0.elapsed();
    let what = "a call without retries after publish(0)";
    let off = first_call(&mut rx, t0, Duration::from_secs(1), what, |n| n == 1).await;
    assert!(off.read_at >= t0, "retries stopped before the switch: {:?}", off.text);
    let delay_off = off.read_at - t0;
    eprintln!(
        "switch off: publish took {published:?}; first 1-attempt call read {delay_off:?} after \
         the publish began ({:?})",
        off.text
    );
    assert!(delay_off <= Duration::from_secs(1), "switched off after {delay_off:?}");
    assert!(off.text.contains("reason=RetriesDisabled"), "{:?}", off.text);
    // And it stays off.
    for _ in 0..5 {
        let line = next_line(&mut rx, Instant::now() + Duration::from_secs(5), "calls").await;
        assert_eq!(line.attempts(), Some(1), "retries stay off: {:?}", line.text);
    }

    // Back on from this process; retries return within a second.
    let t1 = Instant::now();
    fleet::publish(&mut admin, &at, 100).await.unwrap();
    let what = "a call with retries after publish(100)";
    let back = first_call(&mut rx, t1, Duration::from_secs(1), what, |n| n > 1).await;
    let delay_on = back.read_at - t1;
    eprintln!(
        "switch on: first retrying call read {delay_on:?} after the publish ({:?})",
        back.text
    );
    assert!(delay_on <= Duration::from_secs(1), "switched back on after {delay_on:?}");

    drop(child);
    redis::cmd("DEL").arg(&at.key).query_async::<i64>(&mut admin).await.unwrap();
}
