//! A load test's input, validated: the target, the request, the schedule and the bounds.
//!
//! Everything here is user input (flags, a body file), so it is parsed strictly and each
//! refusal names the flag and the reason; nothing panics. Only loopback targets are accepted:
//! the lab loads the user's stack on this machine, never somebody else's.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::num::NonZeroUsize;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use seawall_tower::wire::{REQUEST_ATTEMPT, REQUEST_TIMEOUT_MS};

use super::drive::Bounds;
use super::error::{LoadError, LoadErrorKind};
use super::schedule::{MAX_DURATION, Schedule, Stage};

/// Most headers a request may carry from `--header`.
pub const MAX_HEADERS: usize = 64;
/// Largest request body.
pub const MAX_BODY: usize = 16 << 20;
/// Most requests in flight (and so connections) accepted.
pub const MAX_IN_FLIGHT: usize = 10_000;
/// Longest deadline accepted.
pub const MAX_DEADLINE: Duration = Duration::from_secs(60);
/// Most generator threads.
pub const MAX_THREADS: usize = 8;

/// The generator's threads by default: half the cores (at least one, at most [`MAX_THREADS`]).
///
/// The target is on loopback, so it runs on the same cores as the generator, and a generator
/// thread per core competes with it. On a 2-core machine against one nginx worker, two
/// generator threads spent 8.0 µs of CPU per request at 30,000 rps where one spent 5.0, and
/// nginx 5.7 against 4.0 (`perf stat`, `BENCHMARKS.md`, "`seawall load` vs wrk"); wrk itself
/// reaches more there with `-t1` than with `-t2`.
pub fn default_threads() -> NonZeroUsize {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    NonZeroUsize::new((cores / 2).clamp(1, MAX_THREADS)).unwrap_or(NonZeroUsize::MIN)
}

fn err(kind: LoadErrorKind, m: impl Into<String>) -> LoadError {
    LoadError::new(kind, m.into())
}

/// A loopback HTTP target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Where to connect.
    pub addr: SocketAddr,
    /// The `Host` header (`host[:port]` as written).
    pub host: HeaderValue,
    /// Path and query sent on the request line.
    pub path: Uri,
}

impl Target {
    /// Parses `http://host[:port][/path][?query]`; the host must be a loopback address or a
    /// name that resolves only to loopback addresses (`localhost`).
    pub fn parse(url: &str) -> Result<Self, LoadError> {
        let uri: Uri =
            url.parse().map_err(|e| err(LoadErrorKind::Url, format!("URL {url:?}: {e}")))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(s) => {
                return Err(err(
                    LoadErrorKind::Url,
                    format!("URL {url:?}: scheme {s:?} is not supported (http only)"),
                ));
            }
            None => {
                return Err(err(
                    LoadErrorKind::Url,
                    format!("URL {url:?}: expected http://host[:port]/path"),
                ));
            }
        }
        let auth = uri
            .authority()
            .ok_or_else(|| err(LoadErrorKind::Url, format!("URL {url:?}: no host")))?;
        if auth.as_str().contains('@') {
            return Err(err(
                LoadErrorKind::Url,
                format!("URL {url:?}: credentials in the URL are not supported"),
            ));
        }
        let host = auth.host().trim_start_matches('[').trim_end_matches(']');
        let port = auth.port_u16().unwrap_or(80);
        let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => (host, port)
                .to_socket_addrs()
                .map_err(|e| {
                    err(LoadErrorKind::Url, format!("URL {url:?}: cannot resolve {host:?}: {e}"))
                })?
                .collect(),
        };
        let Some(addr) = addrs.first().copied() else {
            return Err(err(
                LoadErrorKind::Url,
                format!("URL {url:?}: {host:?} resolves to nothing"),
            ));
        };
        if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(err(
                LoadErrorKind::NotLoopback,
                format!(
                    "URL {url:?}: {} is not a loopback address; seawall load only targets 127.0.0.0/8 and ::1",
                    a.ip()
                ),
            ));
        }
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let path: Uri =
            path.parse().map_err(|e| err(LoadErrorKind::Url, format!("URL {url:?}: path: {e}")))?;
        let host = HeaderValue::from_str(auth.as_str())
            .map_err(|e| err(LoadErrorKind::Url, format!("URL {url:?}: {e}")))?;
        Ok(Self { addr, host, path })
    }
}

/// Parses one `--header 'Name: value'`. The generator's own headers (`Request-Timeout-Ms`,
/// `Request-Attempt`, `Content-Length`, `Transfer-Encoding`) cannot be set; `Host` can.
pub fn parse_header(s: &str) -> Result<(HeaderName, HeaderValue), LoadError> {
    let bad = |why: &str| {
        err(LoadErrorKind::Header, format!("--header {s:?}: {why} (expected 'Name: value')"))
    };
    let (name, value) = s.split_once(':').ok_or_else(|| bad("no ':'"))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| bad("not a valid header name"))?;
    let value = HeaderValue::from_str(value.trim()).map_err(|_| bad("not a valid header value"))?;
    if [REQUEST_TIMEOUT_MS, REQUEST_ATTEMPT, CONTENT_LENGTH, TRANSFER_ENCODING].contains(&name) {
        return Err(bad("this header is set by the generator"));
    }
    Ok((name, value))
}

