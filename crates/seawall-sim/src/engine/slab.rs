//! A generational slab: stable small ids for calls and jobs, reused so memory follows what is
//! in flight rather than simulated time.

use std::num::NonZeroU32;

/// A handle into a [`Slab`]; stale once its slot is freed (the generation moves on).
///
/// A live slot's generation is odd, so never zero: an `Option<Id>` is 8 bytes, not 12.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Id {
    pub(crate) idx: u32,
    pub(crate) generation: NonZeroU32,
}

impl Id {
    /// The id as one word (a calendar entry's payload): index above, generation below.
    pub(crate) fn to_bits(self) -> u64 {
        (u64::from(self.idx) << 32) | u64::from(self.generation.get())
    }

    /// The id [`Id::to_bits`] gave. A word with a zero generation names no live slot; it comes
    /// back with generation 1 rather than panicking (`to_bits` never makes one).
    pub(crate) fn from_bits(bits: u64) -> Id {
        let generation = NonZeroU32::new(bits as u32).unwrap_or(NonZeroU32::MIN);
        Id { idx: (bits >> 32) as u32, generation }
    }
}

/// A slot: odd generations are live, even ones free (the bit a separate `live` flag would take).
#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    /// While the slot is free, the next free slot ([`NONE`] for none): the free list lives in
    /// the slots, in the 4 B that padding takes beside the generation anyway (the records are
    /// 8-aligned), so freeing 10 M calls does not grow a 40 MB list beside them.
    next_free: u32,
    value: T,
}

/// The end of the free list.
const NONE: u32 = u32::MAX;

impl<T> Slot<T> {
    fn live(&self) -> bool {
        self.generation & 1 == 1
    }

    /// The id of the live value in slot `idx`.
    fn id(&self, idx: u32) -> Id {
        debug_assert!(self.live());
        // A live generation is odd, hence non-zero.
        Id { idx, generation: NonZeroU32::new(self.generation).unwrap_or(NonZeroU32::MIN) }
    }

    /// Whether `id` names this slot's live value.
    fn holds(&self, id: Id) -> bool {
        self.generation == id.generation.get()
    }
}

/// Slots with a free list. Events carry [`Id`]s; an event for a freed slot finds a newer
/// generation and is ignored, which is how timeouts that lost the race are discarded.
///
/// The free list is a stack threaded through the free slots: the slot freed last is reused
/// first.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    /// The free slot to reuse next, [`NONE`] for none.
    free: u32,
    live: usize,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Self {
        Slab { slots: Vec::new(), free: NONE, live: 0 }
    }

    // Inlined, a record is built in its slot; called, it was built on the caller's stack and
    // read back in 16-byte pieces through a store-forwarding stall (−5 to −11 % CPU time on
    // the engine bench: BENCHMARKS.md, "A record built in its slot").
    #[inline]
    pub(crate) fn insert(&mut self, value: T) -> Id {
        self.live += 1;
        if self.free != NONE {
            let idx = self.free;
            let s = &mut self.slots[idx as usize];
            self.free = s.next_free;
            s.generation = s.generation.wrapping_add(1);
            s.value = value;
            return s.id(idx);
        }
        let idx = u32::try_from(self.slots.len())
            .ok()
            .filter(|&i| i != NONE)
            .expect("fewer than 2^32 - 1 requests in flight");
        let s = Slot { generation: 1, next_free: NONE, value };
        let id = s.id(idx);
        self.slots.push(s);
        id
    }

    pub(crate) fn get(&self, id: Id) -> Option<&T> {
        let s = self.slots.get(id.idx as usize)?;
        s.holds(id).then_some(&s.value)
    }

    pub(crate) fn get_mut(&mut self, id: Id) -> Option<&mut T> {
        let s = self.slots.get_mut(id.idx as usize)?;
        s.holds(id).then_some(&mut s.value)
    }

    /// Frees the slot; returns false if `id` was already stale.
    pub(crate) fn remove(&mut self, id: Id) -> bool {
        match self.slots.get_mut(id.idx as usize) {
            Some(s) if s.holds(id) => {
                s.generation = s.generation.wrapping_add(1);
                s.next_free = self.free;
                self.free = id.idx;
                self.live -= 1;
                true
            }
            _ => false,
        }
    }

    /// Ids of the live slots, in slot order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = Id> + '_ {
        self.slots.iter().enumerate().filter(|(_, s)| s.live()).map(|(i, s)| s.id(i as u32))
    }

    /// Slots ever allocated (the high-water mark of requests in flight).
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_are_refused_after_reuse() {
        let mut s = Slab::new();
        let a = s.insert(1);
        assert!(s.remove(a));
        let b = s.insert(2);
        assert_eq!(a.idx, b.idx);
        assert_eq!(s.get(a), None);
        assert_eq!(s.get(b), Some(&2));
        assert!(!s.remove(a));
        assert_eq!(s.capacity(), 1);
    }

    #[test]
    fn generations_stay_odd_across_wraparound() {
        let mut s = Slab::new();
        let a = s.insert(1);
        s.slots[0].generation = u32::MAX; // live, about to wrap
        let a = Id { generation: NonZeroU32::new(u32::MAX).unwrap(), ..a };
        assert!(s.remove(a)); // generation 0: free
        assert!(s.ids().next().is_none());
        let b = s.insert(2);
        assert_eq!(b.generation.get(), 1);
        assert_eq!(s.get(a), None);
        assert_eq!(s.get(b), Some(&2));
        assert_eq!(std::mem::size_of::<Option<Id>>(), 8);
    }

    /// The slot freed last is reused first, as with the `Vec` stack of free indices the list
    /// replaced (the ids a run hands out, and so its results, stay what they were). Red if
    /// `remove` stops linking the freed slot in front (`next_free` left as it was: slot 0 would
    /// be lost, the third insert a new slot 3).
    #[test]
    fn the_slot_freed_last_is_reused_first() {
        let mut s = Slab::new();
        let ids: Vec<Id> = (0..3).map(|i| s.insert(i)).collect();
        assert!(s.remove(ids[0]));
        assert!(s.remove(ids[2]));
        assert_eq!(s.insert(10).idx, 2);
        assert_eq!(s.insert(11).idx, 0);
        assert_eq!(s.insert(12).idx, 3);
        assert_eq!(s.capacity(), 4);
    }

    /// A slot takes no more room than the value and its generation did before the free list
    /// moved into the slots: 8-aligned records had 4 B of padding beside the generation.
    #[test]
    fn the_free_list_costs_no_room() {
        assert_eq!(std::mem::size_of::<Slot<u64>>(), 16);
        assert_eq!(std::mem::size_of::<Slot<[u64; 10]>>(), 88);
    }
}
