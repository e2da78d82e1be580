//! Deadlines that propagate by themselves: the deadline of the request a task is serving,
//! readable by every outgoing call the task makes.
//!
//! While [`DeadlineLayer`](crate::server::DeadlineLayer) runs a handler, the handler's future
//! runs inside [`scope`] with the request's deadline. The client layers (`RetryLayer`,
//! `FailFastLayer`, the reqwest middleware, the gRPC layer) read [`current`] when the outgoing
//! request carries no [`RequestDeadline`] of its own, so a handler
//! never copies the deadline by hand and the time left shrinks hop by hop.
//!
//! The scope is a tokio task-local: it follows the handler's future, not its thread. Work moved to
//! another task (`tokio::spawn`) leaves the scope; wrap that future in [`scope`] with
//! [`current`]'s value to carry the deadline along.
//!
//! The deadline keeps the clock of the server layer that made it ([`RequestDeadline`]); a client
//! layer on another clock reads its time left ([`RequestDeadline::for_clock`]), so the server
//! and client layers of one service need not share a clock.

use std::future::Future;

use seawall::deadline::Deadline;
use seawall::time::{Clock, Instant};

use crate::wire::RequestDeadline;

tokio::task_local! {
    static DEADLINE: RequestDeadline;
}

/// The future [`scope`] returns: `F`, polled with the deadline in scope.
pub type Scoped<F> = tokio::task::futures::TaskLocalFuture<RequestDeadline, F>;

/// Runs `fut` with `deadline` as the deadline of outgoing calls it makes (see the
/// [module docs](self)). An inner scope replaces an outer one for its own future.
pub fn scope<F: Future>(deadline: RequestDeadline, fut: F) -> Scoped<F> {
    DEADLINE.scope(deadline, fut)
}

/// Runs `f` with `deadline` in scope, synchronously (for code that builds requests outside a
/// future, such as a `Service::call`).
pub fn sync_scope<R>(deadline: RequestDeadline, f: impl FnOnce() -> R) -> R {
    DEADLINE.sync_scope(deadline, f)
}

/// The deadline in scope, if the current task is serving a request with one.
#[inline]
pub fn current() -> Option<RequestDeadline> {
    DEADLINE.try_with(RequestDeadline::clone).ok()
}

/// The deadline in scope as an instant of `clock`, whose reading is `now`
/// ([`RequestDeadline::for_clock`]): what a client layer on its own clock bounds its calls by.
#[inline]
pub fn current_for<C: Clock + ?Sized>(clock: &C, now: Instant) -> Option<Deadline> {
    current().map(|d| d.for_clock(clock, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use seawall::time::{ManualClock, SystemClock};
    use std::time::Duration;

    #[test]
    fn scope_is_visible_inside_and_gone_outside() {
        let clock = ManualClock::new();
        let d = RequestDeadline::after(&clock, Duration::from_millis(250));
        assert_eq!(current(), None);
        assert_eq!(sync_scope(d.clone(), current), Some(d.clone()));
        let inner = RequestDeadline::after(&clock, Duration::from_millis(10));
        assert_eq!(sync_scope(d.clone(), || sync_scope(inner.clone(), current)), Some(inner));
        assert_eq!(current(), None);
        // Read on another clock: the time left, from that clock's now.
        let now = SystemClock.now();
        let on_system = sync_scope(d, || current_for(&SystemClock, now));
        assert_eq!(on_system, Some(Deadline::after(now, Duration::from_millis(250))));
    }
}
