//! [`RetryFuture`]: one logical call through a [`Retry`](super::Retry) service.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use pin_project_lite::pin_project;
use seawall::budget::Budget;
use seawall::time::{Clock, SystemClock};
use tower_service::Service;

use super::{BoxError, GaveUpError, LastOutcome};
use crate::client::ReplayBody;
use crate::client::attempt::Sending;
use crate::client::engine::{Ctx, Shared, Step};
use crate::client::timer;

type Output<RB> = Result<Response<RB>, GaveUpError<RB>>;

pin_project! {
    /// The future a [`Retry`](super::Retry) service returns: one logical call, all of its
    /// attempts and waits.
    ///
    /// One state machine, like tower's `retry::ResponseFuture`: start, send, and on a failure
    /// the policy's wait, then the next attempt. Nothing allocates on the success path; the
    /// first wait (an attempt's timeout or the wait before a retry) allocates the call's one
    /// timer, which later waits reuse. The
    /// success path — the common one — thus costs little more than the policy's decisions, the
    /// headers and the request copy a retry needs (see `BENCHMARKS-client.md`). Dropping it
    /// abandons the call and returns what it held to the budget and breaker.
    pub struct RetryFuture<S, B, RB, Bu>
    where
        S: Service<Request<B>>,
        Bu: Budget,
    {
        // Everything is built when the service is called and filled in where it lies on the
        // first poll: every move of the future is a copy of it. Dropped in this order: the call
        // (abandoned if it has not ended), then the attempt in flight.
        ctx: Ctx<S, B, RB, Bu>,
        #[pin]
        sending: Sending<S, B>,
        // The call's timer, once it has waited (kept apart from `state`, which then has nothing
        // to drop: the success path changes it without drop glue). Between attempts it holds
        // what the failed attempt produced.
        timer: timer::Slot<LastOutcome<RB>>,
        state: State,
    }
}

#[derive(Clone, Copy)]
enum State {
    // Not polled yet: the call starts, and its clock is read, on the first poll.
    Init,
    // An attempt in flight (`sending`).
    Sending,
    // The policy's wait (on `timer`) before the next attempt.
    Waiting,
    Done,
}

impl<S, B, RB, Bu> RetryFuture<S, B, RB, Bu>
where
    S: Service<Request<B>>,
    Bu: Budget,
{
    /// A call of `req` through `svc`. It starts — the deadline's clock, the policy's first
    /// decision — when the future is first polled.
    pub(crate) fn new(svc: S, shared: Arc<Shared<Bu>>, req: Request<B>) -> Self {
        let (ctx, sending) = (Ctx::new(svc, shared, req), Sending::new());
        RetryFuture { ctx, sending, timer: None, state: State::Init }
    }
}

