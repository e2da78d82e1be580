//! Errors of idempotency stores.

use std::fmt;

/// A store could not answer. The layer then fails closed: `503` and the handler does not run,
/// because running it without a record could execute a request twice.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The backing service (PostgreSQL, Redis) failed or was unreachable.
    Backend(Box<dyn std::error::Error + Send + Sync>),
    /// The in-memory store's records pool is full of unexpired keys. New keys are refused
    /// rather than evicting one (which would let its retry execute again).
    Full {
        /// When the oldest record expires (space frees then, or sooner if a key is released).
        frees_in: Option<std::time::Duration>,
    },
    /// This principal holds its share of the in-memory store, or its bound of outcome-unknown
    /// records: its new keys are refused (others' are not).
    ScopeFull {
        /// When this principal's oldest record (of the kind over its bound) expires.
        frees_in: Option<std::time::Duration>,
    },
    /// The in-memory store's pending pool (keys in flight) is full.
    PendingFull,
    /// The store did not answer within the layer's
    /// [`store_timeout`](super::IdempotencyLayer::with_store_timeout).
    Timeout,
    /// A stored record could not be decoded (written by an incompatible version?).
    Corrupt,
    /// A response too large for the stored record's format (more than 65,535 headers kept, a
    /// header name over 65,535 bytes, a header value over 4 GiB): refused rather than stored
    /// truncated, which would replay a different response.
    TooLarge,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Backend(e) => write!(f, "idempotency store backend error: {e}"),
            StoreError::Full { .. } => f.write_str("idempotency store full (new keys refused)"),
            StoreError::ScopeFull { .. } => f.write_str(
                "idempotency store: this principal's share is full (its new keys refused)",
            ),
            StoreError::PendingFull => f.write_str("idempotency store: too many keys in flight"),
            StoreError::Timeout => f.write_str("idempotency store did not answer in time"),
            StoreError::Corrupt => f.write_str("idempotency store record could not be decoded"),
            StoreError::TooLarge => {
                f.write_str("idempotency store: the response is too large for its record")
            }
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Backend(e) => Some(&**e),
            _ => None,
        }
    }
}
