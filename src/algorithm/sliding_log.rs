//! The sliding log (`RL.SLIDING ... EXACT`): every admitted unit of cost is
//! a timestamp; a request is admitted when the timestamps younger than
//! `window`, plus its cost, are at most `limit`. An entry exactly `window`
//! old has expired. So at most `limit` units are admitted in any interval of
//! length `window`, with no boundary effect at all.
//!
//! The log is read through [`Entries`] (oldest first, non-decreasing) so the
//! decision runs directly on the stored bytes in O(log n) without decoding
//! them; every change is a [`LogEdit`] of the log's two ends, which the
//! caller turns into a patch of the entries it adds (and a header).

use super::{not_before, settled_without_state, Decision, Micros, RetryAfter};

/// The largest `limit` EXACT can ever take (the largest value of the
/// operator's `ratelimit.max-log-entries`, which bounds it in force).
pub const MAX_SLIDING_LOG_LIMIT: u64 = 10_000_000;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingLog {
    limit: u64,
    window: Micros,
}

/// A change to the log, touching only its ends, applied in this order:
/// drop the `expired` oldest entries, keep at most the newest `keep`, drop
/// the `removed` newest, append `added` entries stamped `at`, and keep at
/// most the newest `keep` again. `keep` is the limit of the call that
/// writes: a log never holds more than that limit after its write, and
/// what it holds beyond a later, lower limit decides nothing a shorter log
/// would not (a request needs the `limit`-th newest entry, or a newer one,
/// to have expired).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEdit {
    pub expired: usize,
    pub removed: usize,
    pub added: usize,
    pub at: Micros,
    pub keep: usize,
}

/// A log of `len` entries after a [`LogEdit`]: the old entries
/// `from..from + kept`, then `added` entries stamped with the edit's `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogAfter {
    pub from: usize,
    pub kept: usize,
    pub added: usize,
}

impl LogEdit {
    /// Where the entries of a log of `len` entries end up.
    pub fn after(&self, len: usize) -> LogAfter {
        let expired = self.expired.min(len);
        let live = len - expired;
        let over = live.saturating_sub(self.keep);
        let base = live - over - self.removed.min(live - over);
        let total = base.saturating_add(self.added);
        let trim = total.saturating_sub(self.keep);
        let trim_base = trim.min(base);
        LogAfter {
            from: expired + over + trim_base,
            kept: base - trim_base,
            added: self.added - (trim - trim_base),
        }
    }
}

impl LogAfter {
    pub fn len(&self) -> usize {
        self.kept + self.added
    }
}

/// A log as it reads after an edit, without writing it: what the decision
/// reported after a refund or a forced charge is computed on, in O(log n).
pub struct EditedLog<'a, E: ?Sized> {
    base: &'a E,
    after: LogAfter,
    at: Micros,
}

impl<'a, E: Entries + ?Sized> EditedLog<'a, E> {
    pub fn new(base: &'a E, edit: &LogEdit) -> EditedLog<'a, E> {
        EditedLog {
            base,
            after: edit.after(base.count()),
            at: edit.at,
        }
    }
}

impl<E: Entries + ?Sized> Entries for EditedLog<'_, E> {
    fn count(&self) -> usize {
        self.after.len()
    }
    fn stamp(&self, i: usize) -> Micros {
        if i < self.after.kept {
            self.base.stamp(self.after.from + i)
        } else {
            self.at
        }
    }
}

impl SlidingLog {
    /// The time in which it admits one unit on average.
    pub fn interval(&self) -> Micros {
        super::per_unit(self.window, self.limit)
    }

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

    fn keep(&self) -> usize {
        self.limit as usize
    }

