//! `GrpcRetryLayer` against a real tonic server on 127.0.0.1: gRFC A6 retries, throttle
//! accounting, pushback and hedging, end to end over HTTP/2.
//!
//! Waits are asserted on the layer's own decisions (its [`GrpcEvent`]s, drawn from a seeded
//! stream and recomputed here with the core's formula), not on wall-clock spreads; the
//! wall clock only gives lower bounds (a pushback's wait really happened).

mod common_grpc;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common_grpc::{Raw, Server, reply, with_pushback};
use seawall::grpc::{Policy, StopReason};
use seawall::rng::SeedSource;
use seawall_grpc::{GrpcEvent, GrpcRetryLayer};
use seawall_tower::time::TokioClock;
use seawall_tower::wire::RequestDeadline;
use tonic::Code;
use tower::ServiceBuilder;

const SEED: u64 = 19;

fn config(policy: &str) -> String {
    format!(
        r#"{{"methodConfig": [{{"name": [{{"service": "demo.Echo"}}], {policy}}},
             {{"name": [{{"service": "demo.Echo", "method": "Once"}}]}}],
            "retryThrottling": {{"maxTokens": 10, "tokenRatio": 0.1}}}}"#
    )
}

const RETRY: &str = r#""retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.02s",
    "maxBackoff": "2s", "backoffMultiplier": 10, "retryableStatusCodes": ["UNAVAILABLE"]}"#;

/// The layer on a channel to `server`, recording its events.
fn client(
    server: &Server,
    layer: GrpcRetryLayer,
) -> (
    tonic::client::Grpc<seawall_grpc::GrpcRetry<tonic::transport::Channel>>,
    Arc<Mutex<Vec<GrpcEvent>>>,
) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    let layer = layer.with_seed(SEED).with_observer(move |e| log.lock().unwrap().push(*e));
    let svc = ServiceBuilder::new().layer(layer).service(server.channel());
    (tonic::client::Grpc::new(svc), events)
}

async fn call(
    client: &mut tonic::client::Grpc<seawall_grpc::GrpcRetry<tonic::transport::Channel>>,
    method: &'static str,
) -> Result<Vec<u8>, tonic::Status> {
    client.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static(method);
    let reply = client.unary(tonic::Request::new(b"hello".to_vec()), path, Raw).await?;
    Ok(reply.into_inner())
}

/// The claim: `UNAVAILABLE` is retried by the method's policy, with no idempotency
/// key, `grpc-previous-rpc-attempts` on every retry and `grpc-timeout` from the deadline the
/// task inherited. Breaks if the layer asks for an idempotency key (or HTTP rules), drops the
/// attempt header, or ignores `propagate::current()`.
#[tokio::test]
async fn unavailable_is_retried_by_policy() {
    let server = Server::start(|s| {
        reply(match s.previous {
            None | Some(1) => Err(tonic::Status::unavailable("warming up")),
            _ => Ok(s.message.clone()),
        })
    })
    .await;
    let layer = GrpcRetryLayer::from_json(&config(RETRY)).unwrap();
    let throttle = layer.throttle().unwrap().clone();
    let (mut c, _) = client(&server, layer);
    let deadline = RequestDeadline::after(&TokioClock, Duration::from_secs(5));
    let got = seawall_tower::propagate::scope(deadline, call(&mut c, "/demo.Echo/Say")).await;
    assert_eq!(got.unwrap(), b"hello");
    assert_eq!(server.previous(), [None, Some(1), Some(2)]);
    let seen = server.seen.lock().unwrap().clone();
    for s in &seen {
        let t = s.timeout.as_deref().expect("grpc-timeout on every attempt");
        let left = seawall::deadline::parse_grpc_timeout(t).unwrap();
        assert!(left <= Duration::from_secs(5) && left > Duration::from_secs(1), "{t}");
    }
    // Two retryable failures (−1 each), then a success (+0.1), settled from its trailers.
    assert_eq!(throttle.tokens(), 8.1);

    // Control: the method whose entry has no policy is sent once.
    let got = call(&mut c, "/demo.Echo/Once").await;
    assert_eq!(got.unwrap_err().code(), Code::Unavailable);
    assert_eq!(server.previous().len(), 4);
    assert_eq!(throttle.tokens(), 8.1, "a method without a policy: failures cost nothing");
}

