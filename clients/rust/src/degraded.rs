//! Degraded mode: while the store cannot answer, a fail-closed limit is
//! enforced locally at its rate times this process's share of the key's
//! recent traffic.
//!
//! The share is estimated from the store's own replies. Between two
//! replies on a key, everyone together consumed about
//! `min(limit, remaining_before + rate × elapsed) − remaining_now` units,
//! of which this process charged what it sent; both are counted with a
//! decay of the limit's window, and the share is their ratio. A key this
//! process has not seen answered has no share: it is denied (it fails
//! closed). When the store answers again the local buckets are dropped.
//!
//! Memory is bounded by `capacity` keys; the least recently answered gives
//! way. Every operation is O(1) (an LRU map, the `lru` crate).

use crate::reply::Decision;
use crate::Quota;
use lru::LruCache;
use std::collections::hash_map::RandomState;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
struct Seen {
    at: Instant,
    remaining: f64,
    limit: f64,
    /// Decayed units this process charged, and everyone together.
    own: f64,
    total: f64,
    /// The local bucket while degraded: tokens and when last filled.
    bucket: Option<(f64, Instant)>,
}

/// The traffic shares of keys, and their local buckets while degraded.
#[derive(Debug)]
pub(crate) struct Shares {
    /// The keys, the least recently answered first to give way. Keys come
    /// from requests: hashed with std's keyed SipHash, as a `HashMap`
    /// would.
    by_key: LruCache<String, Seen, RandomState>,
}

fn per_second(quota: Quota) -> f64 {
    quota.q as f64 / quota.w.max(1) as f64
}

fn decay(since: Duration, quota: Quota) -> f64 {
    (-since.as_secs_f64() / quota.w.max(1) as f64).exp()
}

impl Shares {
    pub fn new(capacity: usize) -> Shares {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Shares {
            by_key: LruCache::with_hasher(capacity, RandomState::new()),
        }
    }

    /// The store's reply on `key` (a limit of rate `quota`) at `now`;
    /// `charged` the units this process's request took (0 if denied).
    pub fn observe(&mut self, key: &str, quota: Quota, d: &Decision, charged: u64, now: Instant) {
        let (remaining, limit, charged) = (d.remaining as f64, d.limit as f64, charged as f64);
        let mut seen = match self.by_key.pop(key) {
            Some(old) => {
                let since = now.saturating_duration_since(old.at);
                let refilled = old.remaining + per_second(quota) * since.as_secs_f64();
                let consumed = (refilled.min(limit) - remaining).max(charged);
                let k = decay(since, quota);
                Seen {
                    own: old.own * k + charged,
                    total: old.total * k + consumed,
                    ..old
                }
            }
            None => {
                // The first reply: what is used of the limit is everyone's,
                // this request's charge this process's.
                Seen {
                    at: now,
                    remaining,
                    limit,
                    own: charged,
                    total: (limit - remaining).max(charged),
                    bucket: None,
                }
            }
        };
        seen.at = now;
        seen.remaining = remaining;
        seen.limit = limit;
        seen.bucket = None;
        // When full, the least recently answered key gives way.
        self.by_key.put(key.to_string(), seen);
    }

    /// This process's share of the key's recent traffic, if it has one.
    pub fn share(&self, key: &str) -> Option<f64> {
        let seen = self.by_key.peek(key)?;
        (seen.total > 0.0).then(|| (seen.own / seen.total).clamp(0.0, 1.0))
    }

    /// Decides a request of `cost` units locally at `now`: `Ok(())`
    /// admitted, or the wait until they accrue (`None`: never, without a
    /// share or above what the share can hold).
    pub fn admit(
        &mut self,
        key: &str,
        quota: Quota,
        cost: u64,
        now: Instant,
    ) -> Result<(), Option<Duration>> {
        if cost == 0 {
            return Ok(());
        }
        let cost = cost as f64;
        let share = self.share(key).ok_or(None)?;
        let Some(seen) = self.by_key.peek_mut(key) else {
            return Err(None);
        };
        let capacity = seen.limit * share;
        let rate = per_second(quota) * share;
        let (tokens, at) = seen
            .bucket
            .unwrap_or((seen.remaining.min(seen.limit) * share, now));
        let tokens =
            (tokens + rate * now.saturating_duration_since(at).as_secs_f64()).min(capacity);
        if tokens >= cost {
            seen.bucket = Some((tokens - cost, now));
            return Ok(());
        }
        seen.bucket = Some((tokens, now));
        if rate <= 0.0 || cost > capacity {
            return Err(None);
        }
        // A share near zero makes the wait longer than a `Duration` holds:
        // never, as far as a client can tell.
        Err(Duration::try_from_secs_f64((cost - tokens) / rate).ok())
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: Quota = Quota { q: 10, w: 10 };

    fn reply(remaining: u64) -> Decision {
        Decision {
            allowed: true,
            limit: 10,
            remaining,
            retry_after: None,
            reset_after: Duration::ZERO,
            granted: None,
            lease: None,
        }
    }

    #[test]
    fn the_share_is_what_this_process_charged_of_what_everyone_used() {
        let mut s = Shares::new(10);
        let t0 = Instant::now();
        // Alone: every unit used is ours.
        s.observe("a", Q, &reply(9), 1, t0);
        s.observe("a", Q, &reply(8), 1, t0);
        assert_eq!(s.share("a"), Some(1.0));
        // Another process takes 2 units between each of ours.
        let mut remaining = 9;
        for _ in 0..3 {
            remaining -= 3;
            s.observe("b", Q, &reply(remaining), 1, t0);
        }
        let share = s.share("b").unwrap();
        assert!((0.3..0.45).contains(&share), "{share}");
        assert_eq!(s.share("unseen"), None);
    }

    #[test]
    fn degraded_admits_the_share_of_what_was_left_then_the_share_of_the_rate() {
        let mut s = Shares::new(10);
        let t0 = Instant::now();
        s.observe("a", Q, &reply(9), 1, t0);
        // Alone, with 9 left: 9 now, then one a second.
        for _ in 0..9 {
            assert_eq!(s.admit("a", Q, 1, t0), Ok(()));
        }
        assert_eq!(s.admit("a", Q, 1, t0), Err(Some(Duration::from_secs(1))));
        assert_eq!(s.admit("a", Q, 1, t0 + Duration::from_secs(1)), Ok(()));
        // Never seen: denied.
        assert_eq!(s.admit("b", Q, 1, t0), Err(None));
        // Three units wait for three to accrue; more than the limit, never;
        // nothing, at once.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(s.admit("a", Q, 3, t1), Err(Some(Duration::from_secs(3))));
        assert_eq!(s.admit("a", Q, 11, t1), Err(None));
        assert_eq!(s.admit("a", Q, 0, t1), Ok(()));
        assert_eq!(s.admit("a", Q, 3, t1 + Duration::from_secs(3)), Ok(()));
    }

    #[test]
    fn memory_is_bounded_at_a_thousand_times_the_capacity() {
        let mut s = Shares::new(100);
        let t0 = Instant::now();
        for i in 0..100_000u64 {
            s.observe(
                &format!("k{i}"),
                Q,
                &reply(5),
                1,
                t0 + Duration::from_micros(i),
            );
            assert!(s.len() <= 100);
        }
        assert!(s.share("k99999").is_some() && s.share("k0").is_none());
    }
}
