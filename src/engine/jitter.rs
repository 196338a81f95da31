//! Jittered waits (`JITTER`, or `ratelimit.jitter 1` for every request):
//! a denial's `retry_after` is spread over `[wait, wait + spread)`, never
//! earlier than the true wait, so that clients denied together come back
//! at the rate the key admits rather than all at once.
//!
//! `spread` is the time the key needs to admit, one per emission interval
//! `I` of the limit that blocks ([`Policy::interval`]), every client it
//! denied recently: each key's *herd* is a schedule of its denials, as
//! GCRA schedules admissions: a denial at `now` moves its end to
//! `max(end, now) + I`, and `spread = end - now` (at most
//! `ratelimit.jitter-max-herd` intervals). A lone denial is spread over
//! one interval; n clients denied together over n intervals, where the
//! key admits n of them. The offset within the spread is a hash of the
//! key, the cost, the clock and the herd: the same requests at the same
//! instants are told the same waits (under `clock manual`, exactly), and
//! no source a test cannot repeat is read.
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
    let RetryAfter::After(_) = outcome.retry_after else {
        return;
    };
    let blocking = outcome.blocked_by.and_then(|i| policies.get(i));
    let Some(interval) = blocking.and_then(Policy::interval) else {
        return;
    };
    let hash = hash_of(key);
    let spread = {
        let mut herds = HERDS.lock().unwrap_or_else(|e| e.into_inner());
        let herds = herds.get_or_insert_with(|| vec![Herd::default(); SLOTS].into());
        herds
            .get_mut((hash % SLOTS as u64) as usize)
            .map_or(interval, |herd| herd.deny(hash, now, interval))
    };
    let seed = hash_of(&(hash, cost, now.as_u64(), spread.as_u64()));
    let offset = Micros::new(seed % spread.as_u64().max(1));
    later(&mut outcome.retry_after, offset);
    for d in &mut outcome.decisions {
        if !d.allowed {
            later(&mut d.retry_after, offset);
        }
    }
}

impl Herd {
    /// A denial of this slot's key (`key`) at `now`: the herd's spread
    /// after it.
    fn deny(&mut self, key: u64, now: Micros, interval: Micros) -> Micros {
        if self.key != key {
            *self = Herd { key, end: now };
        }
        let most = Micros::new(
            interval
                .as_u64()
                .saturating_mul(bounds::JITTER_MAX_HERD.get()),
        );
        let end = self.end.max(now).saturating_add(interval);
        self.end = end.min(now.saturating_add(most));
        self.end.saturating_sub(now).max(Micros::new(1))
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

    #[test]
    fn a_herd_spreads_over_an_interval_per_client_denied_and_drains_at_the_rate() {
        let mut herd = Herd::default();
        let now = Micros::new(1_000_000);
        let spreads: Vec<u64> = (0..5).map(|_| herd.deny(7, now, I).as_u64()).collect();
        assert_eq!(spreads, [10_000, 20_000, 30_000, 40_000, 50_000]);
        // Two intervals later two of them are gone.
        let later = now.saturating_add(Micros::new(20_000));
        assert_eq!(herd.deny(7, later, I), Micros::new(40_000));
        // Long after, a lone denial again.
        assert_eq!(herd.deny(7, Micros::new(9_000_000), I), I);
        // Another key in the slot starts afresh.
        assert_eq!(herd.deny(8, Micros::new(9_000_000), I), I);
    }

    #[test]
    fn a_herd_is_bounded() {
        bounds::JITTER_MAX_HERD.set(3).unwrap();
        let mut herd = Herd::default();
        let spreads: Vec<u64> = (0..5)
            .map(|_| herd.deny(1, Micros::new(5), I).as_u64())
            .collect();
        bounds::JITTER_MAX_HERD.reset();
        assert_eq!(spreads, [10_000, 20_000, 30_000, 30_000, 30_000]);
    }
}
