//! Reading counters back from a node's Prometheus page (`GET /metrics`).
//!
//! The lab takes each tier's attempts, retries and budget refusals from the client layers' own
//! metrics — the numbers a user's dashboard would show — rather than from a side channel. The
//! page is read with `seawall-detect`'s strict, bounded parser ([`seawall_detect::prom`]), the
//! one every seawall tool uses: a page that does not parse is an error naming the line, never a
//! panic and never a silently partial sum.

pub use seawall_detect::prom::ParseError;
use seawall_detect::prom::PromSample;

/// A parsed metrics page.
#[derive(Debug, Clone)]
pub struct Page(Vec<PromSample>);

impl Page {
    /// Parses `text` strictly (see [`seawall_detect::prom::parse`]).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        seawall_detect::prom::parse(text).map(Page)
    }

    /// The sum of every finite sample of `name` (over all label sets), or `None` if absent.
    ///
    /// ```
    /// use seawall_lab::prom::Page;
    /// let page = Page::parse("# TYPE x counter\nx_total{a=\"1\"} 2\nx_total{a=\"2\"} 3\nx_totally 9\n")?;
    /// assert_eq!(page.sum("x_total"), Some(5.0));
    /// assert_eq!(page.sum("y_total"), None);
    /// assert!(Page::parse("x_total{broken 7\n").is_err());
    /// # Ok::<(), seawall_lab::prom::ParseError>(())
    /// ```
    pub fn sum(&self, name: &str) -> Option<f64> {
        let mut samples = self.0.iter().filter(|s| s.name == name).peekable();
        samples.peek()?;
        Some(samples.map(|s| s.value).filter(|v| v.is_finite()).sum())
    }

    /// [`sum`](Self::sum) as a counter value (0 if absent).
    pub fn counter(&self, name: &str) -> u64 {
        self.sum(name).map_or(0, |v| v.max(0.0) as u64)
    }
}

/// The counter `name` on `page` (0 if absent), for a page whose parse error the caller has no
/// use for: a page that does not parse counts as absent.
pub fn counter(page: &str, name: &str) -> u64 {
    Page::parse(page).map_or(0, |p| p.counter(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_label_sets_and_rejects_garbage() {
        let page =
            Page::parse("a_total 1\na_total{x=\"}\"} 2\na_total NaN\na_total 4 123\n").unwrap();
        // The strict parser reads the quoted `}` as a label value, not the end of the labels.
        assert_eq!(page.sum("a_total"), Some(7.0));
        assert_eq!(page.counter("b_total"), 0);
        let err = Page::parse("a_total 1\na_total{broken 7\n").unwrap_err();
        assert!(matches!(err, ParseError::Line { line: 2, .. }), "{err}");
        assert_eq!(counter("a_total{broken 7\n", "a_total"), 0);
        assert_eq!(counter("a_total 3\n", "a_total"), 3);
    }
}