    /// Decides `cost` at `now`. A log whose newest entry is after `now`
    /// (a reservation's, stamped with its start, or a clock that stepped
    /// back) no longer holds the entries that expired by then: it admits
    /// nothing before that entry ([`not_before`]). Entries beyond `limit`
    /// (a log written under a higher limit) count as live ones do: such a
    /// log admits nothing until enough of them expire.
    pub fn decide<E: Entries + ?Sized>(
        &self,
        log: &E,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<LogEdit>) {
        let (first, log_now) = self.live_from(log, now);
        if log_now > now {
            let (d, _) = self.decide_from(log, first, log_now, log_now, cost);
            return (not_before(d, log_now.saturating_sub(now), cost), None);
        }
        self.decide_from(log, first, log_now, now, cost)
    }

    /// [`SlidingLog::decide`] at `now` with `first` and `log_now` from
    /// [`SlidingLog::live_from`].
    fn decide_from<E: Entries + ?Sized>(
        &self,
        log: &E,
        first: usize,
        log_now: Micros,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<LogEdit>) {
        let w = self.window;
        let len = log.count();
        let live = (len - first) as u64;
        let until_expired = |t: Micros| t.saturating_add(w).saturating_sub(now);
        let reset_live = if live > 0 {
            until_expired(log.stamp(len - 1))
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
            let edit = LogEdit {
                expired: first,
                removed: 0,
                added: cost as usize,
                at: log_now,
                keep: self.keep(),
            };
            return (decision, Some(edit));
        }
        // The k-th oldest live entry must expire to make room for `cost`.
        let k = (live + cost - self.limit) as usize;
        let t = log.stamp(first + k - 1);
        decision.retry_after = RetryAfter::After(until_expired(t).max(Micros::new(1)));
        (decision, None)
    }

    /// The index of the oldest live entry at `now`, and the log's time:
    /// `now`, or the newest entry's if the clock went back behind it.
    fn live_from<E: Entries + ?Sized>(&self, log: &E, now: Micros) -> (usize, Micros) {
        let len = log.count();
        let newest = len.checked_sub(1).map(|i| log.stamp(i));
        let log_now = newest.map_or(now, |t| now.max(t));
        let w = self.window;
        // Entries age with the clock: the expired ones are a prefix.
        let first = partition_point(log, len, |t| log_now.saturating_sub(t) >= w);
        (first, log_now)
    }

    /// Gives back `n` units: removes the `n` newest of the live entries
    /// this limit counts (the newest `limit`). `None` when nothing changes.
    pub fn refund<E: Entries + ?Sized>(&self, log: &E, now: Micros, n: u64) -> Option<LogEdit> {
        let (first, log_now) = self.live_from(log, now);
        let counted = (log.count() - first).min(self.keep());
        let removed = usize::try_from(n).unwrap_or(usize::MAX).min(counted);
        (removed > 0).then_some(LogEdit {
            expired: first,
            removed,
            added: 0,
            at: log_now,
            keep: self.keep(),
        })
    }

    /// Charges `cost` whether or not it fits. The log keeps the newest
    /// `limit` entries of the result, which decide every later request
    /// exactly as the whole log would.
    pub fn force<E: Entries + ?Sized>(&self, log: &E, now: Micros, cost: u64) -> LogEdit {
        let (first, log_now) = self.live_from(log, now);
        LogEdit {
            expired: first,
            removed: 0,
            added: cost.min(self.limit) as usize,
            at: log_now,
            keep: self.keep(),
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

/// Applies `edit` to a plain list of entries: the meaning of a [`LogEdit`],
/// for tests of the stored layout.
#[cfg(test)]
pub fn apply(edit: &LogEdit, log: &mut Vec<Micros>) {
    let a = edit.after(log.len());
    log.drain(..a.from);
    log.truncate(a.kept);
    log.extend(std::iter::repeat_n(edit.at, a.added));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Micros {
        Micros::from_secs(n)
    }

    fn step(l: &SlidingLog, log: &mut Vec<Micros>, now: Micros, cost: u64) -> Decision {
        let (d, edit) = l.decide(log.as_slice(), now, cost);
        if let Some(e) = edit {
            apply(&e, log);
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
