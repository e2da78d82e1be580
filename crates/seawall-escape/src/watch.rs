//! Watching goodput and queue age between the steps of an escape.

use std::time::{Duration, Instant};

use super::{EscapeConfig, EscapeError};
use seawall_detect::scrape::{Interval, Scraper};

/// Goodput share (of the responses the edge produced) at which the dependency counts as back.
const RECOVERED: f64 = 0.9;
/// A fall in goodput share this large during a ramp stage is a regression.
const REGRESSION: f64 = 0.1;

/// What one watched interval showed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Seen {
    /// Goodput as a share of what the edge served (admitted work): 1 when healthy, whatever the
    /// admission cut — shed requests are not counted against it.
    pub(super) goodput: f64,
    /// Oldest queued request anywhere on the path, seconds.
    pub(super) queue_age_s: f64,
}

impl Seen {
    fn of(i: &Interval) -> Seen {
        let served = i.targets.first().and_then(|t| t.throughput_rps).unwrap_or(i.sample.edge_rps);
        let goodput =
            if served > 0.0 { (i.sample.goodput_rps / served).clamp(0.0, 1.0) } else { 1.0 };
        Seen { goodput, queue_age_s: i.sample.queue_age_s }
    }
}

pub(super) struct Watch {
    scraper: Option<Scraper>,
    apply: bool,
    hold: Duration,
    interval: Duration,
    caller_timeout_s: f64,
}

impl Watch {
    pub(super) fn new(cfg: &EscapeConfig, apply: bool) -> Result<Watch, EscapeError> {
        let scraper = if apply && !cfg.scrape.is_empty() {
            let timeout = cfg.interval.clamp(Duration::from_millis(200), Duration::from_secs(10));
            Some(Scraper::new(&cfg.scrape, timeout).map_err(EscapeError::Scrape)?)
        } else {
            None
        };
        Ok(Watch {
            scraper,
            apply,
            hold: cfg.hold,
            interval: cfg.interval,
            caller_timeout_s: cfg.caller_timeout_s,
        })
    }

    /// One interval, printed; `None` without a scraper (or if the scrape failed).
    pub(super) fn observe(
        &mut self,
        say: &mut dyn FnMut(&str),
        label: &str,
        every: Duration,
    ) -> Option<Seen> {
        let scraper = self.scraper.as_mut()?;
        match scraper.next_interval(every) {
            Ok(i) => {
                let seen = Seen::of(&i);
                say(&format!(
                    "        {label}: goodput {:.0} % of served ({:.1} rps), oldest queued {:.2} s",
                    100.0 * seen.goodput,
                    i.sample.goodput_rps,
                    seen.queue_age_s
                ));
                Some(seen)
            }
            Err(e) => {
                say(&format!("        {label}: scrape failed: {e}"));
                None
            }
        }
    }

    fn blind(&self, say: &mut dyn FnMut(&str), what: &str) {
        if self.apply {
            say(&format!("        no --scrape: {what} blind for {:.1} s", self.hold.as_secs_f64()));
            std::thread::sleep(self.hold);
        } else {
            say(&format!(
                "        would {what} for {:.1} s, watching goodput and queue age",
                self.hold.as_secs_f64()
            ));
        }
    }

    /// Watches until goodput is back and the queue younger than the callers' timeout.
    pub(super) fn until_recovered(
        &mut self,
        say: &mut dyn FnMut(&str),
        max_wait: Duration,
    ) -> Result<Option<Seen>, String> {
        if self.scraper.is_none() {
            self.blind(say, "hold");
            return Ok(None);
        }
        let start = Instant::now();
        while start.elapsed() < max_wait {
            let every = self.interval;
            if let Some(s) = self.observe(say, "waiting", every)
                && s.goodput >= RECOVERED
                && s.queue_age_s <= self.caller_timeout_s
            {
                return Ok(Some(s));
            }
        }
        Err(format!(
            "goodput did not return within {:.0} s; retries stay off",
            max_wait.as_secs_f64()
        ))
    }

    /// Holds a ramp stage for `hold`, failing on a regression against `before`.
    pub(super) fn hold(
        &mut self,
        say: &mut dyn FnMut(&str),
        hold: Duration,
        before: Option<&Seen>,
    ) -> Result<Option<Seen>, String> {
        if self.scraper.is_none() {
            self.blind(say, "hold this stage");
            return Ok(None);
        }
        let start = Instant::now();
        let mut last = None;
        // At least one interval per stage, however short the hold.
        while last.is_none() || start.elapsed() < hold {
            let every = self.interval;
            let Some(s) = self.observe(say, "holding", every) else {
                if start.elapsed() >= hold + self.interval * 3 {
                    return Err("no metrics while holding the stage".into());
                }
                continue;
            };
            if s.queue_age_s > self.caller_timeout_s {
                return Err(format!(
                    "oldest queued request {:.2} s, older than the callers' {} s timeout",
                    s.queue_age_s, self.caller_timeout_s
                ));
            }
            if let Some(b) = before
                && s.goodput < b.goodput - REGRESSION
            {
                return Err(format!(
                    "goodput fell from {:.0} % to {:.0} %",
                    100.0 * b.goodput,
                    100.0 * s.goodput
                ));
            }
            last = Some(s);
        }
        Ok(last)
    }
}