/// Parses a duration: `250ms`, `30s`, `2m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, LoadError> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        err(LoadErrorKind::Duration, format!("{s:?} is not a duration (e.g. 30s, 500ms, 2m)"))
    })?;
    let secs = v * scale;
    if !secs.is_finite() || secs <= 0.0 || secs > MAX_DURATION.as_secs_f64() {
        return Err(err(
            LoadErrorKind::Duration,
            format!("{s:?}: in (0, {}] s", MAX_DURATION.as_secs()),
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses one `--ramp DURATION:TARGET` stage (k6's `--stage`, e.g. `30s:1000`).
pub fn parse_stage(s: &str) -> Result<Stage, LoadError> {
    let (d, r) = s.split_once(':').ok_or_else(|| {
        err(LoadErrorKind::Ramp, format!("--ramp {s:?}: expected DURATION:RATE, e.g. 30s:1000"))
    })?;
    let duration =
        parse_duration(d).map_err(|e| err(LoadErrorKind::Ramp, format!("--ramp {s:?}: {e}")))?;
    let target: f64 = r
        .trim()
        .parse()
        .map_err(|_| err(LoadErrorKind::Ramp, format!("--ramp {s:?}: {r:?} is not a rate")))?;
    Ok(Stage { duration, target })
}

/// A validated load test.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Where.
    pub target: Target,
    /// The request method.
    pub method: Method,
    /// Extra headers (plus `Host` if not given).
    pub headers: HeaderMap,
    /// The request body (empty: none).
    pub body: Bytes,
    /// When.
    pub schedule: Schedule,
    /// Each request's deadline, from its scheduled time.
    pub deadline: Duration,
    /// The generator's bounds.
    pub bounds: Bounds,
    /// Threads [`run_blocking`](super::run_blocking) drives the schedule on, each with its own
    /// runtime, connections and share of the arrivals; [`default_threads`] unless set (at most
    /// [`MAX_THREADS`] and `max_in_flight` are used).
    pub threads: NonZeroUsize,
}

impl LoadSpec {
    /// Checks the parts against each other: the deadline in (lateness, [`MAX_DEADLINE`]], max in
    /// flight at most [`MAX_IN_FLIGHT`], at most [`MAX_HEADERS`] headers and [`MAX_BODY`] bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        target: Target,
        method: &str,
        headers: Vec<(HeaderName, HeaderValue)>,
        body: impl Into<Bytes>,
        schedule: Schedule,
        deadline: Duration,
        max_in_flight: usize,
        max_lateness: Duration,
    ) -> Result<Self, LoadError> {
        let body = body.into();
        let method = Method::from_bytes(method.as_bytes()).map_err(|_| {
            err(LoadErrorKind::Method, format!("--method {method:?} is not an HTTP method"))
        })?;
        if headers.len() > MAX_HEADERS {
            return Err(err(LoadErrorKind::Header, format!("at most {MAX_HEADERS} headers")));
        }
        if body.len() > MAX_BODY {
            return Err(err(
                LoadErrorKind::Body,
                format!("the body is at most {MAX_BODY} bytes, got {}", body.len()),
            ));
        }
        if deadline.is_zero() || deadline > MAX_DEADLINE {
            return Err(err(
                LoadErrorKind::Deadline,
                format!("--deadline-ms: in [1, {}]", MAX_DEADLINE.as_millis()),
            ));
        }
        if max_lateness >= deadline {
            return Err(err(LoadErrorKind::Bound, "--max-lateness-ms must be below the deadline"));
        }
        let max_in_flight =
            NonZeroUsize::new(max_in_flight).filter(|n| n.get() <= MAX_IN_FLIGHT).ok_or_else(
                || err(LoadErrorKind::Bound, format!("--max-in-flight: in [1, {MAX_IN_FLIGHT}]")),
            )?;
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(k, v);
        }
        if !map.contains_key(HOST) {
            map.insert(HOST, target.host.clone());
        }
        map.insert(REQUEST_ATTEMPT, HeaderValue::from_static("1"));
        Ok(Self {
            target,
            method,
            headers: map,
            body,
            schedule,
            deadline,
            bounds: Bounds { max_in_flight, max_lateness },
            threads: default_threads(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only() {
        let t = Target::parse("http://127.0.0.1:8080/a?b=1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(t.path, "/a?b=1");
        assert_eq!(Target::parse("http://[::1]/").unwrap().addr.port(), 80);
        assert_eq!(Target::parse("http://127.0.0.1:9").unwrap().path, "/");
        for (u, k) in [
            ("http://10.0.0.1/", LoadErrorKind::NotLoopback),
            ("http://8.8.8.8:80/", LoadErrorKind::NotLoopback),
            ("https://127.0.0.1/", LoadErrorKind::Url),
            ("127.0.0.1:80", LoadErrorKind::Url),
            ("http://user@127.0.0.1/", LoadErrorKind::Url),
            ("not a url", LoadErrorKind::Url),
        ] {
            assert_eq!(Target::parse(u).unwrap_err().kind(), k, "{u}");
        }
    }

    #[test]
    fn headers_and_stages_are_strict() {
        let (k, v) = parse_header("X-Test:  a b ").unwrap();
        assert_eq!((k.as_str(), v.to_str().unwrap()), ("x-test", "a b"));
        for h in [
            "nocolon",
            ": v",
            "bad name: v",
            "request-timeout-ms: 5",
            "Content-Length: 1",
            "x: a\nb",
        ] {
            assert_eq!(parse_header(h).unwrap_err().kind(), LoadErrorKind::Header, "{h}");
        }
        assert_eq!(
            parse_stage("30s:1000").unwrap(),
            Stage { duration: Duration::from_secs(30), target: 1000.0 }
        );
        assert_eq!(parse_stage("500ms:0").unwrap().duration, Duration::from_millis(500));
        assert_eq!(parse_stage("2m:5").unwrap().duration, Duration::from_secs(120));
        for s in ["30s", "x:1", "0s:1", "1s:abc", "11m:1", "-1:1"] {
            assert_eq!(parse_stage(s).unwrap_err().kind(), LoadErrorKind::Ramp, "{s}");
        }
    }
}
