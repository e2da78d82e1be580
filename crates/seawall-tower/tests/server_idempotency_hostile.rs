//! IdempotencyLayer under hostile clients and unlucky operators, in-process on virtual time:
//! scoping, cancellation, store outages, slow and huge bodies, a full store.
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use seawall::time::{ManualClock, SystemClock};
use seawall_tower::server::IdempotencyLayer;
use seawall_tower::server::idempotency::error::StoreError;
use seawall_tower::server::idempotency::key::{Fingerprint, Owner, StoreKey};
use seawall_tower::server::idempotency::scope::{Principal, header_scope};
use seawall_tower::server::idempotency::store::BoxFuture;
use seawall_tower::server::idempotency::store::memory::MemoryStore;
use seawall_tower::server::idempotency::{Begin, IdempotencyStore, StoredResponse};
use seawall_tower::wire::RequestDeadline;
use tower::{Layer, Service, ServiceExt};

/// A request body: the given bytes, or (`stall`) one that never finishes.
#[derive(Debug, Default)]
struct TestBody {
    data: Option<Bytes>,
    stall: bool,
}

impl From<Bytes> for TestBody {
    fn from(b: Bytes) -> Self {
        TestBody { data: Some(b), stall: false }
    }
}

impl Body for TestBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(d) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(d))));
        }
        if self.stall { Poll::Pending } else { Poll::Ready(None) }
    }
}

/// The payment handler: counts executions, takes `work`, answers 201.
fn handler(
    n: Arc<AtomicU64>,
    work: Duration,
) -> impl Service<Request<TestBody>, Response = Response<TestBody>, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static {
    tower::service_fn(move |req: Request<TestBody>| {
        let n = n.clone();
        async move {
            let i = n.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(work).await;
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let mut r = Response::new(TestBody::from(Bytes::from(format!("paid {body:?} #{i}"))));
            *r.status_mut() = StatusCode::CREATED;
            Ok::<_, Infallible>(r)
        }
    })
}

fn keyed(key: &str) -> http::request::Builder {
    Request::post("/pay").header("idempotency-key", key)
}

fn body(b: &'static str) -> TestBody {
    TestBody::from(Bytes::from_static(b.as_bytes()))
}

