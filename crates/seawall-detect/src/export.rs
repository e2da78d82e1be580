//! The server layers' metrics in the Prometheus text format, under the names in [`crate::names`].
//!
//! `seawall_tower::server::ServerMetrics` keeps plain atomics and leaves exporting to the user;
//! `detect` and `alerts` need names everyone agrees on, so this renders a snapshot with them.
//! Serve it next to the client registry's text on `/metrics`:
//!
//! ```
//! use seawall_tower::server::ServerMetrics;
//!
//! let metrics = ServerMetrics::new();
//! metrics.response(true, std::time::Duration::from_millis(3));
//! let page = seawall_detect::export::server_metrics_text(&metrics.snapshot());
//! assert!(page.contains("seawall_server_goodput_total 1\n"));
//! ```

use std::fmt::Write;

use seawall_tower::server::{MetricsSnapshot, RejectReason};

use crate::names;

/// Renders `s` in the Prometheus text exposition format (version 0.0.4).
pub fn server_metrics_text(s: &MetricsSnapshot) -> String {
    let mut out = String::new();
    let mut one = |name: &str, kind: &str, help: &str, value: String| {
        let base = name.strip_suffix("_total").unwrap_or(name);
        // Writing into a String cannot fail.
        let _ = write!(out, "# HELP {base} {help}\n# TYPE {base} {kind}\n{name} {value}\n");
    };
    one(
        names::SERVER_THROUGHPUT,
        "counter",
        "Responses the handler produced",
        s.throughput.to_string(),
    );
    one(
        names::SERVER_GOODPUT,
        "counter",
        "Successful responses ready before the deadline",
        s.goodput.to_string(),
    );
    one(
        names::SERVER_IN_FLIGHT,
        "gauge",
        "Requests running in the handler",
        s.in_flight.to_string(),
    );
    one(
        names::SERVER_QUEUE_LENGTH,
        "gauge",
        "Requests waiting in the queue",
        s.queue_len.to_string(),
    );
    one(
        names::SERVER_OLDEST_QUEUED,
        "gauge",
        "Age of the oldest queued request",
        format!("{}", s.oldest_queued.as_secs_f64()),
    );
    let base = names::SERVER_REJECTED.trim_end_matches("_total");
    let _ = writeln!(out, "# HELP {base} Requests rejected by a server layer, by reason");
    let _ = writeln!(out, "# TYPE {base} counter");
    for r in RejectReason::ALL {
        let _ = writeln!(
            out,
            "{}{{reason=\"{}\"}} {}",
            names::SERVER_REJECTED,
            r.as_str(),
            s.rejected(r)
        );
    }
    out
}
