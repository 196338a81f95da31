//! Denials remembered locally: after the store denies a request on a limit
//! with `retry_after` r, a request on the same key and limit costing at
//! least as much is denied without a round trip until r has passed. It
//! only ever denies, and only what the store denied for that long, so it
//! cannot admit anything the store would not. It can deny a little longer
//! than the store would: the store's waits are rounded up to whole
//! milliseconds and the wait is counted from when the reply arrived. A
//! refund or `DEL` in the meantime can also make it deny a request the
//! store would have admitted.
//!
//! **Paced denials.** For a limit that regains one unit every `interval`
//! (GCRA, token bucket: [`crate::Policy::unit_interval`]), a denial says
//! more: the key holds nothing now, one unit comes after `retry_after`,
//! then one per `interval`. After n admissions of this process since then
//! the key holds at most `accrued − n` units, whatever others did, so a
//! request before `retry_after + n × interval` is denied locally: a key offered
//! more than its limit costs about one store command per admission, not
//! one per admission and one per denial.
//!
//! Memory is bounded by `capacity` entries; when full, the least recently
//! used gives way. Every operation is O(1) (an LRU map, the `lru` crate).

use crate::reply::Decision;
use lru::LruCache;
use std::collections::hash_map::RandomState;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A key and its limit's words (the same key under another limit is
/// another entry).
type Slot = (String, String);

/// The entries, the least recently used first to give way. Keys come from
/// requests: hashed with std's keyed SipHash, as a `HashMap` would.
type Entries = LruCache<Slot, Entry, RandomState>;

struct Entry {
    until: Instant,
    /// Paced: the time one unit takes. Every entry outlives `until` (by
    /// [`GRACE`], or one interval if longer): an admission can move a
    /// paced one on, and the key counts as recently denied.
    interval: Option<Duration>,
    cost: u64,
    decision: Decision,
}

/// How long an entry outlives its denial, waiting for an admission to move
/// it on (a stalled process must not lose it), and during which the key
/// counts as recently denied.
const GRACE: Duration = Duration::from_secs(1);

impl Entry {
    /// When the entry is of no more use.
    fn expiry(&self) -> Instant {
        let grace = self.interval.map_or(GRACE, |i| i.max(GRACE));
        self.until.checked_add(grace).unwrap_or(self.until)
    }
}

/// A bounded cache of denials, shared by every request of a process: the
/// layer's ([`crate::http::Builder::deny_cache`]), which
/// [`crate::http::RedisRateLimitLayer::deny_cache`] shows for its counts.
#[non_exhaustive]
pub struct DenyCache {
    entries: Mutex<Entries>,
    saved: AtomicU64,
}