impl<S, B, RB, Bu> Future for RetryFuture<S, B, RB, Bu>
where
    S: Service<Request<B>, Response = Response<RB>> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: ReplayBody + Send + 'static,
    RB: Send + 'static,
    Bu: Budget + 'static,
{
    type Output = Output<RB>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let ctx = this.ctx;
        // When the attempt started, if it was sent in this poll.
        let mut sent_at = None;
        loop {
            match this.state {
                State::Init => {
                    let at = ctx.start();
                    match ctx.begin(at) {
                        Ok(attempt) => {
                            this.sending.as_mut().arm(attempt, at);
                            (sent_at, *this.state) = (Some(at), State::Sending);
                        }
                        Err(g) => {
                            *this.state = State::Done;
                            return Poll::Ready(Err(ctx.give_up(g, LastOutcome::NotSent)));
                        }
                    }
                }
                State::Sending => {
                    let polled = ctx.poll_attempt(this.sending.as_mut(), cx);
                    // The success path: the response goes straight out, as the service gave it.
                    if let Poll::Ready(Ok(resp)) = &polled
                        && ctx.is_success(resp)
                    {
                        ctx.succeeded(sent_at);
                        *this.state = State::Done;
                        let Poll::Ready(Ok(resp)) = polled else { unreachable!("matched above") };
                        return Poll::Ready(Ok(resp));
                    }
                    let sent = match polled {
                        Poll::Ready(r) => Some(r.map_err(Into::into)),
                        Poll::Pending => {
                            let idle = || LastOutcome::NotSent;
                            ready!(this.sending.as_mut().poll_timeout(this.timer, idle, cx));
                            None
                        }
                    };
                    match ctx.failed(sent) {
                        Step::Done(r) => {
                            *this.state = State::Done;
                            return Poll::Ready(r);
                        }
                        Step::Retry { after, last } => {
                            this.sending.set(Sending::new());
                            timer::set(this.timer, after, last);
                            *this.state = State::Waiting;
                        }
                    }
                }
                State::Waiting => {
                    let timer = this.timer.as_mut().expect("a wait is under way");
                    ready!(timer.as_mut().poll_fired(cx));
                    // What the failed attempt produced: the error's content if the next attempt
                    // is refused, dropped if it starts.
                    let last = timer.as_mut().take(LastOutcome::NotSent);
                    let at = SystemClock.now();
                    match ctx.begin(at) {
                        Ok(attempt) => {
                            this.sending.as_mut().arm(attempt, at);
                            *this.state = State::Sending;
                        }
                        Err(g) => {
                            *this.state = State::Done;
                            return Poll::Ready(Err(ctx.give_up(g, last)));
                        }
                    }
                }
                State::Done => panic!("seawall RetryFuture polled after completion"),
            }
        }
    }
}

