//! The Grafana dashboard: the storm signals on one screen, the edge-to-dependency ratio first.

use serde_json::{Value, json};

use super::AlertConfig;
use crate::names;

/// A time-series panel at grid position (`x`, `y`), 12 wide and 8 high.
pub(super) fn panel(
    id: u32,
    title: &str,
    unit: &str,
    x: u32,
    y: u32,
    targets: &[(String, &str)],
) -> Value {
    let targets: Vec<Value> = targets
        .iter()
        .zip('A'..)
        .map(|((expr, legend), ref_id)| {
            json!({ "expr": expr, "legendFormat": legend, "refId": ref_id.to_string(),
                    "datasource": { "type": "prometheus", "uid": "${datasource}" } })
        })
        .collect();
    json!({
        "id": id,
        "type": "timeseries",
        "title": title,
        "datasource": { "type": "prometheus", "uid": "${datasource}" },
        "gridPos": { "h": 8, "w": 12, "x": x, "y": y },
        "fieldConfig": { "defaults": { "unit": unit }, "overrides": [] },
        "targets": targets,
    })
}

/// A Grafana dashboard (JSON model, schema 39) with a Prometheus datasource variable: the
/// dependency-to-edge ratio, attempts per call, edge rate, goodput vs throughput, retry
/// overflow, oldest queued age against the callers' timeout, rejections by reason, in flight
/// and queued, the retry share at the dependency's door and its top callers.
///
/// ```
/// let dash = seawall_detect::alerts::grafana_dashboard(&Default::default());
/// assert!(dash.contains("\"panels\""));
/// ```
pub fn grafana_dashboard(c: &AlertConfig) -> String {
    let rate = |name: &str, sel: &str| format!("sum(rate({name}{{{sel}}}[1m]))");
    let e = &c.edge_selector();
    let panels = vec![
        panel(
            1,
            "Dependency-to-edge ratio (requests reaching the dependency per edge request)",
            "x",
            0,
            0,
            &[(c.dependency_to_edge(""), "dependency / edge")],
        ),
        panel(
            2,
            "Attempts per logical call (alert > 1.5 for 2 min)",
            "x",
            12,
            0,
            &[(c.attempts_per_call(), "{{job}}")],
        ),
        panel(
            3,
            "Edge rate vs dependency rate",
            "reqps",
            0,
            8,
            &[(c.arrivals(e, ""), "edge"), (c.dependency_rate(""), "dependency")],
        ),
        panel(
            4,
            "Edge goodput vs throughput",
            "reqps",
            12,
            8,
            &[
                (rate(names::SERVER_GOODPUT, e), "goodput"),
                (rate(names::SERVER_THROUGHPUT, e), "throughput"),
            ],
        ),
        panel(
            5,
            "Retries refused by budgets",
            "reqps",
            0,
            16,
            &[(
                format!(
                    "sum by (job) (rate({}{}[1m]))",
                    names::CLIENT_RETRY_OVERFLOW,
                    super::rules::braces(&c.edge)
                ),
                "{{job}}",
            )],
        ),
        panel(
            6,
            "Oldest queued request vs the callers' timeout",
            "s",
            12,
            16,
            &[
                (
                    format!(
                        "max by (job) ({}{})",
                        names::SERVER_OLDEST_QUEUED,
                        super::rules::braces(&c.dependency)
                    ),
                    "{{job}}",
                ),
                (format!("vector({})", c.caller_timeout_s), "callers' timeout"),
            ],
        ),
        panel(
            7,
            "Rejections by reason",
            "reqps",
            0,
            24,
            &[(
                format!("sum by (job, reason) (rate({}[1m]))", names::SERVER_REJECTED),
                "{{job}} {{reason}}",
            )],
        ),
        panel(
            8,
            "In flight and queued",
            "short",
            12,
            24,
            &[
                (format!("sum by (job) ({})", names::SERVER_IN_FLIGHT), "{{job}} in flight"),
                (format!("sum by (job) ({})", names::SERVER_QUEUE_LENGTH), "{{job}} queued"),
            ],
        ),
        panel(
            9,
            "Retries at the door (share of arrivals with attempt 2 or later)",
            "percentunit",
            0,
            32,
            &[(super::rules::retry_share(c, names::SERVER_ARRIVALS), "{{job}}")],
        ),
        panel(
            10,
            "Top callers by request rate",
            "reqps",
            12,
            32,
            &[(super::rules::top_callers(c, names::SERVER_CALLER_ARRIVALS), "{{job}} {{caller}}")],
        ),
    ];
    let dash = json!({
        "title": "seawall: retry storm or traffic spike?",
        "uid": "seawall-storm",
        "schemaVersion": 39,
        "editable": true,
        "refresh": "10s",
        "time": { "from": "now-1h", "to": "now" },
        "tags": ["seawall"],
        "templating": { "list": [{
            "name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"
        }]},
        "panels": panels,
    });
    // Serializing a Value built above cannot fail.
    serde_json::to_string_pretty(&dash).unwrap_or_default()
}
