//! The deny cache in front of the module's own GCRA core (the pure code the
//! server runs, time passed in): whatever the traffic, the cache admits
//! nothing itself, and every request it denies the store would deny too,
//! up to the store's own rounding of waits to whole milliseconds (the
//! cache holds a denial for the wait the store reported, rounded up). And
//! no panic, whatever the waits, costs and intervals.

use super::DenyCache;
use crate::Decision;
use proptest::prelude::*;
use redis_ratelimit::api::{parse_policy, Micros, Policy, RetryAfter};
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
    let retry_after = match d.retry_after {
        RetryAfter::After(w) => Some(ms(w.as_u64())),
        RetryAfter::NotNeeded | RetryAfter::Never => None,
    };
    Decision {
        allowed: d.allowed,
        limit: d.limit,
        remaining: d.remaining,
        retry_after,
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
        let interval = crate::Policy::from(
            crate::Gcra::new(limit, Duration::from_millis(period_ms)),
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

    #[test]
    fn a_deny_cache_with_extreme_waits_costs_and_intervals(
        ops in proptest::collection::vec((0u8..4, extreme_decision(), extreme_count(), proptest::option::of(extreme_duration()), extreme_duration()), 1..40),
        capacity in 0usize..4,
    ) {
        let cache = DenyCache::new(capacity);
        let t0 = Instant::now();
        for (op, d, cost, interval, at) in ops {
            let now = t0.checked_add(at).unwrap_or(t0);
            match op {
                0 => cache.record_paced("k", "p", cost, &d, now, interval),
                1 => cache.admitted("k", "p", cost, now),
                2 => { let _ = cache.check("k", "p", cost, now); }
                _ => { let _ = (cache.remaining("k", "p", now), cache.recently_denied("k", "p", now)); }
            }
        }
    }
}

fn extreme_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(Duration::from_nanos(1)),
        any::<u64>().prop_map(Duration::from_nanos),
        any::<u64>().prop_map(Duration::from_millis),
    ]
}

fn extreme_count() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0), Just(1), Just(u64::MAX), any::<u64>()]
}

fn extreme_decision() -> impl Strategy<Value = Decision> {
    (
        any::<bool>(),
        extreme_count(),
        proptest::option::of(extreme_duration()),
        extreme_duration(),
    )
        .prop_map(|(allowed, n, retry_after, reset_after)| {
            let d = if allowed {
                Decision::admitted(n, n)
            } else {
                Decision::denied(n, retry_after)
            };
            d.with_reset_after(reset_after)
        })
}
