//! gRPC status codes as service configs name them, and small sets of them.

use std::fmt;

/// The seventeen canonical gRPC status names, indexed by code.
const NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// A canonical gRPC status code (0 = `OK` … 16 = `UNAUTHENTICATED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Code(u8);

impl Code {
    /// `OK` (0).
    pub const OK: Code = Code(0);
    /// `CANCELLED` (1): also what an attempt cut off by `perAttemptRecvTimeout` ends with.
    pub const CANCELLED: Code = Code(1);
    /// `UNKNOWN` (2).
    pub const UNKNOWN: Code = Code(2);
    /// `INVALID_ARGUMENT` (3).
    pub const INVALID_ARGUMENT: Code = Code(3);
    /// `DEADLINE_EXCEEDED` (4).
    pub const DEADLINE_EXCEEDED: Code = Code(4);
    /// `PERMISSION_DENIED` (7).
    pub const PERMISSION_DENIED: Code = Code(7);
    /// `RESOURCE_EXHAUSTED` (8).
    pub const RESOURCE_EXHAUSTED: Code = Code(8);
    /// `UNIMPLEMENTED` (12).
    pub const UNIMPLEMENTED: Code = Code(12);
    /// `INTERNAL` (13).
    pub const INTERNAL: Code = Code(13);
    /// `UNAVAILABLE` (14).
    pub const UNAVAILABLE: Code = Code(14);
    /// `UNAUTHENTICATED` (16).
    pub const UNAUTHENTICATED: Code = Code(16);

    /// The code for a number in 0..=16; `None` for anything else.
    pub fn from_i64(n: i64) -> Option<Code> {
        u8::try_from(n).ok().filter(|&n| usize::from(n) < NAMES.len()).map(Code)
    }

    /// The code for a canonical name (`"UNAVAILABLE"`), matched exactly: upper case, no
    /// aliases.
    pub fn from_name(name: &str) -> Option<Code> {
        NAMES.iter().position(|n| *n == name).map(|i| Code(i as u8))
    }

    /// The code for a name in any case (`"unavailable"`, `"Unavailable"`), as gRFC A6 allows
    /// in `retryableStatusCodes` and `nonFatalStatusCodes` ("the integer form or the
    /// case-insensitive string form (eg. \[14\], \["UNAVAILABLE"\] or \["unavailable"\])").
    /// ASCII case only: no aliases, no surrounding spaces.
    pub fn from_name_ignore_case(name: &str) -> Option<Code> {
        NAMES.iter().position(|n| n.eq_ignore_ascii_case(name)).map(|i| Code(i as u8))
    }

    /// Parses the `grpc-status` value a server sends: ASCII digits only. A number outside
    /// 0..=16 is `UNKNOWN`, as the gRPC protocol spec says a client must treat it.
    pub fn from_wire(value: &[u8]) -> Option<Code> {
        if value.is_empty() || value.len() > 3 || !value.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = value.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        Some(Code::from_i64(i64::from(n)).unwrap_or(Code::UNKNOWN))
    }

    /// The number (0..=16).
    pub fn number(self) -> u8 {
        self.0
    }

    /// The canonical name.
    pub fn name(self) -> &'static str {
        NAMES[usize::from(self.0)]
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of status codes (`retryableStatusCodes`, `nonFatalStatusCodes`), one bit per code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CodeSet(u32);

impl CodeSet {
    /// The empty set.
    pub const EMPTY: CodeSet = CodeSet(0);

    /// A set of the given codes.
    pub fn of(codes: &[Code]) -> CodeSet {
        codes.iter().fold(CodeSet::EMPTY, |s, &c| s.with(c))
    }

    /// This set plus `code`.
    #[must_use]
    pub fn with(self, code: Code) -> CodeSet {
        CodeSet(self.0 | 1 << code.0)
    }

    /// Whether `code` is in the set.
    pub fn contains(self, code: Code) -> bool {
        self.0 & 1 << code.0 != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The codes in the set, lowest first.
    pub fn iter(self) -> impl Iterator<Item = Code> {
        (0..NAMES.len() as u8).map(Code).filter(move |&c| self.contains(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_wire() {
        assert_eq!(Code::from_name("UNAVAILABLE"), Some(Code::UNAVAILABLE));
        assert_eq!(Code::from_name("unavailable"), None, "exact, as grpc-go");
        assert_eq!(Code::from_i64(14), Some(Code::UNAVAILABLE));
        assert_eq!(Code::from_i64(17), None);
        assert_eq!(Code::from_i64(-1), None);
        assert_eq!(Code::from_wire(b"14"), Some(Code::UNAVAILABLE));
        assert_eq!(Code::from_wire(b"99"), Some(Code::UNKNOWN));
        assert_eq!(Code::from_wire(b"1x"), None);
        assert_eq!(Code::from_wire(b""), None);
        for n in 0..17 {
            let c = Code::from_i64(n).unwrap();
            assert_eq!(Code::from_name(c.name()), Some(c));
        }
        let s = CodeSet::of(&[Code::UNAVAILABLE, Code::CANCELLED]);
        assert!(s.contains(Code::UNAVAILABLE) && !s.contains(Code::INTERNAL));
        assert_eq!(s.iter().collect::<Vec<_>>(), [Code::CANCELLED, Code::UNAVAILABLE]);
    }
}
