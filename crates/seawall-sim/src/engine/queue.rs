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

/// The calendar: a heap for arbitrary times plus FIFO *lanes* for delays that repeat.
///
/// Why lanes: most events are timers with a constant delay (a layer's per-attempt timeout, a
/// flat backoff, a herd arriving at one instant). Events pushed as `now + d` for the same `d`
/// arrive in time order, so a FIFO per `d` keeps them sorted for O(1) instead of a heap
/// operation that misses the cache when millions of timers are pending (a 5 M-client herd).
/// Every entry still carries the global sequence number and `pop` takes the least
/// `(time, sequence)` over the heap and the lane fronts, so the order is exactly the heap's.
#[derive(Debug, Default)]
pub(crate) struct Calendar {
    heap: BinaryHeap<Entry>,
    lanes: Vec<(u64, VecDeque<Entry>)>,
    seq: u64,
}

impl Calendar {
    /// Schedules `kind` at `at`.
    pub(crate) fn push(&mut self, at: u64, kind: Kind) {
        self.seq += 1;
        self.heap.push(Entry { at, seq: self.seq, kind });
    }

    /// Schedules `kind` after `delay` from `now`, a delay expected to recur (a lane is used).
    pub(crate) fn push_after(&mut self, now: u64, delay: u64, kind: Kind) {
        self.seq += 1;
        let e = Entry { at: now + delay, seq: self.seq, kind };
        if let Some((_, q)) = self.lanes.iter_mut().find(|(d, _)| *d == delay) {
            q.push_back(e);
        } else if self.lanes.len() < MAX_LANES {
            self.lanes.push((delay, VecDeque::from([e])));
        } else {
            self.heap.push(e);
        }
    }

    /// The earliest event, ties in scheduling order.
    pub(crate) fn pop(&mut self) -> Option<(u64, Kind)> {
        let mut best: Option<(u64, u64, usize)> =
            self.heap.peek().map(|e| (e.at, e.seq, usize::MAX));
        for (i, (_, q)) in self.lanes.iter().enumerate() {
            if let Some(e) = q.front()
                && best.is_none_or(|(at, seq, _)| (e.at, e.seq) < (at, seq))
            {
                best = Some((e.at, e.seq, i));
            }
        }
        let e = match best? {
            (_, _, usize::MAX) => self.heap.pop()?,
            (_, _, i) => self.lanes[i].1.pop_front()?,
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
    fn entries_stay_small() {
        // One entry per pending timer: a synchronised herd holds about one per call in flight
        // (its attempt's timeout), so it counts against the per-call budget (see
        // `size_tests` in engine/mod.rs). Time and sequence (16 B) plus a 16 B `Kind`.
        assert_eq!(std::mem::size_of::<Kind>(), 16);
        assert!(std::mem::size_of::<Entry>() <= 32, "calendar entry grew");
    }
}
