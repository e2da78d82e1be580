//! Budgets shared by two threads calling at once: the same operations and anchors as
//! `budget_single`, each thread on its own core (the machine has two). A sample's time is the
//! slower thread's, so the figure is the time per call *per thread* under contention.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant as StdInstant};

use criterion::{Criterion, criterion_group, criterion_main};

mod common;

const THREADS: u64 = 2;

/// Runs `op` `iters` times on each of two threads started together; returns the slower
/// thread's loop time (thread start-up excluded). `next` hands out call numbers across samples
/// so virtual time only moves forward; both threads walk the same instants.
fn contend<S: Sync>(s: &S, op: impl Fn(&S, u64) + Sync, next: &AtomicU64, iters: u64) -> Duration {
    let base = next.fetch_add(iters, Ordering::Relaxed);
    let barrier = Barrier::new(THREADS as usize);
    thread::scope(|sc| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (op, barrier) = (&op, &barrier);
                sc.spawn(move || {
                    barrier.wait();
                    let start = StdInstant::now();
                    for i in base..base + iters {
                        op(s, i);
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("bench thread")).max().unwrap_or_default()
    })
}

macro_rules! contended {
    ($g:expr, $name:expr, $subject:expr, $op:path) => {{
        let subject = $subject;
        let next = AtomicU64::new(0);
        $g.bench_function($name, |b| {
            b.iter_custom(|iters| contend(&subject, |s, i| $op(s, i), &next, iters))
        });
    }};
}

fn budgets(c: &mut Criterion) {
    all_subjects!(c, "contended/", contended);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = budgets
}
criterion_main!(benches);