/// The layer runs on tokio's clock; a deadline the task inherited from a server on another
/// clock (a manual one at 0 here) goes out as its time left. Mutation checked: reading the
/// inherited instant on tokio's clock whatever its epoch (`RequestDeadline::for_clock`
/// without the epoch check) sees "0 + 5 s" as long past, and the call fails with
/// `DEADLINE_EXCEEDED` ("the call's deadline passed").
#[tokio::test]
async fn a_deadline_from_another_clock_is_sent_as_its_time_left() {
    let server = Server::start(|s| reply(Ok(s.message.clone()))).await;
    let (mut c, _) = client(&server, GrpcRetryLayer::from_json(&config(RETRY)).unwrap());
    let deadline =
        RequestDeadline::after(&seawall::time::ManualClock::new(), Duration::from_secs(5));
    let got = seawall_tower::propagate::scope(deadline, call(&mut c, "/demo.Echo/Say")).await;
    assert_eq!(got.unwrap(), b"hello");
    let seen = server.seen.lock().unwrap().clone();
    let t = seen[0].timeout.as_deref().expect("grpc-timeout");
    let left = seawall::deadline::parse_grpc_timeout(t).unwrap();
    assert!(left <= Duration::from_secs(5) && left > Duration::from_secs(4), "{t}");
}

/// A non-retryable code is returned after one attempt and leaves the tokens as they were; a
/// "don't retry" pushback costs a token even on such a code. Breaks if non-retryable failures
/// are charged (or retried), or if a negative pushback is free.
#[tokio::test]
async fn non_retryable_not_retried_and_tokens_unchanged() {
    let server = Server::start(|s| {
        reply(Err(match s.message.as_slice() {
            b"hello" => tonic::Status::invalid_argument("bad request"),
            _ => with_pushback(tonic::Code::InvalidArgument, "-1"),
        }))
    })
    .await;
    let layer = GrpcRetryLayer::from_json(&config(RETRY)).unwrap();
    let throttle = layer.throttle().unwrap().clone();
    let (mut c, events) = client(&server, layer);
    for _ in 0..3 {
        let got = call(&mut c, "/demo.Echo/Say").await;
        assert_eq!(got.unwrap_err().code(), Code::InvalidArgument);
    }
    assert_eq!(server.previous(), [None, None, None], "one attempt each");
    assert_eq!(throttle.tokens(), 10.0, "non-retryable codes leave the tokens unchanged");
    let stops = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| **e == GrpcEvent::Stopped { reason: StopReason::NotRetryable })
        .count();
    assert_eq!(stops, 3);

    c.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/demo.Echo/Say");
    let got = c.unary(tonic::Request::new(b"push".to_vec()), path, Raw).await;
    assert_eq!(got.unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(throttle.tokens(), 9.0, "a don't-retry pushback costs one token");
}

/// A valid pushback replaces the backoff with exactly its value and restarts the exponential
/// sequence: with initialBackoff 20 ms and multiplier 10, the retry after the pushback draws
/// from [16, 24 ms) again, not [160, 240 ms). Breaks if the reset is dropped (the third wait is
/// drawn from [160, 240 ms)), or if pushback is jittered or ignored.
#[tokio::test]
async fn pushback_replaces_and_resets_the_backoff() {
    let server = Server::start(|s| {
        reply(match s.previous {
            None | Some(2) => Err(tonic::Status::unavailable("busy")),
            Some(1) => Err(with_pushback(tonic::Code::Unavailable, "30")),
            _ => Ok(s.message.clone()),
        })
    })
    .await;
    let layer = GrpcRetryLayer::from_json(&config(RETRY)).unwrap();
    let Some(Policy::Retry(policy)) =
        layer.config().lookup("demo.Echo", "Say").unwrap().policy.clone()
    else {
        panic!("retry policy")
    };
    let (mut c, events) = client(&server, layer);
    assert_eq!(call(&mut c, "/demo.Echo/Say").await.unwrap(), b"hello");
    assert_eq!(server.previous(), [None, Some(1), Some(2), Some(3)]);

    // The layer's first call draws from the first stream of SeedSource::new(SEED); the pushback
    // wait draws nothing.
    let mut rng = SeedSource::new(SEED).stream();
    let backoff = policy.backoff();
    let first = backoff.delay(1, false, Duration::ZERO, &mut rng);
    let after_reset = backoff.delay(1, false, Duration::ZERO, &mut rng);
    assert_eq!(
        backoffs_in(&events.lock().unwrap()),
        [first, Duration::from_millis(30), after_reset]
    );
    assert!(after_reset < Duration::from_millis(24));
    let seen = server.seen.lock().unwrap().clone();
    assert!(seen[2].at - seen[1].at >= Duration::from_millis(30), "the pushback wait happened");
}

