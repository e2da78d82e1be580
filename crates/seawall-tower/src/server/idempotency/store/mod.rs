//! Where first responses are kept: the [`IdempotencyStore`] trait and its three stores.
//!
//! Every store keeps, per [`StoreKey`], the request [`Fingerprint`] and either an in-flight marker
//! with a lease, or the stored response. `begin` must be atomic across every replica sharing the
//! store (one `INSERT … ON CONFLICT` in PostgreSQL, one `SET NX` in Redis, one mutex in memory):
//! that is what makes "exactly once per key" hold for a fleet.

pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis-store")]
pub mod redis;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::error::StoreError;
use super::key::{Fingerprint, Owner, StoreKey};

/// A boxed, sendable future (the stores are used through `dyn`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a store says about a key when a request carrying it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Begin {
    /// New key (or an expired one): it is now marked in flight, and this request executes.
    Execute,
    /// Another request with this key is executing (its lease has not expired): 409.
    InFlight,
    /// A request with this key started but never stored a response, and its lease expired: the
    /// process crashed or the work was cancelled. Its outcome is unknown, so it is *not* executed
    /// again: 409 with an "outcome unknown" problem until the entry expires.
    Unknown,
    /// The key was used with a different payload: 422.
    Mismatch,
    /// The first request finished; here is its response, to replay.
    Done(StoredResponse),
}

/// The parts of a response worth replaying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// Status code.
    pub status: u16,
    /// The stored headers (names lower-case).
    pub headers: Vec<(String, Bytes)>,
    /// The whole body.
    pub body: Bytes,
}

impl StoredResponse {
    /// Encodes status, headers and body into one buffer (length-prefixed, big-endian): the
    /// header count and each name's length in 16 bits, each value's length in 32.
    /// [`StoreError::TooLarge`] if a count or a length does not fit, rather than a truncated
    /// prefix that would decode as another response.
    pub fn encode(&self) -> Result<Bytes, StoreError> {
        let too_large = |_| StoreError::TooLarge;
        let mut b = BytesMut::with_capacity(8 + self.body.len());
        b.put_u16(self.status);
        b.put_u16(u16::try_from(self.headers.len()).map_err(too_large)?);
        for (name, value) in &self.headers {
            b.put_u16(u16::try_from(name.len()).map_err(too_large)?);
            b.put_slice(name.as_bytes());
            b.put_u32(u32::try_from(value.len()).map_err(too_large)?);
            b.put_slice(value);
        }
        b.put_slice(&self.body);
        Ok(b.freeze())
    }

    /// Decodes what [`encode`](Self::encode) wrote; `Corrupt` on anything else.
    pub fn decode(mut b: Bytes) -> Result<Self, StoreError> {
        fn need(b: &Bytes, n: usize) -> Result<(), StoreError> {
            if b.remaining() < n { Err(StoreError::Corrupt) } else { Ok(()) }
        }
        need(&b, 4)?;
        let status = b.get_u16();
        let n = b.get_u16();
        let mut headers = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            need(&b, 2)?;
            let len = usize::from(b.get_u16());
            need(&b, len)?;
            let name =
                String::from_utf8(b.split_to(len).to_vec()).map_err(|_| StoreError::Corrupt)?;
            need(&b, 4)?;
            let len = b.get_u32() as usize;
            need(&b, len)?;
            headers.push((name, b.split_to(len)));
        }
        Ok(StoredResponse { status, headers, body: b })
    }
}

/// The state a store found for a key, before the decision.
#[derive(Debug)]
pub(crate) enum Found {
    /// In flight; `lease_expired` if its lease has run out.
    Pending { lease_expired: bool },
    /// Finished with this response.
    Done(StoredResponse),
}

