//! The event calendar: a binary heap ordered by (time, sequence) so equal times pop in the order
//! they were scheduled, which keeps runs deterministic.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use super::slab::Id;

/// What happens at an event.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// The next Poisson edge arrival.
    Arrival,
    /// The next arrival of herd `n`: `left` clients still to come.
    Herd { n: u32, left: u64 },
    /// A user tries again by hand (`count` refreshes so far).
    Refresh { count: u32 },
    /// A job's service ends.
    ServiceDone(Id),
    /// Attempt `attempt` of a call times out.
    Timeout { call: Id, attempt: u32 },
    /// A call's backoff ends.
    Retry(Id),
    /// A hedged call's next copy may be due.
    Hedge(Id),
    /// A fault window opens or closes at a tier: re-check its workers.
    Kick(u16),
    /// A tier restarts.
    Restart(u16),
    /// One-second boundary: sample gauges.
    Tick,
}

#[derive(Debug)]
struct Entry {
    at: u64,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// Most delay lanes kept; further fixed delays go to the heap.
const MAX_LANES: usize = 16;

/// The key of an empty lane in `Calendar::fronts`: later than any event.
const EMPTY: u128 = u128::MAX;

/// An event's place in the order, `(at, seq)` as one number (one comparison instead of two).
fn key(at: u64, seq: u64) -> u128 {
    (u128::from(at) << 64) | u128::from(seq)
}

/// The calendar: a heap for arbitrary times plus FIFO *lanes* for delays that repeat.
///
/// Why lanes: most events are timers with a constant delay (a layer's per-attempt timeout, a
/// flat backoff, a herd arriving at one instant). Events pushed as `now + d` for the same `d`
/// arrive in time order, so a FIFO per `d` keeps them sorted for O(1) instead of a heap
/// operation that misses the cache when millions of timers are pending (a 5 M-client herd).
/// Events scheduled up front in time order (the one-second ticks) form one more lane, so the
/// heap holds only what is truly unordered (service ends, arrivals) and stays shallow.
/// Every entry still carries the global sequence number and `pop` takes the least
/// `(time, sequence)` over the heap and the lane fronts, so the order is exactly the heap's.
/// The fronts' keys are kept side by side (`fronts`), so choosing the next event reads one
/// short array instead of every lane's buffer.
#[derive(Debug, Default)]
pub(crate) struct Calendar {
    heap: BinaryHeap<Entry>,
    /// Lane 0 holds events pushed in time order ([`Calendar::push_in_order`]); lane `i > 0`
    /// holds the timers of delay `delays[i - 1]`.
    lanes: Vec<VecDeque<Entry>>,
    delays: Vec<u64>,
    /// The [`key`] of each lane's front, [`EMPTY`] for an empty lane.
    fronts: Vec<u128>,
    seq: u64,
}

/// An event whose place in the order is taken but which is not scheduled yet: see
/// [`Calendar::hold`].
#[derive(Debug)]
pub(crate) struct Held {
    entry: Entry,
    /// The delay whose lane it goes to ([`Calendar::push_after`]), `None` for the heap.
    delay: Option<u64>,
}

impl Calendar {
    /// Schedules `kind` at `at`.
    pub(crate) fn push(&mut self, at: u64, kind: Kind) {
        self.seq += 1;
        self.heap.push(Entry { at, seq: self.seq, kind });
    }

    /// Takes the place in the order that [`Calendar::push`] would give `kind` now, without
    /// scheduling it: [`Calendar::schedule`] does that later, with the same place, or the event
    /// is dropped. An attempt's timer is held while the attempt reaches its server and dropped
    /// if the server answered at once: such a timer could only fire for nothing, and a
    /// synchronised herd shed at once would otherwise keep millions of them pending.
    pub(crate) fn hold(&mut self, at: u64, kind: Kind) -> Held {
        self.seq += 1;
        Held { entry: Entry { at, seq: self.seq, kind }, delay: None }
    }

    /// [`Calendar::hold`] for [`Calendar::push_after`].
    pub(crate) fn hold_after(&mut self, now: u64, delay: u64, kind: Kind) -> Held {
        self.seq += 1;
        Held { entry: Entry { at: now + delay, seq: self.seq, kind }, delay: Some(delay) }
    }

    /// Schedules a held event in its place: exactly where it would be had it been pushed when
    /// it was held.
    #[inline]
    pub(crate) fn schedule(&mut self, held: Held) {
        let Held { entry: e, delay } = held;
        match delay.and_then(|d| self.lane_of(d)) {
            Some(i) => self.insert_lane(i, e),
            None => self.heap.push(e),
        }
    }

    /// The lane of timers of `delay`, opened if need be; `None` once [`MAX_LANES`] delays have
    /// lanes (the heap takes the rest).
    #[inline]
    fn lane_of(&mut self, delay: u64) -> Option<usize> {
        if self.lanes.is_empty() {
            self.open_lanes();
        }
        if let Some(i) = self.delays.iter().position(|&d| d == delay) {
            Some(i + 1)
        } else if self.delays.len() < MAX_LANES {
            self.delays.push(delay);
            self.lanes.push(VecDeque::new());
            self.fronts.push(EMPTY);
            Some(self.lanes.len() - 1)
        } else {
            None
        }
    }

    /// Schedules `kind` at `at`, no earlier than the last event pushed this way (events planned
    /// up front, in time order).
    pub(crate) fn push_in_order(&mut self, at: u64, kind: Kind) {
        self.seq += 1;
        let e = Entry { at, seq: self.seq, kind };
        if self.lanes.is_empty() {
            self.open_lanes();
        }
        debug_assert!(self.lanes[0].back().is_none_or(|b| b.at <= at), "pushed out of order");
        self.push_lane(0, e);
    }

