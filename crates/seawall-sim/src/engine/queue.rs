//! The event calendar: a binary heap ordered by (time, sequence) so equal times pop in the order
//! they were scheduled, which keeps runs deterministic.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

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

/// The calendar.
#[derive(Debug, Default)]
pub(crate) struct Calendar {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl Calendar {
    pub(crate) fn push(&mut self, at: u64, kind: Kind) {
        self.seq += 1;
        self.heap.push(Entry { at, seq: self.seq, kind });
    }

    pub(crate) fn pop(&mut self) -> Option<(u64, Kind)> {
        self.heap.pop().map(|e| (e.at, e.kind))
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
}
