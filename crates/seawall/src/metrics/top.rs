//! The heaviest callers, counted in bounded memory.
//!
//! "Slice server-side counts by client": one caller sending most of the traffic is a retry loop
//! (or a runaway job) more often than it is demand. A label per caller would let any client
//! grow the exporter without bound, so [`TopCallers`] keeps at most `k` callers with the
//! Space-Saving algorithm (Metwally, Agrawal and El Abbadi, "Efficient Computation of Frequent
//! and Top-k Elements in Data Streams", ICDT 2005): a caller not in the table takes the place
//! of the one with the smallest count and inherits that count plus one. Every caller whose true
//! count exceeds `total / k` is in the table; each count is an upper bound, over by at most the
//! [`CallerCount::error`] it carries.
//!
//! Caller names come from requests (a header, an address), so they are untrusted: each is cut
//! to [`MAX_CALLER_BYTES`] at a character boundary, and control characters, `"` and `\` become
//! `?`, so a name is a valid label value without escaping.

use std::collections::HashMap;

/// Callers kept by [`TopCallers::default`]: enough for the "top callers" panel, few enough for
/// a linear scan on each eviction.
pub const DEFAULT_CALLERS: usize = 20;

/// The most callers a table may keep ([`TopCallers::new`] clamps to it).
pub const MAX_CALLERS: usize = 256;

/// Longest caller name kept, in bytes.
pub const MAX_CALLER_BYTES: usize = 64;

/// One caller's count in a [`TopCallers`] table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerCount {
    /// The caller, as recorded (cut and cleaned).
    pub caller: String,
    /// Requests counted for it: never fewer than it sent.
    pub count: u64,
    /// How much of `count` may belong to callers it replaced; `count - error` it surely sent.
    pub error: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    caller: Box<str>,
    count: u64,
    error: u64,
}

/// The `k` heaviest callers of a stream of requests (Space-Saving).
///
/// ```
/// use seawall::metrics::top::TopCallers;
/// let mut t = TopCallers::new(2);
/// for _ in 0..10 { t.record("batch-job"); }
/// t.record("web");
/// t.record("mobile"); // replaces "web", the smallest: count 1 + 1, error 1
/// let top = t.top();
/// assert_eq!((top[0].caller.as_str(), top[0].count), ("batch-job", 10));
/// assert_eq!((top[1].caller.as_str(), top[1].count, top[1].error), ("mobile", 2, 1));
/// assert_eq!(t.total(), 12);
/// ```
#[derive(Debug, Clone)]
pub struct TopCallers {
    k: usize,
    entries: Vec<Entry>,
    index: HashMap<Box<str>, usize>,
    total: u64,
}

impl Default for TopCallers {
    fn default() -> Self {
        TopCallers::new(DEFAULT_CALLERS)
    }
}

/// `caller` cut to [`MAX_CALLER_BYTES`] at a character boundary, control characters, `"` and `\`
/// as `?`: a name is then a valid label value in every exposition format without escaping, and
/// safe to print. [`TopCallers::record`] cleans every name; a reader of someone else's page
/// (`seawall detect`) cleans what it reads the same way.
pub fn clean(caller: &str) -> std::borrow::Cow<'_, str> {
    let mut end = caller.len().min(MAX_CALLER_BYTES);
    while !caller.is_char_boundary(end) {
        end -= 1;
    }
    let cut = &caller[..end];
    let odd = |c: char| c.is_control() || c == '"' || c == '\\';
    if cut.chars().any(odd) {
        cut.chars().map(|c| if odd(c) { '?' } else { c }).collect::<String>().into()
    } else {
        cut.into()
    }
}

impl TopCallers {
    /// A table of at most `k` callers (clamped to `1..=`[`MAX_CALLERS`]).
    pub fn new(k: usize) -> Self {
        let k = k.clamp(1, MAX_CALLERS);
        TopCallers { k, entries: Vec::with_capacity(k), index: HashMap::with_capacity(k), total: 0 }
    }

    /// Counts one request from `caller`.
    pub fn record(&mut self, caller: &str) {
        let caller = clean(caller);
        self.total += 1;
        if let Some(&i) = self.index.get(caller.as_ref()) {
            self.entries[i].count += 1;
            return;
        }
        let name: Box<str> = caller.into_owned().into_boxed_str();
        if self.entries.len() < self.k {
            self.index.insert(name.clone(), self.entries.len());
            self.entries.push(Entry { caller: name, count: 1, error: 0 });
            return;
        }
        // The smallest count gives up its place; the newcomer inherits it as its error.
        let (i, min) = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (i, e.count))
            .min_by_key(|&(_, c)| c)
            .expect("k >= 1 entries");
        self.index.remove(&self.entries[i].caller);
        self.index.insert(name.clone(), i);
        self.entries[i] = Entry { caller: name, count: min + 1, error: min };
    }

    /// Requests counted, from every caller (kept or not).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The callers kept, heaviest first (ties by name).
    pub fn top(&self) -> Vec<CallerCount> {
        let mut v: Vec<CallerCount> = self
            .entries
            .iter()
            .map(|e| CallerCount { caller: e.caller.to_string(), count: e.count, error: e.error })
            .collect();
        v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.caller.cmp(&b.caller)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_are_cut_and_cleaned() {
        let mut t = TopCallers::new(4);
        t.record(&"é".repeat(40)); // 80 bytes: cut to 64, on a boundary
        t.record("a\nb\u{7}");
        t.record("x\"y\\");
        let top = t.top();
        assert!(top.iter().any(|c| c.caller == "é".repeat(32)), "{top:?}");
        assert!(top.iter().any(|c| c.caller == "a?b?"), "{top:?}");
        assert!(top.iter().any(|c| c.caller == "x?y?"), "{top:?}");
    }

    #[test]
    fn k_is_clamped() {
        let mut t = TopCallers::new(0);
        t.record("a");
        t.record("b");
        assert_eq!(t.top().len(), 1);
        let mut t = TopCallers::new(usize::MAX);
        for i in 0..1000 {
            t.record(&i.to_string());
        }
        assert_eq!(t.top().len(), MAX_CALLERS);
    }

    proptest! {
        /// Space-Saving's guarantees, against exact counts: the table holds at most k callers,
        /// its counts sum to the total, each count bounds the true count from above by at most
        /// its error, and every caller with more than total / k requests is kept.
        #[test]
        fn space_saving_bounds(k in 1usize..8, stream in proptest::collection::vec(0u8..20, 0..400)) {
            let mut t = TopCallers::new(k);
            let mut exact: HashMap<String, u64> = HashMap::new();
            for c in &stream {
                let name = format!("c{c}");
                t.record(&name);
                *exact.entry(name).or_default() += 1;
            }
            let top = t.top();
            prop_assert!(top.len() <= k);
            prop_assert_eq!(top.iter().map(|c| c.count).sum::<u64>(), stream.len() as u64);
            prop_assert_eq!(t.total(), stream.len() as u64);
            for c in &top {
                let truth = exact.get(&c.caller).copied().unwrap_or(0);
                prop_assert!(c.count >= truth && c.count - c.error <= truth, "{c:?} truth {truth}");
            }
            for (name, &n) in &exact {
                if n > stream.len() as u64 / k as u64 {
                    prop_assert!(top.iter().any(|c| &c.caller == name), "{name} ({n}) missing");
                }
            }
        }
    }
}
