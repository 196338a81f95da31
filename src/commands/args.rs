//! Argument parsing: integers, durations and options, from raw bytes.
//! Arguments are never assumed to be UTF-8.

use crate::algorithm::limits::MAX_DURATION;
use crate::algorithm::Micros;
use crate::engine::error::Error;

/// Parses a decimal integer in `min..=max`: digits only, no sign, no spaces.
pub fn integer(bytes: &[u8], arg: &'static str, min: u64, max: u64) -> Result<u64, Error> {
    match digits(bytes) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(Error::Integer { arg, min, max }),
    }
}

/// Parses an integer in `min..=max` as redis-cell reads its arguments
/// (Rust's `i64` parse), where that is harmless: [`integer`]'s digits,
/// optionally after one `+`, or a `-` before a zero (`-0`, `-00`). Only for
/// CL.THROTTLE; the RL.* commands take digits only.
pub fn cell_integer(bytes: &[u8], arg: &'static str, min: u64, max: u64) -> Result<u64, Error> {
    match bytes {
        [b'+', rest @ ..] => integer(rest, arg, min, max),
        [b'-', rest @ ..] if digits(rest) == Some(0) => integer(rest, arg, min, max),
        [b'-', ..] => Err(Error::Integer { arg, min, max }),
        _ => integer(bytes, arg, min, max),
    }
}

/// Parses an integer from `-max` to `max` (`max` at most `i64::MAX`) as
/// redis-cell reads it (Rust's `i64` parse): [`cell_integer`]'s forms, or
/// a `-` before digits. Only for CL.THROTTLE's `quantity`.
pub fn cell_signed(bytes: &[u8], arg: &'static str, max: u64) -> Result<i64, Error> {
    let n = match bytes {
        [b'-', rest @ ..] => integer(rest, arg, 0, max).map(|n| -i128::from(n)),
        _ => cell_integer(bytes, arg, 0, max).map(i128::from),
    };
    n.ok()
        .and_then(|n| i64::try_from(n).ok())
        .ok_or(Error::SignedInteger { arg, max })
}