struct Got {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

async fn call<S>(svc: &S, req: Request<TestBody>) -> Got
where
    S: Service<Request<TestBody>, Response = Response<TestBody>, Error = Infallible> + Clone,
{
    let res = svc.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let b = res.into_body().collect().await.unwrap().to_bytes();
    Got { status, headers, body: String::from_utf8_lossy(&b).into_owned() }
}

// ---------- 1. scope ----------

#[tokio::test(start_paused = true)]
async fn without_a_principal_keyed_requests_are_refused_never_pooled() {
    // Two tenants authenticated by cookies (no Authorization header), same key, same body.
    // With a shared anonymous scope the second would get the first's stored response.
    let n = Arc::new(AtomicU64::new(0));
    let layer = IdempotencyLayer::in_memory();
    let metrics = layer.metrics_handle();
    let svc = layer.layer(handler(n.clone(), Duration::ZERO));
    for cookie in ["session=tenant-a", "session=tenant-b"] {
        let r = keyed("order-1").header("cookie", cookie).body(body("10 EUR")).unwrap();
        let got = call(&svc, r).await;
        assert_eq!(got.status, StatusCode::UNAUTHORIZED, "{}", got.body);
        assert_eq!(got.headers["content-type"], "application/problem+json");
        assert!(got.body.contains(r#""code":"idempotency-principal-missing""#), "{}", got.body);
        let uri = format!(
            r#""type":"{}#idempotency-principal-missing""#,
            seawall_tower::server::problem::TYPE_BASE
        );
        assert!(got.body.contains(&uri), "{}", got.body);
    }
    assert_eq!(n.load(Ordering::SeqCst), 0, "never executed without a principal");
    assert_eq!(metrics.snapshot().principal_missing, 2);
    // Unkeyed requests are not the layer's business: they pass.
    let r = Request::post("/pay").body(body("1 EUR")).unwrap();
    assert_eq!(call(&svc, r).await.status, StatusCode::CREATED);
}

#[tokio::test(start_paused = true)]
async fn another_scope_never_sees_a_key_neither_replay_nor_422() {
    let n = Arc::new(AtomicU64::new(0));
    let svc = IdempotencyLayer::in_memory().layer(handler(n.clone(), Duration::ZERO));
    let as_user = |who: &str, b: &'static str| {
        keyed("same").extension(Principal::user(who)).body(body(b)).unwrap()
    };
    let a = call(&svc, as_user("alice", "1 EUR")).await;
    let same_body = call(&svc, as_user("bob", "1 EUR")).await;
    let other_body = call(&svc, as_user("carol", "2 EUR")).await;
    for got in [&a, &same_body, &other_body] {
        assert_eq!(got.status, StatusCode::CREATED, "{}", got.body);
        assert!(got.headers.get("idempotent-replayed").is_none());
    }
    assert_eq!(n.load(Ordering::SeqCst), 3);
    // Within one scope the draft's rules hold: replay, and 422 on another payload.
    assert_eq!(call(&svc, as_user("alice", "1 EUR")).await.headers["idempotent-replayed"], "true");
    let reused = call(&svc, as_user("alice", "9 EUR")).await;
    assert_eq!(reused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(n.load(Ordering::SeqCst), 3);
}

/// A cookie user `acme` and an API-key tenant `acme`, same key, same body: two principals, two
/// executions, no replay across them. The control: the same kind twice is one scope (a replay).
#[tokio::test(start_paused = true)]
async fn two_auth_mechanisms_with_one_name_never_share_a_scope() {
    let n = Arc::new(AtomicU64::new(0));
    let svc = IdempotencyLayer::in_memory().layer(handler(n.clone(), Duration::ZERO));
    let as_ = |p: Principal| keyed("order-9").extension(p).body(body("3 EUR")).unwrap();
    let user = call(&svc, as_(Principal::user("acme"))).await;
    let tenant = call(&svc, as_(Principal::of_kind("api-key", "acme"))).await;
    for got in [&user, &tenant] {
        assert_eq!(got.status, StatusCode::CREATED, "{}", got.body);
        assert!(got.headers.get("idempotent-replayed").is_none(), "{}", got.body);
    }
    assert_eq!(n.load(Ordering::SeqCst), 2);
    let again = call(&svc, as_(Principal::user("acme"))).await;
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

/// What an auth middleware does: resolve the credential to a stable principal.
fn authenticate(req: &mut Request<TestBody>) {
    let user = match req.headers().get("authorization").and_then(|v| v.to_str().ok()) {
        Some("Bearer token-before-refresh" | "Bearer token-after-refresh") => "user-42",
        _ => return,
    };
    req.extensions_mut().insert(Principal::user(user));
}

#[tokio::test(start_paused = true)]
async fn a_refreshed_token_keeps_the_scope_of_its_principal() {
    let n = Arc::new(AtomicU64::new(0));
    let svc = IdempotencyLayer::in_memory().layer(handler(n.clone(), Duration::ZERO));
    let attempt = |token: &str| {
        let mut r = keyed("pay-7")
            .header("authorization", format!("Bearer {token}"))
            .body(body("5 EUR"))
            .unwrap();
        authenticate(&mut r);
        r
    };
    let first = call(&svc, attempt("token-before-refresh")).await;
    let retry = call(&svc, attempt("token-after-refresh")).await;
    assert_eq!((first.status, retry.status), (StatusCode::CREATED, StatusCode::CREATED));
    assert_eq!(retry.headers["idempotent-replayed"], "true", "the retry is a replay");
    assert_eq!(retry.body, first.body);
    assert_eq!(n.load(Ordering::SeqCst), 1, "the payment ran once across the refresh");
}

// ---------- 2. cancellation ----------

fn tenant(b: http::request::Builder) -> http::request::Builder {
    b.extension(Principal::user("t"))
}

#[tokio::test(start_paused = true)]
async fn requests_cancelled_after_start_free_the_pending_pool_and_read_outcome_unknown() {
    let n = Arc::new(AtomicU64::new(0));
    let store = Arc::new(MemoryStore::with_capacity(1_000).max_pending(8).scope_unknown(1_000));
    let layer = IdempotencyLayer::with_store_and_clock(store.clone(), SystemClock);
    let metrics = layer.metrics_handle();
    let svc = layer.layer(handler(n.clone(), Duration::from_secs(5)));
    // 100 keyed requests, each cancelled by its caller's 10 ms timeout while the handler runs.
    for i in 0..100 {
        let r = tenant(keyed(&format!("k{i}"))).body(body("x")).unwrap();
        let cancelled = tokio::time::timeout(Duration::from_millis(10), call(&svc, r)).await;
        assert!(cancelled.is_err(), "the handler takes 5 s");
        tokio::task::yield_now().await; // the settling task runs
    }
    assert_eq!(n.load(Ordering::SeqCst), 100);
    assert_eq!(store.stats().pending, 0, "every cancelled key left the pending pool");
    assert_eq!(metrics.snapshot().abandoned, 100);
    // New keys execute: the burst of timeouts did not take writes down.
    let fresh = call(&svc, tenant(keyed("new")).body(body("x")).unwrap()).await;
    assert_eq!(fresh.status, StatusCode::CREATED, "{}", fresh.body);
    // A retry of a cancelled key: outcome unknown at once, not "in progress", never re-run.
    let again = call(&svc, tenant(keyed("k0")).body(body("x")).unwrap()).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains(r#""code":"outcome-unknown""#), "{}", again.body);
    assert_eq!(n.load(Ordering::SeqCst), 101);
}

/// A store whose `begin` takes `delay` of the manual clock's time (a slow network round trip).
#[derive(Debug)]
struct SlowBegin {
    inner: MemoryStore<ManualClock>,
    clock: ManualClock,
    delay: Duration,
}

impl IdempotencyStore for SlowBegin {
    fn begin<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
        owner: &'a Owner,
        lease: Duration,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Begin, StoreError>> {
        self.clock.advance(self.delay);
        self.inner.begin(key, fp, owner, lease, ttl)
    }
    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
        res: &'a StoredResponse,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.complete(key, owner, res, ttl)
    }
    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.release(key, owner)
    }
}

#[tokio::test(start_paused = true)]
async fn a_deadline_that_passes_before_the_handler_releases_the_key() {
    let clock = ManualClock::new();
    let store = SlowBegin {
        inner: MemoryStore::with_clock(100, clock.clone()),
        clock: clock.clone(),
        delay: Duration::from_millis(50),
    };
    let n = Arc::new(AtomicU64::new(0));
    let svc = IdempotencyLayer::with_store_and_clock(Arc::new(store), clock.clone())
        .layer(handler(n.clone(), Duration::ZERO));
    let with_deadline = |ms: u64| {
        let d = RequestDeadline::after(&clock, Duration::from_millis(ms));
        tenant(keyed("slow")).extension(d).body(body("x")).unwrap()
    };
    // 20 ms left, the store takes 50: the deadline passes before the handler could be called.
    let late = call(&svc, with_deadline(20)).await;
    assert_eq!(late.status, StatusCode::GATEWAY_TIMEOUT, "{}", late.body);
    assert_eq!(n.load(Ordering::SeqCst), 0);
    tokio::task::yield_now().await;
    // Nothing ran, so the key was given back: the retry executes (not 409).
    let retry = call(&svc, with_deadline(1_000)).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.body);
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

// ---------- 3. store outages ----------

/// A store that fails (`hang: false`) or never answers (`hang: true`).
#[derive(Debug)]
struct Broken {
    hang: bool,
}

impl Broken {
    fn fail<'a, T: Send + 'a>(&self) -> BoxFuture<'a, Result<T, StoreError>> {
        if self.hang {
            Box::pin(std::future::pending())
        } else {
            Box::pin(std::future::ready(Err(StoreError::Backend("connection refused".into()))))
        }
    }
}

impl IdempotencyStore for Broken {
    fn begin<'a>(
        &'a self,
        _: &'a StoreKey,
        _: &'a Fingerprint,
        _: &'a Owner,
        _: Duration,
        _: Duration,
    ) -> BoxFuture<'a, Result<Begin, StoreError>> {
        self.fail()
    }
    fn complete<'a>(
        &'a self,
        _: &'a StoreKey,
        _: &'a Owner,
        _: &'a StoredResponse,
        _: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.fail()
    }
    fn release<'a>(
        &'a self,
        _: &'a StoreKey,
        _: &'a Owner,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.fail()
    }
}

