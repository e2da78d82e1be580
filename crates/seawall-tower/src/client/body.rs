//! Which request bodies can be sent again: the [`ReplayBody`] trait.
//!
//! # Why a trait and not `B: Clone`
//!
//! A retry must send the *same* request again, so the layer needs a second copy of the body
//! before the first attempt consumes it. `tower::retry` asks the policy to clone the whole
//! request; requiring `B: Clone` would shut out every streaming body (hyper's `Incoming`, axum's
//! `Body`, tonic's `Body`), and buffering every body behind the caller's back would turn a
//! 2 GB upload into 2 GB of memory. So seawall asks the body itself: [`ReplayBody::try_replay`]
//! returns a copy when one is cheap (`Bytes`, `String`, `Full<Bytes>`, `Empty` — a reference
//! count or a small copy) and `None` for a stream. A request whose body says `None` is **sent
//! once**: the policy still classifies it, counts it and applies its deadline, but never resends
//! it — not even after a refused connection, because the stream was consumed by the attempt.
//!
//! To retry a streaming body, buffer it yourself into one of the replayable types first (gRPC
//! users: see `client::grpc` behind the `grpc` feature, which does exactly that for unary calls).
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
}

macro_rules! replay_by_clone {
    ($($t:ty),* $(,)?) => {
        $(impl ReplayBody for $t {
            #[inline]
            fn try_replay(&self) -> Option<Self> {
                Some(self.clone())
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
}

impl<D> ReplayBody for http_body_util::Empty<D> {
    #[inline]
    fn try_replay(&self) -> Option<Self> {
        Some(http_body_util::Empty::new())
    }
}

impl<D, E> ReplayBody for http_body_util::combinators::BoxBody<D, E> {
    /// A boxed body is a stream as far as seawall can tell: sent once.
    fn try_replay(&self) -> Option<Self> {
        None
    }
}

impl<D, E> ReplayBody for http_body_util::combinators::UnsyncBoxBody<D, E> {
    /// A boxed body is a stream as far as seawall can tell: sent once.
    fn try_replay(&self) -> Option<Self> {
        None
    }
}

/// Copies a request for another attempt: method, URI, version, headers, extensions and a
/// replayed body. `None` when the body cannot be replayed.
#[cfg(test)]
pub(crate) fn replay_request<B: ReplayBody>(req: &http::Request<B>) -> Option<http::Request<B>> {
    let mut slot = None;
    replay_into(req, &mut slot);
    slot
}

/// The same copy into `slot`, where the copy is built in place (a request is a few hundred
/// bytes: returning it would copy it); `false`, with `slot` emptied, when the body cannot be
/// replayed.
#[inline(always)]
pub(crate) fn replay_into<B: ReplayBody>(
    req: &http::Request<B>,
    slot: &mut Option<http::Request<B>>,
) -> bool {
    let Some(body) = req.body().try_replay() else {
        *slot = None;
        return false;
    };
    let copy = slot.insert(http::Request::new(body));
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    // A header-less request keeps the copy's empty map: no clone of it, no drop of the one it
    // would replace (the success path of a plain client call pays neither).
    if !req.headers().is_empty() {
        *copy.headers_mut() = req.headers().clone();
    }
    *copy.extensions_mut() = req.extensions().clone();
    true
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
        let copy = replay_request(&req).unwrap();
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
    }
}