impl DenyCache {
    /// Remembers up to `capacity` denials at once.
    pub(crate) fn new(capacity: usize) -> DenyCache {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        DenyCache {
            entries: Mutex::new(LruCache::with_hasher(capacity, RandomState::new())),
            saved: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A panic elsewhere leaves the entries consistent (each change is
        // whole), so a poisoned lock is still usable.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The store's denial of `cost` on `key` under `limit` (its words),
    /// seen at `now`. Denials without a wait (never admissible) are not
    /// kept: the store's answer is cheap to repeat and its words matter.
    #[cfg(test)]
    pub(crate) fn record(
        &self,
        key: &str,
        limit: &str,
        cost: u64,
        decision: &Decision,
        now: Instant,
    ) {
        self.record_paced(key, limit, cost, decision, now, None);
    }

    /// The same for a limit that regains one unit every `interval` (see
    /// the module's documentation): later admissions of this process
    /// ([`DenyCache::admitted`]) move the denial on by `interval` each.
    pub(crate) fn record_paced(
        &self,
        key: &str,
        limit: &str,
        cost: u64,
        decision: &Decision,
        now: Instant,
        interval: Option<Duration>,
    ) {
        let Some(wait) = decision
            .retry_after
            .filter(|w| !decision.allowed && !w.is_zero())
        else {
            return;
        };
        let Some(until) = now.checked_add(wait) else {
            return;
        };
        let entry = Entry {
            until,
            // Paced only from a denial of one unit: its wait is the next
            // unit's.
            interval: interval.filter(|i| cost == 1 && !i.is_zero()),
            cost,
            decision: decision.clone(),
        };
        // When full, the least recently used entry gives way.
        self.lock().put((key.to_string(), limit.to_string()), entry);
    }

    /// This process's request of `cost` on `key` under `limit` was admitted
    /// by the store: a paced denial moves on by `cost` units.
    pub(crate) fn admitted(&self, key: &str, limit: &str, cost: u64, now: Instant) {
        let mut entries = self.lock();
        let slot: Slot = (key.to_string(), limit.to_string());
        let Some(entry) = entries.peek_mut(&slot) else {
            return;
        };
        if entry.expiry() <= now {
            entries.pop(&slot);
            return;
        }
        let Some(interval) = entry.interval else {
            return;
        };
        let step = interval.saturating_mul(u32::try_from(cost).unwrap_or(u32::MAX));
        if let Some(until) = entry.until.checked_add(step) {
            entry.until = until;
        }
    }

    /// A remembered denial of `cost` on `key` under `limit` still in force
    /// at `now` (its `retry_after` what is left of the wait), counted as a
    /// round trip saved.
    pub(crate) fn check(
        &self,
        key: &str,
        limit: &str,
        cost: u64,
        now: Instant,
    ) -> Option<Decision> {
        let mut entries = self.lock();
        let slot: Slot = (key.to_string(), limit.to_string());
        let entry = entries.get(&slot)?;
        if entry.until <= now {
            if entry.expiry() <= now {
                entries.pop(&slot);
            }
            return None;
        }
        // A smaller request may fit sooner: only as large or larger ones
        // are certain to be denied.
        if cost < entry.cost {
            return None;
        }
        let mut decision = entry.decision.clone();
        decision.retry_after = Some(entry.until - now);
        self.saved.fetch_add(1, Ordering::Relaxed);
        Some(decision)
    }

    /// Whether `key` under `limit` was denied lately (its denial in force,
    /// or ended less than a second ago): a key on which concurrent
    /// requests are worth coalescing.
    pub(crate) fn recently_denied(&self, key: &str, limit: &str, now: Instant) -> bool {
        let entries = self.lock();
        let slot: Slot = (key.to_string(), limit.to_string());
        entries.peek(&slot).is_some_and(|e| e.expiry() > now)
    }

    /// How long a remembered denial of `key` under `limit` still lasts.
    #[cfg(test)]
    pub(crate) fn remaining(&self, key: &str, limit: &str, now: Instant) -> Option<Duration> {
        let entries = self.lock();
        let slot: Slot = (key.to_string(), limit.to_string());
        let entry = entries.peek(&slot)?;
        (entry.until > now).then(|| entry.until - now)
    }

    /// Requests answered from the cache: store round trips saved.
    pub fn round_trips_saved(&self) -> u64 {
        self.saved.load(Ordering::Relaxed)
    }

    /// Denials held now (expired ones included until they are looked up
    /// or give way).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether it holds no denial.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(ms: u64) -> Decision {
        Decision {
            allowed: false,
            limit: 10,
            remaining: 0,
            retry_after: Some(Duration::from_millis(ms)),
            reset_after: Duration::from_secs(1),
            granted: None,
            lease: None,
        }
    }

    #[test]
    fn denies_until_the_wait_has_passed_then_asks_again() {
        let cache = DenyCache::new(10);
        let t0 = Instant::now();
        cache.record("k", "GCRA 10 1000ms", 1, &denied(100), t0);
        let d = cache.check("k", "GCRA 10 1000ms", 1, t0 + Duration::from_millis(40));
        assert_eq!(d.unwrap().retry_after, Some(Duration::from_millis(60)));
        // Another limit on the key, a smaller cost, or after the wait: ask.
        assert!(cache.check("k", "GCRA 5 1000ms", 1, t0).is_none());
        assert!(cache.check("k", "GCRA 10 1000ms", 0, t0).is_none());
        let at_end = t0 + Duration::from_millis(100);
        assert!(cache.check("k", "GCRA 10 1000ms", 1, at_end).is_none());
        assert_eq!(cache.round_trips_saved(), 1);
        // Recently denied for a second more; then gone.
        assert!(cache.recently_denied("k", "GCRA 10 1000ms", at_end));
        assert!(cache
            .check("k", "GCRA 10 1000ms", 1, at_end + GRACE)
            .is_none());
        assert!(!cache.recently_denied("k", "GCRA 10 1000ms", at_end + GRACE));
        assert!(cache.is_empty());
    }

    #[test]
    fn a_paced_denial_moves_on_one_interval_per_admission() {
        let cache = DenyCache::new(10);
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        cache.record_paced("k", "p", 1, &denied(4), t0, Some(ms(10)));
        assert!(cache.check("k", "p", 1, t0 + ms(3)).is_some());
        // The unit due at 4 ms: asked for, admitted; the next one is due at
        // 14 ms, whatever the time of the admission.
        assert!(cache.check("k", "p", 1, t0 + ms(5)).is_none());
        cache.admitted("k", "p", 1, t0 + ms(5));
        let d = cache.check("k", "p", 1, t0 + ms(13)).unwrap();
        assert_eq!(d.retry_after, Some(ms(1)));
        assert!(cache.check("k", "p", 1, t0 + ms(14)).is_none());
        // Unpaced, an admission changes nothing.
        cache.record("u", "p", 1, &denied(4), t0);
        cache.admitted("u", "p", 1, t0 + ms(5));
        assert!(cache.check("u", "p", 1, t0 + ms(5)).is_none());
        // Long after, with no admission, the entry is gone.
        cache.check("k", "p", 1, t0 + ms(14) + GRACE);
        cache.check("u", "p", 1, t0 + ms(14) + GRACE);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn admissions_and_never_admissible_denials_are_not_kept() {
        let cache = DenyCache::new(10);
        let t0 = Instant::now();
        let mut never = denied(0);
        never.retry_after = None;
        let mut allowed = denied(0);
        allowed.allowed = true;
        for d in [never, allowed] {
            cache.record("k", "p", 1, &d, t0);
        }
        assert!(cache.is_empty());
    }

    #[test]
    fn memory_is_bounded_at_a_thousand_times_the_capacity() {
        let cache = DenyCache::new(100);
        let t0 = Instant::now();
        for i in 0..100_000u64 {
            cache.record(&format!("k{i}"), "p", 1, &denied(1_000 + i), t0);
            assert!(cache.len() <= 100);
        }
        // The most recently recorded stayed.
        assert!(cache.check("k99999", "p", 1, t0).is_some());
        assert!(cache.check("k0", "p", 1, t0).is_none());
    }
}
