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
    /// The next arrival of herd `n` (how many clients are still to come is `Sim::herd_left`:
    /// a herd has one arrival pending at a time, and a count here would not fit an [`Entry`]).
    Herd(u32),
    /// A user tries again by hand (`count` refreshes so far).
    Refresh { count: u32 },
    /// A job's service ends.
    ServiceDone(Id),
    /// Attempt `attempt` of a call times out (at most [`seawall::policy::MAX_ATTEMPTS`], or a
    /// hedged call's copy number, at most gRFC A6's 5: it fits the 8 bits an [`Entry`] has).
    Timeout { call: Id, attempt: u8 },
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

impl Kind {
    /// The kind as an [`Entry`] holds it: a tag, an 8-bit field (a timeout's attempt number) and
    /// one word (an id, a count, a server).
    #[inline]
    fn pack(self) -> (u8, u8, u64) {
        match self {
            Kind::Arrival => (0, 0, 0),
            Kind::Herd(n) => (1, 0, u64::from(n)),
            Kind::Refresh { count } => (2, 0, u64::from(count)),
            Kind::ServiceDone(job) => (3, 0, job.to_bits()),
            Kind::Timeout { call, attempt } => (4, attempt, call.to_bits()),
            Kind::Retry(call) => (5, 0, call.to_bits()),
            Kind::Hedge(call) => (6, 0, call.to_bits()),
            Kind::Kick(server) => (7, 0, u64::from(server)),
            Kind::Restart(server) => (8, 0, u64::from(server)),
            Kind::Tick => (9, 0, 0),
        }
    }

    /// The kind [`Kind::pack`] packed (the casts take back what it widened).
    #[inline]
    fn unpack(tag: u8, small: u8, data: u64) -> Kind {
        match tag {
            0 => Kind::Arrival,
            1 => Kind::Herd(data as u32),
            2 => Kind::Refresh { count: data as u32 },
            3 => Kind::ServiceDone(Id::from_bits(data)),
            4 => Kind::Timeout { call: Id::from_bits(data), attempt: small },
            5 => Kind::Retry(Id::from_bits(data)),
            6 => Kind::Hedge(Id::from_bits(data)),
            7 => Kind::Kick(data as u16),
            8 => Kind::Restart(data as u16),
            _ => Kind::Tick,
        }
    }
}

/// Bits of [`Entry::order`] below the sequence number: the kind's tag and 8-bit field.
const KIND_BITS: u32 = 16;

/// One scheduled event in 24 B. A synchronised 5 M-client herd holds about 10 M of them at its
/// peak (each edge attempt's timeout, each balancer call's backoff), so 8 B less each is 80 MB.
/// As a struct of time, sequence number and [`Kind`] it took 32 B: a `Kind` is 16 B,
/// its tag beside an 8 B id and an attempt number. Here the tag and the 8-bit field ride in the
/// low [`KIND_BITS`] of `order`, under the sequence number, and the rest of the kind is one word.
/// Sequence numbers are unique, so ordering entries by `(at, order)` is ordering them by
/// `(at, seq)`, exactly as before; 48 bits of sequence number are 2.8 × 10^14 events scheduled in
/// one run (`Calendar::next_seq` stops the run before they wrap).
#[derive(Debug, Clone, Copy)]
struct Entry {
    at: u64,
    /// The sequence number above [`KIND_BITS`], the kind's tag and 8-bit field below.
    order: u64,
    /// The kind's word ([`Kind::pack`]).
    data: u64,
}

impl Entry {
    #[inline]
    fn new(at: u64, seq: u64, kind: Kind) -> Entry {
        let (tag, small, data) = kind.pack();
        let order = (seq << KIND_BITS) | (u64::from(tag) << 8) | u64::from(small);
        Entry { at, order, data }
    }

    #[inline]
    fn kind(&self) -> Kind {
        Kind::unpack((self.order >> 8) as u8, self.order as u8, self.data)
    }

    /// The sequence number it was pushed (or held) with.
    #[cfg(test)]
    fn seq(&self) -> u64 {
        self.order >> KIND_BITS
    }
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
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
        (o.at, o.order).cmp(&(self.at, self.order))
    }
}

/// Most delay lanes kept; further fixed delays go to the heap.
const MAX_LANES: usize = 16;

/// The key of an empty lane in `Calendar::fronts`: later than any event.
const EMPTY: u128 = u128::MAX;

