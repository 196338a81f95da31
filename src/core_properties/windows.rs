//! Property tests of the window limiters, run on their stored bytes
//! through the algorithm and codec APIs (so the layouts and patches are
//! exercised too): the admission bounds, and that `retry_after`,
//! `remaining` and `reset_after` are exact.

use crate::algorithm::fixed_window::{FixedState, FixedWindow};
use crate::algorithm::sliding_approx::{ApproxState, SlidingApprox};
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_subwindows::{SlidingSubwindows, SubwindowState};
use crate::algorithm::{Decision, Micros, RetryAfter};
use crate::codec::sliding_log::{self, StoredSlidingLog};
use crate::codec::window;
use crate::codec::Kind;
use proptest::prelude::*;

/// A window limiter on its stored bytes, as the module keeps them.
trait OnStoredBytes {
    /// Decides `cost` at `now` against `stored` (`None`: no key); returns
    /// the decision and, when an admitted request changes the state, the
    /// bytes stored after it.
    fn decide_stored(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<Vec<u8>>);
}

/// The log is patched in place, as the server writes it.
impl OnStoredBytes for SlidingLog {
    fn decide_stored(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<Vec<u8>>) {
        let log = stored.map(|v| StoredSlidingLog::decode(v).expect("own state"));
        let (decision, edit) = match &log {
            Some(log) => self.decide(log, now, cost),
            None => self.decide(&[][..], now, cost),
        };
        let new = edit.map(|e| {
            let width = sliding_log::stamp_width(self.window());
            let w = sliding_log::write_log(log.as_ref(), &e, width, usize::MAX);
            let mut value = stored.map(<[u8]>::to_vec).unwrap_or_default();
            w.apply_to(&mut value);
            value
        });
        (decision, new)
    }
}

/// The counts are patched where they change, as the server writes them.
impl OnStoredBytes for SlidingSubwindows {
    fn decide_stored(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<Vec<u8>>) {
        let found = stored.map(|v| window::decode_subwindows(v).expect("own state"));
        let width = found
            .as_ref()
            .map_or(window::count_width(self.limit()), |f| f.width);
        let (decision, new) = self.decide(found.map(|f| f.state).as_ref(), now, cost);
        let new = new.map(|s| {
            let encoded = window::encode_subwindows(width, &s);
            let Some(value) = stored else {
                return encoded;
            };
            let mut patched = value.to_vec();
            window::diff(value, &encoded, 16).apply_to(&mut patched);
            patched
        });
        (decision, new)
    }
}

impl OnStoredBytes for SlidingApprox {
    fn decide_stored(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<Vec<u8>>) {
        let state = stored.map(|v| window::decode_approx(v).expect("own state"));
        let (decision, new) = self.decide(state, now, cost);
        (decision, new.map(|s| window::encode_approx(&s).to_vec()))
    }
}

impl OnStoredBytes for FixedWindow {
    fn decide_stored(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<Vec<u8>>) {
        let kind = if self.aligned() {
            Kind::FixedAligned
        } else {
            Kind::Fixed
        };
        let state = stored.map(|v| window::decode_fixed(v, kind).expect("own state"));
        let (decision, new) = self.decide(state, now, cost);
        (
            decision,
            new.map(|s| window::encode_fixed(kind, &s).to_vec()),
        )
    }
}

/// Decides at `now` µs, without storing.
fn decide<L: OnStoredBytes>(l: &L, state: &Option<Vec<u8>>, now: u64, cost: u64) -> Decision {
    l.decide_stored(state.as_deref(), Micros::new(now), cost).0
}

/// Runs `events` (time step, cost) and checks the exactness properties at
/// every step; returns the admitted (time, cost) pairs.
fn run<L: OnStoredBytes>(l: &L, limit: u64, start: u64, events: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut now = start;
    let timeline: Vec<(u64, u64)> = events
        .iter()
        .map(|&(dt, cost)| {
            now += dt;
            (now, cost)
        })
        .collect();
    run_at(l, limit, &timeline)
}

