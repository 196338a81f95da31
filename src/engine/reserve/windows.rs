//! Reservations on the window limiters (FIXED, SLIDING in each mode):
//! charged in the window where the admission starts, which admits nothing
//! before that start.

use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_subwindows::SlidingSubwindows;
use crate::algorithm::{Micros, RetryAfter};
use crate::engine::store::MemoryStore;
use crate::engine::{decide, Outcome, Request, Reservation};
use crate::policy::Policy;

const S: u64 = 1_000_000;
const T0: u64 = 1_000 * 3_600 * S;

/// Every window limiter: `limit` per `window_s` seconds.
fn windows(limit: u64, window_s: u64) -> Vec<Policy> {
    let w = Micros::new(window_s * S);
    vec![
        Policy::Fixed(FixedWindow::new(limit, w, false)),
        Policy::Fixed(FixedWindow::new(limit, w, true)),
        Policy::SlidingLog(SlidingLog::new(limit, w)),
        Policy::SlidingApprox(SlidingApprox::new(limit, w)),
        Policy::SlidingSubwindows(SlidingSubwindows::new(limit, w, 4)),
    ]
}

fn request(cost: u64, reserve: Option<u64>) -> Request {
    Request {
        cost,
        reserve: reserve.map(Micros::new),
        ..Request::default()
    }
}

fn at(store: &mut MemoryStore, p: &[Policy], now: u64, r: Request) -> Outcome {
    decide(store, p, Micros::new(now), &r).unwrap()
}

/// Filled, a window limiter reserves at the instant the same request with
/// `WAIT` is admitted, and stores what that admission stores, expiring as
/// long after the start.
#[test]
fn each_window_reserves_at_the_instant_a_waiter_is_admitted() {
    for policy in windows(3, 60) {
        let p = [policy];
        let mut store = MemoryStore::new(1);
        let now = T0 + 7 * S;
        for _ in 0..3 {
            assert!(at(&mut store, &p, now, request(1, None)).allowed, "{p:?}");
        }
        let mut waited = store.clone();
        let plain = at(&mut store.clone(), &p, now, request(1, None));
        let RetryAfter::After(wait) = plain.retry_after else {
            panic!("{p:?}: {plain:?}")
        };
        let reserved = at(&mut store, &p, now, request(1, Some(3_600 * S)));
        assert_eq!(
            reserved.reservation,
            Some(Reservation::Starts(wait)),
            "{p:?}"
        );
        assert!(reserved.allowed);
        let start = now + wait.as_u64();
        // 1 µs before the start a waiter is not admitted; at it, it is.
        assert!(!at(&mut waited.clone(), &p, start - 1, request(1, None)).allowed);
        let admitted = at(&mut waited, &p, start, request(1, None));
        assert!(admitted.allowed, "{p:?}");
        assert_eq!(store.values, waited.values, "{p:?}");
        let ttl = admitted.decisions[0].reset_after.saturating_add(wait);
        assert_eq!(store.ttls[0], Some(ttl), "{p:?}");
        assert_eq!(reserved.decisions[0].reset_after, ttl, "{p:?}");
    }
}

/// A request after a reservation stands behind it: nothing is admitted
/// before the start, not even into room the present window has left.
#[test]
fn after_a_reservation_nothing_is_admitted_before_its_start() {
    for policy in windows(4, 60) {
        let p = [policy];
        let mut store = MemoryStore::new(1);
        let now = T0 + 7 * S;
        assert!(at(&mut store, &p, now, request(3, None)).allowed);
        // 2 do not fit beside the 3: reserved.
        let reserved = at(&mut store, &p, now, request(2, Some(3_600 * S)));
        let Some(Reservation::Starts(wait)) = reserved.reservation else {
            panic!("{p:?}: {reserved:?}")
        };
        assert!(wait > Micros::ZERO, "{p:?}");
        let start = now + wait.as_u64();
        // One unit would fit in the room left now; it waits for the start.
        let later = at(&mut store, &p, now + 1, request(1, None));
        assert!(!later.allowed, "{p:?}");
        let told = later.retry_after;
        assert!(
            matches!(told, RetryAfter::After(w) if now + 1 + w.as_u64() >= start),
            "{p:?}: {told:?}"
        );
        // A second reservation starts no earlier than the first.
        let second = at(&mut store, &p, now + 1, request(1, Some(3_600 * S)));
        match second.reservation {
            Some(Reservation::Starts(w)) => assert!(now + 1 + w.as_u64() >= start, "{p:?}"),
            other => panic!("{p:?}: {other:?}"),
        }
    }
}

