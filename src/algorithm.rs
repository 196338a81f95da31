//! The pure core: every algorithm is plain Rust with the time passed in.
//!
//! Nothing here knows about Redis. Every time is a [`Micros`] (an instant
//! since the Unix epoch, or a duration); all arithmetic is exact integer
//! arithmetic (`u128` where a product could overflow `u64`), so a decision
//! never depends on rounding.

pub mod cell;
pub mod concurrency;
pub mod fixed_window;
pub mod gcra;
pub mod limits;
pub mod schedule;
pub mod share;
pub mod sketch;
pub mod sliding_approx;
pub mod sliding_log;
pub mod sliding_subwindows;
pub mod token_bucket;

mod time;
pub use time::Micros;

/// `span` shared out over `units`, rounded up: the time in which a limit
/// of `units` per `span` admits one on average.
pub fn per_unit(span: Micros, units: u64) -> Micros {
    Micros::new(span.as_u64().div_ceil(units.max(1)))
}

/// The longest time a limiter may need to return to its full state
/// (`burst × period / limit` for GCRA, `capacity × period / refill` for a
/// bucket): 1,000 years. It bounds every stored time and every TTL.
pub const MAX_HORIZON: Micros = Micros::from_secs(1_000 * 365 * 86_400);

/// When a denied request could be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// The request was admitted: there is nothing to wait for.
    NotNeeded,
    /// The same request is admitted after this wait.
    After(Micros),
    /// The same request can never be admitted (its cost exceeds the limit).
    Never,
}

/// The outcome of one decision, its times in [`Micros`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// The most that can be admitted at once (burst, capacity, window limit).
    pub limit: u64,
    /// How many requests of cost 1 would be admitted right now, after this one.
    pub remaining: u64,
    pub retry_after: RetryAfter,
    /// Time until the limiter is back to its full, untouched state (rounded up).
    pub reset_after: Micros,
}

/// A decision taken at `start`, the first instant a window limiter's state
/// describes (a window, a sub-window or a log entry that begins `ahead`
/// from now: a reservation charged where its admission starts, or a clock
/// that stepped back), as the answer now. Such a state no longer holds the
/// count of the time before `start`, so it admits nothing before then:
/// a request it would admit at `start` waits until `start`, one it would
/// deny waits `ahead` longer; nothing remains now, and the reset is
/// counted from now. A look (cost 0) stays admitted.
pub(crate) fn not_before(mut d: Decision, ahead: Micros, cost: u64) -> Decision {
    d.reset_after = d.reset_after.saturating_add(ahead);
    d.remaining = 0;
    if cost == 0 {
        return d;
    }
    d.retry_after = match d.retry_after {
        RetryAfter::NotNeeded => RetryAfter::After(ahead),
        RetryAfter::After(wait) => RetryAfter::After(wait.saturating_add(ahead)),
        RetryAfter::Never => RetryAfter::Never,
    };
    d.allowed = false;
    d
}

/// Settles the requests that need no look at the state, given a denied
/// `decision` already filled in from it: cost 0 is always admitted (and
/// changes nothing); a cost above `limit` can never be. True when settled.
pub(crate) fn settled_without_state(decision: &mut Decision, cost: u64, limit: u64) -> bool {
    if cost == 0 {
        decision.allowed = true;
        decision.retry_after = RetryAfter::NotNeeded;
        return true;
    }
    cost > limit
}

/// `a / b` for `b > 0`: in 64-bit arithmetic when both fit, as they do
/// but for times and limits near the bounds (a 128-bit division is a call
/// several times as long).
#[inline]
pub(crate) fn div_u128(a: u128, b: u128) -> u128 {
    match (u64::try_from(a), u64::try_from(b)) {
        (Ok(a), Ok(b)) => u128::from(a / b),
        _ => a / b,
    }
}

/// `ceil(a / b)` for `b > 0`.
#[inline]
pub(crate) fn div_ceil_u128(a: u128, b: u128) -> u128 {
    let q = div_u128(a, b);
    // q * b <= a: no overflow.
    q + u128::from(q * b != a)
}

/// Saturating narrowing from the wide arithmetic used inside decisions.
pub(crate) fn clamp_u64(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

/// A time from the wide arithmetic used inside decisions, saturating.
pub(crate) fn clamp_micros(us: u128) -> Micros {
    Micros::new(clamp_u64(us))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_helpers() {
        assert_eq!(div_ceil_u128(7, 7), 1);
        assert_eq!(div_ceil_u128(8, 7), 2);
        assert_eq!(clamp_u64(u128::MAX), u64::MAX);
        assert_eq!(clamp_micros(u128::MAX), Micros::MAX);
        assert_eq!(MAX_HORIZON.as_u64(), 1_000 * 365 * 86_400 * 1_000_000);
    }
}
