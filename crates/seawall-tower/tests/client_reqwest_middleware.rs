//! `RetryMiddleware` (feature `reqwest-middleware`) in a real reqwest 0.13 client built with
//! `reqwest_middleware::ClientBuilder`, against an axum server on 127.0.0.1: `Retry-After` is
//! honoured (virtual time), a POST is retried only with an `Idempotency-Key` (its body replayed
//! by `try_clone`; a streamed body sent once), a streamed response is handed over before its body
//! has been sent, stamped keys make a POST retryable, the budget stops retries, deadlines come
//! from the request, the serving task or the default, and a connect failure ends in a
//! `GaveUpError`.
//!
//! Paused-clock tests keep the connection pool off (`pool_max_idle_per_host(0)`) and set no
//! timeout, so no timer is pending while a request is on the wire: a paused runtime then only
//! jumps to the policy's own waits. Deadline tests run on a `ManualClock` instead (an attempt
//! timeout is a pending timer), which makes every `Request-Timeout-Ms` exact.
#![cfg(feature = "reqwest-middleware")]

mod common_client;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::Request;
use axum::routing::any;
use bytes::Bytes;
use common_client::{reply, serve};
use prometheus_client::registry::Registry;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use seawall::budget::{AnyBudget, GrpcThrottle};
use seawall::deadline::Deadline;
use seawall::policy::{GiveUpReason, PolicyConfig, RetryPolicy};
use seawall::time::{Clock, ManualClock};
use seawall_tower::client::middleware::{GaveUp, RetryMiddleware, gave_up};
use seawall_tower::client::{ClientMetrics, metrics_text};
use seawall_tower::propagate;
use seawall_tower::time::TokioClock;
use seawall_tower::wire::RequestDeadline;

/// What the server saw: when each request arrived (tokio time), its headers and body.
type Seen = Arc<Mutex<Vec<(tokio::time::Instant, http::HeaderMap, Bytes)>>>;

/// A server at `/` answering the `n`th request (1-based) with `answer(n)`.
async fn recording(
    answer: impl Fn(usize) -> axum::response::Response + Clone + Send + Sync + 'static,
) -> (std::net::SocketAddr, Seen) {
    let seen = Seen::default();
    let s = seen.clone();
    let router = axum::Router::new().route(
        "/",
        any(move |req: Request| {
            let (s, answer) = (s.clone(), answer.clone());
            async move {
                let (parts, body) = req.into_parts();
                let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                let n = {
                    let mut g = s.lock().unwrap();
                    g.push((tokio::time::Instant::now(), parts.headers, body));
                    g.len()
                };
                answer(n)
            }
        }),
    );
    (serve(router).await, seen)
}

fn reqwest_client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().pool_max_idle_per_host(0).build().unwrap()
}

/// The adoption lines of the module docs, on the given middleware.
fn client<Bu, C>(retry: RetryMiddleware<Bu, C>) -> ClientWithMiddleware
where
    Bu: seawall::budget::Budget + Send + Sync + 'static,
    C: Clock + Send + Sync + 'static,
{
    ClientBuilder::new(reqwest_client()).with(retry).build()
}

