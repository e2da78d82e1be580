//! Live samples: scrape the Prometheus endpoints of a call path and turn counter deltas into
//! [`Sample`]s for the classifier.
//!
//! # Order matters
//!
//! Targets are given in call-path order: **the edge first, the dependency under watch last**
//! (`edge → … → dependency`). The edge's arrivals are the inbound requests; the last target's
//! arrivals are the requests that reached the dependency; their ratio is the number that shows
//! a storm first. See [`totals::fold`] for exactly which metric feeds which number.
//!
//! [`Scraper`] is blocking: it owns a small current-thread runtime, so a command-line tool can
//! call it from plain code. Each scrape has a timeout and a size cap; a target that fails
//! returns an error for that interval and the next interval compares against the last good page.

pub mod totals;

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;

use crate::prom::{self, ParseError};
use crate::sample::Sample;
pub use totals::{TargetRates, Totals};

/// Why a scrape failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ScrapeError {
    /// The URL is not an `http://host:port/path` URL.
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What was wrong.
        reason: String,
    },
    /// Connecting, sending or reading failed, or timed out.
    Http {
        /// The target.
        url: String,
        /// What happened.
        message: String,
    },
    /// The target answered with a status other than 200.
    Status {
        /// The target.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The page is not valid Prometheus text.
    Parse {
        /// The target.
        url: String,
        /// The parser's complaint.
        error: ParseError,
    },
    /// The async runtime could not be started.
    Runtime(String),
}

impl fmt::Display for ScrapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScrapeError::InvalidUrl { url, reason } => write!(f, "{url}: {reason}"),
            ScrapeError::Http { url, message } => write!(f, "{url}: {message}"),
            ScrapeError::Status { url, status } => write!(f, "{url}: HTTP status {status}"),
            ScrapeError::Parse { url, error } => write!(f, "{url}: {error}"),
            ScrapeError::Runtime(m) => write!(f, "cannot start the runtime: {m}"),
        }
    }
}

impl std::error::Error for ScrapeError {}

/// One interval of a live watch: the classifier's sample and each target's rates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    /// What the classifier is fed (`t` is seconds since the first scrape).
    pub sample: Sample,
    /// Each target's rates, in the order given.
    pub targets: Vec<TargetRates>,
}

/// Checks `url` is `http://…` with a host, and appends `/metrics` when it has no path.
pub fn normalize_url(url: &str) -> Result<http::Uri, ScrapeError> {
    let bad = |reason: &str| ScrapeError::InvalidUrl { url: url.into(), reason: reason.into() };
    let uri: http::Uri = url.parse().map_err(|_| bad("not a URL"))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(bad("expected http://HOST:PORT/PATH (https is not supported)"));
    }
    if uri.path() == "/" && !url.ends_with('/') {
        let fixed = format!("{}/metrics", url.trim_end_matches('/'));
        return fixed.parse().map_err(|_| bad("not a URL"));
    }
    Ok(uri)
}

/// A blocking scraper of a call path (edge first, dependency last).
#[derive(Debug)]
pub struct Scraper {
    rt: tokio::runtime::Runtime,
    http: Client<HttpConnector, Empty<Bytes>>,
    urls: Vec<http::Uri>,
    timeout: Duration,
    first: Instant,
    last: Instant,
    /// When the last scrape was attempted, good or not: the next waits `every` from here, so a
    /// target that is down is retried once an interval, not in a busy loop.
    tried: Instant,
    prev: Vec<Totals>,
}

impl Scraper {
    /// Validates the URLs and scrapes every target once (so a typo fails now, not an interval
    /// later). `timeout` bounds each request.
    pub fn new(urls: &[String], timeout: Duration) -> Result<Scraper, ScrapeError> {
        let urls = urls.iter().map(|u| normalize_url(u)).collect::<Result<Vec<_>, _>>()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ScrapeError::Runtime(e.to_string()))?;
        let http = {
            let _guard = rt.enter();
            Client::builder(TokioExecutor::new()).build(HttpConnector::new())
        };
        let now = Instant::now();
        let mut s = Scraper {
            rt,
            http,
            urls,
            timeout,
            first: now,
            last: now,
            tried: now,
            prev: Vec::new(),
        };
        s.prev = s.scrape_all()?;
        s.first = Instant::now();
        s.last = s.first;
        s.tried = s.first;
        Ok(s)
    }

    /// The targets, normalized, in order.
    pub fn urls(&self) -> Vec<String> {
        self.urls.iter().map(ToString::to_string).collect()
    }

    /// The pages of the last good scrape, one per target, in order.
    pub fn last_totals(&self) -> &[Totals] {
        &self.prev
    }

    /// Waits until `every` has passed since the last scrape, scrapes every target, and returns
    /// the interval's rates. On error the last good page is kept for the next interval.
    pub fn next_interval(&mut self, every: Duration) -> Result<Interval, ScrapeError> {
        let due = self.tried + every;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        self.tried = Instant::now();
        let cur = self.scrape_all()?;
        let now = Instant::now();
        // A zero interval would divide by zero; a millisecond is below any real interval.
        let dt = now.duration_since(self.last).as_secs_f64().max(1e-3);
        let t = self.last.duration_since(self.first).as_secs_f64();
        let targets: Vec<TargetRates> = self
            .urls
            .iter()
            .zip(self.prev.iter().zip(&cur))
            .map(|(u, (p, c))| totals::rates(&u.to_string(), p, c, dt))
            .collect();
        let sample = totals::fold(t, &targets, &self.prev, &cur, dt);
        self.prev = cur;
        self.last = now;
        Ok(Interval { sample, targets })
    }

    fn scrape_all(&self) -> Result<Vec<Totals>, ScrapeError> {
        self.rt.block_on(async {
            let mut out = Vec::with_capacity(self.urls.len());
            for u in &self.urls {
                let page = self.fetch(u).await?;
                let samples = prom::parse(&page)
                    .map_err(|error| ScrapeError::Parse { url: u.to_string(), error })?;
                out.push(Totals::from_samples(&samples));
            }
            Ok(out)
        })
    }

    async fn fetch(&self, uri: &http::Uri) -> Result<String, ScrapeError> {
        let url = uri.to_string();
        let fail = |m: String| ScrapeError::Http { url: url.clone(), message: m };
        let call = async {
            let resp = self.http.get(uri.clone()).await.map_err(|e| fail(e.to_string()))?;
            let status = resp.status().as_u16();
            if status != 200 {
                return Err(ScrapeError::Status { url: url.clone(), status });
            }
            let body = Limited::new(resp.into_body(), prom::MAX_BYTES)
                .collect()
                .await
                .map_err(|e| fail(e.to_string()))?;
            String::from_utf8(body.to_bytes().to_vec())
                .map_err(|_| fail("page is not UTF-8".into()))
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(r) => r,
            Err(_) => Err(fail(format!("no answer within {:?}", self.timeout))),
        }
    }
}

#[cfg(test)]
mod tests;
