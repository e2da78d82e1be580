//! Reading counters back from a node's Prometheus page (`GET /metrics`).
//!
//! The lab takes each tier's attempts, retries and budget refusals from the client layers' own
//! metrics — the numbers a user's dashboard would show — rather than from a side channel. Only
//! what the lab needs is parsed: a sample line `name{labels} value`, summed over labels. The
//! page comes from our own child over loopback, but it is still bounded and parsed leniently:
//! a line that does not parse is skipped, never a panic.

/// The most bytes of a metrics page the lab reads.
pub const MAX_PAGE: usize = 1 << 20;

/// The sum of every sample of `name` (over all label sets) on `page`, or `None` if absent.
///
/// ```
/// let page = "# TYPE x counter\nx_total{a=\"1\"} 2\nx_total{a=\"2\"} 3\nx_totally 9\n";
/// assert_eq!(seawall_lab::prom::sum(page, "x_total"), Some(5.0));
/// assert_eq!(seawall_lab::prom::sum(page, "y_total"), None);
/// ```
pub fn sum(page: &str, name: &str) -> Option<f64> {
    let page = &page[..floor_char_boundary(page, MAX_PAGE)];
    let mut total = None;
    for line in page.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else { continue };
        let rest = match rest.chars().next() {
            Some('{') => match rest.find('}') {
                Some(i) => &rest[i + 1..],
                None => continue,
            },
            Some(' ') => rest,
            _ => continue,
        };
        // `value [timestamp]`
        if let Some(v) = rest.split_whitespace().next().and_then(|v| v.parse::<f64>().ok())
            && v.is_finite()
        {
            *total.get_or_insert(0.0) += v;
        }
    }
    total
}

/// [`sum`] as a counter value (0 if absent).
pub fn counter(page: &str, name: &str) -> u64 {
    sum(page, name).map_or(0, |v| v.max(0.0) as u64)
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    (0..=max).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_label_sets_and_skips_garbage() {
        let page = "a_total 1\na_total{x=\"}\"} 2\na_total{broken 7\na_total nan\na_total 4 123\n";
        // `{x="}"}` is cut at the first `}` (our own pages never put one in a label value).
        assert_eq!(sum(page, "a_total"), Some(5.0));
        assert_eq!(counter("", "a_total"), 0);
        let big = "é".repeat(MAX_PAGE);
        assert_eq!(sum(&big, "a_total"), None);
    }
}
