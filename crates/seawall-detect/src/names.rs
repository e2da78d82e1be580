//! The metric names `detect`, `alerts` and `escape` read: the client layers' (exported by
//! `seawall_tower::client::ClientMetrics`) and the server layers' (exported by
//! `seawall_tower::server::ServerMetrics::register`, feature `prometheus`).
//!
//! A test registers the real client and server metrics in a real registry, and checks
//! every name here appears in the text, so a rename upstream breaks the build of the alerts, not
//! a dashboard at three in the morning.

/// Logical calls started by a client layer (counter).
pub const CLIENT_CALLS: &str = "seawall_client_call_started_total";
/// Attempts sent by a client layer, label `attempt` (counter).
pub const CLIENT_ATTEMPTS: &str = "seawall_client_attempt_started_total";
/// Retries refused by the budget or local throttling (counter).
pub const CLIENT_RETRY_OVERFLOW: &str = "seawall_client_retry_overflow_total";
/// Successful logical calls: the count of the call-duration histogram.
pub const CLIENT_CALL_SUCCESSES: &str = "seawall_client_call_duration_seconds_count";
/// Responses the server's handler produced, any status (counter).
pub const SERVER_THROUGHPUT: &str = "seawall_server_throughput_total";
/// Successful responses produced before the caller's deadline (counter).
pub const SERVER_GOODPUT: &str = "seawall_server_goodput_total";
/// Requests answered by a server layer instead of the handler, label `reason` (counter).
pub const SERVER_REJECTED: &str = "seawall_server_rejected_total";
/// Requests running in the handler now (gauge).
pub const SERVER_IN_FLIGHT: &str = "seawall_server_in_flight";
/// Requests waiting in the shedding queue now (gauge).
pub const SERVER_QUEUE_LENGTH: &str = "seawall_server_queue_length";
/// Age of the oldest queued request, seconds (gauge).
pub const SERVER_OLDEST_QUEUED: &str = "seawall_server_oldest_queued_seconds";

/// Every name above, client names first.
pub const ALL: [&str; 10] = [
    CLIENT_CALLS,
    CLIENT_ATTEMPTS,
    CLIENT_RETRY_OVERFLOW,
    CLIENT_CALL_SUCCESSES,
    SERVER_THROUGHPUT,
    SERVER_GOODPUT,
    SERVER_REJECTED,
    SERVER_IN_FLIGHT,
    SERVER_QUEUE_LENGTH,
    SERVER_OLDEST_QUEUED,
];
