//! Lock-free sliding windows: a ring of time slots, each one tagged `AtomicU64` counter.
//!
//! The ratio budget and the adaptive throttle count events "over the last W seconds". tower's
//! `TpsBudget` does this with a ring of slots rotated under a mutex by whoever notices the time
//! has moved, reading `Instant::now()` itself. Here the time is the caller's `now`, and a slot
//! carries its own generation in its upper 32 bits, so there is nothing to rotate: a writer that
//! finds an older generation in its slot replaces it with one compare-and-swap, and a reader
//! simply ignores slots whose generation is outside the window. The common case — the slot is
//! current — is one load and one `fetch_add`.
//!
//! Generations are `now / slot width`; a slot stores the low 32 bits. Two generations exactly a
//! multiple of 2³² apart are indistinguishable: with the smallest slot width any budget allows
//! (100 ms) that is a slot left untouched for 13.6 years and then read at exactly the wrong
//! moment, which this crate accepts.

use std::sync::atomic::Ordering;
// Built with `--cfg shuttle`, every atomic here is Shuttle's, so `tests/window_model.rs` can
// explore the interleavings of concurrent writers and readers (see that file).
#[cfg(shuttle)]
use shuttle::sync::atomic::AtomicU64;
#[cfg(not(shuttle))]
use std::sync::atomic::AtomicU64;

use crate::time::Instant;

/// Slots in a ring. A power of two so the slot index is a mask; windows may span up to this many.
pub(crate) const RING: usize = 16;

/// A count stops growing here, leaving room for 65 536 racing `fetch_add`s below `u32::MAX`.
/// Saturated counts only ever make a budget more conservative (see the callers).
const SATURATED: u32 = u32::MAX - (1 << 16);

/// A slot whose tag is more than this many generations *ahead* of the writer's is taken for a
/// stale slot whose 32-bit tag wrapped (at least ~2³⁰ slots, years at any allowed width), not for
/// a newer one: a writer a few rings late (a skewed `now`) leaves newer counts alone.
const STALE_AHEAD: i32 = -(1 << 30);

const fn pack(tag: u32, count: u32) -> u64 {
    ((tag as u64) << 32) | count as u64
}

const fn tag(v: u64) -> u32 {
    (v >> 32) as u32
}

const fn count(v: u64) -> u32 {
    v as u32
}

/// How many generations `slot_tag` is behind `tag`: 0 = current, > 0 older, < 0 newer.
const fn age(tag: u32, slot_tag: u32) -> i32 {
    tag.wrapping_sub(slot_tag) as i32
}

/// Maps instants to slot generations, remembering the last one so the hot path is a load and a
/// comparison instead of a 64-bit division.
#[derive(Debug)]
pub(crate) struct SlotClock {
    slot_nanos: u64,
    hint: AtomicU64,
}

impl SlotClock {
    /// Slots `slot_nanos` long (at least 1; callers validate far larger).
    pub(crate) fn new(slot_nanos: u64) -> Self {
        SlotClock { slot_nanos: slot_nanos.max(1), hint: AtomicU64::new(0) }
    }

    /// The generation `now` falls in: `now / slot width`.
    pub(crate) fn generation(&self, now: Instant) -> u64 {
        let n = now.as_nanos();
        let h = self.hint.load(Ordering::Relaxed);
        // `h` was computed as some `n / slot_nanos`, so `h * slot_nanos` cannot overflow. If
        // `n` is before the hinted slot the subtraction wraps to a huge value and misses.
        if n.wrapping_sub(h * self.slot_nanos) < self.slot_nanos {
            return h;
        }
        let g = n / self.slot_nanos;
        // A racing store of another generation is harmless: the hint is verified before use.
        self.hint.store(g, Ordering::Relaxed);
        g
    }
}

/// `LANES` counters per slot over a ring of [`RING`] slots. A slot's lanes are adjacent in
/// memory, so counters that are updated together (the adaptive throttle's requests and accepts)
/// share a cache line instead of bouncing two between threads.
#[derive(Debug)]
pub(crate) struct SlotCounts<const LANES: usize = 1> {
    slots: [[AtomicU64; LANES]; RING],
}

