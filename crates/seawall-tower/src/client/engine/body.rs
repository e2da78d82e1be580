//! Which request bodies can be sent again: the [`ReplayBody`] trait.
//!
//! # Why a trait and not `B: Clone`
//!
//! A retry must send the *same* request again, so an attempt that may be followed by another
//! is sent a copy of the request, and the layer keeps the request itself (the last attempt a
//! call may make is sent the request). `tower::retry` asks the policy to clone the whole
//! request; requiring `B: Clone` would shut out every streaming body (hyper's `Incoming`, axum's
//! `Body`, tonic's `Body`), and buffering every body behind the caller's back would turn a
//! 2 GB upload into 2 GB of memory. So seawall asks the body itself: [`ReplayBody::try_replay`]
//! returns a copy when one is cheap (`Bytes`, `String`, `Full<Bytes>`, `Empty` — a reference
//! count or a small copy) and `None` for a stream. A request whose body cannot be replayed
//! ([`ReplayBody::can_replay`] is false) is **sent once**: the policy still classifies it,
//! counts it and applies its deadline, but never resends it — not even after a refused
//! connection, because the stream was consumed by the attempt.
//!
//! To retry a streaming body, buffer it yourself into one of the replayable types first (gRPC
//! users: see `seawall-grpc`'s `GrpcRetryLayer`, which does exactly that for unary calls).
//!
//! ```
//! use bytes::Bytes;
//! use http_body_util::Full;
//! use seawall_tower::client::ReplayBody;
//!
//! let body = Full::new(Bytes::from_static(b"{\"id\":1}"));
//! assert!(body.try_replay().is_some());
//! ```

use bytes::Bytes;

/// A request body that may be able to produce an identical copy of itself, for a retry.
///
/// Implement it for your own body types; return `None` for anything that cannot be replayed
/// cheaply (the request is then sent once).
pub trait ReplayBody: Sized {
    /// An identical, unconsumed copy of this body, or `None` if it cannot be replayed.
    fn try_replay(&self) -> Option<Self>;

    /// Whether [`try_replay`](Self::try_replay) would return a copy. A call asks once, before
    /// its first attempt, and the copies come later; the default makes a copy and drops it, so
    /// implement it where the answer is known without one.
    #[inline]
    fn can_replay(&self) -> bool {
        self.try_replay().is_some()
    }
}

macro_rules! replay_by_clone {
    ($($t:ty),* $(,)?) => {
        $(impl ReplayBody for $t {
            #[inline]
            fn try_replay(&self) -> Option<Self> {
                Some(self.clone())
            }

            #[inline]
            fn can_replay(&self) -> bool {
                true
            }
        })*
    };
}

replay_by_clone!((), String, Vec<u8>, Bytes, &'static str, &'static [u8]);

impl<D: Clone> ReplayBody for http_body_util::Full<D> {
    #[inline]
    fn try_replay(&self) -> Option<Self> {
        Some(self.clone())
    }

    #[inline]
    fn can_replay(&self) -> bool {
        true
    }
}

impl<D> ReplayBody for http_body_util::Empty<D> {
    #[inline]
    fn try_replay(&self) -> Option<Self> {
        Some(http_body_util::Empty::new())
    }

    #[inline]
    fn can_replay(&self) -> bool {
        true
    }
}

impl<D, E> ReplayBody for http_body_util::combinators::BoxBody<D, E> {
    /// A boxed body is a stream as far as seawall can tell: sent once.
    fn try_replay(&self) -> Option<Self> {
        None
    }

    fn can_replay(&self) -> bool {
        false
    }
}

impl<D, E> ReplayBody for http_body_util::combinators::UnsyncBoxBody<D, E> {
    /// A boxed body is a stream as far as seawall can tell: sent once.
    fn try_replay(&self) -> Option<Self> {
        None
    }

    fn can_replay(&self) -> bool {
        false
    }
}

/// Makes `copy` (a new request, from `Request::new`, whose body is a replay of `req`'s) a copy of
/// `req`: method, URI, version, headers and extensions. Written in place: a request is a few
/// hundred bytes, and returning one would copy it.
#[inline(always)]
pub(crate) fn replay_head<B>(req: &http::Request<B>, copy: &mut http::Request<B>) {
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    // A header-less request keeps the copy's empty map: no clone of it at all.
    if !req.headers().is_empty() {
        *copy.headers_mut() = req.headers().clone();
    }
    *copy.extensions_mut() = req.extensions().clone();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_bytes_like_bodies_and_whole_requests() {
        let req = http::Request::post("http://a/x")
            .header("x-a", "1")
            .body(Bytes::from_static(b"hi"))
            .unwrap();
        let mut copy = http::Request::new(req.body().try_replay().unwrap());
        replay_head(&req, &mut copy);
        assert_eq!(copy.method(), req.method());
        assert_eq!(copy.uri(), req.uri());
        assert_eq!(copy.headers(), req.headers());
        assert_eq!(copy.body(), req.body());
    }

    #[test]
    fn boxed_bodies_are_sent_once() {
        use http_body_util::BodyExt;
        let b = http_body_util::Full::new(Bytes::new()).boxed_unsync();
        assert!(b.try_replay().is_none());
        assert!(!b.can_replay());
        assert!(Bytes::new().can_replay() && http_body_util::Empty::<Bytes>::new().can_replay());
    }
}
