//! The `Idempotency-Key` value, the request fingerprint and the client scope.

use std::fmt;

use sha2::{Digest, Sha256};

/// Longest key accepted, in bytes (the IETF draft sets no limit; UUIDs are 36, Stripe allows 255).
pub const MAX_KEY_LEN: usize = 255;

/// Why an `Idempotency-Key` value was refused (answered with 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// Empty, or `""`.
    Empty,
    /// Longer than [`MAX_KEY_LEN`].
    TooLong,
    /// A byte outside visible ASCII, a backslash, or an unbalanced quote.
    BadChar,
    /// More than one `Idempotency-Key` header.
    Repeated,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyError::Empty => "empty Idempotency-Key",
            KeyError::TooLong => "Idempotency-Key longer than 255 bytes",
            KeyError::BadChar => "Idempotency-Key must be visible ASCII (an sf-string or a token)",
            KeyError::Repeated => "more than one Idempotency-Key header",
        })
    }
}

impl std::error::Error for KeyError {}

/// Parses an `Idempotency-Key` value. The draft makes it a Structured Field string
/// (`"8e03978e-…"`); common clients send the bare value, so both are accepted: a quoted string of
/// visible ASCII and spaces without `"` or `\` inside, or a bare run of visible ASCII without
/// quotes. Returns the key without its quotes.
pub fn parse_key(value: &[u8]) -> Result<&str, KeyError> {
    let inner = match value {
        [b'"', inner @ .., b'"'] => {
            if !inner.iter().all(|&b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\') {
                return Err(KeyError::BadChar);
            }
            inner
        }
        _ => {
            if !value.iter().all(|&b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\') {
                return Err(KeyError::BadChar);
            }
            value
        }
    };
    if inner.is_empty() {
        return Err(KeyError::Empty);
    }
    if inner.len() > MAX_KEY_LEN {
        return Err(KeyError::TooLong);
    }
    // Visible ASCII is valid UTF-8.
    std::str::from_utf8(inner).map_err(|_| KeyError::BadChar)
}

/// SHA-256 of what makes two requests "the same payload": method, path and query, and body.
pub type Fingerprint = [u8; 32];

/// The payload fingerprint (the draft's "request fingerprint"): length-prefixed method, target
/// and body, hashed with SHA-256.
pub fn fingerprint(method: &http::Method, target: &str, body: &[u8]) -> Fingerprint {
    let mut h = Sha256::new();
    for part in [method.as_str().as_bytes(), target.as_bytes(), body] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.finalize().into()
}

/// Who began an in-flight record: a 128-bit token for each request that asks a store to
/// [`begin`](super::IdempotencyStore::begin) a key — a prefix drawn once per process from the
/// OS's entropy (the first 8 bytes of a UUID v4: 60 random bits), then a 64-bit counter, so
/// tokens never repeat within a process and two processes share a prefix with probability
/// 2⁻⁶⁰.
///
/// A store writes it with the in-flight marker and settles the marker ([`complete`], [`release`],
/// [`abandon`]) only for the same owner. Releasing by key and fingerprint alone would let a
/// request cut before its handler ran delete the marker of an *identical* request (same key,
/// same payload) that began the key meanwhile and is executing it: that one's retry would then
/// execute a second time.
///
/// [`complete`]: super::IdempotencyStore::complete
/// [`release`]: super::IdempotencyStore::release
/// [`abandon`]: super::IdempotencyStore::abandon
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner([u8; 16]);

impl Owner {
    /// A fresh token.
    pub fn random() -> Self {
        use std::sync::OnceLock;
        use std::sync::atomic::{AtomicU64, Ordering};
        static PREFIX: OnceLock<[u8; 8]> = OnceLock::new();
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let prefix = PREFIX.get_or_init(|| {
            let mut p = [0; 8];
            p.copy_from_slice(&uuid::Uuid::new_v4().as_bytes()[..8]);
            p
        });
        let mut bytes = [0; 16];
        bytes[..8].copy_from_slice(prefix);
        bytes[8..].copy_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes());
        Owner(bytes)
    }

    /// The token of these 16 bytes (as a store read them back).
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Owner(bytes)
    }

    /// The token's 16 bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owner({})", uuid::Uuid::from_bytes(self.0).simple())
    }
}

/// Where a key lives: the client's scope (a hash of its identity) and the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreKey {
    /// Hex SHA-256 of the client identity ([`scope_of`]); 64 characters.
    pub scope: String,
    /// The parsed `Idempotency-Key`.
    pub key: String,
}

/// The scope for a client identity: hex SHA-256, so stores never hold raw credentials and every
/// scope has the same safe shape for SQL and Redis keys. `None` (anonymous) is its own scope.
pub fn scope_of(identity: Option<&[u8]>) -> String {
    let mut h = Sha256::new();
    match identity {
        Some(id) => {
            h.update([1]);
            h.update(id);
        }
        None => h.update([0]),
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_strict() {
        assert_eq!(parse_key(b"\"8e03978e-40d5\""), Ok("8e03978e-40d5"));
        assert_eq!(parse_key(b"abc-123"), Ok("abc-123"));
        assert_eq!(parse_key(b"\"with space\""), Ok("with space"));
        assert_eq!(parse_key(b""), Err(KeyError::Empty));
        assert_eq!(parse_key(b"\"\""), Err(KeyError::Empty));
        assert_eq!(parse_key(&[b'a'; 256]), Err(KeyError::TooLong));
        for bad in [&b"a b"[..], b"\"a", b"a\"", b"\"a\\b\"", b"\xff", b"\x00", b"tab\there"] {
            assert_eq!(parse_key(bad), Err(KeyError::BadChar), "{bad:?}");
        }
    }

    #[test]
    fn fingerprint_separates_fields() {
        let m = http::Method::POST;
        assert_ne!(fingerprint(&m, "/a", b"bc"), fingerprint(&m, "/ab", b"c"));
        assert_eq!(fingerprint(&m, "/a", b"x"), fingerprint(&m, "/a", b"x"));
        assert_ne!(scope_of(None), scope_of(Some(b"")));
        assert_eq!(scope_of(Some(b"k")).len(), 64);
    }
}
