//! Properties of REFUND, FORCE and PARTIAL over every policy, on the
//! stored bytes: a refund never goes beyond full and undoes a charge
//! exactly; a partial grant never exceeds what fits; a forced debt is
//! waited off exactly at the stated `retry_after`.

use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_subwindows::SlidingSubwindows;
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::{Micros, RetryAfter};
use crate::policy::{ForceError, Policy, Transition};
use proptest::prelude::*;

/// Every policy kind with `limit` and a window/period of `ms` milliseconds.
fn policies(limit: u64, ms: u64, n: u64) -> Vec<Policy> {
    let w = Micros::from_millis(ms);
    vec![
        Policy::Gcra(Gcra::new(limit, w, limit).unwrap()),
        Policy::Bucket(TokenBucket::new(limit, (limit / 2).max(1), w).unwrap()),
        Policy::SlidingLog(SlidingLog::new(limit, w)),
        Policy::SlidingApprox(SlidingApprox::new(limit, w)),
        Policy::SlidingSubwindows(SlidingSubwindows::new(limit, w, n)),
        Policy::Fixed(FixedWindow::new(limit, w, n.is_multiple_of(2))),
    ]
}

fn apply(state: &mut Option<Vec<u8>>, out: &Transition) {
    if let Some(w) = &out.write {
        w.apply_to(state);
    }
}

/// What a policy would admit at `now`: the most one request may take.
fn room(p: &Policy, state: &Option<Vec<u8>>, now: Micros) -> u64 {
    p.admittable(state.as_deref(), now, u64::MAX).unwrap()
}

/// One step of a random history: 0 charge, 1 force, 2 refund.
type Step = (u8, u64, u64);

fn history() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec((0u8..3, 0u64..400, 1u64..12), 0..25)
}