/// Hedging: a second copy after 50 ms; the first copy hangs, the second answers at once. The second
/// wins, the first is cancelled (the server sees its handler dropped), and both copies carried
/// their attempt numbers. Breaks if losers are not cancelled (the slow handler runs to its
/// end), if hedges are not sent, or if the first answer is not the one returned.
#[tokio::test]
async fn hedging_first_success_wins_and_losers_are_cancelled() {
    let dropped = Arc::new(tokio::sync::Notify::new());
    let flag = dropped.clone();
    let server = Server::start(move |s| {
        let s = s.clone();
        let flag = flag.clone();
        Box::pin(async move {
            if s.previous.is_none() {
                // Notifies when dropped: tonic drops the handler when the client resets the stream.
                struct Guard(Arc<tokio::sync::Notify>);
                impl Drop for Guard {
                    fn drop(&mut self) {
                        self.0.notify_one();
                    }
                }
                let _guard = Guard(flag);
                tokio::time::sleep(Duration::from_secs(10)).await;
                return Ok(b"slow".to_vec());
            }
            Ok(format!("copy {}", s.previous.unwrap()).into_bytes())
        })
    })
    .await;
    // maxAttempts 2: however slow the machine, exactly two copies can go out.
    let hedging = r#""hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.05s",
        "nonFatalStatusCodes": ["UNAVAILABLE"]}"#;
    let layer = GrpcRetryLayer::from_json(&config(hedging)).unwrap();
    let (mut c, events) = client(&server, layer);
    let started = std::time::Instant::now();
    assert_eq!(call(&mut c, "/demo.Echo/Say").await.unwrap(), b"copy 1");
    assert!(started.elapsed() < Duration::from_secs(5), "did not wait for the slow copy");
    tokio::time::timeout(Duration::from_secs(5), dropped.notified())
        .await
        .expect("the losing copy was cancelled on the server");
    assert_eq!(server.previous(), [None, Some(1)], "two copies");
    let events = events.lock().unwrap().clone();
    assert!(events.contains(&GrpcEvent::Cancelled { copies: 1 }), "{events:?}");
}

/// A non-fatal failure sends the next copy at once, without waiting for `hedgingDelay`; a
/// fatal one ends the call. Breaks if the shortcut is dropped (the 10 s delay would run into
/// the test's bound) or fatal codes keep hedging.
#[tokio::test]
async fn hedging_non_fatal_shortcuts_and_fatal_ends() {
    let server = Server::start(|s| {
        reply(match s.previous {
            None => Err(tonic::Status::unavailable("no")),
            Some(1) => Err(tonic::Status::internal("fatal")),
            _ => Ok(b"never".to_vec()),
        })
    })
    .await;
    let hedging = r#""hedgingPolicy": {"maxAttempts": 5, "hedgingDelay": "10s",
        "nonFatalStatusCodes": ["UNAVAILABLE"]}"#;
    let layer = GrpcRetryLayer::from_json(&config(hedging)).unwrap();
    let throttle = layer.throttle().unwrap().clone();
    let (mut c, _) = client(&server, layer);
    let got = tokio::time::timeout(Duration::from_secs(5), call(&mut c, "/demo.Echo/Say")).await;
    assert_eq!(got.expect("no hedgingDelay wait").unwrap_err().code(), Code::Internal);
    assert_eq!(server.previous(), [None, Some(1)]);
    assert_eq!(throttle.tokens(), 9.0, "the non-fatal failure cost a token, the fatal one none");
}