/// The decision every store shares, once it has read an existing entry.
pub(crate) fn decide(stored_fp: &[u8], fp: &Fingerprint, found: Found) -> Begin {
    if stored_fp != fp.as_slice() {
        return Begin::Mismatch;
    }
    match found {
        Found::Pending { lease_expired: false } => Begin::InFlight,
        Found::Pending { lease_expired: true } => Begin::Unknown,
        Found::Done(r) => Begin::Done(r),
    }
}

/// A place to keep idempotency records, shared by every replica that must agree.
///
/// An in-flight marker belongs to the request that began it: `begin` records its [`Owner`], and
/// `complete`, `release` and `abandon` change the marker only when it is still in flight *for
/// that owner*. A settle call for a marker that is gone, finished, or owned by another request
/// does nothing and succeeds.
pub trait IdempotencyStore: Send + Sync + std::fmt::Debug + 'static {
    /// Atomically: if `key` is absent or expired, mark it in flight for `owner` with `fp` for
    /// `lease` (kept for `ttl`) and return [`Begin::Execute`]; otherwise report what is there.
    fn begin<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
        owner: &'a Owner,
        lease: Duration,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Begin, StoreError>>;

    /// Stores the response of `owner`'s execution, kept for `ttl`.
    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
        res: &'a StoredResponse,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Forgets `owner`'s in-flight marker: its request failed visibly (5xx or a service error),
    /// or was cut before its handler was called, so a retry may execute.
    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Marks `owner`'s in-flight key, whose handler started but whose request was cancelled
    /// (deadline, client gone), as *outcome unknown* at once, ending its lease: repeats get the
    /// outcome-unknown `409` instead of "in progress", and the key leaves the pending pool. The
    /// default keeps the marker until its lease runs out, which is also safe.
    fn abandon<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = (key, owner);
        Box::pin(std::future::ready(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_rejects_garbage() {
        let r = StoredResponse {
            status: 201,
            headers: vec![
                ("content-type".into(), Bytes::from_static(b"text/plain")),
                ("etag".into(), Bytes::new()),
            ],
            body: Bytes::from_static(b"hello"),
        };
        assert_eq!(StoredResponse::decode(r.encode().unwrap()).unwrap(), r);
        assert!(StoredResponse::decode(Bytes::from_static(b"\x00")).is_err());
        assert!(StoredResponse::decode(Bytes::from_static(b"\x00\xc8\x00\x05\x00")).is_err());
    }

    /// A response whose header count or name length does not fit the format is refused, not
    /// stored truncated. Red with the lengths cast (`as u16`): 65,536 headers encode as 0 and
    /// decode as a response with none, their bytes read as its body.
    #[test]
    fn a_response_too_large_for_the_format_is_refused() {
        let many = StoredResponse {
            status: 200,
            headers: vec![("set-cookie".into(), Bytes::from_static(b"a=1")); 65_536],
            body: Bytes::from_static(b"ok"),
        };
        assert!(matches!(many.encode(), Err(StoreError::TooLarge)));
        let long = StoredResponse {
            status: 200,
            headers: vec![("x".repeat(65_536), Bytes::new())],
            body: Bytes::new(),
        };
        assert!(matches!(long.encode(), Err(StoreError::TooLarge)));
        let most = StoredResponse { headers: many.headers[..65_535].to_vec(), ..many };
        assert_eq!(StoredResponse::decode(most.encode().unwrap()).unwrap(), most);
    }

    proptest::proptest! {
        /// Any response within the format's bounds reads back as it was written.
        #[test]
        fn any_response_round_trips(
            status in 100u16..1000,
            headers in proptest::collection::vec(("[a-z-]{1,40}", proptest::collection::vec(proptest::num::u8::ANY, 0..64)), 0..12),
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..512),
        ) {
            let r = StoredResponse {
                status,
                headers: headers.into_iter().map(|(n, v)| (n, Bytes::from(v))).collect(),
                body: Bytes::from(body),
            };
            proptest::prop_assert_eq!(StoredResponse::decode(r.encode().unwrap()).unwrap(), r);
        }
    }
}
