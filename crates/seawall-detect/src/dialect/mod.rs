//! Metric dialects: which PromQL answers each question the classifier asks, for the metric
//! names a stack already exports.
//!
//! # The signals
//!
//! The classifier ([`crate::Classifier`]) needs, per interval, five numbers ([`Signal`]):
//!
//! | signal | meaning | needed for |
//! |---|---|---|
//! | `edge` | logical requests per second entering the call path | every verdict |
//! | `dependency` | attempts per second reaching the dependency under watch | every verdict (the ratio `dependency / edge` is the attempts per logical call) |
//! | `goodput` | edge requests per second answered successfully | `degraded`, `metastable`, "errors came first" |
//! | `overflow` | retries per second refused by a budget | evidence only |
//! | `queue_age` | age of the oldest queued request at the dependency, seconds | evidence only |
//!
//! # The dialects
//!
//! `E` is the `--edge` selector, `D` the `--dependency` selector, `C` the `--caller` selector
//! (seawall only), `W` the rate window. Where a dialect has both signals on one client (gRPC,
//! Envoy), an empty selector defaults to the other one. The full expressions are what
//! `seawall detect --explain` prints.
//!
//! | dialect | edge | dependency | goodput | overflow | queue age |
//! |---|---|---|---|---|---|
//! | `seawall` | `seawall_server_throughput_total{E}` + `seawall_server_rejected_total{E}` | the same at `{D}`; with `--caller`, the larger of that and `seawall_client_attempt_started_total{C}` | `seawall_server_goodput_total{E}` | `seawall_client_retry_overflow_total{E}` | `seawall_server_oldest_queued_seconds{D}` |
//! | `grpc` (gRFC A66) | `grpc_client_call_duration_seconds_count{E}` | `grpc_client_attempt_started_total{D}` | calls with `grpc_status="OK"` | — | — |
//! | `envoy` | `envoy_cluster_upstream_rq_total{E}` − `envoy_cluster_upstream_rq_retry{E}` | `envoy_cluster_upstream_rq_total{D}` | `envoy_cluster_upstream_rq_xx{E,envoy_response_code_class="2"}` | `envoy_cluster_upstream_rq_retry_overflow{D}` | — |
//! | `istio` | `istio_requests_total{reporter="destination",E}` | the same at `{D}` | edge requests with `response_code=~"[1-4].."` | — | — |
//! | `otel-http` | `http_server_request_duration_seconds_count{E}` | `http_client_request_duration_seconds_count{D}` | edge requests with `http_response_status_code=~"[1-4].."` | — | — |
//!
//! `otel-http` reads the stable names of the OpenTelemetry HTTP semantic conventions
//! (`http.server.request.duration`, `http.client.request.duration`, in seconds:
//! <https://opentelemetry.io/docs/specs/semconv/http/http-metrics/>), or else, per signal, the
//! experimental names that instrumentations still emit by default until
//! `OTEL_SEMCONV_STABILITY_OPT_IN=http` (`http.server.duration`, `http.client.duration`, in
//! milliseconds, status in `http_status_code`; OpenTelemetry Python's
//! `opentelemetry-instrumentation-wsgi` and `-requests` 0.66b2 among them), so a service halfway
//! through the migration is read either way, never twice.
//!
//! Every counter is read as `sum(rate(…[W]))`; a counter reset inside the window (a restarted
//! process: `resets(…[W]) > 0`) makes that interval's verdict unsure.
//!
//! **The seawall dialect's dependency count and `--caller`.** A seawall server layer counts a
//! request when it answers or rejects it, so the requests its callers abandon while they wait
//! in its queue (the bulk of a storm against a slow or queueing dependency) are missing from
//! the dependency's own count: the storm looks smaller or ends early. The callers' client
//! layers count every attempt they send, but their metrics carry no label naming the
//! dependency, so the dialect cannot find them alone. `--caller C` names them (label matchers
//! picking the client series of the services that call the dependency, and of nothing else,
//! e.g. `job="orders"` when the orders service's only client layer is the dependency's): the
//! dependency signal becomes
//! `max((arrivals{D}) or label_replace(sum(rate(seawall_client_attempt_started_total{C}[W])), "from", "caller", "", ""))`,
//! the larger of the two (the label keeps `or` from dropping the second), which is how
//! `seawall detect --scrape` reads a path. Without `--caller` the output says so.
//!
//! Notes on the names, from each project's documentation:
//!
//! - **gRPC**: gRFC A66 (OpenTelemetry metrics) defines `grpc.client.attempt.started`
//!   (`{attempt}`) and `grpc.client.call.duration` (seconds, attribute `grpc.status`); the
//!   OpenTelemetry Prometheus exporter turns them into `grpc_client_attempt_started_total` and
//!   `grpc_client_call_duration_seconds_count`. The call count is taken when a call *ends*.
//!   Stock grpcio-observability (1.85) leaves `grpc.client.call.duration` out of its default
//!   metric set, so the edge's series is missing: see [`GRPC_CALL_DURATION_FIX`].
//! - **Envoy**: the admin endpoint `/stats/prometheus` exports `cluster.<name>.upstream_rq_total`
//!   as `envoy_cluster_upstream_rq_total{envoy_cluster_name="<name>"}`; the default tag
//!   extraction turns `upstream_rq_5xx` / `upstream_rq_2xx` into
//!   `envoy_cluster_upstream_rq_xx{envoy_response_code_class="5"}` / `"2"`, so those are the
//!   names used. Counters carry no `_total` suffix except where Envoy's own name has one.
//! - **Istio**: `istio_requests_total` is reported by both sidecars; `reporter="destination"`
//!   counts what reached the workload, so mesh retries (a VirtualService's `retries`) are in it.
//! - **OpenTelemetry HTTP** semantic conventions: every resend is its own client request
//!   (`http.request.resend_count`), so the client duration count is an attempt count.