/// Runs a history on `p` from `now`; returns the state and the time.
fn run(p: &Policy, steps: &[Step], mut now: u64) -> (Option<Vec<u8>>, Micros) {
    let mut state = None;
    for &(op, gap_ms, amount) in steps {
        now += gap_ms * 1_000;
        let at = Micros::new(now);
        let out = match op {
            0 => p.decide(state.as_deref(), at, amount).unwrap(),
            1 => match p.force(state.as_deref(), at, amount) {
                Ok(out) => out,
                Err(e) => panic!("{e:?}"),
            },
            _ => p.refund(state.as_deref(), at, amount).unwrap(),
        };
        apply(&mut state, &out);
    }
    (state, Micros::new(now))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_refund_never_goes_beyond_full_and_undoes_a_charge_exactly(
        limit in 1u64..20, ms in 1u64..2_000, n in 2u64..6,
        steps in history(), charge in 1u64..20, extra in 0u64..30,
    ) {
        for p in policies(limit, ms, n) {
            let (mut state, now) = run(&p, &steps, 1 << 40);
            let before = room(&p, &state, now);
            let before_fields = p.decide(state.as_deref(), now, 0).unwrap().decision;
            let charged = p.decide(state.as_deref(), now, charge).unwrap();
            apply(&mut state, &charged);
            let refund = if charged.decision.allowed { charge } else { 0 };
            if refund > 0 {
                let back = p.refund(state.as_deref(), now, refund).unwrap();
                prop_assert!(back.decision.allowed);
                apply(&mut state, &back);
                prop_assert_eq!(room(&p, &state, now), before, "{:?}", p);
                let after = p.decide(state.as_deref(), now, 0).unwrap().decision;
                prop_assert_eq!(after.remaining, before_fields.remaining);
            }
            // More than was ever charged: back to full at most.
            let back = p.refund(state.as_deref(), now, limit + extra).unwrap();
            apply(&mut state, &back);
            let full = room(&p, &state, now);
            prop_assert!(full <= limit);
            prop_assert!(full >= before);
            prop_assert_eq!(back.decision.remaining, p.decide(state.as_deref(), now, 0).unwrap().decision.remaining);
            // A refund that leaves the limiter untouched leaves no key.
            if back.write.is_some() && back.decision.reset_after == Micros::ZERO {
                prop_assert!(state.is_none(), "{:?} kept a key back to full", p);
            }
        }
    }

    /// Every algorithm: what was charged, given back (at once or later),
    /// leaves no key, so the next request starts afresh, exactly as on a
    /// key never used.
    #[test]
    fn a_refund_to_full_deletes_the_key_for_every_algorithm(
        limit in 1u64..20, ms in 1u64..2_000, n in 2u64..6,
        charge in 1u64..20, extra in 0u64..5, later in 0u64..3_000,
    ) {
        for p in policies(limit, ms, n) {
            let window = ms * 1_000;
            let start = Micros::new((1u64 << 40) / window * window);
            let mut state = None;
            let charged = p.decide(None, start, charge).unwrap();
            if !charged.decision.allowed {
                continue;
            }
            apply(&mut state, &charged);
            let at = start.saturating_add(Micros::new(later % window));
            // Already back to full by itself: its TTL has ended the key.
            if p.decide(state.as_deref(), at, 0).unwrap().decision.reset_after == Micros::ZERO {
                continue;
            }
            let out = p.refund(state.as_deref(), at, charge + extra).unwrap();
            apply(&mut state, &out);
            prop_assert!(state.is_none(), "{:?}: {:?}", p, out);
            prop_assert_eq!(out.decision, p.decide(None, at, 0).unwrap().decision);
        }
    }

    #[test]
    fn a_partial_grant_is_the_most_that_fits(
        limit in 1u64..20, ms in 1u64..2_000, n in 2u64..6,
        steps in history(), want in 1u64..30,
    ) {
        for p in policies(limit, ms, n) {
            let (state, now) = run(&p, &steps, 1 << 40);
            let m = p.admittable(state.as_deref(), now, want).unwrap();
            prop_assert!(m <= want && m <= limit);
            if m > 0 {
                prop_assert!(p.decide(state.as_deref(), now, m).unwrap().decision.allowed);
            }
            if m < want && m < limit {
                prop_assert!(!p.decide(state.as_deref(), now, m + 1).unwrap().decision.allowed, "{:?}", p);
            }
        }
    }

    #[test]
    fn a_forced_debt_is_waited_off_exactly(
        limit in 1u64..20, ms in 1u64..2_000, n in 2u64..6,
        steps in history(), cost in 1u64..60,
    ) {
        for p in policies(limit, ms, n) {
            let (mut state, now) = run(&p, &steps, 1 << 40);
            let fits = p.decide(state.as_deref(), now, cost).unwrap().decision.allowed;
            let out = p.force(state.as_deref(), now, cost).unwrap();
            prop_assert_eq!(out.decision.allowed, fits);
            prop_assert!(out.write.is_some());
            apply(&mut state, &out);
            let next = p.decide(state.as_deref(), now, 1).unwrap().decision;
            if fits {
                continue;
            }
            prop_assert!(!next.allowed);
            prop_assert_eq!(out.decision.remaining, 0);
            let RetryAfter::After(wait) = out.decision.retry_after else {
                panic!("no wait after a debt: {:?}", out.decision)
            };
            prop_assert_eq!(next.retry_after, out.decision.retry_after);
            let at = now.saturating_add(wait);
            prop_assert!(p.decide(state.as_deref(), at, 1).unwrap().decision.allowed, "{:?}", p);
            let sooner = Micros::new(at.as_u64() - 1);
            prop_assert!(!p.decide(state.as_deref(), sooner, 1).unwrap().decision.allowed, "{:?}", p);
        }
    }
}

#[test]
fn a_refund_to_no_key_changes_nothing() {
    for p in policies(5, 1_000, 3) {
        let out = p.refund(None, Micros::from_secs(1), 3).unwrap();
        assert!(out.write.is_none());
        assert!(out.decision.allowed);
        assert_eq!(out.decision.remaining, 5);
    }
}

#[test]
fn a_schedule_debt_beyond_the_horizon_is_refused() {
    let p = Policy::Gcra(Gcra::new(1, Micros::from_secs(86_400 * 365), 1).unwrap());
    assert_eq!(
        p.force(None, Micros::from_secs(1), 1_001),
        Err(ForceError::TooLarge)
    );
    assert!(p.force(None, Micros::from_secs(1), 999).is_ok());
    let f = Policy::Fixed(FixedWindow::new(1, Micros::from_secs(1), false));
    let full = f.force(None, Micros::ZERO, u64::MAX).unwrap();
    let mut state = None;
    apply(&mut state, &full);
    assert_eq!(
        f.force(state.as_deref(), Micros::ZERO, 1),
        Err(ForceError::TooLarge)
    );
}