/// A run of ASCII digits as a `u64`; `None` if empty, not digits, or too big.
fn digits(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() {
        return None;
    }
    // Up to 19 digits never overflow: no check per digit (this runs for
    // every number of every request).
    if bytes.len() <= 19 {
        let mut n = 0u64;
        for &b in bytes {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            n = n * 10 + u64::from(d);
        }
        return Some(n);
    }
    bytes.iter().try_fold(0u64, |acc, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// Parses a duration, `60`, `250ms`, `1m`, ...: a positive integer with an
/// optional unit `ms`, `s`, `m`, `h`, `d` (any case); a bare number is
/// seconds.
pub fn duration(bytes: &[u8], arg: &'static str) -> Result<Micros, Error> {
    let split = bytes
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(bytes.len());
    let (number, unit) = bytes.split_at(split);
    // Lowercased in place of a copy: this runs on every request.
    let ms_per_unit: u64 = match unit {
        [] => 1_000,
        [u] => match u.to_ascii_lowercase() {
            b's' => 1_000,
            b'm' => 60_000,
            b'h' => 3_600_000,
            b'd' => 86_400_000,
            _ => return Err(Error::Duration { arg }),
        },
        _ if unit.eq_ignore_ascii_case(b"ms") => 1,
        _ => return Err(Error::Duration { arg }),
    };
    if number.is_empty() {
        return Err(Error::Duration { arg });
    }
    // All digits by the split above: `None` here means beyond u64, which is
    // a positive number far above the maximum, not a malformed one.
    // (Errors are built only on the error path: building one costs a
    // drop on every request.)
    let n = match digits(number) {
        Some(0) => return Err(Error::Duration { arg }),
        Some(n) => n,
        None => return Err(Error::DurationTooLong { arg }),
    };
    match n.checked_mul(ms_per_unit).map(Micros::from_millis) {
        Some(duration) if duration <= MAX_DURATION => Ok(duration),
        _ => Err(Error::DurationTooLong { arg }),
    }
}

/// Walks the optional arguments after a command's fixed ones.
pub struct Options<'a, A> {
    args: &'a [A],
    pos: usize,
}

impl<'a, A: AsRef<[u8]>> Options<'a, A> {
    pub fn new(args: &'a [A]) -> Options<'a, A> {
        Options { args, pos: 0 }
    }

    /// The next word, without taking it.
    pub fn peek(&self) -> Option<&'a [u8]> {
        self.args.get(self.pos).map(AsRef::as_ref)
    }

    /// Takes the next keyword, if any.
    pub fn next_keyword(&mut self) -> Option<&'a [u8]> {
        let word = self.peek()?;
        self.pos += 1;
        Some(word)
    }

    /// Takes the value that follows option `name`.
    pub fn value(&mut self, name: &'static str) -> Result<&'a [u8], Error> {
        let Some(v) = self.peek() else {
            return Err(Error::MissingValue(name));
        };
        self.pos += 1;
        Ok(v)
    }

    /// How many arguments have been taken.
    pub fn position(&self) -> usize {
        self.pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::limits::MAX_COUNT;

    #[test]
    fn integers() {
        assert_eq!(integer(b"10", "limit", 1, MAX_COUNT), Ok(10));
        assert_eq!(
            integer(b"9223372036854775807", "limit", 1, MAX_COUNT),
            Ok(MAX_COUNT)
        );
        for bad in [
            &b""[..],
            b"0",
            b"-1",
            b"1.5",
            b" 1",
            b"+1",
            b"9223372036854775808",
            b"99999999999999999999999",
            b"\xff",
        ] {
            assert_eq!(
                integer(bad, "limit", 1, MAX_COUNT),
                Err(Error::Integer {
                    arg: "limit",
                    min: 1,
                    max: MAX_COUNT
                }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn digits_at_the_edges_of_u64() {
        assert_eq!(
            digits(b"9999999999999999999"),
            Some(9_999_999_999_999_999_999)
        );
        assert_eq!(digits(b"0000000000000000000"), Some(0));
        assert_eq!(digits(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(digits(b"18446744073709551616"), None);
        assert_eq!(digits(b"99999999999999999999"), None);
        for bad in [&b""[..], b"1a", b"/", b":", b" 1", b"1 ", b"-1", b"+1"] {
            assert_eq!(digits(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn cell_integers_take_a_plus_and_minus_zero() {
        let cell = |b: &[u8]| cell_integer(b, "quantity", 0, 9).ok();
        assert_eq!(cell(b"+5"), Some(5));
        assert_eq!(cell(b"+0"), Some(0));
        assert_eq!(cell(b"-0"), Some(0));
        assert_eq!(cell(b"-000"), Some(0));
        assert_eq!(cell(b"+007"), Some(7));
        for bad in [
            &b"-5"[..],
            b"++5",
            b"+-5",
            b"-+0",
            b"+",
            b"-",
            b" 5",
            b"+ 5",
            b"+10",
            b"",
        ] {
            assert_eq!(cell(bad), None, "{bad:?}");
        }
        // Everyone else takes digits only.
        for signed in [&b"+5"[..], b"-0", b"+0"] {
            assert!(integer(signed, "limit", 0, 9).is_err(), "{signed:?}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(duration(b"60", "period"), Ok(Micros::new(60_000_000)));
        assert_eq!(duration(b"250ms", "period"), Ok(Micros::new(250_000)));
        assert_eq!(duration(b"1m", "period"), Ok(Micros::new(60_000_000)));
        assert_eq!(duration(b"2H", "period"), Ok(Micros::new(7_200_000_000)));
        assert_eq!(duration(b"36500d", "period"), Ok(MAX_DURATION));
        for bad in [
            &b""[..],
            b"0",
            b"0ms",
            b"ms",
            b"1x",
            b"1.5s",
            b"-1",
            b"1 s",
            b"1sec",
        ] {
            assert_eq!(
                duration(bad, "period"),
                Err(Error::Duration { arg: "period" }),
                "{bad:?}"
            );
        }
        for long in [
            &b"36501d"[..],
            b"99999999999d",
            b"18446744073709551615d",
            b"18446744073709551616",
            b"99999999999999999999999999ms",
        ] {
            assert_eq!(
                duration(long, "period"),
                Err(Error::DurationTooLong { arg: "period" })
            );
        }
    }

    proptest::proptest! {
        /// Any bytes as a duration and as a count in any bounds: what
        /// parses is in range, and a count is digits only.
        #[test]
        fn any_bytes_as_a_duration_and_a_count(
            arg in proptest::prop_oneof![
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
                proptest::prelude::Strategy::prop_map("[0-9+-]{0,22}(ms|us|s|m|h|d)?", String::into_bytes),
            ],
            a in proptest::prelude::any::<u64>(),
            b in proptest::prelude::any::<u64>(),
        ) {
            if let Ok(d) = duration(&arg, "period") {
                let us = d.as_u64();
                proptest::prop_assert!(us >= 1_000 && us <= MAX_DURATION.as_u64() && us % 1_000 == 0);
            }
            if let Ok(n) = integer(&arg, "n", a.min(b), a.max(b)) {
                proptest::prop_assert!(n >= a.min(b) && n <= a.max(b));
                proptest::prop_assert!(arg.iter().all(u8::is_ascii_digit));
            }
        }
    }
}