mod table;

/// The gRPC dialect's edge series: calls, counted when they end (gRFC A66's
/// `grpc.client.call.duration` through the OpenTelemetry Prometheus exporter).
pub const GRPC_CALL_DURATION_COUNT: &str = "grpc_client_call_duration_seconds_count";

/// What to do when [`GRPC_CALL_DURATION_COUNT`] is missing: stock grpcio-observability 1.85
/// measures `grpc.client.call.duration` but leaves it out of its default metric set.
pub const GRPC_CALL_DURATION_FIX: &str = "stock grpcio-observability (1.85) does not export \
    grpc.client.call.duration: add it to the plugin's metric set before registering it \
    (`from grpc_observability import _open_telemetry_measures as m; base = m.base_metrics(); \
    m.base_metrics = lambda: base + [m.CLIENT_RPC_DURATION]`), or count calls yourself and give \
    `--query edge=PROMQL`";

use std::fmt;

pub use table::Weakness;

/// The metric family `detect`, `alerts` and `escape` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// seawall's own layers (`seawall_…`).
    Seawall,
    /// gRPC's OpenTelemetry metrics (gRFC A66), exported to Prometheus.
    Grpc,
    /// Envoy's cluster statistics (`envoy_cluster_…`).
    Envoy,
    /// Istio's standard metrics (`istio_requests_total`).
    Istio,
    /// OpenTelemetry HTTP semantic conventions (`http_client_…`, `http_server_…`).
    OtelHttp,
}

impl Dialect {
    /// Every dialect.
    pub const ALL: [Dialect; 5] =
        [Dialect::Seawall, Dialect::Grpc, Dialect::Envoy, Dialect::Istio, Dialect::OtelHttp];

    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Seawall => "seawall",
            Dialect::Grpc => "grpc",
            Dialect::Envoy => "envoy",
            Dialect::Istio => "istio",
            Dialect::OtelHttp => "otel-http",
        }
    }
}

/// One number the classifier reads each interval (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Signal {
    /// Logical requests per second at the edge.
    Edge,
    /// Attempts per second reaching the dependency.
    Dependency,
    /// Edge requests answered successfully per second.
    Goodput,
    /// Retries refused by budgets per second.
    Overflow,
    /// Oldest queued request at the dependency, seconds.
    QueueAge,
}

impl Signal {
    /// Every signal, in the order they are queried.
    pub const ALL: [Signal; 5] =
        [Signal::Edge, Signal::Dependency, Signal::Goodput, Signal::Overflow, Signal::QueueAge];

    /// The name used by `--query NAME=PROMQL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Edge => "edge",
            Signal::Dependency => "dependency",
            Signal::Goodput => "goodput",
            Signal::Overflow => "overflow",
            Signal::QueueAge => "queue_age",
        }
    }

    /// Parses a name of [`Signal::as_str`].
    pub fn parse(s: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Without this signal there is no verdict at all (an empty answer is an error).
    pub fn required(self) -> bool {
        matches!(self, Signal::Edge | Signal::Dependency)
    }
}