/// A request over the buffer limit is sent once, as A6 says, rather than refused.
#[tokio::test]
async fn over_the_buffer_limit_is_sent_once() {
    let server = Server::start(|_| reply(Err(tonic::Status::unavailable("no")))).await;
    let layer = GrpcRetryLayer::from_json(&config(RETRY)).unwrap().with_buffer_limit(2);
    let (mut c, events) = client(&server, layer);
    assert_eq!(call(&mut c, "/demo.Echo/Say").await.unwrap_err().code(), Code::Unavailable);
    assert_eq!(server.previous(), [None]);
    assert_eq!(server.seen.lock().unwrap()[0].message, b"hello", "the whole message arrived");
    assert!(events.lock().unwrap().contains(&GrpcEvent::Unbuffered));
}

/// `perAttemptRecvTimeout` cuts a hung attempt off as `CANCELLED`, which this policy retries.
/// Breaks if the per-attempt timeout is ignored (the call waits out the 10 s hang).
#[tokio::test]
async fn per_attempt_timeout_cancels_and_retries() {
    let server = Server::start(|s| {
        let s = s.clone();
        Box::pin(async move {
            if s.previous.is_none() {
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
            Ok(s.message)
        })
    })
    .await;
    let policy = r#""retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s",
        "maxBackoff": "0.01s", "backoffMultiplier": 1, "retryableStatusCodes": ["CANCELLED"],
        "perAttemptRecvTimeout": "1s"}"#;
    let layer = GrpcRetryLayer::from_json(&config(policy)).unwrap();
    let (mut c, _) = client(&server, layer);
    let got = tokio::time::timeout(Duration::from_secs(5), call(&mut c, "/demo.Echo/Say")).await;
    assert_eq!(got.expect("the hung attempt was cut off").unwrap(), b"hello");
    assert_eq!(server.previous(), [None, Some(1)]);
}

/// No wait outlives the deadline: a pushback of 5 s with 2 s left ends the call at once
/// with the server's own status, not a retry that would start past the deadline. Breaks if
/// the deadline check before sleeping is dropped (the call then ends `DEADLINE_EXCEEDED`
/// after sleeping).
#[tokio::test]
async fn a_retry_past_the_deadline_is_not_made() {
    let server =
        Server::start(|_| reply(Err(with_pushback(tonic::Code::Unavailable, "5000")))).await;
    let layer = GrpcRetryLayer::from_json(&config(RETRY)).unwrap();
    let (mut c, events) = client(&server, layer);
    let deadline = RequestDeadline::after(&TokioClock, Duration::from_secs(2));
    let got = seawall_tower::propagate::scope(deadline, call(&mut c, "/demo.Echo/Say")).await;
    assert_eq!(got.unwrap_err().code(), Code::Unavailable);
    assert_eq!(server.previous(), [None]);
    let events = events.lock().unwrap().clone();
    assert!(events.contains(&GrpcEvent::Stopped { reason: StopReason::Deadline }), "{events:?}");
    assert!(backoffs_in(&events).is_empty());
}

/// The throttle switches retries off: with `maxTokens` 2, one failure leaves 1 token (half)
/// and the call is not retried. Breaks if the throttle is not consulted.
#[tokio::test]
async fn throttle_at_half_stops_retries() {
    let server = Server::start(|_| reply(Err(tonic::Status::unavailable("down")))).await;
    let cfg = config(RETRY).replace("\"maxTokens\": 10", "\"maxTokens\": 2");
    let layer = GrpcRetryLayer::from_json(&cfg).unwrap();
    let throttle = layer.throttle().unwrap().clone();
    let (mut c, events) = client(&server, layer);
    assert_eq!(call(&mut c, "/demo.Echo/Say").await.unwrap_err().code(), Code::Unavailable);
    assert_eq!(server.previous(), [None]);
    assert_eq!(throttle.tokens(), 1.0);
    let events = events.lock().unwrap().clone();
    assert!(events.contains(&GrpcEvent::Stopped { reason: StopReason::Throttled }), "{events:?}");
}

fn backoffs_in(events: &[GrpcEvent]) -> Vec<Duration> {
    events.iter().filter_map(GrpcEvent::backoff).collect()
}
