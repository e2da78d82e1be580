//! `grpc-retry-pushback-ms`, read as gRFC A6 defines it.

use std::time::Duration;

/// What a server's `grpc-retry-pushback-ms` said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pushback {
    /// No pushback metadata.
    #[default]
    Absent,
    /// Retry (or send the next hedge) after exactly this long.
    After(Duration),
    /// Negative, malformed, or more than one value: do not retry, send no more hedges.
    DontRetry,
}

impl Pushback {
    /// Reads the values of `grpc-retry-pushback-ms` in a response. A6: the value is "an ASCII
    /// encoded signed 32-bit integer"; negative or unparseable means don't retry. Like grpc-go,
    /// more than one value is also "don't retry"; a value above `i32::MAX` is unparseable.
    pub fn from_values<'a>(mut values: impl Iterator<Item = &'a [u8]>) -> Pushback {
        let Some(first) = values.next() else { return Pushback::Absent };
        if values.next().is_some() {
            return Pushback::DontRetry;
        }
        let digits = first.strip_prefix(b"+").unwrap_or(first);
        if digits.is_empty() || digits.len() > 10 || !digits.iter().all(u8::is_ascii_digit) {
            return Pushback::DontRetry;
        }
        let ms = digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        if ms > i32::MAX as u64 {
            return Pushback::DontRetry;
        }
        Pushback::After(Duration::from_millis(ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn one(v: &str) -> Pushback {
        Pushback::from_values(std::iter::once(v.as_bytes()))
    }

    #[test]
    fn a6_forms() {
        assert_eq!(Pushback::from_values(std::iter::empty()), Pushback::Absent);
        assert_eq!(one("0"), Pushback::After(Duration::ZERO));
        assert_eq!(one("250"), Pushback::After(Duration::from_millis(250)));
        assert_eq!(one("2147483647"), Pushback::After(Duration::from_millis(2_147_483_647)));
        for bad in ["-1", "-0", "", "1.5", " 1", "2147483648", "99999999999", "x"] {
            assert_eq!(one(bad), Pushback::DontRetry, "{bad:?}");
        }
        let two = [b"1".as_slice(), b"2".as_slice()];
        assert_eq!(Pushback::from_values(two.into_iter()), Pushback::DontRetry);
    }

    proptest! {
        #[test]
        fn valid_iff_i32_non_negative(n in any::<i64>()) {
            let p = one(&n.to_string());
            if (0..=i64::from(i32::MAX)).contains(&n) {
                prop_assert_eq!(p, Pushback::After(Duration::from_millis(n as u64)));
            } else {
                prop_assert_eq!(p, Pushback::DontRetry);
            }
        }
    }
}
