//! Injected randomness: a small trait, a seeded generator, and independent per-call streams.
//!
//! Jitter only spreads load if callers that fail at the same instant draw *different* waits. A
//! process-wide generator behind a lock would be contended; one generator per policy shared by
//! every call would hand two concurrent calls interleaved draws of the same sequence. Instead a
//! [`SeedSource`] hands each logical call its own [`SeededRng`], seeded from a base seed and a
//! counter through SplitMix64, so streams are independent, lock-free to create, and reproducible:
//! the same base seed gives the same sequence of streams.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The randomness a decision needs. Implemented by [`SeededRng`]; tests may supply their own.
pub trait Rng {
    /// A uniformly distributed `u64`.
    fn next_u64(&mut self) -> u64;

    /// A uniformly distributed `f64` in `[0, 1)`.
    fn next_f64(&mut self) -> f64 {
        // 53 random mantissa bits; the standard construction.
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl<R: Rng + ?Sized> Rng for &mut R {
    fn next_u64(&mut self) -> u64 {
        (**self).next_u64()
    }
}

/// SplitMix64's increment (the golden ratio in 64 bits).
const PHI: u64 = 0x9E37_79B9_7F4A_7C15;

/// Xoshiro256++ (Blackman and Vigna, <https://prng.di.unimi.it/>): fast, small, and reproducible
/// across platforms and crate versions.
///
/// Written out here (a dozen lines) rather than taken from `rand_xoshiro`. The sequence is
/// `rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64`'s, bit for bit (a test compares them).
#[derive(Clone, PartialEq, Eq)]
pub struct SeededRng {
    s: [u64; 4],
}

impl SeededRng {
    /// A generator whose whole sequence is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        // Four SplitMix64 outputs from `seed`, as `rand_xoshiro` seeds. SplitMix64's mix is a
        // bijection, so four distinct inputs give at most one zero word: never the all-zero
        // state, which Xoshiro never leaves.
        let word = |i: u64| splitmix64(seed.wrapping_add(i.wrapping_mul(PHI)));
        SeededRng { s: [word(0), word(1), word(2), word(3)] }
    }
}

impl fmt::Debug for SeededRng {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SeededRng(..)")
    }
}

impl Rng for SeededRng {
    #[inline]
    fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }
}

/// One logical call's random stream: SplitMix64 (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014; the generator of Java's `SplittableRandom`),
/// whose whole state is one `u64`. A call reads a few values (at most six per attempt), and a
/// simulator keeps millions of calls at once, so a call keeps 8 B of generator rather than
/// [`SeededRng`]'s 32. Each stream starts at its own point of SplitMix64's 2^64-long cycle
/// ([`SeedSource::call_stream`]).
#[derive(Clone, PartialEq, Eq)]
pub struct CallRng {
    state: u64,
}

impl CallRng {
    /// A stream whose whole sequence is determined by `seed`.
    pub const fn new(seed: u64) -> Self {
        CallRng { state: seed }
    }
}

impl fmt::Debug for CallRng {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CallRng(..)")
    }
}

impl Rng for CallRng {
    #[inline]
    fn next_u64(&mut self) -> u64 {
        let out = splitmix64(self.state);
        self.state = self.state.wrapping_add(PHI);
        out
    }
}

/// SplitMix64's output function: a bijective mix, so distinct inputs give distinct seeds.
pub const fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(PHI);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hands out independent, reproducible random streams, one per logical call. Lock-free.
#[derive(Debug)]
pub struct SeedSource {
    base: u64,
    next: AtomicU64,
}

impl SeedSource {
    /// A source whose streams are determined by `seed`.
    pub fn new(seed: u64) -> Self {
        SeedSource { base: seed, next: AtomicU64::new(0) }
    }

    /// A source seeded from the system clock and the address of a stack value: different in every
    /// process, which is what production wants (two replicas must not jitter in lockstep).
    pub fn from_entropy() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let marker = 0u8;
        let addr = &marker as *const u8 as usize as u64;
        Self::new(splitmix64(t ^ addr.rotate_left(32) ^ u64::from(std::process::id())))
    }

    /// The next independent stream.
    pub fn stream(&self) -> SeededRng {
        self.numbered(self.take())
    }

    /// The next call's stream ([`CallRng`]): stream `n` of the source for the `n`-th asked for.
    pub fn call_stream(&self) -> CallRng {
        self.call_numbered(self.take())
    }

    fn take(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn numbered(&self, n: u64) -> SeededRng {
        SeededRng::new(self.seed_of(n))
    }

    /// Call stream number `n` from its start: the same stream whenever it is asked for.
    pub(crate) fn call_numbered(&self, n: u64) -> CallRng {
        CallRng::new(self.seed_of(n))
    }

    #[inline]
    fn seed_of(&self, n: u64) -> u64 {
        splitmix64(self.base ^ splitmix64(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = SeededRng::new(7);
        let mut b = SeededRng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn the_sequence_is_rand_xoshiros() {
        use rand_core::{RngCore, SeedableRng};
        use rand_xoshiro::Xoshiro256PlusPlus;
        let seeds = [0, 1, 7, 42, u64::MAX, PHI, 0u64.wrapping_sub(PHI), splitmix64(3)];
        for seed in seeds.into_iter().chain((0..200).map(|i| splitmix64(i ^ 0x5EA))) {
            let (mut ours, mut theirs) =
                (SeededRng::new(seed), Xoshiro256PlusPlus::seed_from_u64(seed));
            assert_ne!(ours.s, [0; 4], "the all-zero state, which Xoshiro never leaves");
            for _ in 0..64 {
                assert_eq!(ours.next_u64(), theirs.next_u64(), "seed {seed}");
            }
        }
    }

    #[test]
    fn f64_in_unit_interval() {
        let mut r = SeededRng::new(1);
        for _ in 0..10_000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }

    /// A call's stream is SplitMix64 as its authors give it (the first outputs of Vigna's
    /// reference `splitmix64.c` from state 0), and a source's call streams differ and reproduce.
    #[test]
    fn a_call_stream_is_splitmix64() {
        let mut r = CallRng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
        let (a, b) = (SeedSource::new(9), SeedSource::new(9));
        let (mut a0, mut a1) = (a.call_stream(), a.call_stream());
        assert_ne!(a0.next_u64(), a1.next_u64());
        assert_eq!(b.call_stream().next_u64(), SeedSource::new(9).call_numbered(0).next_u64());
    }

    #[test]
    fn streams_differ_and_reproduce() {
        let s1 = SeedSource::new(42);
        let s2 = SeedSource::new(42);
        let mut a = s1.stream();
        let mut b = s1.stream();
        assert_ne!(a.next_u64(), b.next_u64());
        let mut a2 = s2.stream();
        let mut a_again = SeedSource::new(42).stream();
        assert_eq!(a2.next_u64(), a_again.next_u64());
    }
}
