//! Argument parsing: integers, durations and options, from raw bytes.
//! Arguments are never assumed to be UTF-8.

use crate::algorithm::Micros;
use crate::error::{printable, Error};

/// The largest integer any count, limit or cost may take, so that every
/// reply field fits a signed 64-bit integer.
pub const MAX_COUNT: u64 = i64::MAX as u64;

/// The longest duration: 36,500 days (100 years), in milliseconds.
pub const MAX_DURATION_MS: u64 = 36_500 * 86_400 * 1_000;

/// Parses a decimal integer in `min..=max`: digits only, no sign, no spaces.
pub fn integer(bytes: &[u8], arg: &'static str, min: u64, max: u64) -> Result<u64, Error> {
    let err = Error::Integer { arg, min, max };
    let n = digits(bytes).ok_or(err.clone())?;
    if n < min || n > max {
        return Err(err);
    }
    Ok(n)
}

/// A run of ASCII digits as a `u64`; `None` if empty, not digits, or too big.
fn digits(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() {
        return None;
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
    let n = digits(number).ok_or(Error::DurationTooLong { arg })?;
    if n == 0 {
        return Err(Error::Duration { arg });
    }
    let ms = n
        .checked_mul(ms_per_unit)
        .ok_or(Error::DurationTooLong { arg })?;
    if ms > MAX_DURATION_MS {
        return Err(Error::DurationTooLong { arg });
    }
    Ok(Micros::from_millis(ms))
}

/// Walks the optional arguments after a command's fixed ones.
pub struct Options<'a, A> {
    args: &'a [A],
    pos: usize,
    /// Options given so far (no command has more than a handful).
    seen: [&'static str; 8],
    seen_len: usize,
}

impl<'a, A: AsRef<[u8]>> Options<'a, A> {
    pub fn new(args: &'a [A]) -> Options<'a, A> {
        Options {
            args,
            pos: 0,
            seen: [""; 8],
            seen_len: 0,
        }
    }

    /// The next keyword, if any.
    pub fn next_keyword(&mut self) -> Option<&'a [u8]> {
        let word = self.args.get(self.pos)?;
        self.pos += 1;
        Some(word.as_ref())
    }

    /// Records that `name` was given; an error the second time.
    pub fn once(&mut self, name: &'static str) -> Result<(), Error> {
        if self.seen[..self.seen_len].contains(&name) {
            return Err(Error::RepeatedOption(name));
        }
        if let Some(slot) = self.seen.get_mut(self.seen_len) {
            *slot = name;
            self.seen_len += 1;
        }
        Ok(())
    }

    /// The value that follows option `name`.
    pub fn value(&mut self, name: &'static str) -> Result<&'a [u8], Error> {
        let v = self.args.get(self.pos).ok_or(Error::MissingValue(name))?;
        self.pos += 1;
        Ok(v.as_ref())
    }
}

pub fn unknown_option(word: &[u8]) -> Error {
    Error::UnknownOption(printable(word))
}

/// `COST n` and `DRYRUN`, which every decision command takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Common {
    pub cost: u64,
    pub dryrun: bool,
}

impl Default for Common {
    fn default() -> Common {
        Common {
            cost: 1,
            dryrun: false,
        }
    }
}

impl Common {
    /// Consumes `word` (and its value) if it is a common option.
    pub fn accept<A: AsRef<[u8]>>(
        &mut self,
        word: &[u8],
        opts: &mut Options<A>,
    ) -> Result<bool, Error> {
        if word.eq_ignore_ascii_case(b"COST") {
            opts.once("COST")?;
            self.cost = integer(opts.value("COST")?, "COST", 0, MAX_COUNT)?;
        } else if word.eq_ignore_ascii_case(b"DRYRUN") {
            opts.once("DRYRUN")?;
            self.dryrun = true;
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// Parses a tail that holds only the common options.
    pub fn parse<A: AsRef<[u8]>>(tail: &[A]) -> Result<Common, Error> {
        let mut common = Common::default();
        let mut opts = Options::new(tail);
        while let Some(word) = opts.next_keyword() {
            if !common.accept(word, &mut opts)? {
                return Err(unknown_option(word));
            }
        }
        Ok(common)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn durations() {
        assert_eq!(duration(b"60", "period"), Ok(Micros::new(60_000_000)));
        assert_eq!(duration(b"250ms", "period"), Ok(Micros::new(250_000)));
        assert_eq!(duration(b"1m", "period"), Ok(Micros::new(60_000_000)));
        assert_eq!(duration(b"2H", "period"), Ok(Micros::new(7_200_000_000)));
        assert_eq!(
            duration(b"36500d", "period"),
            Ok(Micros::new(MAX_DURATION_MS * 1_000))
        );
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

    #[test]
    fn common_options() {
        assert_eq!(
            Common::parse::<&[u8]>(&[]),
            Ok(Common {
                cost: 1,
                dryrun: false
            })
        );
        assert_eq!(
            Common::parse(&[&b"cost"[..], b"0", b"DryRun"]),
            Ok(Common {
                cost: 0,
                dryrun: true
            })
        );
        assert_eq!(
            Common::parse(&[&b"COST"[..]]),
            Err(Error::MissingValue("COST"))
        );
        assert_eq!(
            Common::parse(&[&b"DRYRUN"[..], b"DRYRUN"]),
            Err(Error::RepeatedOption("DRYRUN"))
        );
        assert_eq!(
            Common::parse(&[&b"FOO"[..]]),
            Err(Error::UnknownOption("FOO".into()))
        );
    }
}
