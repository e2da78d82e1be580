//! The simulator's server and `ShedLayer`, on one trace. `seawall-sim` runs a scenario — an
//! api tier of 2 slots calling a database that slows down, the edge retrying, deadlines
//! propagated, callers cancelling — with the api's slot held across its call downstream
//! (`server_slot = "handler"`, `ShedLayer`'s lifetime), and records what the api's door did
//! (`seawall_sim::door_trace`): the simulator's own tier code, not a copy of it. The same
//! arrivals (attempt number, deadline), handler ends and cancellations, at the same simulated
//! instants, are then fed to `ShedLayer` on a manual clock: after each one, both must have
//! admitted, queued, shed and dropped the same requests, with the same statuses.
#![cfg(feature = "server")]

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::{Request, Response};
use seawall::deadline::Deadline;
use seawall::time::{Clock, Instant, ManualClock};
use seawall_sim::{Door, DoorEvent, Scenario};
use seawall_tower::server::ShedLayer;
use seawall_tower::wire::{REQUEST_ATTEMPT, RequestDeadline};
use tokio::sync::oneshot;
use tower::{Layer, Service};

const SLOTS: usize = 2;
const QUEUE: usize = 6;

/// 120 rps at an api of 2 slots whose handler takes ~2 ms and calls a ~20 ms database (which
/// 2 slots carry at ~90 rps), each attempt given 50 ms: a standing queue, CoDel drops, shed
/// retries, and, while the database is slow (10–16 s), deadlines that pass in the queue and
/// callers that give up.
fn scenario(slot: &str, cancellation: bool, deadline_ms: u32) -> Scenario {
    let text = format!(
        r#"
name = "door"
description = "an api of {SLOTS} slots over a database that slows down"
duration_s = 24
[edge]
rate = 120
deadline_ms = {deadline_ms}
retries = true
timeout_ms = 50
[[tier]]
name = "api"
workers = {SLOTS}
service = {{ mean_ms = 2 }}
queue_limit = {QUEUE}
timeout_ms = 400
[[tier]]
name = "db"
workers = 1000
service = {{ mean_ms = 20 }}
[[fault]]
kind = "latency"
tier = "db"
start_s = 10
duration_s = 6
p50_ms = 150
p99_ms = 900
"#
    );
    let sets = vec![
        format!("policies.seawall.server_slot={slot}"),
        format!("policies.seawall.cancellation={cancellation}"),
        // Retries as the edge's policy allows them, not as its budget rations them.
        "policies.seawall.budget=none".to_string(),
    ];
    Scenario::parse("door.toml", &text, &sets).unwrap()
}

/// What a client sees of a request at the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Seen {
    /// Handed to the handler.
    Admitted(u64),
    /// Waiting for a slot.
    Queued(u64),
    /// Refused on arrival, with this status.
    Shed(u64, u16),
    /// Refused after waiting (evicted, CoDel, deadline), with this status.
    Dropped(u64, u16),
}

/// What the door is told: the inputs of the trace.
#[derive(Debug, Clone, Copy)]
enum Input {
    Arrive { t_ns: u64, id: u64, attempt: u32, deadline_ns: Option<u64> },
    Finish { t_ns: u64, id: u64 },
    Cancel { t_ns: u64, id: u64 },
}