/// An entry's place in the order, `(at, order)` as one number (one comparison instead of two).
#[inline]
fn key(e: &Entry) -> u128 {
    (u128::from(e.at) << 64) | u128::from(e.order)
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
    lanes: Vec<Lane>,
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
    /// The next sequence number (see [`Entry`] for its 48 bits).
    #[inline]
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        assert!(self.seq < 1 << (64 - KIND_BITS), "fewer than 2^48 events scheduled in a run");
        self.seq
    }

    /// Schedules `kind` at `at`.
    pub(crate) fn push(&mut self, at: u64, kind: Kind) {
        let seq = self.next_seq();
        self.heap.push(Entry::new(at, seq, kind));
    }

    /// Takes the place in the order that [`Calendar::push`] would give `kind` now, without
    /// scheduling it: [`Calendar::schedule`] does that later, with the same place, or the event
    /// is dropped. An attempt's timer is held while the attempt reaches its server and dropped
    /// if the server answered at once: such a timer could only fire for nothing, and a
    /// synchronised herd shed at once would otherwise keep millions of them pending.
    pub(crate) fn hold(&mut self, at: u64, kind: Kind) -> Held {
        let seq = self.next_seq();
        Held { entry: Entry::new(at, seq, kind), delay: None }
    }

    /// [`Calendar::hold`] for [`Calendar::push_after`].
    pub(crate) fn hold_after(&mut self, now: u64, delay: u64, kind: Kind) -> Held {
        let seq = self.next_seq();
        Held { entry: Entry::new(now + delay, seq, kind), delay: Some(delay) }
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
            self.lanes.push(Lane::default());
            self.fronts.push(EMPTY);
            Some(self.lanes.len() - 1)
        } else {
            None
        }
    }

    /// Schedules `kind` at `at`, no earlier than the last event pushed this way (events planned
    /// up front, in time order).
    pub(crate) fn push_in_order(&mut self, at: u64, kind: Kind) {
        let seq = self.next_seq();
        let e = Entry::new(at, seq, kind);
        if self.lanes.is_empty() {
            self.open_lanes();
        }
        debug_assert!(self.lanes[0].back().is_none_or(|b| b.at <= at), "pushed out of order");
        self.push_lane(0, e);
    }

    /// Schedules `kind` after `delay` from `now`, a delay expected to recur (a lane is used).
    pub(crate) fn push_after(&mut self, now: u64, delay: u64, kind: Kind) {
        let seq = self.next_seq();
        let e = Entry::new(now + delay, seq, kind);
        match self.lane_of(delay) {
            Some(i) => self.push_lane(i, e),
            None => self.heap.push(e),
        }
    }

    /// Creates lane 0 (the in-order lane).
    fn open_lanes(&mut self) {
        self.lanes.push(Lane::default());
        self.fronts.push(EMPTY);
    }

    /// Adds `e`, the latest event of its lane, at the back of lane `i`.
    fn push_lane(&mut self, i: usize, e: Entry) {
        if self.lanes[i].is_empty() {
            self.fronts[i] = key(&e);
        }
        self.lanes[i].push_back(e);
    }

    /// Adds a held `e` to lane `i` in `(time, sequence)` order: at the back, unless events of
    /// the same delay were pushed while it was held. Those are due at the same time (the same
    /// `now` plus the same delay) but later in sequence, so it goes just before them.
    #[inline]
    fn insert_lane(&mut self, i: usize, e: Entry) {
        let q = &mut self.lanes[i];
        if q.back().is_none_or(|b| b.order < e.order) {
            return self.push_lane(i, e);
        }
        if q.insert_from_back(e) {
            self.fronts[i] = key(&e);
        }
    }

    /// The earliest event, ties in scheduling order.
    pub(crate) fn pop(&mut self) -> Option<(u64, Kind)> {
        let mut best = self.heap.peek().map_or(EMPTY, key);
        let mut lane = usize::MAX;
        for (i, &f) in self.fronts.iter().enumerate() {
            if f < best {
                (best, lane) = (f, i);
            }
        }
        let e = if lane == usize::MAX {
            self.heap.pop()?
        } else {
            let (e, next) = self.lanes[lane].pop_front()?;
            self.fronts[lane] = next.map_or(EMPTY, key);
            e
        };
        Some((e.at, e.kind()))
    }
}

/// Entries per block of a [`Lane`]: 32 KB.
const BLOCK: usize = 1024;

