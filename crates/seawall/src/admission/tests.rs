//! Unit tests of the admission discipline on virtual time.

use std::num::NonZeroUsize;
use std::time::Duration;

use crate::time::{Clock, ManualClock};

use super::*;
use crate::admission::{Class, Offer, Reason, Ticket};

const MS: Duration = Duration::from_millis(1);

fn adm(limit: usize, queue: usize) -> Admission<u32> {
    Admission::new(Config::new(Limit::fixed(NonZeroUsize::new(limit).unwrap()), queue))
}

fn no_drop(_: u32, r: Reason) {
    panic!("unexpected drop: {r}");
}

#[test]
fn runs_then_queues_then_rejects() {
    let c = ManualClock::new();
    let mut a = adm(1, 1);
    assert!(matches!(a.offer(c.now(), Class::First, None, || 1), Offer::Run));
    assert!(matches!(a.offer(c.now(), Class::First, None, || 2), Offer::Queued { .. }));
    assert!(matches!(a.offer(c.now(), Class::First, None, || 3), Offer::Reject(Reason::QueueFull)));
    assert_eq!(a.next(c.now(), no_drop), None, "no free slot yet");
    a.finish(None);
    assert_eq!(a.next(c.now(), no_drop), Some(2));
    assert_eq!(a.in_flight(), 1);
}

#[test]
fn first_attempts_dequeue_before_retries_and_evict_them() {
    let c = ManualClock::new();
    let mut a = adm(1, 2);
    assert!(matches!(a.offer(c.now(), Class::First, None, || 0), Offer::Run));
    assert!(matches!(a.offer(c.now(), Class::Retry, None, || 10), Offer::Queued { .. }));
    assert!(matches!(a.offer(c.now(), Class::Retry, None, || 11), Offer::Queued { .. }));
    // Queue full of retries: a retry is shed, a first attempt evicts the oldest retry.
    assert!(matches!(
        a.offer(c.now(), Class::Retry, None, || 12),
        Offer::Reject(Reason::RetryShed)
    ));
    match a.offer(c.now(), Class::First, None, || 1) {
        Offer::Queued { evicted: Some(10), .. } => {}
        other => panic!("{other:?}"),
    }
    a.finish(None);
    assert_eq!(a.next(c.now(), no_drop), Some(1), "first attempt before the older retry");
    a.finish(None);
    assert_eq!(a.next(c.now(), no_drop), Some(11));
}

#[test]
fn expired_deadline_is_dropped_not_started() {
    let c = ManualClock::new();
    let mut a = adm(1, 4);
    assert!(matches!(a.offer(c.now(), Class::First, None, || 0), Offer::Run));
    let deadline = c.now() + 30 * MS;
    assert!(matches!(a.offer(c.now(), Class::First, Some(deadline), || 1), Offer::Queued { .. }));
    assert!(matches!(a.offer(c.now(), Class::First, None, || 2), Offer::Queued { .. }));
    c.advance(40 * MS);
    a.finish(None);
    let mut dropped = vec![];
    let got = a.next(c.now(), |t, r| dropped.push((t, r)));
    assert_eq!(got, Some(2));
    assert_eq!(dropped, vec![(1, Reason::DeadlineExpired)]);
    // Arriving already expired: rejected at the door.
    assert!(matches!(
        a.offer(c.now(), Class::First, Some(c.now()), || 3),
        Offer::Reject(Reason::DeadlineExpired)
    ));
}

#[test]
fn standing_queue_turns_on_codel_lifo_and_sheds_retries_at_the_door() {
    let c = ManualClock::new();
    let mut a = adm(1, 1000);
    assert!(matches!(a.offer(c.now(), Class::First, None, || 0), Offer::Run));
    let mut dropped = vec![];
    // Offered twice as fast as served: one arrival every 5 ms, one completion every 10 ms.
    for step in 0..100u32 {
        c.advance(5 * MS);
        let _ = a.offer(c.now(), Class::First, None, || step + 1);
        if step % 2 == 1 {
            a.finish(None);
            let _ = a.next(c.now(), |t, r| dropped.push((t, r)));
        }
    }
    assert!(a.codel.overloaded());
    assert!(dropped.iter().any(|&(_, r)| r == Reason::CodelDrop));
    // LIFO: the next one served is the newest.
    c.advance(5 * MS);
    let _ = a.offer(c.now(), Class::First, None, || 9999);
    a.finish(None);
    assert_eq!(a.next(c.now(), |_, _| {}), Some(9999));
    assert!(matches!(a.offer(c.now(), Class::Retry, None, || 1), Offer::Reject(Reason::RetryShed)));
    // Stale waiters were sloughed: nothing left older than 2 x target + one step.
    assert!(a.oldest_age(c.now()) <= 60 * MS, "{:?}", a.oldest_age(c.now()));
}

