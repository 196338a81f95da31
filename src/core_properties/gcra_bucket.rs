//! Property tests of the pure GCRA / token-bucket core (no server).

use crate::algorithm::gcra::Gcra;
use crate::algorithm::schedule::Tat;
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::{Decision, Micros, RetryAfter};
use crate::policy::Policy;
use proptest::prelude::*;

/// Runs one decision at `now` µs and keeps the new state.
fn step(g: &Gcra, state: &mut Option<Tat>, now: u64, cost: u64) -> Decision {
    let (d, new) = g.schedule().decide(*state, Micros::new(now), cost);
    if let Some(t) = new {
        *state = Some(t);
    }
    d
}

fn params() -> impl Strategy<Value = (u64, u64, u64)> {
    // (limit, period µs, burst)
    (1u64..50, 1u64..5_000_000, 1u64..20)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// In any interval [t1, t2] the admitted cost is at most
    /// `burst + rate × (t2 − t1 + 1 µs)`: the clock reads whole microseconds,
    /// so a request stamped t may stand for any moment of [t, t + 1).
    #[test]
    fn never_more_than_burst_plus_rate_times_elapsed(
        (limit, period, burst) in params(),
        gaps in proptest::collection::vec((0u64..400_000, 1u64..4), 1..120),
    ) {
        let g = Gcra::new(limit, Micros::new(period), burst).unwrap();
        let mut state = None;
        let mut now = 1_000_000_000u64;
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        for (gap, cost) in gaps {
            now += gap;
            if step(&g, &mut state, now, cost).allowed {
                admitted.push((now, cost));
            }
        }
        for i in 0..admitted.len() {
            let mut sum = 0u128;
            for &(t2, cost) in &admitted[i..] {
                sum += u128::from(cost);
                let t1 = admitted[i].0;
                let bound = u128::from(burst) * u128::from(period)
                    + u128::from(t2 - t1 + 1) * u128::from(limit);
                prop_assert!(sum * u128::from(period) <= bound,
                    "{sum} admitted in [{t1}, {t2}] (limit {limit} per {period} µs, burst {burst})");
            }
        }
    }

    /// Under constant overload, after the burst the j-th admission falls at
    /// exactly ceil(j × period / limit): denied 1 µs before, with a wait of
    /// exactly 1 µs, and admitted at it.
    #[test]
    fn no_drift((limit, period, burst) in params()) {
        let g = Gcra::new(limit, Micros::new(period), burst).unwrap();
        let mut state = None;
        let start = 5_000_000_000u64;
        for _ in 0..burst {
            prop_assert!(step(&g, &mut state, start, 1).allowed);
        }
        for j in 1..=60u128 {
            let at = start + (j * u128::from(period)).div_ceil(u128::from(limit)) as u64;
            let early = step(&g, &mut state, at - 1, 1);
            prop_assert!(!early.allowed, "j={j} admitted early");
            prop_assert_eq!(early.retry_after, RetryAfter::After(Micros::new(1)));
            prop_assert!(step(&g, &mut state, at, 1).allowed, "j={j} denied on time");
        }
    }

    /// The reply agrees with the state: exactly `remaining` more requests of
    /// cost 1 are admitted at the same instant, a request of cost `burst` is
    /// admitted exactly `reset_after` later (and not 1 µs before), and a
    /// denied request is admitted exactly `retry_after` later.
    #[test]
    fn reply_fields_agree_with_the_state(
        (limit, period, burst) in params(),
        warmup in proptest::collection::vec((0u64..300_000, 0u64..4), 0..30),
        cost in 0u64..25,
    ) {
        let g = Gcra::new(limit, Micros::new(period), burst).unwrap();
        let mut state = None;
        let mut now = 2_000_000_000u64;
        for (gap, c) in warmup {
            now += gap;
            step(&g, &mut state, now, c);
        }
        let d = step(&g, &mut state, now, cost);
        prop_assert_eq!(d.limit, burst);
        match d.retry_after {
            RetryAfter::NotNeeded => prop_assert!(d.allowed),
            RetryAfter::Never => prop_assert!(!d.allowed && cost > burst),
            RetryAfter::After(wait) => {
                let wait = wait.as_u64();
                prop_assert!(!d.allowed && wait > 0);
                let (later, _) = g.schedule().decide(state, Micros::new(now + wait), cost);
                prop_assert!(later.allowed, "not admitted after retry_after");
                let (sooner, _) = g.schedule().decide(state, Micros::new(now + wait - 1), cost);
                prop_assert!(!sooner.allowed, "admitted before retry_after");
            }
        }
        let mut probe = state;
        for _ in 0..d.remaining {
            prop_assert!(step(&g, &mut probe, now, 1).allowed);
        }
        prop_assert!(!step(&g, &mut probe, now, 1).allowed, "more than remaining admitted");
        let reset = d.reset_after.as_u64();
        let (full, _) = g.schedule().decide(state, Micros::new(now + reset), burst);
        prop_assert!(full.allowed, "not full after reset_after");
        if reset > 0 {
            let (not_yet, _) = g.schedule().decide(state, Micros::new(now + reset - 1), burst);
            prop_assert!(!not_yet.allowed, "full before reset_after");
        }
    }
}

