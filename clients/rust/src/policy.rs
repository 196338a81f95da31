//! Limits as types: what `RL.ALL` calls a policy, with `Duration`s for
//! periods, and the rate each one announces in `RateLimit-Policy`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A sustained `limit` per `period`, up to `burst` at once (`RL.GCRA`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Gcra {
    /// The sustained rate: units per `period`.
    pub limit: u64,
    /// The period of the rate.
    pub period: Duration,
    /// Defaults to `limit`.
    pub burst: Option<u64>,
}

impl Gcra {
    /// `limit` per `period`, bursts of `limit`.
    pub fn new(limit: u64, period: Duration) -> Gcra {
        Gcra {
            limit,
            period,
            burst: None,
        }
    }

    /// Bursts of up to `burst` at once.
    pub fn burst(mut self, burst: u64) -> Gcra {
        self.burst = Some(burst);
        self
    }
}

/// A token bucket of `capacity`, gaining `refill` per `period` (`RL.BUCKET`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Bucket {
    /// The most the bucket holds.
    pub capacity: u64,
    /// Units gained per `period`.
    pub refill: u64,
    /// The period of the refill.
    pub period: Duration,
}

impl Bucket {
    /// A bucket of `capacity`, gaining `refill` per `period`.
    pub fn new(capacity: u64, refill: u64, period: Duration) -> Bucket {
        Bucket {
            capacity,
            refill,
            period,
        }
    }
}

/// How `RL.SLIDING` counts its window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlidingMode {
    /// A log of admissions: never more than `limit` in any window.
    #[default]
    Exact,
    /// The weighted two-window estimate.
    Approx,
    /// `n` sub-window counts (2 to 1024).
    Buckets(u32),
}

/// At most `limit` per `window`, counted over the window that ends now
/// (`RL.SLIDING`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sliding {
    /// The most per window.
    pub limit: u64,
    /// The window.
    pub window: Duration,
    /// How the window is counted.
    pub mode: SlidingMode,
}

impl Sliding {
    /// At most `limit` per `window`, counted exactly (a log).
    pub fn new(limit: u64, window: Duration) -> Sliding {
        Sliding {
            limit,
            window,
            mode: SlidingMode::Exact,
        }
    }

    /// Counted with the weighted two-window estimate (`APPROX`).
    pub fn approx(mut self) -> Sliding {
        self.mode = SlidingMode::Approx;
        self
    }

    /// Counted in `n` sub-windows (`BUCKETS n`, 2 to 1024).
    pub fn buckets(mut self, n: u32) -> Sliding {
        self.mode = SlidingMode::Buckets(n);
        self
    }
}

/// A count per fixed window, from the first request or `aligned` to the
/// epoch (`RL.FIXED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fixed {
    /// The most per window.
    pub limit: u64,
    /// The window.
    pub window: Duration,
    /// Windows aligned to the epoch (`ALIGNED`) rather than to the first request.
    pub aligned: bool,
}

impl Fixed {
    /// At most `limit` per `window`, from the first request.
    pub fn new(limit: u64, window: Duration) -> Fixed {
        Fixed {
            limit,
            window,
            aligned: false,
        }
    }

    /// Windows aligned to the epoch (`ALIGNED`).
    pub fn aligned(mut self) -> Fixed {
        self.aligned = true;
        self
    }
}

/// At most `limit` units held at once, each lease ending after `ttl`
/// unless released or renewed (`RL.ACQUIRE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Concurrency {
    /// The most held at once.
    pub limit: u64,
    /// How long a lease lasts unless released or renewed.
    pub ttl: Duration,
}

impl Concurrency {
    /// At most `limit` held at once, each lease ending after `ttl`.
    pub fn new(limit: u64, ttl: Duration) -> Concurrency {
        Concurrency { limit, ttl }
    }
}