impl<const LANES: usize> SlotCounts<LANES> {
    /// All counts zero.
    pub(crate) fn new() -> Self {
        SlotCounts { slots: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))) }
    }

    fn slot(&self, lane: usize, generation: u64) -> &AtomicU64 {
        &self.slots[(generation as usize) & (RING - 1)][lane]
    }

    /// Counts one event in `generation`. Returns false, counting nothing, if the count is
    /// saturated or the slot already belongs to a newer generation (the caller's `now` is a
    /// whole ring behind another caller's).
    pub(crate) fn incr(&self, lane: usize, generation: u64, order: Ordering) -> bool {
        let slot = self.slot(lane, generation);
        let t = generation as u32;
        let mut cur = slot.load(Ordering::Relaxed);
        loop {
            let a = age(t, tag(cur));
            let new = if a == 0 {
                if count(cur) >= SATURATED {
                    return false;
                }
                // The slot is current: one fetch_add, no retry loop under contention. If another
                // caller moved the slot a whole ring ahead since the load, this event lands in
                // that newer generation — counted later than it happened, never lost.
                slot.fetch_add(1, order);
                return true;
            } else if !(STALE_AHEAD..=0).contains(&a) {
                // Older (or so far "ahead" it can only be a stale slot from about 2³¹ slots ago;
                // a writer merely a few rings behind the newest must not overwrite it).
                pack(t, 1)
            } else {
                return false;
            };
            match slot.compare_exchange_weak(cur, new, order, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(v) => cur = v,
            }
        }
    }

    /// Takes back one event counted by [`SlotCounts::incr`] in `generation`, if its slot still
    /// holds that generation (otherwise the event has already left every window).
    pub(crate) fn decr(&self, lane: usize, generation: u64, order: Ordering) {
        let t = generation as u32;
        let _ = self.slot(lane, generation).fetch_update(order, Ordering::Relaxed, |v| {
            (tag(v) == t && count(v) > 0).then(|| v - 1)
        });
    }

    /// Per lane, the total of the slots whose generation is in `(generation − back, generation
    /// + ahead]`: `back` slots up to and including the current one, plus `ahead` newer ones
    /// (written by callers whose `now` is ahead of this one's). One pass over the ring.
    pub(crate) fn sums(
        &self,
        generation: u64,
        back: u32,
        ahead: u32,
        order: Ordering,
    ) -> [u64; LANES] {
        let t = generation as u32;
        let (back, ahead) = (back as i32, ahead as i32);
        let mut total = [0u64; LANES];
        for slot in &self.slots {
            for (lane, counter) in slot.iter().enumerate() {
                let v = counter.load(order);
                let a = age(t, tag(v));
                if a < back && a >= -ahead {
                    total[lane] += u64::from(count(v));
                }
            }
        }
        total
    }
}

impl SlotCounts<1> {
    /// [`SlotCounts::sums`] of the one lane.
    pub(crate) fn sum(&self, generation: u64, back: u32, ahead: u32, order: Ordering) -> u64 {
        self.sums(generation, back, ahead, order)[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SC: Ordering = Ordering::SeqCst;

    #[test]
    fn generation_uses_and_refreshes_the_hint() {
        let c = SlotClock::new(100);
        assert_eq!(c.generation(Instant::from_nanos(99)), 0);
        assert_eq!(c.generation(Instant::from_nanos(250)), 2);
        assert_eq!(c.generation(Instant::from_nanos(299)), 2);
        assert_eq!(c.generation(Instant::from_nanos(150)), 1, "going back recomputes");
        assert_eq!(c.generation(Instant::from_nanos(u64::MAX)), u64::MAX / 100);
    }

    #[test]
    fn window_counts_only_its_generations() {
        let s = SlotCounts::<1>::new();
        for g in 0..40u64 {
            for _ in 0..g {
                assert!(s.incr(0, g, SC));
            }
        }
        // Generations 30..=39 hold 30 + … + 39 = 345.
        assert_eq!(s.sum(39, 10, 0, SC), 345);
        assert_eq!(s.sum(39, 1, 0, SC), 39);
        // From generation 37's point of view, 38 and 39 are ahead.
        assert_eq!(s.sum(37, 3, 0, SC), 35 + 36 + 37);
        assert_eq!(s.sum(37, 3, 2, SC), 35 + 36 + 37 + 38 + 39);
    }

    #[test]
    fn late_writers_and_undo() {
        let s = SlotCounts::<1>::new();
        assert!(s.incr(0, 20, SC));
        assert!(!s.incr(0, 4, SC), "slot 4 is held by newer generation 20");
        assert!(s.incr(0, 5, SC), "slot 5 is free (generation 0)");
        s.decr(0, 20, SC);
        s.decr(0, 20, SC);
        assert_eq!(s.sum(20, 16, 0, SC), 1, "undo never goes below zero; 5 still counted");
        s.decr(0, 36, SC);
        assert_eq!(s.sum(20, 16, 0, SC), 1, "undo of another generation does nothing");
    }

    /// A writer several rings behind the newest (a badly skewed `now`) is refused; it must not
    /// take the newer generation's slot and lose its counts.
    #[test]
    fn a_writer_rings_behind_leaves_newer_counts_alone() {
        let s = SlotCounts::<1>::new();
        for _ in 0..3 {
            assert!(s.incr(0, 100, SC));
        }
        for behind in [16u64, 32, 48, 96] {
            assert!(!s.incr(0, 100 - behind, SC), "{behind} generations behind");
        }
        assert_eq!(s.sum(100, 1, 0, SC), 3);
    }

    #[test]
    fn lanes_are_independent() {
        let s = SlotCounts::<2>::new();
        assert!(s.incr(0, 7, SC));
        assert!(s.incr(1, 7, SC));
        assert!(s.incr(1, 8, SC));
        assert_eq!(s.sums(8, 2, 0, SC), [1, 2]);
        assert_eq!(s.sums(8, 1, 0, SC), [0, 1]);
    }

    #[test]
    fn stale_tags_far_ahead_are_replaced() {
        let s = SlotCounts::<1>::new();
        let far = 1u64 << 31 | 3; // "ahead" of generation 3 by 2³¹ slots: stale, not newer
        assert!(s.incr(0, far, SC));
        assert!(s.incr(0, 3, SC));
        assert_eq!(s.sum(3, 1, 0, SC), 1);
    }
}