#[test]
fn beyond_maxdelay_or_dry_a_window_is_left_as_it_was() {
    for policy in windows(2, 60) {
        let p = [policy];
        let mut store = MemoryStore::new(1);
        let now = T0 + 7 * S;
        assert!(at(&mut store, &p, now, request(2, None)).allowed);
        let before = store.clone();
        let RetryAfter::After(wait) = at(&mut store, &p, now, request(1, None)).retry_after else {
            panic!("{p:?}")
        };
        let short = at(&mut store, &p, now, request(1, Some(wait.as_u64() - 1)));
        assert_eq!(short.reservation, Some(Reservation::Denied), "{p:?}");
        assert!(!short.allowed);
        let dry = Request {
            dryrun: true,
            ..request(1, Some(wait.as_u64()))
        };
        let dry = at(&mut store, &p, now, dry);
        assert_eq!(dry.reservation, Some(Reservation::Starts(wait)), "{p:?}");
        assert!(dry.allowed);
        assert_eq!(store, before, "{p:?}");
    }
}

/// RL.ALL over a GCRA limit and a window: one start for both, the later of
/// their two waits; each key left as a waiter admitted then leaves it.
#[test]
fn rl_all_reserves_a_window_and_a_schedule_at_one_start() {
    for window in windows(2, 60) {
        let gcra = Policy::Gcra(Gcra::new(1, Micros::new(10 * S), 1).unwrap());
        let p = [gcra, window];
        let mut store = MemoryStore::new(2);
        let now = T0 + 7 * S;
        assert!(at(&mut store, &p, now, request(1, None)).allowed);
        assert!(at(&mut store, &p, now + 10 * S, request(1, None)).allowed);
        let mut waited = store.clone();
        let now = now + 10 * S;
        let RetryAfter::After(wait) = at(&mut store.clone(), &p, now, request(1, None)).retry_after
        else {
            panic!("{p:?}")
        };
        let reserved = at(&mut store, &p, now, request(1, Some(3_600 * S)));
        assert_eq!(reserved.reservation, Some(Reservation::Starts(wait)));
        assert!(at(&mut waited, &p, now + wait.as_u64(), request(1, None)).allowed);
        assert_eq!(store.values, waited.values, "{p:?}");
    }
}

/// The most admitted in any half-open interval of `window` µs, each
/// admission counted at its start.
fn most_in_any_window(admitted: &[(u64, u64)], window: u64) -> u64 {
    (admitted.iter())
        .map(|&(t, _)| {
            (admitted.iter())
                .filter(|&&(u, _)| u <= t && t - u < window)
                .map(|&(_, c)| c)
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Whatever the traffic, plain and reserving, every reservation starts
    /// at the instant its request with `WAIT` would be admitted (the plain
    /// denial's wait, admitted then and not a microsecond before), beyond
    /// `maxdelay` nothing is charged, and counted at their starts the
    /// admissions keep each limiter's bound: EXACT and BUCKETS at most the
    /// limit in any window; FIXED and APPROX at most twice, an ALIGNED
    /// window at most the limit in each.
    #[test]
    fn reservations_start_when_a_waiter_would_and_keep_every_bound(
        which in 0usize..5, limit in 1u64..6, window_s in 1u64..50,
        steps in proptest::collection::vec(
            (0u64..20_000_000, 1u64..4, proptest::option::of(0u64..60_000_000)),
            1..40,
        ),
    ) {
        let p = [windows(limit, window_s).swap_remove(which)];
        let window = window_s * S;
        let mut store = MemoryStore::new(1);
        let mut now = T0;
        let mut admitted = Vec::new();
        for (dt, cost, reserve) in steps {
            now += dt;
            let before = store.clone();
            let plain = at(&mut before.clone(), &p, now, request(cost, None));
            let d = at(&mut store, &p, now, request(cost, reserve));
            match d.reservation {
                None | Some(Reservation::Starts(Micros::ZERO)) => {
                    proptest::prop_assert_eq!(d.allowed, plain.allowed);
                    if d.allowed {
                        admitted.push((now, cost));
                    }
                }
                Some(Reservation::Starts(wait)) => {
                    proptest::prop_assert!(d.allowed);
                    proptest::prop_assert_eq!(plain.retry_after, RetryAfter::After(wait));
                    let start = now + wait.as_u64();
                    let early = at(&mut before.clone(), &p, start - 1, request(cost, None));
                    proptest::prop_assert!(!early.allowed);
                    let mut waited = before.clone();
                    proptest::prop_assert!(at(&mut waited, &p, start, request(cost, None)).allowed);
                    proptest::prop_assert_eq!(&waited.values, &store.values);
                    admitted.push((start, cost));
                }
                Some(Reservation::Denied) => {
                    proptest::prop_assert!(!d.allowed);
                    proptest::prop_assert_eq!(&store, &before);
                }
            }
        }
        let bound = match p[0] {
            Policy::SlidingLog(_) | Policy::SlidingSubwindows(_) => limit,
            _ => 2 * limit,
        };
        proptest::prop_assert!(most_in_any_window(&admitted, window) <= bound);
        if let Policy::Fixed(ref f) = p[0] {
            if f.aligned() {
                for &(t, _) in &admitted {
                    let in_window: u64 = admitted.iter()
                        .filter(|a| a.0 / window == t / window).map(|a| a.1).sum();
                    proptest::prop_assert!(in_window <= limit);
                }
            }
        }
    }
}