/// One limit, as `RL.ALL` and `RL.PEEK` take it.
///
/// `"GCRA 10 1s BURST 20".parse::<Policy>()` reads the command's own
/// words (for configuration files).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Policy {
    /// `GCRA`: a rate with bursts.
    Gcra(Gcra),
    /// `BUCKET`: a token bucket.
    Bucket(Bucket),
    /// `SLIDING`: a sliding window.
    Sliding(Sliding),
    /// `FIXED`: a fixed window.
    Fixed(Fixed),
    /// `CONCURRENCY`: units held at once.
    Concurrency(Concurrency),
}

macro_rules! into_policy {
    ($($t:ident),*) => {$(
        impl From<$t> for Policy {
            fn from(p: $t) -> Policy {
                Policy::$t(p)
            }
        }
    )*};
}
into_policy!(Gcra, Bucket, Sliding, Fixed, Concurrency);

/// A duration as the module reads it: whole milliseconds, rounded up, so
/// that a period is never shorter than asked (zero stays zero: the server
/// names that error).
/// One word of a policy.
enum Word {
    Name(&'static str),
    Count(u64),
    Millis(u64),
}

pub(crate) fn duration_arg(d: Duration) -> String {
    format!("{}ms", ceil_millis(d))
}

pub(crate) fn ceil_millis(d: Duration) -> u64 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

impl Policy {
    /// For a policy that regains units one at a time at a constant rate
    /// (GCRA, token bucket), the time one unit takes (rounded down).
    pub fn unit_interval(&self) -> Option<Duration> {
        let (count, period) = match *self {
            Policy::Gcra(g) => (g.limit, g.period),
            Policy::Bucket(b) => (b.refill, b.period),
            _ => return None,
        };
        let nanos = period.as_nanos() / u128::from(count.max(1));
        Some(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }

    /// The single-key command that decides this policy alone.
    pub fn command_name(&self) -> &'static str {
        match self {
            Policy::Gcra(_) => "RL.GCRA",
            Policy::Bucket(_) => "RL.BUCKET",
            Policy::Sliding(_) => "RL.SLIDING",
            Policy::Fixed(_) => "RL.FIXED",
            Policy::Concurrency(_) => "RL.ACQUIRE",
        }
    }

    /// Its words in `RL.ALL`, name first: `["GCRA", "10", "1000ms"]`.
    pub fn words(&self) -> Vec<String> {
        let mut w: Vec<String> = Vec::with_capacity(5);
        self.each_word(|word| {
            w.push(match word {
                Word::Name(n) => n.to_string(),
                Word::Count(n) => n.to_string(),
                Word::Millis(ms) => format!("{ms}ms"),
            })
        });
        w
    }

    /// Appends its words to a command, without the name word when
    /// `with_name` is false (a single-key command names it already), with
    /// no allocation of its own.
    pub(crate) fn append_words(&self, cmd: &mut redis::Cmd, with_name: bool) {
        let mut first = true;
        self.each_word(|word| {
            let skip = first && !with_name;
            first = false;
            match word {
                _ if skip => {}
                Word::Name(n) => {
                    cmd.arg(n);
                }
                Word::Count(n) => {
                    cmd.arg(n);
                }
                Word::Millis(ms) => {
                    let mut buf = [0u8; 24];
                    let len = {
                        let mut out: &mut [u8] = &mut buf;
                        let _ = std::io::Write::write_fmt(&mut out, format_args!("{ms}ms"));
                        24 - out.len()
                    };
                    cmd.arg(&buf[..len]);
                }
            }
        });
    }