    /// Schedules `kind` after `delay` from `now`, a delay expected to recur (a lane is used).
    pub(crate) fn push_after(&mut self, now: u64, delay: u64, kind: Kind) {
        self.seq += 1;
        let e = Entry { at: now + delay, seq: self.seq, kind };
        match self.lane_of(delay) {
            Some(i) => self.push_lane(i, e),
            None => self.heap.push(e),
        }
    }

    /// Creates lane 0 (the in-order lane).
    fn open_lanes(&mut self) {
        self.lanes.push(VecDeque::new());
        self.fronts.push(EMPTY);
    }

    /// Adds `e`, the latest event of its lane, at the back of lane `i`.
    fn push_lane(&mut self, i: usize, e: Entry) {
        if self.lanes[i].is_empty() {
            self.fronts[i] = key(e.at, e.seq);
        }
        self.lanes[i].push_back(e);
    }

    /// Adds a held `e` to lane `i` in `(time, sequence)` order: at the back, unless events of
    /// the same delay were pushed while it was held. Those are due at the same time (the same
    /// `now` plus the same delay) but later in sequence, so it goes just before them.
    #[inline]
    fn insert_lane(&mut self, i: usize, e: Entry) {
        let q = &mut self.lanes[i];
        if q.back().is_none_or(|b| b.seq < e.seq) {
            return self.push_lane(i, e);
        }
        let k = key(e.at, e.seq);
        let at = q.partition_point(|x| key(x.at, x.seq) < k);
        q.insert(at, e);
        if at == 0 {
            self.fronts[i] = k;
        }
    }

    /// The earliest event, ties in scheduling order.
    pub(crate) fn pop(&mut self) -> Option<(u64, Kind)> {
        let mut best = self.heap.peek().map_or(EMPTY, |e| key(e.at, e.seq));
        let mut lane = usize::MAX;
        for (i, &f) in self.fronts.iter().enumerate() {
            if f < best {
                (best, lane) = (f, i);
            }
        }
        let e = if lane == usize::MAX {
            self.heap.pop()?
        } else {
            let q = &mut self.lanes[lane];
            let e = q.pop_front()?;
            self.fronts[lane] = q.front().map_or(EMPTY, |n| key(n.at, n.seq));
            e
        };
        Some((e.at, e.kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_fifo() {
        let mut c = Calendar::default();
        c.push(5, Kind::Tick);
        c.push(1, Kind::Arrival);
        c.push(5, Kind::Kick(3));
        assert!(matches!(c.pop(), Some((1, Kind::Arrival))));
        assert!(matches!(c.pop(), Some((5, Kind::Tick))));
        assert!(matches!(c.pop(), Some((5, Kind::Kick(3)))));
        assert!(c.pop().is_none());
    }

    #[test]
    fn lanes_keep_the_heap_order() {
        let mut c = Calendar::default();
        c.push_after(0, 10, Kind::Kick(1)); // 10, seq 1
        c.push(10, Kind::Kick(2)); // 10, seq 2
        c.push_after(5, 10, Kind::Kick(3)); // 15
        c.push(12, Kind::Kick(4));
        let order: Vec<u16> = std::iter::from_fn(|| c.pop())
            .map(|(_, k)| if let Kind::Kick(n) = k { n } else { 0 })
            .collect();
        assert_eq!(order, [1, 2, 4, 3]);
    }

    #[test]
    fn the_in_order_lane_keeps_the_heap_order() {
        let mut c = Calendar::default();
        c.push_in_order(10, Kind::Kick(1)); // 10, seq 1
        c.push_in_order(20, Kind::Kick(2)); // 20, seq 2
        c.push(10, Kind::Kick(3)); // 10, seq 3: after the in-order 10
        c.push_after(5, 5, Kind::Kick(4)); // 10, seq 4
        c.push(15, Kind::Kick(5));
        c.push_after(10, 10, Kind::Kick(6)); // 20, seq 6: after the in-order 20
        let order: Vec<u16> = std::iter::from_fn(|| c.pop())
            .map(|(_, k)| if let Kind::Kick(n) = k { n } else { 0 })
            .collect();
        assert_eq!(order, [1, 3, 4, 5, 2, 6]);
    }

    /// A held event keeps the place it was held in, in a lane as in the heap. Putting it at the
    /// back of its lane instead turns this red (1 pops after 2), and so would a fresh sequence
    /// number when it is scheduled.
    #[test]
    fn a_held_event_keeps_its_place() {
        let mut c = Calendar::default();
        let timer = c.hold_after(0, 10, Kind::Kick(1)); // 10, seq 1
        let heap_timer = c.hold(10, Kind::Kick(4)); // 10, seq 2
        c.push_after(0, 10, Kind::Kick(2)); // 10, seq 3, same lane
        c.push(10, Kind::Kick(3)); // 10, seq 4
        c.schedule(heap_timer);
        c.schedule(timer);
        let order: Vec<u16> = std::iter::from_fn(|| c.pop())
            .map(|(_, k)| if let Kind::Kick(n) = k { n } else { 0 })
            .collect();
        assert_eq!(order, [1, 4, 2, 3]);
    }

    #[test]
    fn entries_stay_small() {
        // One entry per pending timer: a synchronised herd holds about one per call in flight
        // (its attempt's timeout), so it counts against the per-call budget (see
        // `size_tests` in engine/mod.rs). Time and sequence (16 B) plus a 16 B `Kind`.
        assert_eq!(std::mem::size_of::<Kind>(), 16);
        assert!(std::mem::size_of::<Entry>() <= 32, "calendar entry grew");
    }
}