/// The simulator's record cut into steps: each input, with what the door did in answer.
fn steps(log: &[DoorEvent]) -> Vec<(Input, BTreeSet<Seen>)> {
    let mut out: Vec<(Input, BTreeSet<Seen>)> = Vec::new();
    let mut queued = BTreeSet::new();
    for e in log {
        let (t_ns, id) = (e.t_ns, e.request);
        let seen = match e.what {
            Door::Arrived { attempt, deadline_ns } => {
                out.push((Input::Arrive { t_ns, id, attempt, deadline_ns }, BTreeSet::new()));
                continue;
            }
            // When the simulator frees the slot is what the test checks, through what the
            // door does next; what `ShedLayer` is told is when the handler returns.
            Door::Finished => continue,
            Door::Answered => {
                out.push((Input::Finish { t_ns, id }, BTreeSet::new()));
                continue;
            }
            Door::Cancelled => {
                out.push((Input::Cancel { t_ns, id }, BTreeSet::new()));
                continue;
            }
            Door::Admitted => Seen::Admitted(id),
            Door::Queued => {
                queued.insert(id);
                Seen::Queued(id)
            }
            Door::Refused { status } if queued.contains(&id) => Seen::Dropped(id, status),
            Door::Refused { status } => Seen::Shed(id, status),
        };
        out.last_mut().expect("a door answers an input").1.insert(seen);
    }
    out
}

type Handlers = Arc<Mutex<BTreeMap<u64, oneshot::Sender<()>>>>;
type Pending = Pin<Box<dyn Future<Output = Result<Response<String>, std::convert::Infallible>>>>;

/// `ShedLayer` on a manual clock over a handler that runs until the trace ends it, fed the
/// trace's inputs; what it did after each, or the first input it could not have been given
/// (a handler ending that never started).
fn replay(inputs: &[Input]) -> Result<Vec<BTreeSet<Seen>>, String> {
    let clock = ManualClock::new();
    let handlers: Handlers = Arc::default();
    let h = handlers.clone();
    let inner = tower::service_fn(move |req: Request<()>| {
        let id: u64 = req.headers()["x-id"].to_str().unwrap().parse().unwrap();
        let (tx, rx) = oneshot::channel();
        h.lock().unwrap().insert(id, tx);
        async move {
            let _ = rx.await;
            Ok::<_, std::convert::Infallible>(Response::new(String::new()))
        }
    });
    let mut svc = ShedLayer::new(NonZeroUsize::new(SLOTS).unwrap())
        .with_queue(QUEUE)
        .with_seed(1)
        .with_clock(clock.clone())
        .layer(inner);
    let mut cx = Context::from_waker(Waker::noop());
    let mut waiting: BTreeMap<u64, Pending> = BTreeMap::new();
    let mut admitted = BTreeSet::new();
    let mut out = Vec::new();
    for input in inputs {
        let mut seen = BTreeSet::new();
        let t_ns = match *input {
            Input::Arrive { t_ns, .. }
            | Input::Finish { t_ns, .. }
            | Input::Cancel { t_ns, .. } => t_ns,
        };
        let now = clock.now().as_nanos();
        clock.advance(Duration::from_nanos(t_ns - now));
        match *input {
            Input::Arrive { id, attempt, deadline_ns, .. } => {
                let req = Request::builder()
                    .header("x-id", id.to_string())
                    .header(REQUEST_ATTEMPT, attempt.to_string());
                let mut req = req.body(()).unwrap();
                if let Some(d) = deadline_ns {
                    let at = Deadline::at(Instant::from_nanos(d));
                    req.extensions_mut().insert(RequestDeadline::on(&clock, at));
                }
                assert!(svc.poll_ready(&mut cx).is_ready());
                let mut fut: Pending = Box::pin(svc.call(req));
                match fut.as_mut().poll(&mut cx) {
                    Poll::Ready(res) => {
                        seen.insert(Seen::Shed(id, res.unwrap().status().as_u16()));
                    }
                    Poll::Pending => {
                        if !handlers.lock().unwrap().contains_key(&id) {
                            seen.insert(Seen::Queued(id));
                        }
                        waiting.insert(id, fut);
                    }
                }
            }
            Input::Finish { id, .. } => {
                let Some(tx) = handlers.lock().unwrap().remove(&id) else {
                    return Err(format!("step {}: request {id} ended but never ran", out.len()));
                };
                let _ = tx.send(());
            }
            Input::Cancel { id, .. } => {
                handlers.lock().unwrap().remove(&id);
                waiting.remove(&id);
            }
        }
        // Let every future make progress: ended handlers free their slots, granted waiters
        // call the handler, dropped waiters get their answer.
        loop {
            let mut ready = Vec::new();
            for (id, fut) in waiting.iter_mut() {
                if let Poll::Ready(res) = fut.as_mut().poll(&mut cx) {
                    ready.push((*id, res.unwrap().status().as_u16()));
                }
            }
            for &(id, code) in &ready {
                waiting.remove(&id);
                if code != 200 {
                    seen.insert(Seen::Dropped(id, code));
                }
            }
            if ready.is_empty() {
                break;
            }
        }
        for &id in handlers.lock().unwrap().keys() {
            if admitted.insert(id) {
                seen.insert(Seen::Admitted(id));
            }
        }
        out.push(seen);
    }
    Ok(out)
}