/// A lane's FIFO, in blocks of [`BLOCK`] entries rather than one ring buffer. A ring that is
/// read at the front while written at the back wraps around and so touches its whole capacity,
/// up to twice its contents after doubling (a 5 M-client herd's 100 ms retry lane: 268 MB
/// touched for 154 MB of timers); blocks touch what the lane holds plus two blocks at most.
///
/// The block read from is kept apart (`front`), so a pop and the look at the next front are
/// two reads of one `Vec`; the blocks after it are full but the last, which is written to.
#[derive(Debug, Default)]
struct Lane {
    /// The block read from, also the one written to while `rest` is empty. Entries `head..`
    /// are the lane's first; the lane is empty exactly when there are none.
    front: Vec<Entry>,
    head: usize,
    /// The blocks after `front`, in order.
    rest: VecDeque<Vec<Entry>>,
    /// The block read last, kept for the next one needed: no allocation per block in a lane
    /// that is read as fast as it is written.
    spare: Option<Vec<Entry>>,
}

impl Lane {
    #[inline]
    fn is_empty(&self) -> bool {
        self.head == self.front.len()
    }

    /// The front entry (the calendar learns it from `pop_front`).
    #[cfg(test)]
    fn front(&self) -> Option<&Entry> {
        self.front.get(self.head)
    }

    fn back(&self) -> Option<&Entry> {
        if self.is_empty() {
            return None;
        }
        match self.rest.back() {
            Some(b) => b.last(),
            None => self.front.last(),
        }
    }

    #[inline]
    fn push_back(&mut self, e: Entry) {
        let last = self.rest.back_mut().unwrap_or(&mut self.front);
        if last.len() < BLOCK {
            last.push(e);
        } else {
            self.push_block(e);
        }
    }

    /// Starts a block with `e`: once per [`BLOCK`] entries, kept out of the inlined path.
    #[cold]
    #[inline(never)]
    fn push_block(&mut self, e: Entry) {
        let mut b = self.spare.take().unwrap_or_else(|| Vec::with_capacity(BLOCK));
        b.push(e);
        self.rest.push_back(b);
    }

    /// Takes the front entry; with it, the one after it, the new front.
    #[inline]
    fn pop_front(&mut self) -> Option<(Entry, Option<&Entry>)> {
        let e = *self.front.get(self.head)?;
        self.head += 1;
        if self.head == self.front.len() {
            // `front` is read out: the next block becomes it, or it is emptied for reuse.
            self.head = 0;
            match self.rest.pop_front() {
                Some(next) => {
                    let mut read = std::mem::replace(&mut self.front, next);
                    read.clear();
                    self.spare = Some(read);
                }
                None => self.front.clear(),
            }
        }
        Some((e, self.front.get(self.head)))
    }

    /// The entry `r` places before the back (0: the last), if the lane holds that many.
    fn nth_back(&mut self, mut r: usize) -> Option<&mut Entry> {
        for b in self.rest.iter_mut().rev() {
            if r < b.len() {
                let i = b.len() - 1 - r;
                return Some(&mut b[i]);
            }
            r -= b.len();
        }
        let i = self.front.len().checked_sub(r + 1).filter(|&i| i >= self.head)?;
        Some(&mut self.front[i])
    }