/// The same overload as above under [`Config::fifo`]: nothing dropped, served oldest first,
/// retries queued like any request, and refusals only at a full queue.
#[test]
fn a_fifo_config_is_a_plain_queue_under_a_standing_queue() {
    let c = ManualClock::new();
    let mut a = Admission::new(Config::fifo(Limit::fixed(NonZeroUsize::new(1).unwrap()), 40));
    assert!(matches!(a.offer(c.now(), Class::First, None, || 0), Offer::Run));
    let mut served = vec![];
    for step in 0..100u32 {
        c.advance(5 * MS);
        let _ = a.offer(c.now(), Class::First, None, || step + 1);
        if step % 2 == 1 {
            a.finish(None);
            served.extend(a.next(c.now(), no_drop));
        }
    }
    assert!(!a.overloaded(), "CoDel is off");
    assert!(served.windows(2).all(|w| w[0] < w[1]), "oldest first: {served:?}");
    // Refused only at a full queue: 39 wait after the last hand-over, the 40th queues.
    assert_eq!(a.queue_len(), 39);
    assert!(matches!(a.offer(c.now(), Class::First, None, || 1000), Offer::Queued { .. }));
    assert!(matches!(
        a.offer(c.now(), Class::First, None, || 1001),
        Offer::Reject(Reason::QueueFull)
    ));
    a.finish(None);
    assert_eq!(a.next(c.now(), no_drop), Some(served.last().unwrap() + 1), "still oldest first");
}

#[test]
fn cancel_removes_a_waiter() {
    let c = ManualClock::new();
    let mut a = adm(1, 4);
    assert!(matches!(a.offer(c.now(), Class::First, None, || 0), Offer::Run));
    let Offer::Queued { ticket, .. } = a.offer(c.now(), Class::First, None, || 1) else { panic!() };
    assert_eq!(a.cancel(ticket), Some(1));
    assert_eq!(a.cancel(ticket), None);
    assert_eq!(a.queue_len(), 0);
}

/// A waiter cancelled in the middle of a queue is skipped when its turn comes, counted out of
/// the queue at once, and never counts twice; the head's age is a live request's.
#[test]
fn a_waiter_cancelled_mid_queue_is_skipped() {
    let c = ManualClock::new();
    let mut a = adm(1, 3);
    assert!(matches!(a.offer(c.now(), Class::First, None, || 0), Offer::Run));
    let mut t = vec![];
    for n in 1..=3 {
        c.advance(MS);
        let Offer::Queued { ticket, .. } = a.offer(c.now(), Class::First, None, || n) else {
            panic!()
        };
        t.push(ticket);
    }
    assert_eq!(a.cancel(t[1]), Some(2));
    assert_eq!(a.cancel(t[1]), None, "once");
    assert_eq!(a.queue_len(), 2);
    // Room for one more: the cancelled waiter does not hold a place.
    assert!(matches!(a.offer(c.now(), Class::First, None, || 4), Offer::Queued { .. }));
    assert!(matches!(a.offer(c.now(), Class::First, None, || 5), Offer::Reject(_)));
    assert_eq!(a.cancel(t[0]), Some(1), "the head");
    c.advance(MS);
    assert_eq!(a.oldest_age(c.now()), MS, "the head is now 3, queued 1 ms ago");
    a.finish(None);
    assert_eq!(a.next(c.now(), no_drop), Some(3), "2 is skipped");
    a.finish(None);
    assert_eq!(a.next(c.now(), no_drop), Some(4));
    a.finish(None);
    assert_eq!(a.next(c.now(), no_drop), None);
    assert_eq!(a.queue_len(), 0);
}

#[test]
fn cancel_finds_waiters_after_lifo_and_eviction() {
    let c = ManualClock::new();
    let mut a = adm(1, 3);
    assert!(matches!(a.offer(c.now(), Class::First, None, || 0), Offer::Run));
    let t: Vec<Ticket> = [(Class::Retry, 1), (Class::First, 2), (Class::Retry, 3)]
        .into_iter()
        .map(|(k, n)| match a.offer(c.now(), k, None, || n) {
            Offer::Queued { ticket, .. } => ticket,
            other => panic!("{other:?}"),
        })
        .collect();
    // A first attempt at a full queue evicts the oldest retry (1).
    assert!(matches!(
        a.offer(c.now(), Class::First, None, || 4),
        Offer::Queued { evicted: Some(1), .. }
    ));
    assert_eq!(a.cancel(t[0]), None, "evicted already");
    assert_eq!(a.cancel(t[2]), Some(3));
    assert_eq!(a.cancel(t[1]), Some(2));
    assert_eq!(a.queue_len(), 1);
}

#[test]
fn ceiling_bounds_the_slots_and_clear_empties_everything() {
    let c = ManualClock::new();
    let mut a = adm(4, 8);
    a.set_ceiling(1);
    assert_eq!(a.limit(), 1);
    assert!(matches!(a.offer(c.now(), Class::First, None, || 0), Offer::Run));
    assert!(matches!(a.offer(c.now(), Class::First, None, || 1), Offer::Queued { .. }));
    assert_eq!(a.next(c.now(), no_drop), None);
    a.set_ceiling(usize::MAX);
    assert_eq!(a.next(c.now(), no_drop), Some(1));
    assert!(matches!(a.offer(c.now(), Class::Retry, None, || 2), Offer::Run));
    a.set_ceiling(0);
    assert!(matches!(a.offer(c.now(), Class::First, None, || 3), Offer::Queued { .. }));
    let mut lost = vec![];
    a.clear(|t| lost.push(t));
    assert_eq!((lost, a.in_flight(), a.queue_len()), (vec![3], 0, 0));
}
