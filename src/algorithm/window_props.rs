//! Property tests of the window limiters, run end to end through
//! [`Policy::decide`] on the stored bytes (so the layouts and patches are
//! exercised too): the admission bounds, and that `retry_after`,
//! `remaining` and `reset_after` are exact.

use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_subwindows::SlidingSubwindows;
use crate::algorithm::{Decision, RetryAfter};
use crate::policy::{Policy, StateWrite};
use proptest::prelude::*;

/// Applies a write as Redis would (SETRANGE semantics for a patch).
pub fn apply(state: &mut Option<Vec<u8>>, write: &StateWrite) {
    write.apply_to(state);
}

fn decide(p: &Policy, state: &Option<Vec<u8>>, now: u64, cost: u64) -> Decision {
    p.decide(state.as_deref(), now, cost).unwrap().decision
}

/// Runs `events` (time step, cost) and checks the exactness properties at
/// every step; returns the admitted (time, cost) pairs.
fn run(p: &Policy, limit: u64, start: u64, events: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut state = None;
    let mut now = start;
    let mut admitted = Vec::new();
    for &(dt, cost) in events {
        now += dt;
        let out = p.decide(state.as_deref(), now, cost).unwrap();
        let d = out.decision;
        assert_eq!(d.limit, limit);
        if d.allowed {
            assert!(cost <= limit, "admitted a cost above the limit");
            if let Some(w) = &out.write {
                apply(&mut state, w);
            }
            if cost > 0 {
                admitted.push((now, cost));
            }
        } else {
            assert!(out.write.is_none(), "a denial wrote");
            match d.retry_after {
                RetryAfter::Never => assert!(cost > limit),
                RetryAfter::After(wait) => {
                    assert!(wait >= 1);
                    assert!(
                        !decide(p, &state, now + wait - 1, cost).allowed,
                        "retry too late"
                    );
                    assert!(
                        decide(p, &state, now + wait, cost).allowed,
                        "retry too early"
                    );
                }
                RetryAfter::NotNeeded => panic!("denied without a wait"),
            }
        }
        // `remaining` cost-1 requests fit now, one more does not.
        if d.remaining > 0 {
            assert!(
                decide(p, &state, now, d.remaining).allowed,
                "remaining too high"
            );
        }
        assert!(
            !decide(p, &state, now, d.remaining + 1).allowed,
            "remaining too low"
        );
        // Untouched exactly after reset_after.
        let untouched = |t| {
            let probe = decide(p, &state, t, 0);
            probe.remaining == limit && probe.reset_after_us == 0
        };
        assert!(untouched(now + d.reset_after_us), "reset too early");
        if d.reset_after_us > 0 {
            assert!(!untouched(now + d.reset_after_us - 1), "reset too late");
        }
    }
    admitted
}