    /// Adds `e` in `(time, sequence)` order, searching from the back (where a held timer's
    /// place is: see [`Calendar::insert_lane`]); true if it is now the front.
    fn insert_from_back(&mut self, e: Entry) -> bool {
        self.push_back(e);
        let k = key(&e);
        let mut r = 0;
        while let Some(&mut before) = self.nth_back(r + 1) {
            if key(&before) < k {
                break;
            }
            *self.nth_back(r).expect("the entry after it") = before;
            r += 1;
        }
        *self.nth_back(r).expect("its place") = e;
        self.nth_back(r + 1).is_none()
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

    fn entry(at: u64, seq: u64) -> Entry {
        Entry::new(at, seq, Kind::Tick)
    }

    /// A lane spanning blocks is still one FIFO in `(time, sequence)` order, and a held entry
    /// finds its place across a block boundary. Red if a position maps to the wrong block
    /// (`nth_back` counting blocks from the front), or to entries already read (`nth_back`
    /// without its `i >= head` filter), or if the bubble does not stop at its place
    /// (`insert_from_back` without its `break`).
    #[test]
    fn a_lane_over_many_blocks_keeps_its_order() {
        let mut l = Lane::default();
        for seq in 0..10 {
            l.push_back(entry(5, seq));
        }
        for seq in 0..7 {
            assert_eq!(l.pop_front().map(|(e, _)| e.seq()), Some(seq)); // head moves on in `front`
        }
        assert!(l.insert_from_back(entry(1, 2))); // the earliest: before 7, not among 0..7 read
        for seq in 100..100 + 2 * BLOCK as u64 + 5 {
            l.push_back(entry(10, seq));
        }
        assert_eq!(l.rest.len(), 2);
        assert!(!l.insert_from_back(entry(10, 50))); // through both blocks, behind 7..10
        assert!(!l.insert_from_back(entry(20, 1))); // the latest: stays at the back
        let mut seqs = Vec::new();
        while let Some((e, next)) = l.pop_front() {
            seqs.push(e.seq());
            let next = next.map(|n| n.seq());
            assert_eq!(next, l.front().map(|n| n.seq()), "pop names the new front");
        }
        let want: Vec<u64> = [2]
            .into_iter()
            .chain(7..10)
            .chain([50])
            .chain(100..100 + 2 * BLOCK as u64 + 5)
            .chain([1])
            .collect();
        assert_eq!(seqs, want);
        assert!(l.is_empty() && l.front().is_none() && l.back().is_none());
        assert!(l.insert_from_back(entry(1, 1)));
    }

    /// A lane read as fast as it is written holds the blocks its contents need and no more:
    /// what a herd's retry lane touches follows its timers. Red if a read block is not given
    /// up (`pop_front` appending the next block to `front` instead of replacing it: `front`
    /// grows by a block per `BLOCK` entries ever read).
    #[test]
    fn a_lane_read_as_written_keeps_few_blocks() {
        let mut l = Lane::default();
        let mut seq = 0;
        for _ in 0..3 * BLOCK {
            l.push_back(entry(seq, seq));
            seq += 1;
        }
        for _ in 0..20 * BLOCK {
            l.push_back(entry(seq, seq));
            seq += 1;
            assert_eq!(l.pop_front().map(|(e, _)| e.seq()), Some(seq - 1 - 3 * BLOCK as u64));
            let room = l.front.capacity()
                + l.rest.iter().map(Vec::capacity).sum::<usize>()
                + l.spare.as_ref().map_or(0, Vec::capacity);
            assert!(room <= 5 * BLOCK, "room for {room} entries, 3 blocks' worth held");
        }
    }

    #[test]
    fn entries_stay_small() {
        // One entry per pending timer: a synchronised herd holds about one per call in flight
        // (its attempt's timeout) and one per backoff, so it counts against the per-call budget
        // (see `size_tests` in engine/mod.rs). Time, order and one word of kind.
        assert_eq!(std::mem::size_of::<Entry>(), 24, "calendar entry grew");
    }

    /// Every kind comes back from an entry as it went in, and the entry's order is its sequence
    /// number's. Red if a tag is shared by two kinds (`Kind::Retry` packed with `Kind::Hedge`'s
    /// 6: a retry pops as a hedge), if the attempt number is dropped (`small` packed as 0), or if
    /// the kind's bits reach the sequence number (`order` without the shift by `KIND_BITS`).
    #[test]
    fn an_entry_gives_back_its_kind_and_its_order() {
        let id = Id { idx: 0xDEAD_BEEF, generation: std::num::NonZeroU32::new(u32::MAX).unwrap() };
        let kinds = [
            Kind::Arrival,
            Kind::Herd(u32::MAX),
            Kind::Refresh { count: u32::MAX },
            Kind::ServiceDone(id),
            Kind::Timeout { call: id, attempt: u8::MAX },
            Kind::Retry(id),
            Kind::Hedge(id),
            Kind::Kick(u16::MAX),
            Kind::Restart(u16::MAX),
            Kind::Tick,
        ];
        for (i, kind) in kinds.into_iter().enumerate() {
            let seq = (1 << 47) + i as u64;
            let e = Entry::new(7, seq, kind);
            assert_eq!(format!("{:?}", e.kind()), format!("{kind:?}"));
            assert_eq!(e.seq(), seq);
        }
        // A later sequence number orders later whatever the kinds: the heap's order.
        let early = Entry::new(7, 5, Kind::Tick);
        let late = Entry::new(7, 6, Kind::Arrival);
        assert!(key(&early) < key(&late) && early > late); // `Ord` is reversed for the max-heap
    }
}
