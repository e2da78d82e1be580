//! The open-loop driver on tokio's paused clock, against a fake transport whose answers take a
//! chosen (virtual) time: deterministic to the microsecond.
//!
//! Each test names the change that turns it red:
//! - awaiting each request before the next send (closed loop) → `sends_on_schedule_…`;
//! - measuring latency from the actual send instead of the scheduled one, or the latency "from
//!   the send" from the schedule → `a_stalled_…`;
//! - dropping the lateness check → `requests_too_late_…`; the in-flight check → `at_max_in_…`;
//! - dropping a due request when every slot is busy instead of letting it wait for one (the
//!   old dispatcher) → `a_burst_owed_…` and `at_max_in_…`;
//! - not abandoning a request at its deadline → `the_deadline_…`;
//! - every shard starting at arrival 0 (duplicates instead of a split) → `shards_send_…`.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seawall_load::{
    Bounds, Outcome, Recorder, Schedule, Stage, Timer, TokioTimer, Transport, drive,
};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

/// Answers 200 after `service`, and notes when each call started.
struct Fake {
    service: Duration,
    calls: Mutex<Vec<(Instant, Duration)>>,
}

impl Fake {
    fn new(service: Duration) -> Arc<Self> {
        Arc::new(Self { service, calls: Mutex::new(Vec::new()) })
    }
}

impl Transport for Fake {
    async fn call(&self, remaining: Duration) -> Outcome {
        self.calls.lock().unwrap().push((Instant::now(), remaining));
        tokio::time::sleep(self.service).await;
        Outcome::Status(200)
    }
}

/// A machine that froze: a wake-up due in [from, until) happens at `until`.
#[derive(Clone)]
struct Stall {
    start: Instant,
    from: Duration,
    until: Duration,
}

impl Timer for Stall {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> + Send {
        let t = at - self.start;
        let at = if t >= self.from && t < self.until { self.start + self.until } else { at };
        tokio::time::sleep_until(at)
    }
}

