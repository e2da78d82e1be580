//! The call's one timer: an attempt's timeout, then the wait before the next attempt, and so on.
//!
//! A call that never waits — a success on the first poll, the common case — never allocates
//! it. The first wait allocates it (a tokio `Sleep` is large, and a future that is moved must
//! not hold it inline); every later wait resets the same allocation. It holds nothing but the
//! time: what a failed attempt produced is kept by the call's state, not here.

use std::pin::Pin;
use std::time::Duration;

use tokio::time::Sleep;

/// A boxed tokio timer, reused from one wait to the next.
pub(crate) type Timer = Pin<Box<Sleep>>;

/// A timer firing `after` from now: `spare` reset if there is one, else a new one.
pub(crate) fn after(spare: Option<Timer>, after: Duration) -> Timer {
    match spare {
        Some(mut timer) => {
            // As `tokio::time::sleep` does, a wait too long to represent is a very long one.
            let now = tokio::time::Instant::now();
            let far = || now + Duration::from_secs(86_400 * 365 * 30);
            timer.as_mut().reset(now.checked_add(after).unwrap_or_else(far));
            timer
        }
        None => Box::pin(tokio::time::sleep(after)),
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::{Context, Waker};

    use super::*;

    fn fired(timer: &mut Timer) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        timer.as_mut().poll(&mut cx).is_ready()
    }

    #[tokio::test(start_paused = true)]
    async fn one_allocation_reset_for_each_wait() {
        let mut timer = after(None, Duration::from_millis(10));
        let first: *const Sleep = &*timer;
        assert!(!fired(&mut timer));
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(fired(&mut timer));

        let mut timer = after(Some(timer), Duration::from_millis(20));
        assert!(std::ptr::eq(first, &*timer), "reset, not reallocated");
        assert!(!fired(&mut timer), "a reset timer waits again");
        tokio::time::advance(Duration::from_millis(20)).await;
        assert!(fired(&mut timer));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_too_long_to_represent_is_a_very_long_one() {
        let timer = after(None, Duration::ZERO);
        let mut timer = after(Some(timer), Duration::MAX);
        tokio::time::advance(Duration::from_secs(86_400 * 365)).await;
        assert!(!fired(&mut timer));
    }
}