/// Why a query set could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DialectError {
    /// A selector is not a comma-separated list of `label="value"` matchers.
    Selector {
        /// The selector as given.
        selector: String,
        /// What was wrong.
        reason: String,
    },
    /// A `--query` names no signal, or gives an empty expression.
    Override(String),
    /// The rate window is not a PromQL duration such as `30s` or `2m`.
    Window(String),
    /// A `--caller` selector for a dialect other than seawall's (the dialect named).
    Caller(&'static str),
}

impl fmt::Display for DialectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DialectError::Selector { selector, reason } => {
                write!(f, "selector {selector:?}: {reason} (expected e.g. job=\"gateway\")")
            }
            DialectError::Override(m) => write!(f, "--query: {m}"),
            DialectError::Window(w) => {
                write!(f, "rate window {w:?}: expected a duration such as 30s or 2m")
            }
            DialectError::Caller(d) => write!(
                f,
                "--caller is only for --metrics seawall (for {d}, give your own dependency \
                 query with --query dependency=…)"
            ),
        }
    }
}

impl std::error::Error for DialectError {}

/// One label matcher of a selector: `name op "value"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    /// The label name.
    pub name: String,
    /// `=`, `!=`, `=~` or `!~`.
    pub op: &'static str,
    /// The value as written between the quotes (escapes kept).
    pub value: String,
}

/// Checks a selector is a list of matchers (`a="x", b=~"y.*"`) that can go inside `{…}`.
pub fn check_selector(sel: &str) -> Result<(), DialectError> {
    parse_matchers(sel).map(|_| ())
}

/// The matchers of a selector (see [`check_selector`]).
pub fn parse_matchers(sel: &str) -> Result<Vec<Matcher>, DialectError> {
    let bad = |reason: &str| DialectError::Selector { selector: sel.into(), reason: reason.into() };
    let mut out = Vec::new();
    let mut r = sel.trim();
    if r.starts_with('{') {
        return Err(bad("give the matchers without braces"));
    }
    while !r.is_empty() {
        let name_end = r
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .ok_or_else(|| bad("a matcher has no operator"))?;
        let name = &r[..name_end];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(bad("a matcher must start with a label name"));
        }
        r = r[name_end..].trim_start();
        let op = ["=~", "!~", "!=", "="]
            .into_iter()
            .find(|op| r.starts_with(op))
            .ok_or_else(|| bad("expected =, !=, =~ or !~ after a label name"))?;
        r = r[op.len()..].trim_start();
        r = r.strip_prefix('"').ok_or_else(|| bad("a label value must be in double quotes"))?;
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err(bad("unterminated label value")),
                Some((i, '"')) => break i,
                Some((_, '\\')) => {
                    chars.next();
                }
                Some(_) => {}
            }
        };
        out.push(Matcher { name: name.to_string(), op, value: r[..end].to_string() });
        r = r[end + 1..].trim_start();
        if let Some(rest) = r.strip_prefix(',') {
            r = rest.trim_start();
        } else if !r.is_empty() {
            return Err(bad("expected a comma between matchers"));
        }
    }
    Ok(out)
}

/// What the classifier will ask Prometheus: one expression per signal, and the counters whose
/// resets make an interval unsure.
#[derive(Debug, Clone, PartialEq)]
pub struct QuerySet {
    /// The dialect the defaults came from.
    pub dialect: Dialect,
    /// The rate window (a PromQL duration).
    pub window: String,
    /// `(signal, expression)`; a signal the dialect lacks has no entry.
    pub queries: Vec<(Signal, String)>,
    /// `(signal, expression)` counting counter resets in the window (default queries only).
    pub resets: Vec<(Signal, String)>,
    /// Signals replaced by `--query`.
    pub overridden: Vec<Signal>,
    /// The `--caller` selector (seawall dialect; empty when not given).
    pub caller: String,
}

impl QuerySet {
    /// The dialect's queries for the `edge` and `dependency` selectors over `window`.
    ///
    /// ```
    /// use seawall_detect::dialect::{Dialect, QuerySet, Signal};
    /// let q = QuerySet::new(Dialect::Grpc, "", r#"grpc_method="orders.Orders/Get""#, "1m").unwrap();
    /// assert_eq!(
    ///     q.query(Signal::Dependency).unwrap(),
    ///     r#"sum(rate(grpc_client_attempt_started_total{grpc_method="orders.Orders/Get"}[1m]))"#
    /// );
    /// assert!(q.query(Signal::Overflow).is_none());
    /// ```
    pub fn new(
        dialect: Dialect,
        edge: &str,
        dependency: &str,
        window: &str,
    ) -> Result<QuerySet, DialectError> {
        QuerySet::with_caller(dialect, edge, dependency, "", window)
    }

