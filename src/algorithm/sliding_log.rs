//! The sliding log (`RL.SLIDING ... EXACT`): every admitted unit of cost is
//! a timestamp; a request is admitted when the timestamps younger than
//! `window`, plus its cost, are at most `limit`. An entry exactly `window`
//! old has expired. So at most `limit` units are admitted in any interval of
//! length `window`, with no boundary effect at all.
//!
//! The log is read through [`Entries`] (oldest first, non-decreasing) so the
//! decision runs directly on the stored bytes in O(log limit) without
//! decoding them; the caller turns the [`LogChange`] into a small patch.

use super::{settled_without_state, Decision, RetryAfter};

/// The largest `limit` EXACT accepts: the log holds one timestamp per
/// admitted unit of cost, so this bounds a key's state (4 MB at 4 bytes a
/// stamp) and what one request can write.
pub const MAX_SLIDING_LOG_LIMIT: u64 = 1_000_000;

/// Timestamps in µs, oldest first, non-decreasing.
pub trait Entries {
    fn count(&self) -> usize;
    fn stamp(&self, i: usize) -> u64;
}

impl Entries for [u64] {
    fn count(&self) -> usize {
        self.len()
    }
    fn stamp(&self, i: usize) -> u64 {
        self.get(i).copied().unwrap_or(0)
    }
}

impl Entries for Vec<u64> {
    fn count(&self) -> usize {
        self.len()
    }
    fn stamp(&self, i: usize) -> u64 {
        self.get(i).copied().unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingLog {
    limit: u64,
    window_us: u64,
}

/// What an admitted request does to the log: drop the `expired` oldest
/// entries, then append `added` entries stamped `at_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogChange {
    pub expired: usize,
    pub added: u64,
    pub at_us: u64,
}

impl SlidingLog {
    /// `limit` in `1..=MAX_SLIDING_LOG_LIMIT` and `window_us` at least 1 (clamped).
    pub fn new(limit: u64, window_us: u64) -> SlidingLog {
        SlidingLog {
            limit: limit.clamp(1, MAX_SLIDING_LOG_LIMIT),
            window_us: window_us.max(1),
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn window_us(&self) -> u64 {
        self.window_us
    }

    /// Decides `cost` at `now_us`. A clock that went back behind the newest
    /// entry is treated as standing still at that entry, so the log stays
    /// sorted; waits are still measured from the real `now_us`.
    pub fn decide<E: Entries + ?Sized>(
        &self,
        log: &E,
        now_us: u64,
        cost: u64,
    ) -> (Decision, Option<LogChange>) {
        let w = self.window_us;
        let len = log.count();
        let newest = len.checked_sub(1).map(|i| log.stamp(i));
        let now = newest.map_or(now_us, |t| now_us.max(t));
        // Entries age with the clock: the expired ones are a prefix.
        let first = partition_point(log, len, |t| now.saturating_sub(t) >= w);
        let live = (len - first) as u64;
        let until_expired = |t: u64| t.saturating_add(w).saturating_sub(now_us);
        let reset_live = if live > 0 {
            newest.map_or(0, until_expired)
        } else {
            0
        };
        let mut decision = Decision {
            allowed: false,
            limit: self.limit,
            remaining: self.limit.saturating_sub(live),
            retry_after: RetryAfter::Never,
            reset_after_us: reset_live,
        };
        if settled_without_state(&mut decision, cost, self.limit) {
            return (decision, None);
        }
        if live + cost <= self.limit {
            decision.allowed = true;
            decision.retry_after = RetryAfter::NotNeeded;
            decision.remaining = self.limit - live - cost;
            decision.reset_after_us = until_expired(now);
            let change = LogChange {
                expired: first,
                added: cost,
                at_us: now,
            };
            return (decision, Some(change));
        }
        // The k-th oldest live entry must expire to make room for `cost`.
        let k = (live + cost - self.limit) as usize;
        let t = log.stamp(first + k - 1);
        decision.retry_after = RetryAfter::After(until_expired(t).max(1));
        (decision, None)
    }
}

/// The first index in `0..len` whose stamp does not satisfy `pred`
/// (`pred` holds for a prefix).
fn partition_point<E: Entries + ?Sized>(log: &E, len: usize, pred: impl Fn(u64) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(log.stamp(mid)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    fn step(l: &SlidingLog, log: &mut Vec<u64>, now: u64, cost: u64) -> Decision {
        let (d, change) = l.decide(log.as_slice(), now, cost);
        if let Some(c) = change {
            log.drain(..c.expired);
            log.extend(std::iter::repeat_n(c.at_us, c.added as usize));
        }
        d
    }

    #[test]
    fn boundary_is_exact_and_retry_waits_for_the_oldest_entries() {
        let l = SlidingLog::new(3, 60 * S);
        let mut log = Vec::new();
        assert!(step(&l, &mut log, 10 * S, 1).allowed);
        assert!(step(&l, &mut log, 20 * S, 1).allowed);
        let d = step(&l, &mut log, 30 * S, 1);
        assert_eq!(
            (d.allowed, d.remaining, d.reset_after_us),
            (true, 0, 60 * S)
        );
        let d = step(&l, &mut log, 40 * S, 2);
        // Two entries must go: the second oldest (20 s) expires at 80 s.
        assert_eq!(d.retry_after, RetryAfter::After(40 * S));
        assert_eq!(d.reset_after_us, 50 * S);
        // Exactly one window after the first entry, it has expired.
        let d = step(&l, &mut log, 70 * S, 1);
        assert!(d.allowed);
        assert_eq!(log, vec![20 * S, 30 * S, 70 * S]);
        assert_eq!(step(&l, &mut log, 70 * S, 4).retry_after, RetryAfter::Never);
        let d = step(&l, &mut log, 70 * S, 0);
        assert_eq!((d.allowed, d.remaining), (true, 0));
    }
}
