//! One arrival trace — first attempts and retries, some with deadlines, and service completions —
//! fed through the core `seawall::admission::Admission` the way the simulator drives it, and
//! through `ShedLayer` on a manual clock: both must admit, queue, shed and drop the same requests
//! at the same steps, for the same reasons. This is what makes the simulator's shedding the
//! shipped layer's.
#![cfg(feature = "server")]

use std::collections::VecDeque;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::{Request, Response};
use seawall::admission::{Admission, Class, Config, Limit, Offer, Reason, Rejection, RetryAfter};
use seawall::deadline::Deadline;
use seawall::rng::{Rng, SeededRng};
use seawall::time::{Clock, ManualClock};
use seawall_tower::server::{RejectReason, ServerMetrics, ShedLayer};
use seawall_tower::wire::{REQUEST_ATTEMPT, RequestDeadline};
use tokio::sync::oneshot;
use tower::{Layer, Service};

const LIMIT: usize = 2;
const QUEUE: usize = 4;

/// One step of the trace.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Time passes.
    Advance(Duration),
    /// Request `id` arrives; `deadline` is how long its caller waits, if it says.
    Arrive { id: u32, class: Class, deadline: Option<Duration> },
    /// The oldest running request finishes.
    Complete,
}

/// What happened to a request, as a client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Seen {
    /// Handed to the handler.
    Admitted(u32),
    /// Waiting for a slot.
    Queued(u32),
    /// Refused on arrival, with this status.
    Shed(u32, u16),
    /// Refused after waiting (evicted, CoDel, deadline), with this status.
    Dropped(u32, u16),
}

/// A trace that exercises every path: bursts that fill the queue (evictions, queue-full),
/// a standing queue (CoDel drops, LIFO, retries shed at the door), and deadlines that expire in
/// the queue or before arrival.
fn trace(seed: u64, len: usize) -> Vec<Step> {
    let mut rng = SeededRng::new(seed);
    let mut steps = Vec::with_capacity(len);
    let mut id = 0;
    for i in 0..len {
        // Phases of 100 steps: calm (completions keep up) and overloaded (arrivals outrun them).
        let overloaded = (i / 100) % 2 == 1;
        steps.push(Step::Advance(Duration::from_micros(rng.next_u64() % 4_000)));
        let p_arrive = if overloaded { 0.75 } else { 0.45 };
        if rng.next_f64() < p_arrive {
            id += 1;
            let class = if rng.next_f64() < 0.35 { Class::Retry } else { Class::First };
            let deadline =
                (rng.next_f64() < 0.4).then(|| Duration::from_micros(rng.next_u64() % 40_000));
            steps.push(Step::Arrive { id, class, deadline });
        } else {
            steps.push(Step::Complete);
        }
    }
    steps
}

fn status(reason: Reason) -> u16 {
    // The Retry-After value does not matter here, only the status.
    Rejection::of(reason, &RetryAfter::default(), &mut SeededRng::new(0)).status()
}

/// The core, driven as `seawall-sim` drives a protected tier (`engine/flow.rs`): the ceiling set
/// to the tier's capacity before each decision, `offer` on arrival, `finish` then `next` until
/// `None` on completion, doomed work collected and answered after each `next`.
fn run_core(steps: &[Step]) -> (Vec<Vec<Seen>>, [u64; 5]) {
    let clock = ManualClock::new();
    let mut adm: Admission<u32> = Admission::new(Config::new(Limit::fixed(nz(LIMIT)), QUEUE));
    let mut running = VecDeque::new();
    let mut reasons = [0u64; 5];
    let mut count = |r: Reason| reasons[reason_index(r)] += 1;
    let mut out = Vec::new();
    for step in steps {
        let mut seen = Vec::new();
        match *step {
            Step::Advance(d) => clock.advance(d),
            Step::Arrive { id, class, deadline } => {
                let now = clock.now();
                adm.set_ceiling(LIMIT);
                match adm.offer(now, class, deadline.map(|d| now + d), || id) {
                    Offer::Run => {
                        running.push_back(id);
                        seen.push(Seen::Admitted(id));
                    }
                    Offer::Queued { evicted, .. } => {
                        seen.push(Seen::Queued(id));
                        if let Some(e) = evicted {
                            count(Reason::RetryShed);
                            seen.push(Seen::Dropped(e, status(Reason::RetryShed)));
                        }
                    }
                    Offer::Reject(r) => {
                        count(r);
                        seen.push(Seen::Shed(id, status(r)));
                    }
                }
            }
            Step::Complete if running.pop_front().is_some() => {
                let now = clock.now();
                adm.finish(Some(Duration::ZERO));
                adm.set_ceiling(LIMIT);
                let mut doomed = Vec::new();
                while let Some(id) = adm.next(now, |t, r| doomed.push((t, r))) {
                    running.push_back(id);
                    seen.push(Seen::Admitted(id));
                }
                for (t, r) in doomed {
                    count(r);
                    seen.push(Seen::Dropped(t, status(r)));
                }
            }
            Step::Complete => {} // nothing runs
        }
        seen.sort();
        out.push(seen);
    }
    (out, reasons)
}

fn nz(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).expect("non-zero")
}

fn reason_index(r: Reason) -> usize {
    match r {
        Reason::QueueFull => 0,
        Reason::CodelDrop => 1,
        Reason::DeadlineExpired => 2,
        Reason::RetryShed => 3,
        _ => 4,
    }
}