/// Seed 1 with cancellation (callers that give up take their requests out of the queue) and
/// 8 s deadlines (room for the edge's retries after a shed answer's `Retry-After`); seed 2
/// without cancellation and with 120 ms deadlines (requests stay queued until their deadline
/// passes: 504 at the door).
#[test]
fn the_simulators_door_and_shed_layer_agree_request_by_request() {
    let mut all: Vec<Seen> = Vec::new();
    let (mut retries, mut cancels) = (0, 0);
    for (seed, cancellation, deadline_ms) in [(1, true, 8_000), (2, false, 120)] {
        let sc = scenario("handler", cancellation, deadline_ms);
        let log = seawall_sim::door_trace(&sc, "seawall", seed, "api").unwrap();
        let steps = steps(&log);
        let inputs: Vec<Input> = steps.iter().map(|s| s.0).collect();
        let layer = replay(&inputs).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for (i, ((input, sim), shed)) in steps.iter().zip(&layer).enumerate() {
            assert_eq!(sim, shed, "seed {seed}, step {i} of {} ({input:?})", steps.len());
        }
        all.extend(steps.iter().flat_map(|s| s.1.iter().copied()));
        let count = |f: fn(&Input) -> bool| inputs.iter().filter(|s| f(s)).count();
        retries += count(|i| matches!(i, Input::Arrive { attempt, .. } if *attempt > 1));
        cancels += count(|i| matches!(i, Input::Cancel { .. }));
    }
    // The traces reach every path, or agreeing would prove little.
    let n = |f: fn(&Seen) -> bool| all.iter().filter(|s| f(s)).count();
    let counts = [
        ("admitted", n(|s| matches!(s, Seen::Admitted(_)))),
        ("queued", n(|s| matches!(s, Seen::Queued(_)))),
        ("shed on arrival", n(|s| matches!(s, Seen::Shed(_, 503)))),
        ("dropped from the queue", n(|s| matches!(s, Seen::Dropped(_, 503)))),
        ("dropped with its deadline passed", n(|s| matches!(s, Seen::Dropped(_, 504)))),
        ("retries", retries),
        ("cancellations", cancels),
    ];
    eprintln!("{counts:?}");
    for (what, count) in counts {
        assert!(count > 0, "no {what} in the traces: {counts:?}");
    }
}

/// The control: the simulator with the slot freed at the end of the api's own work (its
/// default, `server_slot = "service"`) is not `ShedLayer`: it admits requests while
/// `ShedLayer` still holds the slots of handlers waiting for the database.
#[test]
fn the_door_with_its_slot_freed_early_is_not_shed_layers() {
    let log =
        seawall_sim::door_trace(&scenario("service", true, 8_000), "seawall", 1, "api").unwrap();
    let steps = steps(&log);
    let inputs: Vec<Input> = steps.iter().map(|s| s.0).collect();
    match replay(&inputs) {
        Ok(layer) => {
            let differ = steps.iter().zip(&layer).filter(|((_, sim), shed)| sim != *shed).count();
            assert!(differ > 0, "the slot's lifetime made no difference to the door");
        }
        Err(e) => eprintln!("as expected, ShedLayer could not follow: {e}"),
    }
}
