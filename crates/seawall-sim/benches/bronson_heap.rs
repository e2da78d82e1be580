//! A minimal discrete-event simulator of one model — `bronson` under `naive` — written the plain
//! way: one `BinaryHeap` of timed events, a `VecDeque` for the database queue, a `Vec` of calls.
//! It is the floor that `seawall-sim`'s engine is measured against in the same run
//! (`benches/run.sh`): what events per second cost when a program knows only this one model and
//! runs no policy code. `seawall-sim` pays for generality (any chain of tiers, the core's
//! `RetryPolicy` and admission types on every attempt, the report's series); this bench says what
//! that generality costs.
//!
//! The model is the SimPy reference model's (`benches/bronson_simpy.py`), itself the catalog's
//! `bronson` scenario: 280 QPS Poisson for `duration` seconds, an edge deadline of 2 s; the app
//! makes at most two attempts, the second as soon as the first is refused or has run 1 s without
//! an answer; the database has 30 workers, exponential 50 ms service, 10× slower while more than
//! 300 attempts arrived in the last second (ten 100 ms buckets), a queue of at most 10,000 (an
//! attempt beyond it is refused at once); an outage holds every request a worker takes between
//! 10 s and 20 s until 20 s. Work whose caller stopped waiting is still done.
//!
//! ```text
//! cargo bench -p seawall-sim --bench bronson_heap -- [SEED] [DURATION_S]
//! ```
//!
//! Prints one JSON line: wall seconds and CPU seconds (`benches/cpu.rs`), each the median of the
//! runs made in about a second, edge requests, goodput and events (heap pops).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

mod cpu;

const RATE: f64 = 280.0;
const DEADLINE: f64 = 2.0;
const ATTEMPTS: u8 = 2;
const TIMEOUT: f64 = 1.0;
const WORKERS: u32 = 30;
const SERVICE_MEAN: f64 = 0.05;
const QUEUE_LIMIT: usize = 10_000;
const DEGRADE_ABOVE: u32 = 300;
const DEGRADE_FACTOR: f64 = 10.0;
const OUTAGE: (f64, f64) = (10.0, 20.0);
const NANOS: f64 = 1e9;

/// What happens at an instant. The `u32`s index `Model::calls`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrival,
    /// Attempt `1` of call `0` has had no answer for `TIMEOUT`.
    Timeout(u32, u8),
    /// A worker held by the outage starts serving attempt `1` of call `0`.
    HoldEnd(u32, u8),
    /// A worker finished attempt `1` of call `0`.
    Done(u32, u8),
}

#[derive(Clone, Copy)]
struct Call {
    start: f64,
    /// The attempt the caller is waiting on; `None` once it has an answer or gave up.
    waiting: Option<u8>,
}

/// SplitMix64 (the core's `seawall::rng::splitmix64` over a counter): enough for exponential
/// variates.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        let z = seawall::rng::splitmix64(self.0);
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        // 53 random bits in (0, 1]: never 0, so `ln` is finite.
        ((z >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.next_f64().ln()
    }
}

struct Model {
    now: f64,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    calls: Vec<Call>,
    queue: VecDeque<(u32, u8)>,
    busy: u32,
    /// Attempts that reached the database, per 100 ms bucket of the last second.
    ring: [u32; 10],
    ring_slot: u64,
    ring_sum: u32,
    rng: Rng,
    edge: u64,
    good: u64,
    events: u64,
}

impl Model {
    fn new(seed: u64) -> Self {
        Model {
            now: 0.0,
            seq: 0,
            heap: BinaryHeap::new(),
            calls: Vec::new(),
            queue: VecDeque::new(),
            busy: 0,
            ring: [0; 10],
            ring_slot: 0,
            ring_sum: 0,
            rng: Rng(seed),
            edge: 0,
            good: 0,
            events: 0,
        }
    }

    fn at(&mut self, t: f64, e: Event) {
        self.seq += 1;
        self.heap.push(Reverse(((t * NANOS) as u64, self.seq, e)));
    }

    /// Moves the one-second window of arrival counts to `now`.
    fn advance(&mut self) {
        let slot = (self.now / 0.1) as u64;
        if slot > self.ring_slot {
            for k in self.ring_slot + 1..=slot.min(self.ring_slot + 10) {
                let i = (k % 10) as usize;
                self.ring_sum -= self.ring[i];
                self.ring[i] = 0;
            }
            self.ring_slot = slot;
        }
    }