type Handlers = Arc<Mutex<VecDeque<(u32, oneshot::Sender<()>)>>>;
type Pending = Pin<Box<dyn Future<Output = Result<Response<String>, std::convert::Infallible>>>>;

/// `ShedLayer` on the manual clock over a handler that runs until the test completes it.
fn run_layer(steps: &[Step]) -> (Vec<Vec<Seen>>, [u64; 5]) {
    let clock = ManualClock::new();
    let metrics = ServerMetrics::new();
    let handlers: Handlers = Arc::default();
    let h = handlers.clone();
    let inner = tower::service_fn(move |req: Request<()>| {
        let id: u32 = req.headers()["x-id"].to_str().unwrap().parse().unwrap();
        let (tx, rx) = oneshot::channel();
        h.lock().unwrap().push_back((id, tx));
        async move {
            let _ = rx.await;
            Ok::<_, std::convert::Infallible>(Response::new(String::new()))
        }
    });
    let mut svc = ShedLayer::new(nz(LIMIT))
        .with_queue(QUEUE)
        .with_seed(1)
        .with_metrics(metrics.clone())
        .with_clock(clock.clone())
        .layer(inner);
    let mut cx = Context::from_waker(Waker::noop());
    // Every response future not yet answered, by request id.
    let mut waiting: Vec<(u32, Pending)> = Vec::new();
    let mut admitted_seen = 0;
    let mut out = Vec::new();
    for step in steps {
        let mut seen = Vec::new();
        match *step {
            Step::Advance(d) => clock.advance(d),
            Step::Arrive { id, class, deadline } => {
                let mut req = Request::builder().header("x-id", id.to_string());
                if class == Class::Retry {
                    req = req.header(REQUEST_ATTEMPT, "2");
                }
                let mut req = req.body(()).unwrap();
                if let Some(d) = deadline {
                    let at = Deadline::at(clock.now() + d);
                    req.extensions_mut().insert(RequestDeadline::on(&clock, at));
                }
                assert!(svc.poll_ready(&mut cx).is_ready());
                let mut fut: Pending = Box::pin(svc.call(req));
                match fut.as_mut().poll(&mut cx) {
                    Poll::Ready(res) => seen.push(Seen::Shed(id, res.unwrap().status().as_u16())),
                    Poll::Pending => {
                        if !handlers.lock().unwrap().iter().any(|(h, _)| *h == id) {
                            seen.push(Seen::Queued(id));
                        }
                        waiting.push((id, fut));
                    }
                }
            }
            Step::Complete => {
                let oldest = handlers.lock().unwrap().pop_front();
                if let Some((_, tx)) = oldest {
                    admitted_seen -= 1;
                    let _ = tx.send(());
                }
            }
        }
        // Let every future make progress: finished handlers release their slots, granted
        // waiters call the handler, dropped waiters get their answer.
        loop {
            let mut progressed = false;
            let mut i = 0;
            while i < waiting.len() {
                if let Poll::Ready(res) = waiting[i].1.as_mut().poll(&mut cx) {
                    let (id, _) = waiting.swap_remove(i);
                    let code = res.unwrap().status().as_u16();
                    if code != 200 {
                        seen.push(Seen::Dropped(id, code));
                    }
                    progressed = true;
                } else {
                    i += 1;
                }
            }
            if !progressed {
                break;
            }
        }
        let h = handlers.lock().unwrap();
        while admitted_seen < h.len() {
            seen.push(Seen::Admitted(h[admitted_seen].0));
            admitted_seen += 1;
        }
        drop(h);
        seen.sort();
        out.push(seen);
    }
    let snap = metrics.snapshot();
    let reasons = [
        RejectReason::QueueFull,
        RejectReason::CodelDrop,
        RejectReason::DeadlineExpired,
        RejectReason::RetryShed,
        RejectReason::AdmissionCut,
    ]
    .map(|r| snap.rejected(r));
    (out, reasons)
}

#[test]
fn core_as_the_simulator_drives_it_and_shed_layer_agree_step_by_step() {
    for seed in [1, 2, 3] {
        let steps = trace(seed, 1_200);
        let (core, core_reasons) = run_core(&steps);
        let (layer, layer_reasons) = run_layer(&steps);
        for (i, (c, l)) in core.iter().zip(&layer).enumerate() {
            assert_eq!(c, l, "seed {seed}, step {i} ({:?})", steps[i]);
        }
        assert_eq!(core_reasons, layer_reasons, "seed {seed}: rejections by reason");
        // The trace reaches every path, or agreeing would prove little.
        let all: Vec<Seen> = core.into_iter().flatten().collect();
        let n = |f: fn(&Seen) -> bool| all.iter().filter(|s| f(s)).count();
        assert!(n(|s| matches!(s, Seen::Admitted(_))) > 100, "seed {seed}");
        assert!(n(|s| matches!(s, Seen::Queued(_))) > 50, "seed {seed}");
        assert!(n(|s| matches!(s, Seen::Dropped(_, 504))) > 0, "seed {seed}: deadline drops");
        for (k, name) in ["queue full", "codel drop", "deadline", "retry shed"].iter().enumerate() {
            assert!(core_reasons[k] > 0, "seed {seed}: no {name} in the trace: {core_reasons:?}");
        }
    }
}
