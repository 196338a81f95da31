//! The deny cache in front of the module's own GCRA core (the pure code the
//! server runs, time passed in): whatever the traffic, the cache admits
//! nothing itself, and every request it denies the store would deny too,
//! up to the store's own rounding of waits to whole milliseconds (the
//! cache holds a denial for the wait the store reported, rounded up).

use proptest::prelude::*;
use redis_ratelimit::api::{parse_policy, Micros, Policy, RetryAfter};
use redis_ratelimit_client::{Decision, DenyCache};
use std::time::{Duration, Instant};

/// `GCRA limit period_ms BURST burst`, parsed as RL.ALL parses it.
fn gcra(limit: u64, period_ms: u64, burst: u64) -> Policy {
    let words = [
        limit.to_string(),
        format!("{period_ms}ms"),
        "BURST".into(),
        burst.to_string(),
    ];
    parse_policy("GCRA", &words).expect("a valid policy").0
}

/// The core's decision of `cost` at `now_us` on `state`, which an admission
/// updates.
fn decide(
    g: &Policy,
    state: &mut Option<Vec<u8>>,
    now_us: u64,
    cost: u64,
) -> redis_ratelimit::api::Decision {
    let t = g
        .decide(state.as_deref(), Micros::new(now_us), cost)
        .expect("its own state");
    if let Some(write) = &t.write {
        write.apply_to(state);
    }
    t.decision
}

/// The core's decision without changing the state.
fn would(g: &Policy, state: &Option<Vec<u8>>, now_us: u64, cost: u64) -> bool {
    g.decide(state.as_deref(), Micros::new(now_us), cost)
        .expect("its own state")
        .decision
        .allowed
}

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
        let g = gcra(limit, period_ms, burst);
        let cache = DenyCache::new(4);
        let base = Instant::now();
        let mut state: Option<Vec<u8>> = None;
        let mut now_us = 1_000_000_000u64;
        let (mut local, mut asked) = (0, 0);
        for (gap, cost) in requests {
            now_us += gap;
            let now = base + Duration::from_micros(now_us - 1_000_000_000);
            if cache.check("k", "GCRA", cost, now).is_some() {
                // At most 999 µs later than the store's exact time.
                prop_assert!(
                    !would(&g, &state, now_us - 999, cost),
                    "denied locally, admitted by the store"
                );
                local += 1;
                continue;
            }
            asked += 1;
            let d = decide(&g, &mut state, now_us, cost);
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
        let g = gcra(limit, period_ms, burst);
        let interval = redis_ratelimit_client::Policy::from(
            redis_ratelimit_client::Gcra::new(limit, Duration::from_millis(period_ms)),
        )
        .unit_interval();
        let cache = DenyCache::new(4);
        let base = Instant::now();
        let mut state: Option<Vec<u8>> = None;
        let mut now_us = 1_000_000_000u64;
        let (mut local, mut admitted) = (0, 0);
        for (gap, cost) in requests {
            now_us += gap;
            let now = base + Duration::from_micros(now_us - 1_000_000_000);
            if cache.check("k", "GCRA", cost, now).is_some() {
                prop_assert!(
                    !would(&g, &state, now_us - 999, cost),
                    "denied locally, admitted by the store"
                );
                local += 1;
                continue;
            }
            let d = decide(&g, &mut state, now_us, cost);
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