    /// Each word in order, name first.
    fn each_word(&self, mut f: impl FnMut(Word)) {
        match *self {
            Policy::Gcra(g) => {
                f(Word::Name("GCRA"));
                f(Word::Count(g.limit));
                f(Word::Millis(ceil_millis(g.period)));
                if let Some(b) = g.burst {
                    f(Word::Name("BURST"));
                    f(Word::Count(b));
                }
            }
            Policy::Bucket(b) => {
                f(Word::Name("BUCKET"));
                f(Word::Count(b.capacity));
                f(Word::Count(b.refill));
                f(Word::Millis(ceil_millis(b.period)));
            }
            Policy::Sliding(s) => {
                f(Word::Name("SLIDING"));
                f(Word::Count(s.limit));
                f(Word::Millis(ceil_millis(s.window)));
                match s.mode {
                    SlidingMode::Exact => {}
                    SlidingMode::Approx => f(Word::Name("APPROX")),
                    SlidingMode::Buckets(n) => {
                        f(Word::Name("BUCKETS"));
                        f(Word::Count(u64::from(n)));
                    }
                }
            }
            Policy::Fixed(fixed) => {
                f(Word::Name("FIXED"));
                f(Word::Count(fixed.limit));
                f(Word::Millis(ceil_millis(fixed.window)));
                if fixed.aligned {
                    f(Word::Name("ALIGNED"));
                }
            }
            Policy::Concurrency(c) => {
                f(Word::Name("CONCURRENCY"));
                f(Word::Count(c.limit));
                f(Word::Millis(ceil_millis(c.ttl)));
            }
        }
    }

    /// The sustained rate (never the burst) as `RateLimit-Policy` states
    /// it; `None` for a concurrency limit, which is not a rate.
    pub fn quota(&self) -> Option<Quota> {
        let (count, period) = match *self {
            Policy::Gcra(g) => (g.limit, g.period),
            Policy::Bucket(b) => (b.refill, b.period),
            Policy::Sliding(s) => (s.limit, s.window),
            Policy::Fixed(f) => (f.limit, f.window),
            Policy::Concurrency(_) => return None,
        };
        Some(Quota::of_rate(count, ceil_millis(period).max(1)))
    }
}

/// The largest count the server takes (every reply field fits an `i64`).
pub const MAX_COUNT: u64 = i64::MAX as u64;
/// The longest duration the server takes: 36,500 days.
pub const MAX_DURATION: Duration = Duration::from_secs(36_500 * 86_400);

impl Policy {
    /// Checks the policy against the bounds the server holds its arguments
    /// to (counts from 1 to [`MAX_COUNT`], durations from 1 ms to
    /// [`MAX_DURATION`], 2 to 1024 sub-windows), so that a layer refuses
    /// it when it is built rather than answering every request with the
    /// server's error.
    ///
    /// ```
    /// use redis_ratelimit_client::{Gcra, Policy};
    /// use std::time::Duration;
    /// assert!(Policy::from(Gcra::new(10, Duration::from_secs(1))).validate().is_ok());
    /// assert!(Policy::from(Gcra::new(0, Duration::from_secs(1))).validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), crate::Error> {
        let bad = |what: &str| Err(crate::Error::Config(format!("{what} in policy '{self}'")));
        let count = |n: u64| (1..=MAX_COUNT).contains(&n);
        let duration = |d: Duration| d >= Duration::from_millis(1) && d <= MAX_DURATION;
        let (counts, period): (&[u64], Duration) = match self {
            Policy::Gcra(g) => (&[g.limit, g.burst.unwrap_or(1)], g.period),
            Policy::Bucket(b) => (&[b.capacity, b.refill], b.period),
            Policy::Sliding(s) => (&[s.limit], s.window),
            Policy::Fixed(f) => (&[f.limit], f.window),
            Policy::Concurrency(c) => (&[c.limit], c.ttl),
        };
        if !counts.iter().all(|&n| count(n)) {
            return bad("a count outside 1 to 2^63-1");
        }
        if !duration(period) {
            return bad("a duration outside 1 ms to 36,500 days");
        }
        if let Policy::Sliding(Sliding {
            mode: SlidingMode::Buckets(n),
            ..
        }) = self
        {
            if !(2..=1024).contains(n) {
                return bad("BUCKETS outside 2 to 1024");
            }
        }
        Ok(())
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.words().join(" "))
    }
}

