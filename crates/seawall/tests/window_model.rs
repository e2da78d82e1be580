//! Model-checked concurrent writes into the budget window's ring (the tagged slots of
//! `budget/window.rs`), through the public `AdaptiveThrottle`, its one two-lane user.
//!
//! Why a model checker: the ring is lock-free, and its one subtle step is a slot changing
//! generation. A writer that finds an older generation in its slot replaces it with a
//! compare-and-swap; two writers doing that at once, or one doing it while another adds to the
//! old generation, must not lose an event of the new generation. That happens only when two
//! threads meet inside a few instructions, which real threads on a loaded machine almost never
//! do; Shuttle runs every thread on one OS thread and picks, at each atomic access, which thread
//! goes next (with PCT, which is designed to find bugs that need a few specific preemptions), so
//! the race is explored thousands of times per second, and a failure prints a schedule that
//! replays it.
//!
//! What it covers and what it does not: Shuttle runs a sequentially consistent model, so it
//! checks the *protocol* (load, compare-and-swap, retry; `fetch_add` on a current slot) in every
//! interleaving it explores, but not the memory orderings (an `Acquire` weakened to `Relaxed`
//! passes here). The window's reads and writes are all `SeqCst` in `AdaptiveThrottle`.
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle \
//!   cargo test -p seawall --test window_model
//! ```
//!
//! Without `--cfg shuttle` this file compiles to nothing (the crate uses std's atomics).
#![cfg(shuttle)]

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use seawall::budget::{AdaptiveThrottle, AttemptOutcome, Budget};
use seawall::time::Instant;
use shuttle::thread;

/// Schedules tried per test. With the slot's compare-and-swap replaced by a plain store (a
/// racing writer's event overwritten), PCT found a lost count at schedule 47; 20 000 leaves a
/// wide margin and runs in seconds.
const ITERATIONS: usize = 20_000;

thread_local! {
    /// The schedule being run, for failure messages: Shuttle runs a test's schedules one after
    /// another, every task of them on the test's own OS thread.
    static SCHEDULE: Cell<usize> = const { Cell::new(0) };
}

fn schedule() -> usize {
    SCHEDULE.get()
}

fn at(ms: u64) -> Instant {
    Instant::from_nanos(ms * 1_000_000)
}

/// A 12 s window of 1 s slots in a ring of 16, with three requests and three accepts at 3 s.
/// At 19 s (generation 19, the same ring slot as generation 3) that history is out of the
/// window, so the first writer there must take the slot over.
fn throttle_with_old_slot() -> Arc<AdaptiveThrottle> {
    SCHEDULE.set(SCHEDULE.get() + 1);
    let t = Arc::new(AdaptiveThrottle::new(Duration::from_secs(12), 2.0).expect("valid"));
    for _ in 0..3 {
        assert!(t.admit(at(3_000), false, 0.999));
        t.record(at(3_000), None, AttemptOutcome::Answered);
    }
    assert_eq!(t.counts(at(3_500)), (3, 3));
    assert_eq!(t.counts(at(19_500)), (0, 0), "generation 3 has left the window");
    t
}

/// One request and its accept at 19 s.
fn call_at_19(t: &AdaptiveThrottle) {
    assert!(t.admit(at(19_000), false, 0.999), "an empty window admits");
    t.record(at(19_000), None, AttemptOutcome::Answered);
}

/// Two writers taking the old slot over at once, and a reader between them: no event of the new
/// generation is lost (both count, whichever wins the swap), and no read sees more than was
/// written or the old generation's counts.
fn writers_racing_a_slot_takeover() {
    let t = throttle_with_old_slot();
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let t = Arc::clone(&t);
            thread::spawn(move || call_at_19(&t))
        })
        .collect();
    let reader = {
        let t = Arc::clone(&t);
        thread::spawn(move || {
            for _ in 0..2 {
                let (requests, accepts) = t.counts(at(19_500));
                assert!(
                    requests <= 2 && accepts <= 2,
                    "({requests}, {accepts}), schedule {}",
                    schedule()
                );
            }
        })
    };
    for w in writers {
        w.join().expect("writer");
    }
    reader.join().expect("reader");
    assert_eq!(t.counts(at(19_500)), (2, 2), "an event was lost, schedule {}", schedule());
}

/// A writer still at 3 s (its `now` a ring behind) racing the takeover at 19 s: its event lands
/// in generation 3 before the takeover (and leaves with it), is refused after it, or, when it
/// had read the slot as current just before, is added to generation 19 — counted later than it
/// happened, never twice. The 19 s event is never lost: with the check that leaves a newer slot
/// alone removed (the late writer takes the slot back to generation 3), this fails at schedule 5.
fn late_writer_racing_a_takeover() {
    let t = throttle_with_old_slot();
    let late = {
        let t = Arc::clone(&t);
        thread::spawn(move || t.record(at(3_000), None, AttemptOutcome::Answered))
    };
    let fresh = {
        let t = Arc::clone(&t);
        thread::spawn(move || call_at_19(&t))
    };
    late.join().expect("late writer");
    fresh.join().expect("writer");
    let (requests, accepts) = t.counts(at(19_500));
    assert_eq!(requests, 1, "schedule {}", schedule());
    assert!((1..=2).contains(&accepts), "{accepts} accepts, schedule {}", schedule());
}

#[test]
fn writers_racing_a_slot_takeover_pct() {
    shuttle::check_pct(writers_racing_a_slot_takeover, ITERATIONS, 3);
}

#[test]
fn late_writer_racing_a_takeover_pct() {
    shuttle::check_pct(late_writer_racing_a_takeover, ITERATIONS, 3);
}
