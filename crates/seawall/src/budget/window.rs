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
// explore the interleavings of concurrent readers and publishers (see that file).
#[cfg(shuttle)]
use shuttle::sync::atomic::{AtomicU64, fence};
#[cfg(not(shuttle))]
use std::sync::atomic::{AtomicU64, fence};

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
        self.incr_after(lane, generation, order).0
    }

    /// [`SlotCounts::incr`], also returning the count `generation`'s slot held in this lane just
    /// before (0 if the slot held another generation) — what a read would have counted for it.
    #[inline]
    pub(crate) fn incr_after(&self, lane: usize, generation: u64, order: Ordering) -> (bool, u32) {
        let slot = self.slot(lane, generation);
        let t = generation as u32;
        let mut cur = slot.load(Ordering::Relaxed);
        loop {
            let a = age(t, tag(cur));
            let new = if a == 0 {
                if count(cur) >= SATURATED {
                    return (false, count(cur));
                }
                // The slot is current: one fetch_add, no retry loop under contention. If another
                // caller moved the slot a whole ring ahead since the load, this event lands in
                // that newer generation — counted later than it happened, never lost.
                let prev = slot.fetch_add(1, order);
                return (true, if tag(prev) == t { count(prev) } else { 0 });
            } else if !(STALE_AHEAD..=0).contains(&a) {
                // Older (or so far "ahead" it can only be a stale slot from about 2³¹ slots ago;
                // a writer merely a few rings behind the newest must not overwrite it).
                pack(t, 1)
            } else {
                return (false, 0);
            };
            match slot.compare_exchange_weak(cur, new, order, Ordering::Relaxed) {
                Ok(_) => return (true, 0),
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

/// A [`SlotCounts`] read as one window — `back` slots up to and including the reader's, as
/// [`SlotCounts::sums`]`(generation, back, 0)` — with the sum of the window's *finished* slots
/// (all but the reader's own) cached, so a read is the cache plus the current slot instead of a
/// pass over the ring. Every write goes through [`CachedSums::incr`], which is what keeps the
/// cache honest.
///
/// # The scheme
///
/// - `hi` is the newest generation any reader has asked for (`fetch_max`, raised *before* the
///   reader scans). Only a reader whose generation is `hi` uses or fills the cache; an older
///   ("late") reader sums the ring as before.
/// - The cache holds `(generation, epoch, finished sums)` behind a seqlock, so a reader never
///   mixes two publications. A reader that finds no usable entry reads `epoch`, sums the ring
///   (finished slots and current slot apart), returns the total and tries to publish the
///   finished part, tagged with the `epoch` it read before summing.
/// - A write into a slot can change the finished sums of generation `h` only if the slot's index
///   is one of `h`'s finished ones, `h − 1 … h − back + 1` (mod [`RING`]); whatever generation it
///   writes or replaces, a slot's generations are all ≡ its index. So after every write,
///   [`CachedSums::incr`] loads `hi` and, if the slot index is one of `hi`'s finished ones, bumps
///   `epoch`. In steady state every write lands in the current slot (or one just ahead of it)
///   and no one bumps anything.
/// - A reader trusts the cache only if `hi`, the entry's generation and its own generation are
///   equal and `epoch` still holds the value the entry was computed under.
///
/// Why that is exactly as good as summing the ring (all the atomics involved are `SeqCst`, so
/// there is one total order `S` of them): take a write `W` into one of generation `g`'s finished
/// slots that a trusted entry for `g` does not include. The entry's summer raised `hi` to ≥ `g`,
/// read `epoch` (= `e₀`) and then loaded that slot *before* `W` wrote it, so `W`'s later load of
/// `hi` sees ≥ `g`. If `W`'s call finished before the reader's began, the reader's load of `hi`
/// comes later in `S` than `W`'s, and it saw exactly `g` — so `W` saw `g` too, found the slot
/// among `g`'s finished ones and bumped `epoch` before returning: the reader, loading `epoch`
/// after that, sees a value other than `e₀` and sums the ring instead. So a read misses only
/// writes whose calls overlap it — which a pass over the ring, reading one slot after another
/// while writers run, may miss as well — and counts nothing twice (the cache and the current
/// slot are disjoint slots). On one thread it always returns what the pass would.
#[derive(Debug)]
pub(crate) struct CachedSums<const LANES: usize> {
    counts: SlotCounts<LANES>,
    cache: SumCache<LANES>,
    back: u32,
}

/// The cache's words, on their own cache line: read on every call, written about once a slot.
#[derive(Debug)]
#[repr(align(64))]
struct SumCache<const LANES: usize> {
    /// Newest generation asked for.
    hi: AtomicU64,
    /// Bumped after any write that may change the finished sums of `hi`.
    epoch: AtomicU64,
    /// Seqlock over the entry below: odd while a publisher writes, 0 before the first entry.
    seq: AtomicU64,
    generation: AtomicU64,
    /// `epoch` as read before the entry's sums were computed.
    computed_at: AtomicU64,
    finished: [AtomicU64; LANES],
}

impl<const LANES: usize> CachedSums<LANES> {
    /// All counts zero; windows of `back` slots (2 to [`RING`]).
    pub(crate) fn new(back: u32) -> Self {
        debug_assert!((2..=RING as u32).contains(&back));
        let zeros = || std::array::from_fn(|_| AtomicU64::new(0));
        CachedSums {
            counts: SlotCounts::new(),
            cache: SumCache {
                hi: AtomicU64::new(0),
                epoch: AtomicU64::new(0),
                seq: AtomicU64::new(0),
                generation: AtomicU64::new(0),
                computed_at: AtomicU64::new(0),
                finished: zeros(),
            },
            back,
        }
    }

    /// [`SlotCounts::incr`], then the invalidation the cache relies on (see the type's docs).
    pub(crate) fn incr(&self, lane: usize, generation: u64) -> bool {
        let written = self.counts.incr(lane, generation, Ordering::SeqCst);
        if written {
            self.invalidate(generation);
        }
        written
    }

    /// Counts one event like [`CachedSums::incr`] and returns the window's sums as they were
    /// just before it (what [`CachedSums::sums`] would have returned): the current slot's count
    /// in `lane` comes from the increment itself, and the slot's other lanes are read right after
    /// it, while its cache line is still this thread's.
    pub(crate) fn incr_and_sums(&self, lane: usize, generation: u64) -> [u64; LANES] {
        let (written, before) = self.counts.incr_after(lane, generation, Ordering::SeqCst);
        if written {
            self.invalidate(generation);
        }
        let mut current = self.current(generation);
        current[lane] = u64::from(before);
        let finished = self.finished(generation);
        std::array::from_fn(|l| finished[l] + current[l])
    }

    /// Per lane, what [`SlotCounts::sums`]`(generation, back, 0)` returns.
    pub(crate) fn sums(&self, generation: u64) -> [u64; LANES] {
        let finished = self.finished(generation);
        let current = self.current(generation);
        std::array::from_fn(|l| finished[l] + current[l])
    }

    /// After a write into `generation`'s slot: bumps `epoch` if that slot is one of `hi`'s
    /// finished ones.
    #[inline]
    fn invalidate(&self, generation: u64) {
        let h = self.cache.hi.load(Ordering::SeqCst);
        let age = (h.wrapping_sub(generation) as usize) & (RING - 1);
        if age != 0 && age < self.back as usize {
            self.cache.epoch.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Per lane, the count of `generation`'s own slot.
    #[inline]
    fn current(&self, generation: u64) -> [u64; LANES] {
        let slot = &self.counts.slots[(generation as usize) & (RING - 1)];
        let t = generation as u32;
        std::array::from_fn(|lane| {
            let v = slot[lane].load(Ordering::SeqCst);
            if tag(v) == t { u64::from(count(v)) } else { 0 }
        })
    }

    /// Per lane, the sum of the finished slots of `generation` (ages 1 ..= back − 1): from the
    /// cache if it holds them, otherwise summed (and, if `generation` is the newest asked for,
    /// published).
    #[inline(always)]
    fn finished(&self, generation: u64) -> [u64; LANES] {
        if self.cache.hi.load(Ordering::SeqCst) == generation
            && let Some(finished) = self.cached(generation)
        {
            return finished;
        }
        self.finished_uncached(generation)
    }

    /// [`CachedSums::finished`] without a usable entry: a late reader sums the ring; the
    /// newest one also publishes what it summed.
    #[cold]
    #[inline(never)]
    fn finished_uncached(&self, generation: u64) -> [u64; LANES] {
        let c = &self.cache;
        if c.hi.fetch_max(generation, Ordering::SeqCst) > generation {
            return self.scan_finished(generation);
        }
        let e0 = c.epoch.load(Ordering::SeqCst);
        let finished = self.scan_finished(generation);
        self.publish(generation, e0, finished);
        finished
    }

    /// The finished slots of `generation` summed from the ring: ages 1 ..= back − 1 of it are
    /// ages 0 ..= back − 2 of the generation before.
    #[cold]
    fn scan_finished(&self, generation: u64) -> [u64; LANES] {
        self.counts.sums(generation.wrapping_sub(1), self.back - 1, 0, Ordering::SeqCst)
    }

    /// The finished sums of `generation`, if the entry is for it and still valid.
    #[inline(always)]
    fn cached(&self, generation: u64) -> Option<[u64; LANES]> {
        let c = &self.cache;
        let s1 = c.seq.load(Ordering::Acquire);
        if s1 & 1 == 1 || s1 == 0 {
            return None;
        }
        let g = c.generation.load(Ordering::Relaxed);
        let e = c.computed_at.load(Ordering::Relaxed);
        let finished = std::array::from_fn(|lane| c.finished[lane].load(Ordering::Relaxed));
        fence(Ordering::Acquire);
        let s2 = c.seq.load(Ordering::Relaxed);
        (s1 == s2 && g == generation && e == c.epoch.load(Ordering::SeqCst)).then_some(finished)
    }

    /// Publishes an entry unless another publisher holds the seqlock (then its entry will do).
    fn publish(&self, generation: u64, epoch: u64, finished: [u64; LANES]) {
        let c = &self.cache;
        let s = c.seq.load(Ordering::Relaxed);
        if s & 1 == 1
            || c.seq.compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed).is_err()
        {
            return;
        }
        fence(Ordering::Release);
        c.generation.store(generation, Ordering::Relaxed);
        c.computed_at.store(epoch, Ordering::Relaxed);
        for (slot, v) in c.finished.iter().zip(finished) {
            slot.store(v, Ordering::Relaxed);
        }
        c.seq.store(s + 2, Ordering::Release);
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
    fn cached_sums_equal_a_pass_over_the_ring() {
        // Out-of-order writes and reads (far behind, a little ahead, a ring ahead) against a
        // plain ring given the same writes: every read must agree exactly.
        let (cached, plain) = (CachedSums::<2>::new(13), SlotCounts::<2>::new());
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut top = 100u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            top += u64::from(x.is_multiple_of(64));
            let g = match (x >> 8) % 16 {
                0 => top - (x >> 16) % 40, // late, possibly past a whole ring
                1 => top + (x >> 16) % 20, // ahead, possibly past a whole ring
                2..=5 => top - (x >> 16) % 4,
                _ => top,
            };
            if (x >> 24).is_multiple_of(3) {
                assert_eq!(cached.sums(g), plain.sums(g, 13, 0, SC), "read at {g}, top {top}");
            } else if (x >> 40).is_multiple_of(2) {
                let lane = ((x >> 32) % 2) as usize;
                assert_eq!(cached.incr(lane, g), plain.incr(lane, g, SC));
            } else {
                let lane = ((x >> 32) % 2) as usize;
                let before = plain.sums(g, 13, 0, SC);
                plain.incr(lane, g, SC);
                assert_eq!(cached.incr_and_sums(lane, g), before, "counted at {g}, top {top}");
            }
        }
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
