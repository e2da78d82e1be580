//! A generational slab: stable small ids for calls and jobs, reused so memory follows what is
//! in flight rather than simulated time.

/// A handle into a [`Slab`]; stale once its slot is freed (the generation moves on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Id {
    pub(crate) idx: u32,
    pub(crate) generation: u32,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    live: bool,
    value: T,
}

/// Slots with a free list. Events carry [`Id`]s; an event for a freed slot finds a newer
/// generation and is ignored, which is how timeouts that lost the race are discarded.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Self {
        Slab { slots: Vec::new(), free: Vec::new(), live: 0 }
    }

    pub(crate) fn insert(&mut self, value: T) -> Id {
        self.live += 1;
        if let Some(idx) = self.free.pop() {
            let s = &mut self.slots[idx as usize];
            s.live = true;
            s.value = value;
            return Id { idx, generation: s.generation };
        }
        let idx = u32::try_from(self.slots.len()).expect("fewer than 2^32 requests in flight");
        self.slots.push(Slot { generation: 0, live: true, value });
        Id { idx, generation: 0 }
    }

    pub(crate) fn get(&self, id: Id) -> Option<&T> {
        let s = self.slots.get(id.idx as usize)?;
        (s.live && s.generation == id.generation).then_some(&s.value)
    }

    pub(crate) fn get_mut(&mut self, id: Id) -> Option<&mut T> {
        let s = self.slots.get_mut(id.idx as usize)?;
        (s.live && s.generation == id.generation).then_some(&mut s.value)
    }

    /// Frees the slot; returns false if `id` was already stale.
    pub(crate) fn remove(&mut self, id: Id) -> bool {
        match self.slots.get_mut(id.idx as usize) {
            Some(s) if s.live && s.generation == id.generation => {
                s.live = false;
                s.generation = s.generation.wrapping_add(1);
                self.free.push(id.idx);
                self.live -= 1;
                true
            }
            _ => false,
        }
    }

    /// Ids of the live slots, in slot order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = Id> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live)
            .map(|(i, s)| Id { idx: i as u32, generation: s.generation })
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
}
