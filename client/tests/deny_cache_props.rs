//! The deny cache in front of the module's own GCRA core (the pure code the
//! server runs, time passed in): whatever the traffic, the cache admits
//! nothing itself, and every request it denies the store would deny too,
//! up to the store's own rounding of waits to whole milliseconds (the
//! cache holds a denial for the wait the store reported, rounded up).

use proptest::prelude::*;
use redis_ratelimit::api::{Gcra, Micros, RetryAfter, Tat};
use redis_ratelimit_client::{Decision, DenyCache};
use std::time::{Duration, Instant};

/// The server's reply fields from the core's decision: waits in whole
/// milliseconds, rounded up, as the module replies them.
fn reply(d: &redis_ratelimit::api::Decision) -> Decision {
    let ms = |us: u64| Duration::from_millis(us.div_ceil(1000));
    Decision {
        allowed: d.allowed,
        limit: d.limit,
        remaining: d.remaining,
        retry_after: match d.retry_after {
            RetryAfter::After(w) => Some(ms(w.as_u64())),
            RetryAfter::NotNeeded | RetryAfter::Never => None,
        },
        reset_after: ms(d.reset_after.as_u64()),
        granted: None,
        lease: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_cache_denies_only_what_the_store_denies_up_to_its_rounding(
        (limit, period_ms, burst) in (1u64..50, 1u64..5_000, 1u64..20),
        requests in proptest::collection::vec((0u64..300_000, 1u64..4), 1..300),
    ) {
        let g = Gcra::new(limit, Micros::from_millis(period_ms), burst).unwrap();
        let cache = DenyCache::new(4);
        let base = Instant::now();
        let mut state: Option<Tat> = None;
        let mut now_us = 1_000_000_000u64;
        let (mut local, mut asked) = (0, 0);
        for (gap, cost) in requests {
            now_us += gap;
            let now = base + Duration::from_micros(now_us - 1_000_000_000);
            if cache.check("k", "GCRA", cost, now).is_some() {
                // At most 999 µs later than the store's exact time.
                let (would, _) = g.decide(state, Micros::new(now_us - 999), cost);
                prop_assert!(!would.allowed, "denied locally, admitted by the store");
                local += 1;
                continue;
            }
            asked += 1;
            let (d, new) = g.decide(state, Micros::new(now_us), cost);
            if let Some(t) = new {
                state = Some(t);
            }
            cache.record("k", "GCRA", cost, &reply(&d), now);
        }
        prop_assert_eq!(cache.round_trips_saved(), local);
        prop_assert!(asked >= 1);
    }

    #[test]
    fn a_paced_denial_denies_only_what_the_store_denies_up_to_its_rounding(
        (limit, period_ms, burst) in (1u64..50, 1u64..5_000, 1u64..20),
        requests in proptest::collection::vec((0u64..20_000, 1u64..3), 1..500),
    ) {
        let g = Gcra::new(limit, Micros::from_millis(period_ms), burst).unwrap();
        let interval = redis_ratelimit_client::Policy::from(
            redis_ratelimit_client::Gcra::new(limit, Duration::from_millis(period_ms)),
        )
        .unit_interval();
        let cache = DenyCache::new(4);
        let base = Instant::now();
        let mut state: Option<Tat> = None;
        let mut now_us = 1_000_000_000u64;
        let (mut local, mut admitted) = (0, 0);
        for (gap, cost) in requests {
            now_us += gap;
            let now = base + Duration::from_micros(now_us - 1_000_000_000);
            if cache.check("k", "GCRA", cost, now).is_some() {
                let (would, _) = g.decide(state, Micros::new(now_us - 999), cost);
                prop_assert!(!would.allowed, "denied locally, admitted by the store");
                local += 1;
                continue;
            }
            let (d, new) = g.decide(state, Micros::new(now_us), cost);
            if let Some(t) = new {
                state = Some(t);
            }
            if d.allowed {
                admitted += 1;
                cache.admitted("k", "GCRA", cost, now);
            } else {
                cache.record_paced("k", "GCRA", cost, &reply(&d), now, interval);
            }
        }
        prop_assert_eq!(cache.round_trips_saved(), local);
        prop_assert!(admitted + local <= 500);
    }
}
