//! Reservations (`RESERVE maxdelay`): a request denied now that would be
//! admitted within `maxdelay` is admitted now for a start later, and
//! charged now; beyond `maxdelay` it is denied as without the option, and
//! charges nothing.
//!
//! Its start is the instant the same request with `WAIT` would be admitted
//! on keys nobody waits on: now plus the wait its denial names (exact on
//! every limit that reserves: a wait is the instant it admits, and with no
//! other traffic admission only grows with time). It is decided at that
//! start, and the state that decision writes is stored now, each key
//! expiring as long after the start as the decision says
//! ([`Policy::reserves`]). Where the state is an instant (a schedule's
//! TAT, every rate of an RL.SHARE path), read at any moment before the
//! start it is the state the admission at the start leaves, so a request
//! after it stands where it would behind a waiter admitted then. A window
//! limiter's state is charged in the window (sub-window, log entry) where
//! the admission starts: that state no longer holds the count of the time
//! before the start, so it admits nothing before it
//! (`algorithm::not_before`): a request after the reservation is admitted
//! at the start at the earliest, behind it, never in room the present
//! window has left (a waiter in the reservation's place would let a
//! smaller request into that room; a reservation does not).

use super::store::{self, Store};
use super::{decide_now, Charge, KeyError, Outcome, Request, Reservation};
use crate::algorithm::{Decision, Micros, RetryAfter};
use crate::bounds::work::{self, Work};
use crate::engine::error::Error;
use crate::policy::{Policy, StateWrite, Transition};

/// Decides `request` (with `RESERVE most`) under `policies` at `now`.
pub(super) fn decide<S: Store>(
    store: &mut S,
    policies: &[Policy],
    now: Micros,
    request: &Request,
    most: Micros,
) -> Result<Outcome, KeyError> {
    // `decide_now` reads no `reserve`: the request as it is decides now.
    // The outcome is answered where it was decided (not moved) unless a
    // start is decided for several limits.
    let mut result = decide_now(store, policies, now, request, false);
    let Ok(decided) = &mut result else {
        return result;
    };
    if decided.allowed {
        decided.reservation = Some(Reservation::Starts(Micros::ZERO));
        return result;
    }
    decided.reservation = Some(Reservation::Denied);
    let wait = match decided.retry_after {
        RetryAfter::After(wait) if wait <= most && wait > Micros::ZERO => wait,
        _ => return result,
    };
    if !policies.iter().all(Policy::reserves) {
        return result;
    }
    let start = now.saturating_add(wait);
    if let [policy] = policies {
        if request.charge == Charge::Normal && !is_node(policy) {
            one(store, policy, start, request, wait, decided)?;
            return result;
        }
    }
    let mut later = Later { store, by: wait };
    let mut reserved = decide_now(&mut later, policies, start, request, false)?;
    if !reserved.allowed {
        // Not what the wait named (no limit that reserves does this):
        // denied as without the option.
        return result;
    }
    // Counted from now, as every reply's: the reset after the start.
    for d in &mut reserved.decisions {
        d.reset_after = d.reset_after.saturating_add(wait);
    }
    reserved.reservation = Some(Reservation::Starts(wait));
    Ok(reserved)
}

/// The start of a reservation on one limit, `denied` now with `wait`:
/// its limit decides at `start` (= now + `wait`) on the state it decided
/// on now, and `denied` becomes the admission in place (left as it is if
/// the start does not admit), without the rest of a decision made again. What it answers and writes is what [`decide_now`]
/// at the start, through [`Later`], answers and writes.
#[inline(never)]
fn one<S: Store>(
    store: &mut S,
    policy: &Policy,
    start: Micros,
    request: &Request,
    wait: Micros,
    denied: &mut Outcome,
) -> Result<(), KeyError> {
    work::add(Work::Decisions, 1);
    let cost = request.cost_of(0);
    let stored = store.value(0).map_err(|error| KeyError { key: 0, error })?;
    let Transition {
        decision, write, ..
    } = policy.decide(stored, start, cost).map_err(|e| KeyError {
        key: 0,
        error: Error::state(policy.command(), e),
    })?;
    if !decision.allowed {
        // Not what the wait named (no limit that reserves does this):
        // denied as without the option.
        return Ok(());
    }
    // Counted from now, as every reply's: the reset after the start; the
    // key expires as long after the start as the decision says.
    let decision = Decision {
        reset_after: decision.reset_after.saturating_add(wait),
        ..decision
    };
    if let (Some(write), false) = (&write, request.dryrun) {
        store::write_one(store, 0, write, decision.reset_after)
            .map_err(|error| KeyError { key: 0, error })?;
    }
    denied.allowed = true;
    denied.blocked_by = None;
    denied.retry_after = RetryAfter::NotNeeded;
    denied.decisions[0] = decision;
    denied.units[0] = cost;
    denied.reservation = Some(Reservation::Starts(wait));
    Ok(())
}

