//! Runs a sweep's tasks on scoped threads: each worker takes the next task index from a shared
//! counter and writes its result into that index's slot, so the collected results are in task
//! order whatever the thread count or the order in which tasks finish.

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Runs `task(i)` for every `i` in `0..n` on `jobs` threads; returns the results in index
/// order, or the error of the lowest failed index (the rest stop taking tasks).
/// `progress(done, n)` is called after each task.
pub(super) fn run_all<T: Send, E: Send>(
    n: usize,
    jobs: NonZeroUsize,
    task: &(dyn Fn(usize) -> Result<T, E> + Sync),
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<T>, E> {
    let slots: Mutex<Vec<Option<Result<T, E>>>> = Mutex::new((0..n).map(|_| None).collect());
    let (next, done, failed) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicBool::new(false));
    std::thread::scope(|scope| {
        for _ in 0..jobs.get().min(n.max(1)) {
            scope.spawn(|| {
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let r = task(i);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    // A worker that panicked poisons the lock; its slot stays empty and the
                    // panic resurfaces when the scope joins.
                    if let Ok(mut s) = slots.lock() {
                        s[i] = Some(r);
                    }
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, n);
                }
            });
        }
    });
    let slots = slots.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::with_capacity(n);
    let mut first_err = None;
    for s in slots {
        match s {
            Some(Ok(v)) => out.push(v),
            Some(Err(e)) => {
                first_err.get_or_insert(e);
            }
            None => {}
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_index_order_at_any_thread_count() {
        let square = |i: usize| Ok::<_, ()>(i * i);
        let want: Vec<usize> = (0..50).map(|i| i * i).collect();
        for jobs in [1, 2, 7] {
            let got = run_all(50, NonZeroUsize::new(jobs).unwrap(), &square, &|_, _| {}).unwrap();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn the_lowest_failure_is_reported() {
        let task = |i: usize| if i == 3 || i == 9 { Err(i) } else { Ok(i) };
        let one = NonZeroUsize::new(1).unwrap();
        assert_eq!(run_all(12, one, &task, &|_, _| {}), Err(3));
    }
}