#[tokio::test(start_paused = true)]
async fn a_down_or_black_holed_store_answers_503_with_a_jittered_retry_after_in_bounded_time() {
    for hang in [false, true] {
        let n = Arc::new(AtomicU64::new(0));
        let layer =
            IdempotencyLayer::new(Broken { hang }).with_store_timeout(Duration::from_millis(300));
        let metrics = layer.metrics_handle();
        let svc = layer.layer(handler(n.clone(), Duration::ZERO));
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..40 {
            let r = tenant(keyed(&format!("k{i}"))).body(body("x")).unwrap();
            let t0 = tokio::time::Instant::now();
            let got = tokio::time::timeout(Duration::from_secs(30), call(&svc, r))
                .await
                .expect("answered, not hung");
            assert!(t0.elapsed() <= Duration::from_millis(300), "within the store timeout");
            assert_eq!(got.status, StatusCode::SERVICE_UNAVAILABLE, "{}", got.body);
            assert!(got.body.contains(r#""code":"idempotency-store-unavailable""#));
            let ra: u64 = got.headers["retry-after"].to_str().unwrap().parse().unwrap();
            assert!((1..=5).contains(&ra), "{ra}");
            seen.insert(ra);
        }
        assert!(seen.len() >= 3, "Retry-After is jittered: {seen:?}");
        let s = metrics.snapshot();
        assert_eq!(s.store_unavailable, 40, "{s:?}");
        assert_eq!(s.store_timeouts, if hang { 40 } else { 0 }, "{s:?}");
        assert_eq!(n.load(Ordering::SeqCst), 0, "fail closed: the handler never ran");
    }
}

// ---------- 4. bodies ----------

#[tokio::test(start_paused = true)]
async fn a_huge_content_length_is_413_at_once_without_reading() {
    let n = Arc::new(AtomicU64::new(0));
    let layer = IdempotencyLayer::in_memory();
    let metrics = layer.metrics_handle();
    let svc = layer.layer(handler(n.clone(), Duration::ZERO));
    let r = tenant(keyed("big"))
        .header("content-length", "10737418240")
        .body(TestBody { data: None, stall: true })
        .unwrap();
    let t0 = tokio::time::Instant::now();
    let got = tokio::time::timeout(Duration::from_secs(60), call(&svc, r)).await.expect("answered");
    assert_eq!(got.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(t0.elapsed(), Duration::ZERO, "refused before reading a byte");
    assert_eq!((n.load(Ordering::SeqCst), metrics.snapshot().body_too_large), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_body_that_never_finishes_is_408_after_the_body_timeout() {
    let n = Arc::new(AtomicU64::new(0));
    let layer = IdempotencyLayer::in_memory().with_body_timeout(Duration::from_secs(2));
    let metrics = layer.metrics_handle();
    let svc = layer.layer(handler(n.clone(), Duration::ZERO));
    let trickle = TestBody { data: Some(Bytes::from_static(b"1")), stall: true };
    let r = tenant(keyed("slow")).header("content-length", "10").body(trickle).unwrap();
    let t0 = tokio::time::Instant::now();
    let got = tokio::time::timeout(Duration::from_secs(60), call(&svc, r)).await.expect("answered");
    assert_eq!(got.status, StatusCode::REQUEST_TIMEOUT, "{}", got.body);
    assert_eq!(t0.elapsed(), Duration::from_secs(2));
    assert_eq!((n.load(Ordering::SeqCst), metrics.snapshot().body_timeouts), (0, 1));
    // The key was never begun: the same key with a whole body executes.
    let ok = call(&svc, tenant(keyed("slow")).body(body("1234567890")).unwrap()).await;
    assert_eq!(ok.status, StatusCode::CREATED);
}

// ---------- 5. capacity ----------

#[tokio::test(start_paused = true)]
async fn a_full_store_refuses_new_keys_and_never_re_executes_within_the_ttl() {
    let n = Arc::new(AtomicU64::new(0));
    let layer = IdempotencyLayer::new(MemoryStore::with_capacity(2).scope_share(1.0));
    let metrics = layer.metrics_handle();
    let svc = layer.layer(handler(n.clone(), Duration::ZERO));
    let pay = |k: &str| tenant(keyed(k)).body(body("x")).unwrap();
    assert_eq!(call(&svc, pay("a")).await.status, StatusCode::CREATED);
    assert_eq!(call(&svc, pay("b")).await.status, StatusCode::CREATED);
    let full = call(&svc, pay("c")).await;
    assert_eq!(full.status, StatusCode::SERVICE_UNAVAILABLE, "{}", full.body);
    assert!(full.body.contains(r#""code":"idempotency-store-full""#));
    // Space frees when the oldest record expires: the default TTL, 24 h, from now.
    assert_eq!(full.headers["retry-after"], "86400");
    // The stored keys are still replayed: nothing was evicted, nothing runs twice.
    for k in ["a", "b"] {
        assert_eq!(call(&svc, pay(k)).await.headers["idempotent-replayed"], "true", "{k}");
    }
    assert_eq!(n.load(Ordering::SeqCst), 2);
    assert_eq!(metrics.snapshot().capacity_refused, 1);
}

#[tokio::test]
async fn a_principal_over_its_share_gets_429_with_when_its_space_frees_and_others_do_not() {
    let n = Arc::new(AtomicU64::new(0));
    // 4 records, a quarter (1) per principal and in reserve.
    let layer = IdempotencyLayer::new(MemoryStore::with_capacity(4))
        .with_scope(header_scope(http::HeaderName::from_static("x-tenant")));
    let metrics = layer.metrics_handle();
    let svc = layer.layer(handler(n.clone(), Duration::ZERO));
    let pay = |who: &str, k: &str| keyed(k).header("x-tenant", who).body(body("x")).unwrap();
    for k in ["1", "2", "3"] {
        assert_eq!(call(&svc, pay("mallory", k)).await.status, StatusCode::CREATED);
    }
    let over = call(&svc, pay("mallory", "4")).await;
    assert_eq!(over.status, StatusCode::TOO_MANY_REQUESTS, "{}", over.body);
    assert!(over.body.contains(r#""code":"idempotency-quota""#), "{}", over.body);
    assert_eq!(over.headers["retry-after"], "86400", "when mallory's oldest record expires");
    assert_eq!(call(&svc, pay("mallory", "1")).await.headers["idempotent-replayed"], "true");
    assert_eq!(call(&svc, pay("alice", "1")).await.status, StatusCode::CREATED);
    assert_eq!(n.load(Ordering::SeqCst), 4);
    assert_eq!(metrics.snapshot().scope_refused, 1);
}

#[test]
fn header_scope_is_public_and_composable() {
    // Compile-time check of the extractor's bounds for `IdempotencyLayer::scope`.
    let _ = IdempotencyLayer::in_memory()
        .with_scope(header_scope(http::HeaderName::from_static("x-t")));
}