/// Whether `policy` is an RL.SHARE node (decided with its path).
fn is_node(policy: &Policy) -> bool {
    match policy {
        Policy::Share(_) => true,
        Policy::Named(named) => matches!(named.as_ref(), Policy::Share(_)),
        _ => false,
    }
}

/// A store whose writes expire `by` later than they say: a decision at a
/// start `by` from now counts its expiries from the start.
struct Later<'s, S> {
    store: &'s mut S,
    by: Micros,
}

impl<S: Store> Store for Later<'_, S> {
    fn value(&self, key: usize) -> Result<Option<&[u8]>, crate::engine::error::Error> {
        self.store.value(key)
    }

    fn prepare(
        &mut self,
        key: usize,
        write: &StateWrite,
    ) -> Result<(), crate::engine::error::Error> {
        self.store.prepare(key, write)
    }

    fn abandon(&mut self, key: usize) {
        self.store.abandon(key);
    }

    fn commit(&mut self, key: usize, write: &StateWrite, ttl: Micros) {
        self.store.commit(key, write, ttl.saturating_add(self.by));
    }
}

#[cfg(test)]
mod tests {
    use super::{Micros, Policy, Request, Reservation, RetryAfter};
    use crate::algorithm::gcra::Gcra;
    use crate::algorithm::token_bucket::TokenBucket;
    use crate::engine::decide;
    use crate::engine::store::MemoryStore;

    const S: u64 = 1_000_000;

    fn gcra(limit: u64, period_s: u64, burst: u64) -> Policy {
        Policy::Gcra(Gcra::new(limit, Micros::new(period_s * S), burst).unwrap())
    }

    fn bucket(capacity: u64, refill: u64, period_s: u64) -> Policy {
        Policy::Bucket(TokenBucket::new(capacity, refill, Micros::new(period_s * S)).unwrap())
    }

    fn request(cost: u64, reserve: Option<u64>) -> Request {
        Request {
            cost,
            reserve: reserve.map(Micros::new),
            ..Request::default()
        }
    }

    /// A reservation writes the state that the same request admitted at
    /// its start (as a waiter would be, nobody else arriving) writes, and
    /// the key expires as long after the start.
    #[test]
    fn a_reservation_writes_what_an_admission_at_its_start_writes() {
        let policies = [gcra(1, 10, 1), bucket(3, 1, 5)];
        let now = Micros::new(1_000 * S);
        let mut store = MemoryStore::new(2);
        decide(&mut store, &policies, now, &request(1, None)).unwrap();
        let mut waited = store.clone();
        let reserved = decide(&mut store, &policies, now, &request(1, Some(60 * S))).unwrap();
        // The GCRA limit admits again 10 s later (the bucket at once).
        let wait = Micros::new(10 * S);
        assert_eq!(reserved.reservation, Some(Reservation::Starts(wait)));
        assert!(reserved.allowed);
        let at_start = decide(
            &mut waited,
            &policies,
            now.saturating_add(wait),
            &request(1, None),
        );
        let at_start = at_start.unwrap();
        assert!(at_start.allowed);
        assert_eq!(store.values, waited.values);
        for (key, d) in at_start.decisions.iter().enumerate() {
            let ttl = d.reset_after.saturating_add(wait);
            assert_eq!(store.ttls[key], Some(ttl));
            assert_eq!(reserved.decisions[key].reset_after, ttl);
        }
    }

    #[test]
    fn beyond_maxdelay_it_is_denied_and_charges_nothing() {
        let policies = [gcra(1, 10, 1)];
        let now = Micros::new(1_000 * S);
        let mut store = MemoryStore::new(1);
        decide(&mut store, &policies, now, &request(1, None)).unwrap();
        let before = store.clone();
        let d = decide(&mut store, &policies, now, &request(1, Some(10 * S - 1))).unwrap();
        assert_eq!(d.reservation, Some(Reservation::Denied));
        assert!(!d.allowed);
        assert_eq!(d.retry_after, RetryAfter::After(Micros::new(10 * S)));
        assert_eq!(store, before);
        // Never admitted (more than the burst): denied whatever the delay.
        let d = decide(&mut store, &policies, now, &request(2, Some(u64::MAX))).unwrap();
        assert_eq!(d.reservation, Some(Reservation::Denied));
        assert_eq!(store, before);
    }

