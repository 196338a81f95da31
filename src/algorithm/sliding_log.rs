//! The sliding log (`RL.SLIDING ... EXACT`): every admitted unit of cost is
//! a timestamp; a request is admitted when the timestamps younger than
//! `window`, plus its cost, are at most `limit`. An entry exactly `window`
//! old has expired. So at most `limit` units are admitted in any interval of
//! length `window`, with no boundary effect at all.
//!
//! The log is read through [`Entries`] (oldest first, non-decreasing) so the
//! decision runs directly on the stored bytes in O(log limit) without
//! decoding them; the caller turns the [`LogChange`] into a small patch.

use super::{settled_without_state, Decision, Micros, RetryAfter};

/// The largest `limit` EXACT accepts: the log holds one timestamp per
/// admitted unit of cost, so this bounds a key's state (4 MB at 4 bytes a
/// stamp) and what one request can write.
pub const MAX_SLIDING_LOG_LIMIT: u64 = 1_000_000;

/// Timestamps, oldest first, non-decreasing.
pub trait Entries {
    fn count(&self) -> usize;
    fn stamp(&self, i: usize) -> Micros;
}

impl Entries for [Micros] {
    fn count(&self) -> usize {
        self.len()
    }
    fn stamp(&self, i: usize) -> Micros {
        self.get(i).copied().unwrap_or_default()
    }
}

impl Entries for Vec<Micros> {
    fn count(&self) -> usize {
        self.len()
    }
    fn stamp(&self, i: usize) -> Micros {
        self.get(i).copied().unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingLog {
    limit: u64,
    window: Micros,
}

/// What an admitted request does to the log: drop the `expired` oldest
/// entries, then append `added` entries stamped `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogChange {
    pub expired: usize,
    pub added: u64,
    pub at: Micros,
}

impl SlidingLog {
    /// `limit` in `1..=MAX_SLIDING_LOG_LIMIT` and `window` at least 1 µs
    /// (clamped).
    pub fn new(limit: u64, window: Micros) -> SlidingLog {
        SlidingLog {
            limit: limit.clamp(1, MAX_SLIDING_LOG_LIMIT),
            window: window.max(Micros::new(1)),
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn window(&self) -> Micros {
        self.window
    }

    /// Decides `cost` at `now`. A clock that went back behind the newest
    /// entry is treated as standing still at that entry, so the log stays
    /// sorted; waits are still measured from the real `now`.
    pub fn decide<E: Entries + ?Sized>(
        &self,
        log: &E,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<LogChange>) {
        let w = self.window;
        let len = log.count();
        let newest = len.checked_sub(1).map(|i| log.stamp(i));
        // The log's time: `now`, or the newest entry if the clock went back.
        let log_now = newest.map_or(now, |t| now.max(t));
        // Entries age with the clock: the expired ones are a prefix.
        let first = partition_point(log, len, |t| log_now.saturating_sub(t) >= w);
        let live = (len - first) as u64;
        let until_expired = |t: Micros| t.saturating_add(w).saturating_sub(now);
        let reset_live = if live > 0 {
            newest.map_or(Micros::ZERO, until_expired)
        } else {
            Micros::ZERO
        };
        let mut decision = Decision {
            allowed: false,
            limit: self.limit,
            remaining: self.limit.saturating_sub(live),
            retry_after: RetryAfter::Never,
            reset_after: reset_live,
        };
        if settled_without_state(&mut decision, cost, self.limit) {
            return (decision, None);
        }
        if live + cost <= self.limit {
            decision.allowed = true;
            decision.retry_after = RetryAfter::NotNeeded;
            decision.remaining = self.limit - live - cost;
            decision.reset_after = until_expired(log_now);
            let change = LogChange {
                expired: first,
                added: cost,
                at: log_now,
            };
            return (decision, Some(change));
        }
        // The k-th oldest live entry must expire to make room for `cost`.
        let k = (live + cost - self.limit) as usize;
        let t = log.stamp(first + k - 1);
        decision.retry_after = RetryAfter::After(until_expired(t).max(Micros::new(1)));
        (decision, None)
    }
}

/// What a refund does to the log: drop the `expired` oldest entries and the
/// `removed` newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRefund {
    pub expired: usize,
    pub removed: usize,
}

impl SlidingLog {
    /// The index of the oldest live entry at `now`, and the log's time.
    fn live_from<E: Entries + ?Sized>(&self, log: &E, now: Micros) -> (usize, Micros) {
        let len = log.count();
        let newest = len.checked_sub(1).map(|i| log.stamp(i));
        let log_now = newest.map_or(now, |t| now.max(t));
        let w = self.window;
        let first = partition_point(log, len, |t| log_now.saturating_sub(t) >= w);
        (first, log_now)
    }

    /// Gives back `n` units: removes the `n` newest live entries. `None`
    /// when nothing changes.
    pub fn refund<E: Entries + ?Sized>(&self, log: &E, now: Micros, n: u64) -> Option<LogRefund> {
        let (first, _) = self.live_from(log, now);
        let live = log.count() - first;
        let removed = usize::try_from(n).unwrap_or(usize::MAX).min(live);
        (removed > 0).then_some(LogRefund {
            expired: first,
            removed,
        })
    }

    /// Charges `cost` whether or not it fits. The log holds at most `limit`
    /// entries: the caller keeps the newest `limit` of the result, which
    /// decides every later request exactly as the whole log would (a
    /// request needs the `limit`-th newest entry, or a newer one, to have
    /// expired).
    pub fn force<E: Entries + ?Sized>(&self, log: &E, now: Micros, cost: u64) -> LogChange {
        let (first, log_now) = self.live_from(log, now);
        LogChange {
            expired: first,
            added: cost.min(self.limit),
            at: log_now,
        }
    }
}

/// The first index in `0..len` whose stamp does not satisfy `pred`
/// (`pred` holds for a prefix).
fn partition_point<E: Entries + ?Sized>(
    log: &E,
    len: usize,
    pred: impl Fn(Micros) -> bool,
) -> usize {
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

    fn s(n: u64) -> Micros {
        Micros::from_secs(n)
    }

    fn step(l: &SlidingLog, log: &mut Vec<Micros>, now: Micros, cost: u64) -> Decision {
        let (d, change) = l.decide(log.as_slice(), now, cost);
        if let Some(c) = change {
            log.drain(..c.expired);
            log.extend(std::iter::repeat_n(c.at, c.added as usize));
        }
        d
    }

    #[test]
    fn boundary_is_exact_and_retry_waits_for_the_oldest_entries() {
        let l = SlidingLog::new(3, s(60));
        let mut log = Vec::new();
        assert!(step(&l, &mut log, s(10), 1).allowed);
        assert!(step(&l, &mut log, s(20), 1).allowed);
        let d = step(&l, &mut log, s(30), 1);
        assert_eq!((d.allowed, d.remaining, d.reset_after), (true, 0, s(60)));
        let d = step(&l, &mut log, s(40), 2);
        // Two entries must go: the second oldest (20 s) expires at 80 s.
        assert_eq!(d.retry_after, RetryAfter::After(s(40)));
        assert_eq!(d.reset_after, s(50));
        // Exactly one window after the first entry, it has expired.
        let d = step(&l, &mut log, s(70), 1);
        assert!(d.allowed);
        assert_eq!(log, vec![s(20), s(30), s(70)]);
        assert_eq!(step(&l, &mut log, s(70), 4).retry_after, RetryAfter::Never);
        let d = step(&l, &mut log, s(70), 0);
        assert_eq!((d.allowed, d.remaining), (true, 0));
    }
}