/// An independent model of the schedule: exact GCRA in ticks of
/// `1 / limit` µs (the unreduced fraction), for comparing field by field.
struct Model {
    limit: u128,
    period: u128,
    burst: u128,
    /// The TAT in ticks; `None`: no key.
    tat: Option<u128>,
}

/// What the model answers: (allowed, remaining, retry µs or None, reset µs).
type Fields = (bool, u64, Option<u64>, u64);

impl Model {
    /// The TAT a request at clock reading `t` µs starts from: a TAT less
    /// than 1 µs before `t` stands (the clock cannot show the moment it
    /// asked for); an older one, or none, restarts at `t` exactly.
    fn start(&self, t: u64) -> u128 {
        let now = u128::from(t) * self.limit;
        match self.tat {
            Some(tat) if tat + self.limit > now => tat,
            _ => now,
        }
    }

    fn decide(&mut self, t: u64, cost: u64) -> Fields {
        let now = u128::from(t) * self.limit;
        let tolerance = self.burst * self.period;
        let start = self.start(t);
        let wanted = start + u128::from(cost) * self.period;
        // Nothing asked is always granted (even behind a clock gone back).
        let fits = cost == 0
            || (u128::from(cost) <= self.burst && wanted.saturating_sub(now) <= tolerance);
        let after = if fits { wanted } else { start };
        if fits && cost > 0 {
            self.tat = Some(after);
        }
        let backlog = after.saturating_sub(now);
        let retry = (!fits && u128::from(cost) <= self.burst)
            .then(|| (wanted - now - tolerance).div_ceil(self.limit) as u64);
        (
            fits,
            ((tolerance - backlog.min(tolerance)) / self.period) as u64,
            retry,
            backlog.div_ceil(self.limit) as u64,
        )
    }

    /// Gives `n` units back, never beyond full (no key).
    fn refund(&mut self, t: u64, n: u64) {
        let now = u128::from(t) * self.limit;
        let start = self.start(t);
        if self.tat.is_some() && start > now {
            let back = start.saturating_sub(u128::from(n) * self.period);
            self.tat = (back > now).then_some(back);
        }
    }
}

/// One step of a timeline: the clock moves (forward, or back after a
/// failover), then a request or a refund.
#[derive(Debug, Clone)]
enum Move {
    Forward(u64),
    /// Idle for whole periods and more: the schedule lies far in the past.
    Idle(u64),
    Back(u64),
}

fn moves() -> impl Strategy<Value = Vec<(Move, bool, u64)>> {
    let step = prop_oneof![
        4 => (0u64..400_000).prop_map(Move::Forward),
        1 => (1u64..50_000_000_000).prop_map(Move::Idle),
        2 => (1u64..2_000_000).prop_map(Move::Back),
    ];
    proptest::collection::vec((step, any::<bool>(), 0u64..5), 1..80)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The core agrees with the model on every field of every decision,
    /// through idle gaps (a restart after idle is exactly a fresh key's),
    /// backward clock steps, refunds back to full, and intervals far
    /// shorter than a millisecond (denials whose wait is a few µs).
    #[test]
    fn the_schedule_is_exactly_the_model(
        (limit, period, burst) in prop_oneof![params(), (1u64..50, 1u64..3_000, 1u64..20)],
        timeline in moves(),
    ) {
        let gcra = Policy::Gcra(Gcra::new(limit, Micros::new(period), burst).unwrap());
        let bucket =
            Policy::Bucket(TokenBucket::new(burst, limit, Micros::new(period)).unwrap());
        for p in [gcra, bucket] {
            let mut model = Model {
                limit: u128::from(limit),
                period: u128::from(period),
                burst: u128::from(burst),
                tat: None,
            };
            let mut state: Option<Vec<u8>> = None;
            let mut now = 1_900_000_000_000_000u64;
            for (step, refund, amount) in &timeline {
                now = match *step {
                    Move::Forward(dt) | Move::Idle(dt) => now + dt,
                    Move::Back(dt) => now - dt,
                };
                let at = Micros::new(now);
                let out = if *refund {
                    model.refund(now, *amount);
                    p.refund(state.as_deref(), at, *amount).unwrap()
                } else {
                    let out = p.decide(state.as_deref(), at, *amount).unwrap();
                    let d = out.decision;
                    let retry = match d.retry_after {
                        RetryAfter::After(w) => Some(w.as_u64()),
                        _ => None,
                    };
                    let got = (d.allowed, d.remaining, retry, d.reset_after.as_u64());
                    prop_assert_eq!(got, model.decide(now, *amount), "{:?} at {}", p, now);
                    out
                };
                if let Some(w) = &out.write {
                    w.apply_to(&mut state);
                }
                // Back to full is no key, in both.
                prop_assert_eq!(state.is_none(), model.tat.is_none(), "{:?} at {}", p, now);
                // Whatever the history, a look agrees too.
                let look = p.decide(state.as_deref(), at, 0).unwrap().decision;
                let mut probe = Model { tat: model.tat, ..model };
                let want = probe.decide(now, 0);
                prop_assert_eq!((look.remaining, look.reset_after.as_u64()), (want.1, want.3));
            }
        }
    }
}