    #[test]
    fn admitted_at_once_it_starts_now_and_a_dry_run_writes_nothing() {
        let policies = [gcra(2, 10, 2)];
        let now = Micros::new(1_000 * S);
        let mut store = MemoryStore::new(1);
        let d = decide(&mut store, &policies, now, &request(2, Some(S))).unwrap();
        assert_eq!(d.reservation, Some(Reservation::Starts(Micros::ZERO)));
        let before = store.clone();
        let dry = Request {
            dryrun: true,
            ..request(1, Some(60 * S))
        };
        let d = decide(&mut store, &policies, now, &dry).unwrap();
        assert_eq!(d.reservation, Some(Reservation::Starts(Micros::new(5 * S))));
        assert!(d.allowed);
        assert_eq!(store, before);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// Whatever the history, a reservation leaves the state a waiter
        /// admitted at its start leaves, and later requests are answered
        /// the same on both.
        #[test]
        fn a_reservation_is_a_waiter_admitted_at_its_start(
            limit in 1u64..10, period_s in 1u64..20, burst in 1u64..5,
            capacity in 1u64..5, refill in 1u64..5,
            history in proptest::collection::vec((0u64..3_000_000, 0u64..4), 0..20),
            cost in 1u64..4,
            after in proptest::collection::vec((0u64..3_000_000, 0u64..4), 1..10),
        ) {
            let policies = [gcra(limit, period_s, burst), bucket(capacity, refill, period_s)];
            let mut store = MemoryStore::new(2);
            let mut now = 1_000 * S;
            for (dt, c) in history {
                now += dt;
                decide(&mut store, &policies, Micros::new(now), &request(c, None)).unwrap();
            }
            let mut waited = store.clone();
            let now = Micros::new(now);
            let reserved = decide(&mut store, &policies, now, &request(cost, Some(u64::MAX))).unwrap();
            let plain = decide(&mut waited.clone(), &policies, now, &request(cost, None)).unwrap();
            match reserved.reservation {
                Some(Reservation::Starts(wait)) => {
                    proptest::prop_assert!(reserved.allowed);
                    let start = now.saturating_add(wait);
                    let admitted = decide(&mut waited, &policies, start, &request(cost, None)).unwrap();
                    proptest::prop_assert!(admitted.allowed);
                    // Not a microsecond earlier (unless admitted at once).
                    if wait > Micros::ZERO {
                        proptest::prop_assert_eq!(plain.retry_after, RetryAfter::After(wait));
                    }
                    proptest::prop_assert_eq!(&store.values, &waited.values);
                }
                other => {
                    proptest::prop_assert_eq!(other, Some(Reservation::Denied));
                    proptest::prop_assert_eq!(plain.retry_after, RetryAfter::Never);
                }
            }
            let mut t = now;
            for (dt, c) in after {
                t = t.saturating_add(Micros::new(dt));
                let a = decide(&mut store, &policies, t, &request(c, None)).unwrap();
                let b = decide(&mut waited, &policies, t, &request(c, None)).unwrap();
                proptest::prop_assert_eq!(a.decisions, b.decisions);
            }
        }

        /// On one limit the start is decided by the limit alone, in the
        /// outcome of the denial: the reply, the state and the expiry of
        /// the request decided at its start, the reset counted from now.
        #[test]
        fn on_one_limit_a_reservation_answers_the_decision_at_its_start(
            is_bucket in proptest::bool::ANY, limit in 1u64..10, period_s in 1u64..20,
            burst in 1u64..5, dryrun in proptest::bool::ANY, cost in 1u64..4,
            history in proptest::collection::vec((0u64..3_000_000, 0u64..4), 0..20),
        ) {
            let policy = match is_bucket {
                true => bucket(burst, limit, period_s),
                false => gcra(limit, period_s, burst),
            };
            let policies = [policy];
            let mut store = MemoryStore::new(1);
            let mut now = 1_000 * S;
            for (dt, c) in history {
                now += dt;
                decide(&mut store, &policies, Micros::new(now), &request(c, None)).unwrap();
            }
            let now = Micros::new(now);
            let mut waited = store.clone();
            let asked = Request { dryrun, ..request(cost, Some(u64::MAX)) };
            let reserved = decide(&mut store, &policies, now, &asked).unwrap();
            let plain = decide(&mut waited.clone(), &policies, now, &request(cost, None)).unwrap();
            if let Some(Reservation::Starts(wait)) = reserved.reservation {
                if wait > Micros::ZERO {
                    let at = Request { dryrun, ..request(cost, None) };
                    let start = decide(&mut waited, &policies, now.saturating_add(wait), &at).unwrap();
                    proptest::prop_assert!(start.allowed && reserved.allowed);
                    proptest::prop_assert_eq!(plain.retry_after, RetryAfter::After(wait));
                    let mut want = start.decisions[0];
                    want.reset_after = want.reset_after.saturating_add(wait);
                    proptest::prop_assert_eq!(reserved.decisions.as_slice(), &[want]);
                    proptest::prop_assert_eq!(
                        (reserved.blocked_by, reserved.retry_after, reserved.granted),
                        (None, RetryAfter::NotNeeded, None)
                    );
                    proptest::prop_assert_eq!(reserved.units.as_slice(), &[cost]);
                    proptest::prop_assert_eq!(reserved.leases.as_slice(), &[None]);
                    proptest::prop_assert_eq!(&store.values, &waited.values);
                    if !dryrun {
                        proptest::prop_assert_eq!(store.ttls[0], Some(want.reset_after));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod windows;
