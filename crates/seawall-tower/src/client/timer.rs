//! The call's one timer: an attempt's timeout, then the wait before the next attempt, and so on.
//!
//! A call that never waits — a success on the first poll, the common case — never allocates
//! it. The first wait allocates it (a tokio `Sleep` is large, and a future that is moved must
//! not hold it inline); every later wait resets it. Between attempts it also holds what the
//! failed attempt produced, which becomes the error's content if the next attempt is refused.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;

pin_project! {
    /// A timer with what it holds until it fires.
    pub(crate) struct Timer<T> {
        #[pin]
        sleep: Sleep,
        held: T,
    }
}

/// Where a call keeps its timer: `None` until its first wait.
pub(crate) type Slot<T> = Option<Pin<Box<Timer<T>>>>;

/// Sets the timer in `slot` to fire `after` from now, holding `held` (what it held before is
/// dropped); allocates it the first time.
pub(crate) fn set<T>(slot: &mut Slot<T>, after: Duration, held: T) {
    match slot {
        Some(timer) => {
            let this = timer.as_mut().project();
            // As `tokio::time::sleep` does, a wait too long to represent is a very long one.
            let now = tokio::time::Instant::now();
            let far = || now + Duration::from_secs(86_400 * 365 * 30);
            this.sleep.reset(now.checked_add(after).unwrap_or_else(far));
            *this.held = held;
        }
        None => *slot = Some(Box::pin(Timer { sleep: tokio::time::sleep(after), held })),
    }
}

impl<T> Timer<T> {
    /// Ready once the timer has fired.
    pub(crate) fn poll_fired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.project().sleep.poll(cx)
    }

    /// What the timer holds, leaving `empty` in its place.
    pub(crate) fn take(self: Pin<&mut Self>, empty: T) -> T {
        std::mem::replace(self.project().held, empty)
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use super::*;

    fn fired<T>(slot: &mut Slot<T>) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        slot.as_mut().unwrap().as_mut().poll_fired(&mut cx).is_ready()
    }

    #[tokio::test(start_paused = true)]
    async fn one_allocation_reset_for_each_wait_and_the_held_value_replaced() {
        let mut slot: Slot<u32> = None;
        set(&mut slot, Duration::from_millis(10), 1);
        let first: *const Timer<u32> = &**slot.as_ref().unwrap();
        assert!(!fired(&mut slot));
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(fired(&mut slot));

        set(&mut slot, Duration::from_millis(20), 2);
        assert!(std::ptr::eq(first, &**slot.as_ref().unwrap()), "reset, not reallocated");
        assert!(!fired(&mut slot), "a reset timer waits again");
        tokio::time::advance(Duration::from_millis(20)).await;
        assert!(fired(&mut slot));
        assert_eq!(slot.as_mut().unwrap().as_mut().take(0), 2);
        assert_eq!(slot.as_mut().unwrap().as_mut().take(0), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_too_long_to_represent_is_a_very_long_one() {
        let mut slot: Slot<()> = None;
        set(&mut slot, Duration::ZERO, ());
        set(&mut slot, Duration::MAX, ());
        tokio::time::advance(Duration::from_secs(86_400 * 365)).await;
        assert!(!fired(&mut slot));
    }
}