fn bounds(max_in_flight: usize, lateness_ms: u64) -> Bounds {
    Bounds {
        max_in_flight: NonZeroUsize::new(max_in_flight).unwrap(),
        max_lateness: Duration::from_millis(lateness_ms),
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

async fn run<K: Timer>(
    rate: f64,
    secs: u64,
    b: Bounds,
    deadline: Duration,
    t: Arc<Fake>,
    k: K,
) -> Recorder {
    let s = Schedule::constant(rate, Duration::from_secs(secs)).unwrap();
    drive(&s, b, deadline, t, k, |_| {}).await
}

#[tokio::test(start_paused = true)]
async fn sends_on_schedule_whatever_the_responses_do() {
    // Each answer takes ~2 s; a closed-loop sender would manage 1 request per 2 s per slot.
    let fake = Fake::new(1995 * MS);
    let start = Instant::now();
    let rec = run(100.0, 3, bounds(1000, 50), 5000 * MS, fake.clone(), TokioTimer).await;
    let sent: Vec<u64> = rec.seconds.iter().map(|s| s.sent).collect();
    assert_eq!(sent, vec![100, 100, 100]);
    let calls = fake.calls.lock().unwrap();
    for (i, (at, remaining)) in calls.iter().enumerate() {
        assert_eq!(*at - start, i as u32 * 10 * MS, "call {i} left on time");
        assert_eq!(*remaining, 5000 * MS, "the full deadline is left when sent on time");
    }
    assert_eq!(rec.seconds.iter().map(|s| s.good).sum::<u64>(), 300);
    assert!((ms(rec.overall.value_at_quantile(0.5)) - 1995.0).abs() < 2.0);
    assert_eq!(rec.peak_in_flight, 200, "2 s of answers at 100 rps are outstanding at once");
    assert_eq!(Instant::now() - start, 2990 * MS + 1995 * MS, "returns when the last answer is in");
}

#[tokio::test(start_paused = true)]
async fn a_stalled_sender_charges_its_stall_to_latency() {
    // The sender freezes from 1.0 s to 1.2 s; the 20 requests due then go out at 1.2 s, each
    // answered in 10 ms. Their latency from the schedule is 20 … 210 ms; from the send, 10 ms.
    let fake = Fake::new(10 * MS);
    let start = Instant::now();
    let stall = Stall { start, from: 1000 * MS, until: 1200 * MS };
    let rec = run(100.0, 2, bounds(1000, 500), 1000 * MS, fake.clone(), stall).await;
    assert_eq!(rec.seconds[1].sent, 100, "within the lateness bound nothing is dropped");
    assert_eq!(rec.max_lag, 200 * MS);
    let max0 = ms(rec.seconds[0].latency.max());
    let max1 = ms(rec.seconds[1].latency.max());
    assert!((max0 - 10.0).abs() < 0.2, "undisturbed second: {max0} ms");
    assert!((max1 - 210.0).abs() < 2.5, "stalled second: {max1} ms");
    assert_eq!(rec.seconds[1].latency.count_between(19_000, 211_000), 20);
    // From the send, every request took the fake's 10 ms: the stall is the generator's.
    let from_send = (ms(rec.from_send.min()), ms(rec.from_send.max()));
    assert!((from_send.0 - 10.0).abs() < 0.1 && (from_send.1 - 10.0).abs() < 0.1, "{from_send:?}");
    assert_eq!(rec.from_send.len(), 200);
    // The deadline header carries what is left of the deadline from the schedule.
    let calls = fake.calls.lock().unwrap();
    assert_eq!(calls[100].1, 800 * MS, "due at 1.0 s, sent at 1.2 s");
}

#[tokio::test(start_paused = true)]
async fn requests_too_late_are_dropped_not_sent_in_a_burst() {
    // Same stall to 1.205 s, lateness bound 50 ms: due 1.00 … 1.15 (lateness 205 … 55 ms) are
    // dropped, 1.16 … 1.20 (45 … 5 ms) are sent.
    let fake = Fake::new(10 * MS);
    let start = Instant::now();
    let stall = Stall { start, from: 1000 * MS, until: 1205 * MS };
    let rec = run(100.0, 2, bounds(1000, 50), 1000 * MS, fake, stall).await;
    let s = &rec.seconds[1];
    assert_eq!((s.offered, s.sent, s.dropped_late, s.dropped_full), (100, 84, 16, 0));
    assert_eq!(rec.seconds[0].dropped_late, 0);
    assert_eq!(rec.max_lag, 45 * MS);
}

#[tokio::test(start_paused = true)]
async fn at_max_in_flight_requests_wait_and_those_too_late_are_dropped() {
    // 10 slots, answers in 995 ms, 100 rps, lateness 50 ms. Requests 0–9 take the slots until
    // 0.995–1.085 s; the ones due meanwhile wait. A slot that comes free skips (drops as full)
    // those more than 50 ms overdue and sends the first within 50 ms: at 0.995 s the one due at
    // 0.95 s, and so on — 15 sent in second 0 (0–9, 95–99), 11 in second 1 (100–104, 194–199:
    // the one due at 1.94 s goes at 1.99 s, exactly 50 ms late, still within the bound).
    let fake = Fake::new(995 * MS);
    let rec = run(100.0, 2, bounds(10, 50), 2000 * MS, fake, TokioTimer).await;
    let got: Vec<_> = rec
        .seconds
        .iter()
        .map(|s| (s.offered, s.sent, s.dropped_full, s.dropped_late, s.good))
        .collect();
    assert_eq!(got, vec![(100, 15, 85, 0, 15), (100, 11, 89, 0, 11)]);
    assert_eq!(rec.peak_in_flight, 10);
    assert_eq!(rec.max_lag, 50 * MS, "nothing is sent more than the lateness bound late");
}

#[tokio::test(start_paused = true)]
async fn a_burst_owed_after_a_stall_waits_for_a_slot_instead_of_being_dropped() {
    // 2 slots, 100 rps, answers in 4 ms (the slots could carry 500 rps). The sender
    // freezes from 1.00 to 1.05 s and then owes 6 requests (due 1.00 … 1.05) with 2 slots. They
    // wait for a free slot — none is dropped — and their latency runs from their schedule: the
    // one due at 1.00 s goes at 1.05 s (54 ms), the ones due at 1.02 and 1.03 s at 1.054 s when
    // the first two answers are in (38 and 28 ms), and by 1.06 s the sender is back on time.
    let fake = Fake::new(4 * MS);
    let start = Instant::now();
    let stall = Stall { start, from: 1000 * MS, until: 1050 * MS };
    let rec = run(100.0, 2, bounds(2, 100), 1000 * MS, fake.clone(), stall).await;
    let s = &rec.seconds[1];
    assert_eq!((s.offered, s.sent, s.dropped_full, s.dropped_late, s.good), (100, 100, 0, 0, 100));
    assert_eq!(rec.peak_in_flight, 2);
    assert_eq!(rec.max_lag, 50 * MS);
    let lat = |lo: u64, hi: u64| s.latency.count_between(lo * 1000, hi * 1000);
    assert_eq!(ms(s.latency.max()).round(), 54.0, "from the schedule, not the send");
    assert_eq!((lat(37, 39), lat(27, 29)), (1, 1), "due 1.02, 1.03 s: waited for a slot");
    assert_eq!(lat(0, 5), 100 - 7, "all the others on time (4 ms)");
    // Sent as slots came free, in the order they were due.
    let calls = fake.calls.lock().unwrap();
    let sent: Vec<u64> =
        calls[100..107].iter().map(|c| (c.0 - start).as_micros() as u64 / 1000).collect();
    assert_eq!(sent, vec![1050, 1050, 1054, 1054, 1058, 1058, 1062]);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_abandons_a_request_and_counts_it() {
    // Answers would take an hour; the deadline is 300 ms.
    let fake = Fake::new(Duration::from_secs(3600));
    let start = Instant::now();
    let rec = run(10.0, 1, bounds(100, 50), 300 * MS, fake, TokioTimer).await;
    let s = &rec.seconds[0];
    assert_eq!((s.sent, s.deadline, s.good), (10, 10, 0));
    assert!((ms(rec.overall.min()) - 300.0).abs() < 0.5, "recorded at the deadline");
    assert_eq!(Instant::now() - start, 900 * MS + 300 * MS, "the run ends at the last deadline");
}

#[tokio::test(start_paused = true)]
async fn offered_follows_a_ramp_second_by_second() {
    let fake = Fake::new(MS);
    let s = Schedule::ramp(
        0.0,
        vec![
            Stage { duration: Duration::from_secs(2), target: 100.0 },
            Stage { duration: Duration::from_secs(1), target: 100.0 },
            Stage { duration: Duration::from_secs(2), target: 20.0 },
        ],
    )
    .unwrap();
    let mut seen = Vec::new();
    let rec = drive(&s, bounds(100, 50), 100 * MS, fake, TokioTimer, |p| {
        seen.push((p.second, p.offered))
    })
    .await;
    let offered: Vec<u64> = rec.seconds.iter().map(|s| s.offered).collect();
    assert_eq!(offered, vec![25, 75, 100, 80, 40]);
    assert_eq!(seen, vec![(0, 25), (1, 75), (2, 100), (3, 80), (4, 40)], "progress once a second");
}

#[tokio::test(start_paused = true)]
async fn shards_send_the_schedule_exactly_between_them() {
    use seawall_load::{Shard, drive_shard};
    // Three drivers on every third arrival send, together, each instant of the schedule once.
    let s = Schedule::constant(90.0, Duration::from_secs(1)).unwrap();
    let fakes: Vec<_> = (0..3).map(|_| Fake::new(MS)).collect();
    let start = Instant::now();
    let runs = fakes.iter().enumerate().map(|(index, f)| {
        drive_shard(
            &s,
            Shard { index, of: 3 },
            bounds(10, 50),
            100 * MS,
            f.clone(),
            TokioTimer,
            |_| {},
        )
    });
    let recs = futures_join_all(runs).await;
    let mut all: Vec<Duration> = fakes
        .iter()
        .flat_map(|f| f.calls.lock().unwrap().iter().map(|c| c.0 - start).collect::<Vec<_>>())
        .collect();
    all.sort();
    // tokio's timer wakes on whole milliseconds: each arrival goes out at its instant rounded up.
    let ceil_ms = |t: Duration| Duration::from_millis(t.as_nanos().div_ceil(1_000_000) as u64);
    let want: Vec<Duration> = s.arrivals().map(ceil_ms).collect();
    assert_eq!(all, want);
    assert!(recs.iter().all(|r| r.seconds[0].sent == 30));
}

/// Runs the futures concurrently on this task (the test crate has no `futures` dependency).
async fn futures_join_all<F: Future>(fs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    for f in fs {
        set.push(Box::pin(f));
    }
    let mut out: Vec<Option<F::Output>> = set.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in set.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    out.into_iter().map(|o| o.expect("ready")).collect()
}