/// The most admitted in any half-open interval of length `window`.
fn most_in_any_window(admitted: &[(u64, u64)], window: u64) -> u64 {
    admitted
        .iter()
        .map(|&(t, _)| {
            admitted
                .iter()
                .filter(|&&(u, _)| u <= t && t - u < window)
                .map(|&(_, c)| c)
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}

/// Events as (step in thousandths of the window plus a few µs, cost), so
/// that windows of any size see expiry.
fn scaled(window: u64, events: &[(u64, u64, u64)]) -> Vec<(u64, u64)> {
    events
        .iter()
        .map(|&(permille, extra, cost)| (window / 1000 * permille + extra, cost))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn sliding_log_never_admits_more_than_limit_in_any_window(
        limit in 1u64..6, window in 5u64..300,
        // Large starts exercise 32-bit stamps that wrap.
        start in prop_oneof![Just(0u64), 1u64..1 << 40],
        evs in proptest::collection::vec((0u64..450, 0u64..8), 1..60),
    ) {
        let p = Policy::SlidingLog(SlidingLog::new(limit, window));
        let admitted = run(&p, limit, start, &evs);
        prop_assert!(most_in_any_window(&admitted, window) <= limit);
    }

    #[test]
    fn sliding_log_with_wide_stamps_and_wrapping_narrow_ones(
        limit in 1u64..6,
        // Either side of the 4-byte stamp limit (2^32 µs), and far beyond.
        window in prop_oneof![(1u64 << 32) - 3..(1u64 << 32) + 3, Just(1u64 << 44)],
        start in 0u64..1 << 50,
        evs in proptest::collection::vec((0u64..1500, 0u64..3, 0u64..8), 1..40),
    ) {
        let p = Policy::SlidingLog(SlidingLog::new(limit, window));
        let admitted = run(&p, limit, start, &scaled(window, &evs));
        prop_assert!(most_in_any_window(&admitted, window) <= limit);
    }

    #[test]
    fn subwindows_never_admit_more_than_limit_in_any_window(
        limit in 1u64..6, window in 5u64..300, n in 2u64..6, start in 0u64..1 << 40,
        evs in proptest::collection::vec((0u64..450, 0u64..8), 1..60),
    ) {
        let p = Policy::SlidingSubwindows(SlidingSubwindows::new(limit, window, n));
        let admitted = run(&p, limit, start, &evs);
        prop_assert!(most_in_any_window(&admitted, window) <= limit);
    }

    #[test]
    fn approx_never_admits_more_than_twice_the_limit(
        limit in 1u64..6, window in 5u64..300, start in 0u64..1 << 40,
        evs in proptest::collection::vec((0u64..450, 0u64..8), 1..60),
    ) {
        let p = Policy::SlidingApprox(SlidingApprox::new(limit, window));
        let admitted = run(&p, limit, start, &evs);
        prop_assert!(most_in_any_window(&admitted, window) <= 2 * limit);
    }

    #[test]
    fn fixed_never_admits_more_than_limit_per_window(
        limit in 1u64..6, window in 5u64..300, start in 0u64..1 << 40, aligned in any::<bool>(),
        evs in proptest::collection::vec((0u64..450, 0u64..8), 1..60),
    ) {
        let p = Policy::Fixed(FixedWindow::new(limit, window, aligned));
        let admitted = run(&p, limit, start, &evs);
        prop_assert!(most_in_any_window(&admitted, window) <= 2 * limit);
        if aligned {
            for &(t, _) in &admitted {
                let w = t / window;
                let in_window: u64 = admitted.iter().filter(|a| a.0 / window == w).map(|a| a.1).sum();
                prop_assert!(in_window <= limit);
            }
        }
    }

    #[test]
    fn changing_parameters_of_a_key_never_fails(
        evs in proptest::collection::vec((0u64..4, 1u64..8, 0u64..400, 0u64..6, 2u64..5), 1..60),
    ) {
        let mut log = None;
        let mut subwindows = None;
        let mut now = 1u64 << 33;
        for (window_pick, limit, dt, cost, n) in evs {
            now += dt;
            let window = [50, 100, 1 << 33, 300][window_pick as usize];
            for (state, p) in [
                (&mut log, Policy::SlidingLog(SlidingLog::new(limit, window))),
                (&mut subwindows, Policy::SlidingSubwindows(SlidingSubwindows::new(limit, window, n))),
            ] {
                let out = p.decide(state.as_deref(), now, cost).unwrap();
                prop_assert!(!out.decision.allowed || cost <= limit);
                if let Some(w) = &out.write {
                    apply(state, w);
                }
                // What was written reads back under the same parameters.
                let again = p.decide(state.as_deref(), now, 0).unwrap().decision;
                prop_assert!(again.remaining <= limit);
            }
        }
    }

    #[test]
    fn deciding_on_arbitrary_stored_bytes_never_panics(
        tag in 0xA3u8..=0xA6,
        bytes in proptest::collection::vec(any::<u8>(), 0..60),
        now in any::<u64>(),
        cost in 0u64..5,
        limit in 1u64..5,
    ) {
        let mut v = vec![tag];
        v.extend(bytes);
        for p in [
            Policy::SlidingLog(SlidingLog::new(limit, 1 << 20)),
            Policy::SlidingLog(SlidingLog::new(limit, 1 << 40)),
            Policy::SlidingApprox(SlidingApprox::new(limit, 7)),
            Policy::SlidingSubwindows(SlidingSubwindows::new(limit, 100, 2)),
            Policy::SlidingSubwindows(SlidingSubwindows::new(limit, u64::MAX, 3)),
            Policy::Fixed(FixedWindow::new(limit, u64::MAX, true)),
        ] {
            let _ = p.decide(Some(&v), now, cost);
        }
    }

    #[test]
    fn deciding_on_extreme_well_formed_states_never_panics(
        newest in any::<u64>(), counts in proptest::collection::vec(any::<u64>(), 3),
        index in any::<u64>(), prev in any::<u64>(), cur in any::<u64>(),
        now in any::<u64>(), cost in 0u64..5,
    ) {
        use crate::codec::window;
        use crate::algorithm::sliding_approx::ApproxState;
        use crate::algorithm::fixed_window::FixedState;
        use crate::algorithm::sliding_subwindows::SubwindowState;
        let b = window::encode_subwindows(8, &SubwindowState { newest, counts });
        let a = window::encode_approx(&ApproxState { index, prev, cur });
        let f = window::encode_fixed(&FixedState { start_us: index, count: prev });
        for window_us in [1, 1 << 30, u64::MAX] {
            let _ = Policy::SlidingSubwindows(SlidingSubwindows::new(4, window_us, 2)).decide(Some(&b), now, cost);
            let _ = Policy::SlidingApprox(SlidingApprox::new(4, window_us)).decide(Some(&a), now, cost);
            let _ = Policy::Fixed(FixedWindow::new(4, window_us, true)).decide(Some(&f), now, cost);
        }
    }
}