fn attempts(seen: &Seen) -> usize {
    seen.lock().unwrap().len()
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_and_the_retry_is_numbered() {
    let (addr, seen) = recording(|n| match n {
        1 => reply(503, &[("retry-after", "2".into())]),
        _ => reply(200, &[("x-attempt", n.to_string())]),
    })
    .await;
    let registry_metrics = Arc::new(ClientMetrics::new());
    let mut registry = Registry::default();
    registry_metrics.register(&mut registry);
    let client = client(
        RetryMiddleware::new().with_clock(TokioClock).with_metrics(registry_metrics.clone()),
    );

    let t0 = tokio::time::Instant::now();
    let resp = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-attempt"], "2");
    assert!(GaveUp::of(&resp).is_none(), "a success carries no give-up");

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(!seen[0].1.contains_key("request-attempt"), "a first attempt carries no number");
    assert_eq!(seen[1].1["request-attempt"], "2");
    // The server asked for 2 s; the policy adds up to +50 % jitter to a hint, never less.
    let waited = seen[1].0 - seen[0].0;
    assert!(waited >= Duration::from_secs(2), "retried after {waited:?}, before Retry-After");
    assert!(waited <= Duration::from_secs(3), "retried after {waited:?}");
    assert!(t0.elapsed() <= Duration::from_secs(3));

    let text = metrics_text(&registry);
    for line in [
        "seawall_client_call_started_total 1",
        "seawall_client_attempt_started_total{attempt=\"2\"} 1",
        "seawall_client_retries_total 1",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_post_is_retried_only_with_an_idempotency_key_and_its_body_is_replayed() {
    // Requests 1 and 2 (the unkeyed POST, the keyed one's first attempt) and 4 are refused.
    let (addr, seen) = recording(|n| match n {
        3 => reply(201, &[]),
        _ => reply(503, &[("retry-pushback-ms", "10".into())]),
    })
    .await;
    let client = client(RetryMiddleware::new().with_clock(TokioClock));
    let url = format!("http://{addr}/");

    // No key: one attempt; the 503 comes back as reqwest's `send` would return it, marked.
    let resp = client.post(&url).body("order-1").send().await.unwrap();
    assert_eq!(resp.status(), 503);
    let g = GaveUp::of(&resp).expect("a give-up record on the response");
    assert_eq!((g.reason(), g.attempts()), (GiveUpReason::NotIdempotent, 1));
    assert_eq!(attempts(&seen), 1, "a POST without a key is not resent");

    // With a key: retried, the same key and the same body on both attempts.
    let resp = client
        .post(&url)
        .header("idempotency-key", "k-42")
        .body(Bytes::from_static(b"order-2"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3, "the keyed POST was retried");
        for (_, h, body) in &seen[1..] {
            assert_eq!(h["idempotency-key"], "k-42");
            assert_eq!(body, "order-2", "the retry's body is the original's");
        }
        assert_eq!(seen[2].1["request-attempt"], "2");
    }

    // A streamed body cannot be cloned: sent once, even with a key (reqwest-retry would refuse
    // to send it at all).
    let stream = http_body_util::Full::new(Bytes::from_static(b"order-3"));
    let resp = client
        .post(&url)
        .header("idempotency-key", "k-43")
        .body(reqwest::Body::wrap(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503);
    let g = GaveUp::of(&resp).unwrap();
    assert_eq!((g.reason(), g.attempts()), (GiveUpReason::NotReplayable, 1));
    assert_eq!(attempts(&seen), 4);
    assert_eq!(seen.lock().unwrap()[3].2, "order-3");
}

#[tokio::test(start_paused = true)]
async fn stamped_keys_make_a_post_retryable_with_one_key_for_the_call() {
    let (addr, seen) = recording(|n| match n {
        1 => reply(503, &[("retry-pushback-ms", "10".into())]),
        _ => reply(201, &[]),
    })
    .await;
    let client = client(RetryMiddleware::new().with_clock(TokioClock).with_idempotency_keys(true));

    let resp = client.post(format!("http://{addr}/")).body("x").send().await.unwrap();
    assert_eq!(resp.status(), 201);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let key = seen[0].1["idempotency-key"].to_str().unwrap();
    assert_eq!(key.len(), 36, "a UUID: {key}");
    assert_eq!(seen[1].1["idempotency-key"], key, "the same key on the retry");
}

#[tokio::test(start_paused = true)]
async fn the_budget_stops_retries_and_says_overloaded() {
    let (addr, seen) = recording(|_| reply(503, &[("retry-pushback-ms", "10".into())])).await;
    // 4 tokens: retries are allowed while more than 2 are left; each failure takes one.
    let budget = AnyBudget::Grpc(GrpcThrottle::new(4, 0.1).unwrap());
    let policy = RetryPolicy::new(PolicyConfig::default(), budget);
    let client = client(RetryMiddleware::from_policy(policy).with_clock(TokioClock));
    let url = format!("http://{addr}/");

    let mut ends = Vec::new();
    for _ in 0..3 {
        let resp = client.get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 503);
        let g = *GaveUp::of(&resp).unwrap();
        ends.push((g.reason(), g.attempts(), g.is_overloaded()));
    }
    use GiveUpReason::BudgetExhausted as B;
    // 4 → 3 (retry) → 2: no more retries, then one attempt per call.
    assert_eq!(ends, [(B, 2, true), (B, 1, true), (B, 1, true)]);
    assert_eq!(attempts(&seen), 4);
}

#[tokio::test]
async fn a_streamed_response_is_handed_over_before_its_body_is_sent() {
    // The body's first chunk is sent at once; the rest only when the test releases it, after
    // `send()` has returned. A middleware that read the body before returning would wait for
    // the release until the bound below.
    let (release, addr) = held_stream_server();
    let client = client(RetryMiddleware::new());

    let mut resp = tokio::time::timeout(BOUND, client.get(format!("http://{addr}/")).send())
        .await
        .expect("send() returned only after the whole body: the response was buffered")
        .unwrap();
    assert_eq!(resp.status(), 200);
    // reqwest's own response, not one rebuilt from parts (which would lose the URL).
    assert_eq!(resp.url().as_str(), format!("http://{addr}/"));
    let first = tokio::time::timeout(BOUND, resp.chunk()).await.unwrap().unwrap().unwrap();
    assert_eq!(first, "first;");
    release.send(()).unwrap();
    let mut rest = Vec::new();
    while let Some(c) = tokio::time::timeout(BOUND, resp.chunk()).await.unwrap().unwrap() {
        rest.extend_from_slice(&c);
    }
    assert_eq!(rest, b"rest");
}

/// How long the streaming test waits for anything.
const BOUND: Duration = Duration::from_secs(10);

/// One connection on a loopback listener (a plain thread), answered with a chunked body whose
/// first chunk is sent at once and the rest once the returned sender is signalled (or after
/// [`BOUND`]).
fn held_stream_server() -> (std::sync::mpsc::Sender<()>, std::net::SocketAddr) {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_read_timeout(Some(BOUND)).unwrap();
        if !common_client::read_head(&mut sock) {
            return;
        }
        let first = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nfirst;\r\n";
        sock.write_all(first).unwrap();
        let _ = rx.recv_timeout(BOUND);
        let _ = sock.write_all(b"4\r\nrest\r\n0\r\n\r\n");
    });
    (tx, addr)
}

#[tokio::test]
async fn deadlines_come_from_the_request_then_the_serving_task_then_the_default() {
    let (addr, seen) = recording(|_| reply(200, &[])).await;
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(100));
    let client = client(
        RetryMiddleware::new()
            .with_clock(clock.clone())
            .with_default_timeout(Duration::from_millis(2_000)),
    );
    let url = format!("http://{addr}/");
    let in_ms = |ms| RequestDeadline::after(&clock, Duration::from_millis(ms));

    // The default.
    client.get(&url).send().await.unwrap();
    // The deadline of the request the task is serving.
    propagate::scope(in_ms(750), client.get(&url).send()).await.unwrap();
    // The request's own, over the serving task's.
    let own = client.get(&url).with_extension(in_ms(300)).send();
    propagate::scope(in_ms(750), own).await.unwrap();

    let seen = seen.lock().unwrap();
    let timeouts: Vec<_> = seen.iter().map(|(_, h, _)| h["request-timeout-ms"].clone()).collect();
    assert_eq!(timeouts, ["2000", "750", "300"]);
}

