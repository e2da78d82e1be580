//! The metric names `detect`, `alerts` and `escape` read, defined once in
//! [`seawall::metrics::names`]: the client layers' (exported by
//! `seawall_tower::client::ClientMetrics`) and the server layers' (exported by
//! `seawall_tower::server::ServerMetrics::register`, feature `prometheus`).
//!
//! A test registers the real client and server metrics in a real registry, and checks
//! every name here appears in the text, so a rename upstream breaks the build of the alerts, not
//! a dashboard at three in the morning.

pub use seawall::metrics::names::{
    CLIENT_ATTEMPTS, CLIENT_CALL_SUCCESSES, CLIENT_CALLS, CLIENT_RETRY_OVERFLOW, PROXY_ATTEMPTS,
    PROXY_CALLER_REQUESTS, SERVER_ARRIVALS, SERVER_CALLER_ARRIVALS, SERVER_GOODPUT,
    SERVER_IN_FLIGHT, SERVER_OLDEST_QUEUED, SERVER_QUEUE_LENGTH, SERVER_REJECTED,
    SERVER_THROUGHPUT,
};

/// Every name above that a seawall service exports, client names first (the proxy's are in
/// [`PROXY`]).
pub const ALL: [&str; 12] = [
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
    SERVER_ARRIVALS,
    SERVER_CALLER_ARRIVALS,
];

/// The names `seawall proxy` exports that `detect` and `alerts` read.
pub const PROXY: [&str; 2] = [PROXY_ATTEMPTS, PROXY_CALLER_REQUESTS];
