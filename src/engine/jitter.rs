//! Jittered waits (`JITTER`, or `ratelimit.jitter 1` for every request):
//! a denial's `retry_after` is spread over `[wait, wait + spread)`, never
//! earlier than the true wait, so that clients denied together come back
//! at the rate the key admits rather than all at once.
//!
//! Each key's denied clients form a *herd*: a schedule of their returns,
//! one emission interval `I` of the limit that blocks
//! ([`Policy::interval`]) each, as GCRA schedules admissions. A denial
//! whose true wait ends at `at = now + wait` takes the herd's next
//! interval, `[max(end, at), max(end, at) + I)`, and the herd's end moves
//! to the end of that interval; its `spread` runs from `at` to there (at
//! most `ratelimit.jitter-max-herd` intervals). Its wait is a point drawn
//! uniformly in its interval: n clients denied together are spread over
//! n intervals, one in each, so they come back one per interval, at the
//! rate the key admits, and over the herd the returns are uniform over
//! `[wait, wait + spread)`. (A point drawn over the whole spread instead
//! lands two clients in one interval as often as chance says, and the
//! second is denied again.) The point is a hash of the key, the cost, the
//! clock and the interval: the same requests at the same instants are
//! told the same waits (under `clock manual`, exactly), and no source a
//! test cannot repeat is read.
//!
//! The herds are kept in memory only, in a fixed table of [`SLOTS`] (a key
//! takes the slot its hash names; another key there starts afresh):
//! denials write nothing to keys, replicas or the AOF, as without it.

use super::Outcome;
use crate::algorithm::{Micros, RetryAfter};
use crate::bounds;
use crate::policy::Policy;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// The herds kept at most (16 bytes each).
pub const SLOTS: usize = 4096;

/// One key's herd: its key's hash and the end of its schedule.
#[derive(Debug, Clone, Copy, Default)]
struct Herd {
    key: u64,
    end: Micros,
}

/// The herds, allocated on the first jittered denial.
static HERDS: Mutex<Option<Box<[Herd]>>> = Mutex::new(None);

/// Whether a denial of a request that asked `jitter` is spread: it asked,
/// or the configuration spreads every one.
pub fn wanted(jitter: bool) -> bool {
    jitter || bounds::JITTER.get() != 0
}

/// Spreads the waits of `outcome`, a denial of `cost` on `key` (the key of
/// the limit that blocked, under `policies`) at `now`.
pub fn spread<K: Hash>(
    outcome: &mut Outcome,
    key: &K,
    policies: &[Policy],
    now: Micros,
    cost: u64,
) {
    if let RetryAfter::After(_) = outcome.retry_after {
        let mut herds = HERDS.lock().unwrap_or_else(|e| e.into_inner());
        let herds = herds.get_or_insert_with(|| vec![Herd::default(); SLOTS].into());
        let most = bounds::JITTER_MAX_HERD.get();
        spread_in(herds, most, outcome, key, policies, now, cost);
    }
}

/// [`spread`] with the herds `herds`, each at most `most` intervals.
fn spread_in<K: Hash>(
    herds: &mut [Herd],
    most: u64,
    outcome: &mut Outcome,
    key: &K,
    policies: &[Policy],
    now: Micros,
    cost: u64,
) {
    let RetryAfter::After(wait) = outcome.retry_after else {
        return;
    };
    let blocking = outcome.blocked_by.and_then(|i| policies.get(i));
    let Some(interval) = blocking.and_then(Policy::interval) else {
        return;
    };
    let hash = hash_of(key);
    let at = now.saturating_add(wait);
    let slot = (hash % herds.len().max(1) as u64) as usize;
    let ahead = herds
        .get_mut(slot)
        .map_or(Micros::ZERO, |herd| herd.deny(hash, at, interval, most));
    let seed = hash_of(&(hash, cost, now.as_u64(), ahead.as_u64()));
    let offset = ahead.saturating_add(Micros::new(seed % interval.as_u64().max(1)));
    later(&mut outcome.retry_after, offset);
    for d in &mut outcome.decisions {
        if !d.allowed {
            later(&mut d.retry_after, offset);
        }
    }
}

impl Herd {
    /// A denial of this slot's key (`key`) whose true wait ends at `at`,
    /// in a herd of at most `most` intervals: the start of the interval it
    /// takes, as a time after `at`.
    fn deny(&mut self, key: u64, at: Micros, interval: Micros, most: u64) -> Micros {
        if self.key != key {
            *self = Herd { key, end: at };
        }
        let most = interval.as_u64().saturating_mul(most.saturating_sub(1));
        let ahead = self.end.saturating_sub(at).min(Micros::new(most));
        self.end = at.saturating_add(ahead).saturating_add(interval);
        ahead
    }
}

fn later(retry: &mut RetryAfter, by: Micros) {
    if let RetryAfter::After(wait) = retry {
        *wait = wait.saturating_add(by);
    }
}

/// A hash the same in every run (SipHash with fixed keys).
fn hash_of<T: Hash>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: Micros = Micros::new(10_000);
    const MOST: u64 = 10_000;

    #[test]
    fn a_herd_gives_each_client_denied_the_next_interval_and_drains_at_the_rate() {
        let mut herd = Herd::default();
        let at = Micros::new(1_000_000);
        let starts: Vec<u64> = (0..5).map(|_| herd.deny(7, at, I, MOST).as_u64()).collect();
        assert_eq!(starts, [0, 10_000, 20_000, 30_000, 40_000]);
        // Two intervals later two of them are due: the next is 3 ahead.
        let later = at.saturating_add(Micros::new(20_000));
        assert_eq!(herd.deny(7, later, I, MOST), Micros::new(30_000));
        // Long after, a lone denial again.
        let again = Micros::new(9_000_000);
        assert_eq!(herd.deny(7, again, I, MOST), Micros::ZERO);
        // Another key in the slot starts afresh.
        let two = (herd.deny(8, again, I, MOST), herd.deny(8, again, I, MOST));
        assert_eq!(two, (Micros::ZERO, I));
    }

    #[test]
    fn a_herd_is_bounded() {
        let mut herd = Herd::default();
        let starts: Vec<u64> = (0..5)
            .map(|_| herd.deny(1, Micros::new(5), I, 3).as_u64())
            .collect();
        assert_eq!(starts, [0, 10_000, 20_000, 20_000, 20_000]);
    }
}

#[cfg(test)]
mod herd_simulation;