impl<S, B, RB, Bu> fmt::Debug for RetryFuture<S, B, RB, Bu>
where
    S: Service<Request<B>>,
    Bu: Budget,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RetryFuture(..)")
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use seawall::budget::GrpcThrottle;
    use seawall::policy::{GiveUpReason, PolicyConfig, RetryPolicy};
    use tower_layer::Layer;

    use super::*;
    use crate::client::RetryLayer;

    type Fut = Pin<Box<dyn Future<Output = Result<Response<String>, Infallible>> + Send>>;

    /// A service whose first `hang` calls never answer; later calls answer 200.
    fn hanging(
        hang: u32,
        calls: Arc<AtomicU32>,
    ) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future = Fut>
    + Clone
    + Send
    + 'static {
        tower::service_fn(move |req: Request<String>| {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            // A first attempt carries no number (absent = 1); retries carry theirs.
            let stamped = req.headers().get("request-attempt").map(|v| v.to_str().unwrap());
            assert_eq!(stamped, (n > 1).then(|| n.to_string()).as_deref());
            let f: Fut = if n <= hang {
                Box::pin(std::future::pending())
            } else {
                Box::pin(std::future::ready(Ok(Response::new(String::new()))))
            };
            f
        })
    }

    fn layer(per_try: Duration) -> RetryLayer<GrpcThrottle> {
        let cfg = PolicyConfig::default().with_per_try_timeout(per_try).unwrap();
        RetryLayer::from_policy(RetryPolicy::new(cfg, GrpcThrottle::default()))
            .unwrap()
            .with_default_timeout(Duration::from_secs(5))
    }

    #[tokio::test]
    async fn an_attempt_that_hangs_times_out_and_the_retry_answers() {
        let calls = Arc::new(AtomicU32::new(0));
        let mut svc = layer(Duration::from_millis(20)).layer(hanging(1, calls.clone()));
        let resp = svc.call(Request::new(String::new())).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn attempts_that_all_hang_give_up_with_timed_out() {
        let calls = Arc::new(AtomicU32::new(0));
        let mut svc = layer(Duration::from_millis(10)).layer(hanging(u32::MAX, calls.clone()));
        let err = svc.call(Request::new(String::new())).await.unwrap_err();
        assert_eq!(err.reason(), GiveUpReason::AttemptsExhausted);
        assert_eq!(err.attempts(), 3);
        assert!(matches!(err.into_last(), crate::client::LastOutcome::TimedOut));
    }

    #[tokio::test]
    async fn dropping_the_future_mid_call_abandons_the_call() {
        let calls = Arc::new(AtomicU32::new(0));
        let l = layer(Duration::from_secs(1));
        let policy = l.policy().clone();
        let mut svc = l.layer(hanging(u32::MAX, calls));
        let mut fut = svc.call(Request::new(String::new()));
        let waker = std::task::Waker::noop();
        assert!(Pin::new(&mut fut).poll(&mut Context::from_waker(waker)).is_pending());
        drop(fut);
        assert_eq!(policy.metrics().snapshot().give_ups(GiveUpReason::Abandoned), 1);
    }

    #[tokio::test]
    async fn a_refused_first_attempt_is_an_error_without_a_call() {
        let calls = Arc::new(AtomicU32::new(0));
        // 1 ms left is under the 5 ms an attempt needs at least.
        let l = layer(Duration::from_secs(1)).with_default_timeout(Duration::from_millis(1));
        let mut svc = l.layer(hanging(0, calls.clone()));
        let err = svc.call(Request::new(String::new())).await.unwrap_err();
        assert_eq!(err.reason(), GiveUpReason::DeadlineTooClose);
        assert_eq!((err.attempts(), calls.load(Ordering::SeqCst)), (0, 0));
    }

    /// A body that counts its replays; `lies` says it can be replayed and then cannot.
    struct Counted {
        replays: Arc<AtomicU32>,
        lies: bool,
    }

    impl crate::client::ReplayBody for Counted {
        fn try_replay(&self) -> Option<Self> {
            if self.lies {
                return None;
            }
            self.replays.fetch_add(1, Ordering::SeqCst);
            Some(Counted { replays: self.replays.clone(), lies: false })
        }

        fn can_replay(&self) -> bool {
            true
        }
    }

    /// A service answering 503 to its first `fail` calls and 200 after, recording the headers
    /// of each request.
    fn failing<B: Send + 'static>(
        fail: usize,
        seen: Arc<std::sync::Mutex<Vec<http::HeaderMap>>>,
    ) -> impl Service<Request<B>, Response = Response<String>, Error = Infallible, Future = Fut>
    + Clone
    + Send
    + 'static {
        tower::service_fn(move |req: Request<B>| {
            let n = {
                let mut seen = seen.lock().unwrap();
                seen.push(req.headers().clone());
                seen.len()
            };
            let status = if n <= fail { 503 } else { 200 };
            let resp = Response::builder().status(status).body(String::new()).unwrap();
            let f: Fut = Box::pin(std::future::ready(Ok(resp)));
            f
        })
    }

    #[tokio::test]
    async fn a_request_attempt_the_caller_copied_in_is_replaced_by_the_calls_own() {
        let seen = Arc::default();
        let mut svc = layer(Duration::from_secs(1)).layer(failing(1, Arc::clone(&seen)));
        let req = Request::builder().header("request-attempt", "7").body(String::new()).unwrap();
        assert_eq!(svc.call(req).await.unwrap().status(), 200);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert!(!seen[0].contains_key("request-attempt"), "a first attempt carries no number");
        assert_eq!(seen[1].get_all("request-attempt").iter().collect::<Vec<_>>(), ["2"]);
    }

    #[tokio::test]
    async fn each_attempt_of_a_request_with_headers_carries_its_own_numbers_once() {
        // A request that has headers is stamped in place before it is copied: each attempt's
        // number and time left must replace the previous attempt's, never add to them, and
        // the caller's headers must reach every attempt, the last (the request itself) too.
        let seen = Arc::default();
        let mut svc = layer(Duration::from_secs(1)).layer(failing(2, Arc::clone(&seen)));
        let req = Request::post("http://a/x")
            .header("accept", "application/json")
            .header("idempotency-key", "k-1")
            .body(String::new())
            .unwrap();
        assert_eq!(svc.call(req).await.unwrap().status(), 200);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        let mut last_left = u64::MAX;
        for (i, h) in seen.iter().enumerate() {
            let all = |name: &str| h.get_all(name).iter().map(|v| v.to_str().unwrap().to_owned());
            let attempt: Vec<_> = all("request-attempt").collect();
            let expected: Vec<String> = (i > 0).then(|| (i + 1).to_string()).into_iter().collect();
            assert_eq!(attempt, expected, "attempt {}", i + 1);
            let left: Vec<u64> = all("request-timeout-ms").map(|v| v.parse().unwrap()).collect();
            assert_eq!(left.len(), 1, "attempt {}: {left:?}", i + 1);
            assert!(left[0] <= 5_000 && left[0] <= last_left, "attempt {}: {left:?}", i + 1);
            last_left = left[0];
            assert_eq!(all("accept").collect::<Vec<_>>(), ["application/json"]);
            assert_eq!(all("idempotency-key").collect::<Vec<_>>(), ["k-1"]);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_read_no_clock_waits_its_backoff_from_the_failure() {
        // The default layer reads no clock before a failure; the wait before the retry still
        // starts when the failure is reported, and the retry is told the real time.
        let seen = Arc::default();
        let l = RetryLayer::new();
        let policy = l.policy().clone();
        assert!(!policy.success_reads_clock());
        let mut svc = l.layer(failing(2, Arc::clone(&seen)));
        let t0 = tokio::time::Instant::now();
        assert_eq!(svc.call(Request::new(String::new())).await.unwrap().status(), 200);
        assert_eq!(seen.lock().unwrap().len(), 3);
        // Full jitter under 50 ms then 100 ms ceilings (the core's defaults).
        assert!(t0.elapsed() < Duration::from_millis(150), "{:?}", t0.elapsed());
        let snap = policy.metrics().snapshot();
        assert_eq!((snap.calls, snap.attempts, snap.retries), (1, 3, 2));
    }

    #[tokio::test]
    async fn attempts_are_sent_copies_and_the_last_one_the_request_itself() {
        let (seen, replays) = (Arc::default(), Arc::new(AtomicU32::new(0)));
        let mut svc = layer(Duration::from_secs(1)).layer(failing(usize::MAX, seen));
        let body = Counted { replays: replays.clone(), lies: false };
        let err = svc.call(Request::new(body)).await.unwrap_err();
        assert_eq!((err.reason(), err.attempts()), (GiveUpReason::AttemptsExhausted, 3));
        assert_eq!(replays.load(Ordering::SeqCst), 2, "copies for attempts 1 and 2 only");
    }

    #[tokio::test]
    async fn a_streaming_body_is_sent_once() {
        use http_body_util::BodyExt;
        let seen = Arc::default();
        let mut svc = layer(Duration::from_secs(1)).layer(failing(1, Arc::clone(&seen)));
        let body = http_body_util::Full::new(bytes::Bytes::from_static(b"x")).boxed_unsync();
        let err = svc.call(Request::new(body)).await.unwrap_err();
        assert_eq!((err.reason(), err.attempts()), (GiveUpReason::NotReplayable, 1));
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_body_that_fails_to_replay_after_saying_it_could_is_sent_once() {
        let seen = Arc::default();
        let mut svc = layer(Duration::from_secs(1)).layer(failing(1, Arc::clone(&seen)));
        let body = Counted { replays: Arc::default(), lies: true };
        let err = svc.call(Request::new(body)).await.unwrap_err();
        assert_eq!((err.reason(), err.attempts()), (GiveUpReason::NotReplayable, 1));
        assert_eq!(seen.lock().unwrap().len(), 1);
    }
}
