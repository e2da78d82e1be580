//! Model-checked concurrent reads of the budget window's cached sums (the seqlock in
//! `budget/window.rs`), through the public `AdaptiveThrottle`, which is its only user.
//!
//! Why a model checker: the cache is a seqlock, and a seqlock's failure is a torn read — a
//! reader taking the generation and epoch of one publication with the sums of another — which
//! happens only when a reader runs exactly while a publisher writes. Real threads on a loaded
//! machine almost never hit that window; Shuttle runs every thread on one OS thread and picks,
//! at each atomic access, which thread goes next (randomly, and with PCT, which is designed to
//! find bugs that need a few specific preemptions), so the window is explored thousands of
//! times per second, and a failure prints a schedule that replays it.
//!
//! What it covers and what it does not: Shuttle runs a sequentially consistent model, so it
//! checks the *protocol* (the odd/even sequence, both sequence checks, one publisher at a time,
//! the epoch that invalidates an entry) in every interleaving it explores, but not the memory
//! orderings (an `Acquire` weakened to `Relaxed` passes here). loom models weak orderings but
//! supports only `Acquire` fences, and the seqlock needs a `Release` fence.
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle \
//!   cargo test -p seawall --release --test window_model
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

/// Schedules tried per test. With the second sequence check removed, PCT found a torn read at
/// schedule 7 624 (the failure message names the schedule); 100 000 leaves a margin of more than
/// ten and runs in seconds. Shuttle's uniformly random scheduler did not find it in 20 000,
/// which is why these tests use PCT.
const ITERATIONS: usize = 100_000;

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

/// A 12 s window of 1 s slots, read at 5.5 s (generation 5) after three requests and three
/// accepts at 3 s, with the cache entry for generation 5 published — and then invalidated by a
/// late accept at 4 s (a finished slot). The next reader must republish; any reader racing it
/// must still see exactly (3 requests, 4 accepts).
fn throttle_with_stale_entry() -> Arc<AdaptiveThrottle> {
    SCHEDULE.set(SCHEDULE.get() + 1);
    let t = Arc::new(AdaptiveThrottle::new(Duration::from_secs(12), 2.0).expect("valid"));
    for _ in 0..3 {
        assert!(t.admit(at(3_000), false, 0.999));
        t.record(at(3_000), None, AttemptOutcome::Answered);
    }
    assert_eq!(t.counts(at(5_500)), (3, 3), "publishes the entry for generation 5");
    t.record(at(4_000), None, AttemptOutcome::Answered);
    t
}

/// Readers racing a republish: with no write during the race, every read is exact.
fn racing_readers() {
    let t = throttle_with_stale_entry();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let t = Arc::clone(&t);
            thread::spawn(move || {
                for _ in 0..2 {
                    assert_eq!(
                        t.counts(at(5_500)),
                        (3, 4),
                        "torn or stale read, schedule {}",
                        schedule()
                    );
                }
            })
        })
        .collect();
    assert_eq!(t.counts(at(5_500)), (3, 4), "torn or stale read, schedule {}", schedule());
    for r in readers {
        r.join().expect("reader");
    }
}

/// A late write racing readers: a read sees the window either before or after it (never less
/// than before, never more than after), and once the writer is done every read sees it.
fn reader_racing_a_late_write() {
    let t = throttle_with_stale_entry();
    let writer = {
        let t = Arc::clone(&t);
        thread::spawn(move || t.record(at(4_200), None, AttemptOutcome::Answered))
    };
    let reader = {
        let t = Arc::clone(&t);
        thread::spawn(move || {
            for _ in 0..2 {
                let (requests, accepts) = t.counts(at(5_500));
                assert_eq!(requests, 3);
                assert!((4..=5).contains(&accepts), "{accepts} accepts, schedule {}", schedule());
            }
        })
    };
    writer.join().expect("writer");
    assert_eq!(t.counts(at(5_500)), (3, 5), "a finished write is unseen, schedule {}", schedule());
    reader.join().expect("reader");
}

#[test]
fn racing_readers_pct() {
    shuttle::check_pct(racing_readers, ITERATIONS, 3);
}

#[test]
fn reader_racing_a_late_write_pct() {
    shuttle::check_pct(reader_racing_a_late_write, ITERATIONS, 3);
}