    /// As [`QuerySet::new`], and for [`Dialect::Seawall`] the dependency signal also reads the
    /// attempts the `caller` selector's client layers sent: the larger of the two (see the
    /// [module docs](self)). An empty `caller` is [`QuerySet::new`]; a non-empty one for
    /// another dialect is [`DialectError::Caller`].
    ///
    /// ```
    /// use seawall_detect::dialect::{Dialect, QuerySet, Signal};
    /// let q = QuerySet::with_caller(Dialect::Seawall, r#"job="edge""#, r#"job="db""#, r#"job="orders""#, "1m").unwrap();
    /// let dep = q.query(Signal::Dependency).unwrap();
    /// assert!(dep.starts_with("max(("));
    /// assert!(dep.contains(r#"seawall_client_attempt_started_total{job="orders"}[1m]"#));
    /// assert!(q.weaknesses().is_empty());
    /// assert!(QuerySet::with_caller(Dialect::Grpc, "", "", r#"job="x""#, "1m").is_err());
    /// ```
    pub fn with_caller(
        dialect: Dialect,
        edge: &str,
        dependency: &str,
        caller: &str,
        window: &str,
    ) -> Result<QuerySet, DialectError> {
        check_selector(edge)?;
        check_selector(dependency)?;
        check_selector(caller)?;
        let caller = caller.trim();
        if !caller.is_empty() && dialect != Dialect::Seawall {
            return Err(DialectError::Caller(dialect.as_str()));
        }
        if crate::prometheus::time::parse_duration(window).is_none() {
            return Err(DialectError::Window(window.into()));
        }
        let (queries, resets) =
            table::build(dialect, edge.trim(), dependency.trim(), caller, window);
        Ok(QuerySet {
            dialect,
            window: window.into(),
            queries,
            resets,
            overridden: Vec::new(),
            caller: caller.into(),
        })
    }

    /// Replaces (or adds) a signal's expression from `NAME=PROMQL`; its reset check is dropped
    /// (the expression is the user's, and so is what it counts).
    pub fn override_with(&mut self, spec: &str) -> Result<(), DialectError> {
        let (name, expr) = spec
            .split_once('=')
            .ok_or_else(|| DialectError::Override(format!("{spec:?}: expected NAME=PROMQL")))?;
        let sig = Signal::parse(name.trim()).ok_or_else(|| {
            let names: Vec<&str> = Signal::ALL.iter().map(|s| s.as_str()).collect();
            DialectError::Override(format!("no signal {name:?}; signals: {}", names.join(", ")))
        })?;
        let expr = expr.trim();
        if expr.is_empty() {
            return Err(DialectError::Override(format!("{name}: empty expression")));
        }
        self.queries.retain(|(s, _)| *s != sig);
        self.queries.push((sig, expr.to_string()));
        self.queries.sort_by_key(|(s, _)| *s);
        self.resets.retain(|(s, _)| *s != sig);
        self.overridden.push(sig);
        Ok(())
    }

    /// The expression for `signal`, if the dialect (or an override) has one.
    pub fn query(&self, signal: Signal) -> Option<&str> {
        self.queries.iter().find(|(s, _)| *s == signal).map(|(_, q)| q.as_str())
    }

    /// The signals this set lacks and what that weakens.
    pub fn weaknesses(&self) -> Vec<Weakness> {
        table::weaknesses(self.dialect, !self.caller.is_empty())
            .into_iter()
            .filter(|w| w.signal.is_none_or(|s| self.query(s).is_none()))
            .collect()
    }

    /// The queries, reset checks and weaknesses as text (what `detect --explain` prints).
    pub fn explain(&self) -> String {
        let mut out = format!("# dialect {}, rate window {}\n", self.dialect.as_str(), self.window);
        for s in Signal::ALL {
            match self.query(s) {
                Some(q) => {
                    let by = if self.overridden.contains(&s) {
                        " (--query)"
                    } else if s == Signal::Dependency && !self.caller.is_empty() {
                        " (with --caller)"
                    } else {
                        ""
                    };
                    out.push_str(&format!("{}{by}:\n  {q}\n", s.as_str()));
                }
                None => out.push_str(&format!("{}: (not exported by this dialect)\n", s.as_str())),
            }
        }
        if !self.resets.is_empty() {
            out.push_str("counter resets (an interval with one is unsure):\n");
            for (s, q) in &self.resets {
                out.push_str(&format!("  {}: {q}\n", s.as_str()));
            }
        }
        for w in self.weaknesses() {
            out.push_str(&format!("weaker: {}\n", w.text));
        }
        out
    }
}

#[cfg(test)]
mod tests;