/// [`run`] on (clock reading, cost) pairs, in any order: the clock may step
/// back (a failover to a replica whose clock lags).
fn run_at<L: OnStoredBytes>(l: &L, limit: u64, timeline: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut state = None;
    let mut admitted = Vec::new();
    for &(now, cost) in timeline {
        let (d, write) = l.decide_stored(state.as_deref(), Micros::new(now), cost);
        assert_eq!(d.limit, limit);
        if d.allowed {
            assert!(cost <= limit, "admitted a cost above the limit");
            if let Some(new) = write {
                state = Some(new);
            }
            if cost > 0 {
                admitted.push((now, cost));
            }
        } else {
            assert!(write.is_none(), "a denial wrote");
            match d.retry_after {
                RetryAfter::Never => assert!(cost > limit),
                RetryAfter::After(wait) => {
                    let wait = wait.as_u64();
                    assert!(wait >= 1);
                    assert!(
                        !decide(l, &state, now + wait - 1, cost).allowed,
                        "retry too late"
                    );
                    assert!(
                        decide(l, &state, now + wait, cost).allowed,
                        "retry too early"
                    );
                }
                RetryAfter::NotNeeded => panic!("denied without a wait"),
            }
        }
        // `remaining` cost-1 requests fit now, one more does not.
        if d.remaining > 0 {
            assert!(
                decide(l, &state, now, d.remaining).allowed,
                "remaining too high"
            );
        }
        assert!(
            !decide(l, &state, now, d.remaining + 1).allowed,
            "remaining too low"
        );
        // Untouched exactly after reset_after.
        let untouched = |t| {
            let probe = decide(l, &state, t, 0);
            probe.remaining == limit && probe.reset_after == Micros::ZERO
        };
        let reset = d.reset_after.as_u64();
        assert!(untouched(now + reset), "reset too early");
        if reset > 0 {
            assert!(!untouched(now + reset - 1), "reset too late");
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
        let l = SlidingLog::new(limit, Micros::new(window));
        let admitted = run(&l, limit, start, &evs);
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
        let l = SlidingLog::new(limit, Micros::new(window));
        let admitted = run(&l, limit, start, &scaled(window, &evs));
        prop_assert!(most_in_any_window(&admitted, window) <= limit);
    }

    #[test]
    fn subwindows_never_admit_more_than_limit_in_any_window(
        limit in 1u64..6, window in 5u64..300, n in 2u64..6, start in 0u64..1 << 40,
        evs in proptest::collection::vec((0u64..450, 0u64..8), 1..60),
    ) {
        let l = SlidingSubwindows::new(limit, Micros::new(window), n);
        let admitted = run(&l, limit, start, &evs);
        prop_assert!(most_in_any_window(&admitted, window) <= limit);
    }

    #[test]
    fn approx_never_admits_more_than_twice_the_limit(
        limit in 1u64..6, window in 5u64..300, start in 0u64..1 << 40,
        evs in proptest::collection::vec((0u64..450, 0u64..8), 1..60),
    ) {
        let l = SlidingApprox::new(limit, Micros::new(window));
        let admitted = run(&l, limit, start, &evs);
        prop_assert!(most_in_any_window(&admitted, window) <= 2 * limit);
    }

    #[test]
    fn fixed_never_admits_more_than_limit_per_window(
        limit in 1u64..6, window in 5u64..300, start in 0u64..1 << 40, aligned in any::<bool>(),
        evs in proptest::collection::vec((0u64..450, 0u64..8), 1..60),
    ) {
        let l = FixedWindow::new(limit, Micros::new(window), aligned);
        let admitted = run(&l, limit, start, &evs);
        prop_assert!(most_in_any_window(&admitted, window) <= 2 * limit);
        if aligned {
            for &(t, _) in &admitted {
                let w = t / window;
                let in_window: u64 = admitted.iter().filter(|a| a.0 / window == w).map(|a| a.1).sum();
                prop_assert!(in_window <= limit);
            }
        }
    }

    /// Every reply stays exact (`retry_after`, `remaining`, `reset_after`)
    /// when the clock steps back by anything from 1 µs to a window and
    /// more, for every window limiter.
    #[test]
    fn replies_stay_exact_when_the_clock_steps_back(
        limit in 1u64..6, window in 5u64..300, n in 2u64..6, aligned in any::<bool>(),
        start in 1u64 << 20..1 << 40,
        evs in proptest::collection::vec((any::<bool>(), 0u64..450, 0u64..8), 1..60),
    ) {
        let mut now = start;
        let timeline: Vec<(u64, u64)> = evs
            .iter()
            .map(|&(back, dt, cost)| {
                now = if back { now - (1 + dt % (2 * window)) } else { now + dt };
                (now, cost)
            })
            .collect();
        let w = Micros::new(window);
        run_at(&SlidingLog::new(limit, w), limit, &timeline);
        run_at(&SlidingSubwindows::new(limit, w, n), limit, &timeline);
        run_at(&SlidingApprox::new(limit, w), limit, &timeline);
        run_at(&FixedWindow::new(limit, w, aligned), limit, &timeline);
    }

    #[test]
    fn deciding_on_extreme_well_formed_states_never_panics(
        newest in any::<u64>(), counts in proptest::collection::vec(any::<u64>(), 3),
        index in any::<u64>(), prev in any::<u64>(), cur in any::<u64>(),
        now in any::<u64>(), cost in 0u64..5,
    ) {
        let b = window::encode_subwindows(8, &SubwindowState { newest, counts });
        let a = window::encode_approx(&ApproxState { index, prev, cur });
        let f = window::encode_fixed(Kind::FixedAligned, &FixedState { start: Micros::new(index), count: prev });
        let now = Micros::new(now);
        for window in [1, 1 << 30, u64::MAX].map(Micros::new) {
            let _ = SlidingSubwindows::new(4, window, 2).decide_stored(Some(&b), now, cost);
            let _ = SlidingApprox::new(4, window).decide_stored(Some(&a), now, cost);
            let _ = FixedWindow::new(4, window, true).decide_stored(Some(&f), now, cost);
        }
    }
}