    fn attempt(&mut self, call: u32, n: u8) {
        self.advance();
        self.ring[(self.ring_slot % 10) as usize] += 1;
        self.ring_sum += 1;
        self.calls[call as usize].waiting = Some(n);
        if self.busy < WORKERS {
            self.busy += 1;
            self.take(call, n);
        } else if self.queue.len() >= QUEUE_LIMIT {
            self.failed(call, n);
            return;
        } else {
            self.queue.push_back((call, n));
        }
        self.at(self.now + TIMEOUT, Event::Timeout(call, n));
    }

    /// A worker takes attempt `n` of `call`.
    fn take(&mut self, call: u32, n: u8) {
        if (OUTAGE.0..OUTAGE.1).contains(&self.now) {
            self.at(OUTAGE.1, Event::HoldEnd(call, n));
        } else {
            self.serve(call, n);
        }
    }

    fn serve(&mut self, call: u32, n: u8) {
        self.advance();
        let factor = if self.ring_sum > DEGRADE_ABOVE { DEGRADE_FACTOR } else { 1.0 };
        let t = self.now + self.rng.exp(SERVICE_MEAN) * factor;
        self.at(t, Event::Done(call, n));
    }

    /// Attempt `n` of `call` failed (refused or timed out): the next one, or give up.
    fn failed(&mut self, call: u32, n: u8) {
        if n + 1 < ATTEMPTS {
            self.attempt(call, n + 1);
        } else {
            self.calls[call as usize].waiting = None;
        }
    }

    fn run(&mut self, duration: f64) {
        let first = self.rng.exp(1.0 / RATE);
        self.at(first, Event::Arrival);
        let until = ((duration + DEADLINE) * NANOS) as u64;
        while let Some(&Reverse((t, _, e))) = self.heap.peek() {
            if t > until {
                break;
            }
            self.heap.pop();
            self.events += 1;
            self.now = t as f64 / NANOS;
            match e {
                Event::Arrival => {
                    let next = self.now + self.rng.exp(1.0 / RATE);
                    if next < duration {
                        self.at(next, Event::Arrival);
                    }
                    self.edge += 1;
                    let id = self.calls.len() as u32;
                    self.calls.push(Call { start: self.now, waiting: None });
                    self.attempt(id, 0);
                }
                Event::Timeout(call, n) => {
                    if self.calls[call as usize].waiting == Some(n) {
                        self.failed(call, n);
                    }
                }
                Event::HoldEnd(call, n) => self.serve(call, n),
                Event::Done(call, n) => {
                    let c = &mut self.calls[call as usize];
                    if c.waiting == Some(n) {
                        c.waiting = None;
                        if self.now - c.start <= DEADLINE {
                            self.good += 1;
                        }
                    }
                    match self.queue.pop_front() {
                        Some((call, n)) => self.take(call, n),
                        None => self.busy -= 1,
                    }
                }
            }
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; the positional arguments are the seed and the duration.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let parse = |i: usize, default: f64| -> f64 {
        match args.get(i).map(|a| a.parse::<f64>()) {
            None => default,
            Some(Ok(v)) if v.is_finite() && v > 0.0 => v,
            Some(_) => {
                eprintln!("usage: bronson_heap [SEED] [DURATION_S] (positive numbers)");
                std::process::exit(2);
            }
        }
    };
    let seed = parse(0, 1.0) as u64;
    let duration = parse(1, 60.0);

    let (mut walls, mut cpus) = (Vec::new(), Vec::new());
    let mut last = None;
    let budget = Instant::now();
    while walls.len() < 7 && (walls.is_empty() || budget.elapsed().as_secs_f64() < 1.0) {
        let (t0, c0) = (Instant::now(), cpu::thread_cpu_s());
        let mut m = Model::new(seed);
        m.run(duration);
        cpus.push(cpu::thread_cpu_s() - c0);
        walls.push(t0.elapsed().as_secs_f64());
        last = Some(m);
    }
    walls.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    let m = last.expect("at least one run");
    println!(
        "{{\"model\": \"heap-bronson-naive\", \"duration_s\": {duration}, \"wall_s\": {:.6}, \
         \"cpu_s\": {:.6}, \"edge\": {}, \"good\": {}, \"events\": {}, \"events_per_s\": {:.0}}}",
        walls[walls.len() / 2],
        cpus[cpus.len() / 2],
        m.edge,
        m.good,
        m.events,
        m.events as f64 / walls[walls.len() / 2]
    );
}