#[tokio::test]
async fn a_past_deadline_sends_nothing_and_says_why() {
    let (addr, seen) = recording(|_| reply(200, &[])).await;
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(100));
    let client = client(RetryMiddleware::new().with_clock(clock.clone()));
    let past = Deadline::at(clock.now() - Duration::from_secs(1));

    let err = client
        .get(format!("http://{addr}/"))
        .with_extension(RequestDeadline::on(&clock, past))
        .send()
        .await
        .unwrap_err();
    let g = gave_up(&err).unwrap_or_else(|| panic!("not a give-up: {err:?}"));
    assert_eq!((g.reason(), g.attempts()), (GiveUpReason::DeadlineTooClose, 0));
    assert_eq!(attempts(&seen), 0);
}

#[tokio::test]
async fn a_refused_connection_is_retried_even_for_a_post_and_ends_in_a_give_up() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let client = client(RetryMiddleware::new());

    let err = client.post(format!("http://{addr}/")).body("x").send().await.unwrap_err();
    let g = gave_up(&err).unwrap_or_else(|| panic!("not a give-up: {err:?}"));
    // The server never saw the POST: all three attempts were sent.
    assert_eq!((g.reason(), g.attempts()), (GiveUpReason::AttemptsExhausted, 3), "{g}");
    let source = std::error::Error::source(g).expect("the transport error");
    let inner = source.downcast_ref::<reqwest_middleware::Error>().expect("reqwest's error");
    assert!(inner.is_connect(), "{inner:?}");
    assert!(err.to_string().contains("gave up after 3 attempt(s)"), "{err}");
}
