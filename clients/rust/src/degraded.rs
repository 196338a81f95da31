//! Degraded mode: while the store cannot answer, a fail-closed limit is
//! enforced locally at its rate times this process's share of the key's
//! recent traffic.
//!
//! The share is estimated from the store's own replies. Each reply tells
//! the key's level (the units left, fractional): `remaining` is its whole
//! part and, for limits that refill at their rate (GCRA, token bucket),
//! `reset_after × rate` short of the limit gives the rest. Between two
//! replies on a key everyone together consumed
//! `min(limit, level_before + rate × elapsed) − level_now` units, of
//! which this process charged what it sent. Both are summed with a decay
//! of the limit's window or [`SHARE_MEMORY`], whichever is longer (a step
//! may be negative when replies are read out of order; the sums
//! telescope), and the share is their ratio. A key
//! this process has not seen answered has no share: it is denied (it fails
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
    /// The units left at `at`, fractional.
    level: f64,
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

/// How far back the share looks at least: over a window as short as a
/// second, too few admissions to tell a share within a few per cent.
pub(crate) const SHARE_MEMORY: Duration = Duration::from_secs(10);

fn decay(since: Duration, quota: Quota) -> f64 {
    let memory = (quota.w as f64).max(SHARE_MEMORY.as_secs_f64());
    (-since.as_secs_f64() / memory).exp()
}

/// The units left a reply tells, fractional: `remaining` whole, and what
/// `reset_after` says beyond (exact for a limit that refills at its rate;
/// within the unit `remaining` leaves open for a window).
fn level(d: &Decision, quota: Quota) -> f64 {
    let (whole, limit) = (d.remaining as f64, d.limit as f64);
    let refilling = limit - per_second(quota) * d.reset_after.as_secs_f64();
    refilling.min(whole + 1.0).min(limit).max(whole)
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
        let (level, limit, charged) = (level(d, quota), d.limit as f64, charged as f64);
        let mut seen = match self.by_key.pop(key) {
            Some(old) => {
                let since = now.saturating_duration_since(old.at);
                let refilled = (old.level + per_second(quota) * since.as_secs_f64()).min(limit);
                let k = decay(since, quota);
                Seen {
                    own: old.own * k + charged,
                    total: old.total * k + refilled - level,
                    ..old
                }
            }
            None => {
                // The first reply: what is used of the limit is everyone's,
                // this request's charge this process's.
                Seen {
                    at: now,
                    level,
                    limit,
                    own: charged,
                    total: (limit - level).max(charged),
                    bucket: None,
                }
            }
        };
        seen.at = now;
        seen.level = level;
        seen.limit = limit;
        seen.bucket = None;
        // When full, the least recently answered key gives way.
        self.by_key.put(key.to_string(), seen);
    }

    /// This process's share of the key's recent traffic, if it has one.
    pub fn share(&self, key: &str) -> Option<f64> {
        let seen = self.by_key.peek(key)?;
        // Less used in all than charged here: only replies read out of
        // order, this process's alone.
        let total = seen.total.max(seen.own);
        (total > 0.0).then(|| (seen.own / total).clamp(0.0, 1.0))
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
        // At first the share of what was left at the last reply, filled
        // since at the share of the rate.
        let (tokens, at) = seen.bucket.unwrap_or((seen.level * share, seen.at));
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

    /// A reply of `Q` (GCRA 10 per 10 s) with `remaining` left.
    fn reply(remaining: u64) -> Decision {
        Decision {
            allowed: true,
            limit: 10,
            remaining,
            retry_after: None,
            reset_after: Duration::from_secs(10 - remaining),
            granted: None,
            lease: None,
        }
    }

    /// A GCRA key of `limit` a second (and as much burst), asked once a
    /// millisecond for `ms` by the process `who(i)` of the `i`-th request;
    /// each process's `Shares` observes its own replies. Returns what each
    /// admitted.
    fn saturate(
        shares: &mut [Shares],
        limit: u64,
        ms: u64,
        who: impl Fn(u64) -> usize,
        t0: Instant,
    ) -> Vec<u64> {
        let quota = Quota { q: limit, w: 1 };
        let rate = limit as f64 / 1000.0;
        let (mut level, mut admitted) = (limit as f64, vec![0; shares.len()]);
        for i in 0..ms {
            level = (level + rate).min(limit as f64);
            let allowed = level >= 1.0;
            if allowed {
                level -= 1.0;
            }
            let d = Decision {
                allowed,
                limit,
                remaining: level as u64,
                retry_after: None,
                reset_after: Duration::from_secs_f64((limit as f64 - level) / limit as f64),
                granted: None,
                lease: None,
            };
            let p = who(i);
            admitted[p] += u64::from(allowed);
            let now = t0 + Duration::from_millis(i);
            shares[p].observe("k", quota, &d, u64::from(allowed), now);
        }
        admitted
    }

    #[test]
    fn alone_at_the_limit_the_share_is_whole_though_most_replies_deny() {
        // 1,000 requests a second on 100 a second: nine in ten replies
        // deny, each telling the same whole `remaining` (0).
        let t0 = Instant::now();
        let mut s = [Shares::new(10)];
        saturate(&mut s, 100, 5_000, |_| 0, t0);
        let share = s[0].share("k").unwrap();
        assert!(share > 0.97, "{share}");
        // Degraded, the whole rate: about 100 in the next second.
        let start = t0 + Duration::from_secs(5);
        let admitted = (0..1000)
            .filter(|i| {
                s[0].admit(
                    "k",
                    Quota { q: 100, w: 1 },
                    1,
                    start + Duration::from_millis(*i),
                )
                .is_ok()
            })
            .count();
        assert!((97..=102).contains(&admitted), "{admitted}");
    }

    #[test]
    fn processes_at_uneven_rates_each_get_the_share_they_were_admitted() {
        // Two of every three requests from the first process.
        let t0 = Instant::now();
        let mut s = [Shares::new(10), Shares::new(10)];
        let admitted = saturate(&mut s, 100, 5_000, |i| usize::from(i % 3 == 2), t0);
        let whole = (admitted[0] + admitted[1]) as f64;
        for p in 0..2 {
            let share = s[p].share("k").unwrap();
            let expected = admitted[p] as f64 / whole;
            assert!(
                (share - expected).abs() < 0.05,
                "{p}: {share} vs {expected}"
            );
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