/// A rate in the terms of `RateLimit-Policy`: [`Quota::units`] per
/// [`Quota::window_secs`] (the draft's `q` and `w`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Quota {
    pub(crate) q: u64,
    pub(crate) w: u64,
}

impl Quota {
    /// `units` per `window_secs` seconds.
    pub fn new(units: u64, window_secs: u64) -> Quota {
        Quota {
            q: units,
            w: window_secs,
        }
    }

    /// The units a window allows (`q`).
    pub fn units(&self) -> u64 {
        self.q
    }

    /// The window, in whole seconds (`w`).
    pub fn window_secs(&self) -> u64 {
        self.w
    }

    /// `count` per `period_ms`. A period of whole seconds is `w`; otherwise
    /// `w` is the shortest whole number of seconds with a whole `q` at that
    /// rate (`1 per 250ms` is `q=4;w=1`).
    fn of_rate(count: u64, period_ms: u64) -> Quota {
        let (count, ms) = (u128::from(count), u128::from(period_ms.max(1)));
        // q = count × 1000 × w / ms, in terms that cannot overflow.
        let (q, w) = if ms % 1000 == 0 {
            (count, ms / 1000)
        } else {
            let g = gcd(ms, count * 1000);
            (count * 1000 / g, ms / g)
        };
        Quota {
            q: u64::try_from(q).unwrap_or(u64::MAX),
            w: u64::try_from(w).unwrap_or(u64::MAX),
        }
    }
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Why a policy's words do not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParsePolicyError(String);

impl fmt::Display for ParsePolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParsePolicyError {}

/// `60`, `250ms`, `1m`, ... as the module reads them (a bare number is
/// seconds).
pub fn parse_duration(text: &str) -> Result<Duration, ParsePolicyError> {
    let bad = || ParsePolicyError(format!("bad duration '{text}'"));
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let per_unit: u64 = match unit.to_ascii_lowercase().as_str() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    let n: u64 = number.parse().map_err(|_| bad())?;
    match n.checked_mul(per_unit) {
        Some(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(bad()),
    }
}

impl FromStr for Policy {
    type Err = ParsePolicyError;

    fn from_str(text: &str) -> Result<Policy, ParsePolicyError> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let word = |i: usize| {
            words
                .get(i)
                .copied()
                .ok_or_else(|| ParsePolicyError(format!("policy '{text}' is too short")))
        };
        let count = |i: usize| {
            let w = word(i)?;
            w.parse::<u64>()
                .map_err(|_| ParsePolicyError(format!("bad count '{w}' in '{text}'")))
        };
        let duration = |i: usize| parse_duration(word(i)?);
        let name = word(0)?.to_ascii_uppercase();
        let (policy, used) = match name.as_str() {
            "GCRA" => {
                let mut g = Gcra::new(count(1)?, duration(2)?);
                let burst = words
                    .get(3)
                    .is_some_and(|w| w.eq_ignore_ascii_case("BURST"));
                if burst {
                    g = g.burst(count(4)?);
                }
                (Policy::Gcra(g), if burst { 5 } else { 3 })
            }
            "BUCKET" => (
                Policy::Bucket(Bucket::new(count(1)?, count(2)?, duration(3)?)),
                4,
            ),
            "SLIDING" => {
                let s = Sliding::new(count(1)?, duration(2)?);
                match words.get(3).map(|w| w.to_ascii_uppercase()).as_deref() {
                    Some("EXACT") => (Policy::Sliding(s), 4),
                    Some("APPROX") => (Policy::Sliding(s.approx()), 4),
                    Some("BUCKETS") => {
                        let n = u32::try_from(count(4)?)
                            .map_err(|_| ParsePolicyError(format!("bad BUCKETS in '{text}'")))?;
                        (Policy::Sliding(s.buckets(n)), 5)
                    }
                    _ => (Policy::Sliding(s), 3),
                }
            }
            "FIXED" => {
                let f = Fixed::new(count(1)?, duration(2)?);
                let aligned = words
                    .get(3)
                    .is_some_and(|w| w.eq_ignore_ascii_case("ALIGNED"));
                if aligned {
                    (Policy::Fixed(f.aligned()), 4)
                } else {
                    (Policy::Fixed(f), 3)
                }
            }
            "CONCURRENCY" => (
                Policy::Concurrency(Concurrency::new(count(1)?, duration(2)?)),
                3,
            ),
            other => return Err(ParsePolicyError(format!("unknown policy '{other}'"))),
        };
        match words.get(used) {
            Some(extra) => Err(ParsePolicyError(format!(
                "unexpected '{extra}' in '{text}'"
            ))),
            None => Ok(policy),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(p: &str) -> (u64, u64) {
        let q = p.parse::<Policy>().unwrap().quota().unwrap();
        (q.q, q.w)
    }

    #[test]
    fn the_quota_is_the_sustained_rate_in_whole_seconds() {
        assert_eq!(quota("GCRA 10 1s BURST 20"), (10, 1));
        assert_eq!(quota("gcra 100 1m"), (100, 60));
        assert_eq!(quota("BUCKET 100 10 1s"), (10, 1));
        assert_eq!(quota("SLIDING 1000 60 APPROX"), (1000, 60));
        assert_eq!(quota("FIXED 5 1h ALIGNED"), (5, 3600));
        assert_eq!(quota("GCRA 1 250ms"), (4, 1));
        assert_eq!(quota("GCRA 3 1500ms"), (2, 1));
        assert_eq!(quota("GCRA 10 1500ms"), (20, 3));
        assert_eq!(quota("SLIDING 1 300ms"), (10, 3));
        assert_eq!("CONCURRENCY 5 30s".parse::<Policy>().unwrap().quota(), None);
    }

    #[test]
    fn bad_words_are_errors() {
        for bad in [
            "",
            "GCRA 10",
            "GCRA x 1s",
            "GCRA 10 0s",
            "GCRA 10 1y",
            "LEAKY 1 1s",
            "GCRA 10 1s EXTRA",
            "SLIDING 10 1s BUCKETS",
        ] {
            assert!(bad.parse::<Policy>().is_err(), "{bad}");
        }
    }

    #[test]
    fn appended_words_are_the_words() {
        for text in [
            "GCRA 10 1000ms BURST 20",
            "BUCKET 100 10 1000ms",
            "SLIDING 5 60000ms BUCKETS 6",
            "FIXED 5 3600000ms ALIGNED",
            "CONCURRENCY 5 30000ms",
        ] {
            let policy: Policy = text.parse().unwrap();
            let mut appended = redis::cmd("X");
            policy.append_words(&mut appended, true);
            let mut listed = redis::cmd("X");
            listed.arg(policy.words());
            assert_eq!(appended.get_packed_command(), listed.get_packed_command());
        }
    }

    #[test]
    fn words_round_trip_and_durations_round_up_to_milliseconds() {
        for text in [
            "GCRA 10 1000ms BURST 20",
            "BUCKET 100 10 1000ms",
            "SLIDING 5 60000ms",
            "SLIDING 5 60000ms APPROX",
            "SLIDING 5 60000ms BUCKETS 6",
            "FIXED 5 3600000ms ALIGNED",
            "CONCURRENCY 5 30000ms",
        ] {
            assert_eq!(text.parse::<Policy>().unwrap().to_string(), text);
        }
        assert_eq!(duration_arg(Duration::from_micros(1)), "1ms");
        assert_eq!(duration_arg(Duration::from_micros(1001)), "2ms");
        assert_eq!(duration_arg(Duration::ZERO), "0ms");
    }
}
