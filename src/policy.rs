//! A limit of any algorithm, as one value: what RL.ALL combines and what the
//! window commands decide through. Pure: bytes in, decision and bytes out.
//!
//! Every algorithm is one [`Limiter`] implementation in its own file here:
//! its stored-state glue (decode, decide, refund, force, write) and its
//! policy tests. [`Policy`] only names the algorithm a command parsed and
//! dispatches to it (`with_limiter!`); adding an algorithm adds a variant,
//! one arm of that match, and its file.

use crate::algorithm::concurrency::{Concurrency, LeaseId};
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::schedule::Schedule;
use crate::algorithm::share::Node;
use crate::algorithm::sketch::Sketch;
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_subwindows::SlidingSubwindows;
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::{Decision, Micros};
use crate::codec::lease;
use crate::codec::{Bytes, Kind, Patch, StateError};
use carry::Carrying;
use std::sync::Arc;

mod carry;
mod concurrency;
mod fixed_window;
mod gcra;
mod limiter;
mod schedule;
pub mod share;
mod sketch;
mod sliding_approx;
mod sliding_log;
mod sliding_subwindows;
mod token_bucket;
pub use concurrency::{change_leases, release_lease};
pub use limiter::{ForceError, Limiter};
use sketch::ItemSketch;

/// One parsed limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    Gcra(Gcra),
    Bucket(TokenBucket),
    /// RL.SLIDING EXACT: the sliding log.
    SlidingLog(SlidingLog),
    /// RL.SLIDING APPROX: the two-window estimate.
    SlidingApprox(SlidingApprox),
    /// RL.SLIDING BUCKETS n.
    SlidingSubwindows(SlidingSubwindows),
    /// RL.FIXED [ALIGNED].
    Fixed(FixedWindow),
    /// RL.SKETCH: the count-min sketch, deciding for one item.
    Sketch {
        sketch: Sketch,
        item: Vec<u8>,
    },
    /// RL.ACQUIRE; RL.ALL's CONCURRENCY.
    Concurrency(Concurrency),
    /// A node of an RL.SHARE path (decided with its path in the engine).
    Share(Node),
    /// A policy defined by name (`RL.POLICY SET`): it decides on a key's
    /// state written under an earlier definition by the rules of
    /// [`carry`] (never a wrong-kind error).
    Named(Arc<Policy>),
}

/// How a decision changes the stored value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateWrite {
    /// Replace the whole value (replicated as `SET key value PXAT t`).
    Value(Bytes),
    /// Change the value in place ([`Patch`]), replicated as `SETRANGE`s and
    /// one `PEXPIREAT`: what one request sends to replicas then does not
    /// grow with the size of the state. For a key that already holds this
    /// policy's state, or for a missing key (created zero-filled).
    Patch(Patch),
    /// Delete the key: a refund brought the limiter back to its full,
    /// untouched state, which is what no key means (replicated as `DEL`).
    Delete,
}

impl StateWrite {
    /// Applies the write to a value as Redis does (`SET`, or `SETRANGE`
    /// growing the value with zeros): for tests and benches of the core.
    pub fn apply_to(&self, state: &mut Option<Vec<u8>>) {
        match self {
            StateWrite::Value(v) => *state = Some(v.to_vec()),
            StateWrite::Patch(patch) => patch.apply_to(state.get_or_insert_with(Vec::new)),
            StateWrite::Delete => *state = None,
        }
    }
}

/// A decision and, when the state changes, the write to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub decision: Decision,
    pub write: Option<StateWrite>,
    /// The lease an admitted concurrency request holds once written.
    pub lease: Option<LeaseId>,
}

/// Runs `$body` with `$l` bound to the policy's algorithm as a
/// [`Limiter`]: the one place a policy is matched on. Static dispatch: each
/// arm calls its algorithm's implementation directly.
macro_rules! with_limiter {
    ($policy:expr, $l:ident => $body:expr) => {
        match $policy {
            Policy::Gcra($l) => $body,
            Policy::Bucket($l) => $body,
            Policy::SlidingLog($l) => $body,
            Policy::SlidingApprox($l) => $body,
            Policy::SlidingSubwindows($l) => $body,
            Policy::Fixed($l) => $body,
            Policy::Sketch { sketch, item } => {
                let $l = &ItemSketch { sketch, item };
                $body
            }
            Policy::Concurrency($l) => $body,
            Policy::Share($l) => $body,
            Policy::Named(named) => {
                let $l = &Carrying(named);
                $body
            }
        }
    };
}

impl Policy {
    /// The state kind this policy reads and writes.
    pub fn kind(&self) -> Kind {
        with_limiter!(self, l => Limiter::kind(l))
    }

    /// The command whose state this policy shares, for error messages (the
    /// sliding and fixed modes keep different state: it names the mode).
    pub fn command(&self) -> &'static str {
        self.kind().name()
    }

    /// Decides `cost` at `now` against the stored value (`None`: no key).
    /// The write is `Some` only when an admitted request changes the state.
    pub fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError> {
        with_limiter!(self, l => Limiter::decide(l, stored, now, cost))
    }

    /// The decision alone, for looks that write nothing: no write is
    /// prepared (a sliding log's would be as long as `cost`).
    pub fn decision(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Decision, StateError> {
        with_limiter!(self, l => Limiter::decision(l, stored, now, cost))
    }

    /// Gives back `n` units ([`Limiter::refund`]).
    pub fn refund(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        n: u64,
    ) -> Result<Transition, StateError> {
        with_limiter!(self, l => Limiter::refund(l, stored, now, n))
    }

    /// Charges `cost` whether or not it fits ([`Limiter::force`]).
    pub fn force(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, ForceError> {
        with_limiter!(self, l => Limiter::force(l, stored, now, cost))
    }

    /// The most units, up to `most`, that one request could be charged now
    /// ([`Limiter::admittable`]).
    pub fn admittable(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        most: u64,
    ) -> Result<u64, StateError> {
        with_limiter!(self, l => Limiter::admittable(l, stored, now, most))
    }

    /// Whether an admitted request holds a lease (its reply carries it).
    pub fn holds_leases(&self) -> bool {
        with_limiter!(self, l => Limiter::holds_leases(l))
    }

    pub fn lease_deadline(&self, now: Micros) -> Option<Micros> {
        with_limiter!(self, l => Limiter::lease_deadline(l, now))
    }

    /// The time in which it admits one unit on average
    /// ([`Limiter::interval`]).
    pub fn interval(&self) -> Option<Micros> {
        with_limiter!(self, l => Limiter::interval(l))
    }

    /// Whether a request may be admitted now for a later start
    /// ([`Limiter::reserves`]).
    pub fn reserves(&self) -> bool {
        with_limiter!(self, l => Limiter::reserves(l))
    }

    /// Whether its state can hold a debt ([`Limiter::holds_debt`]).
    pub fn holds_debt(&self) -> bool {
        with_limiter!(self, l => Limiter::holds_debt(l))
    }

    /// The policy as it applies to the key named `name` (a concurrency
    /// limit's leases carry a check of the name). The name is read only
    /// for such a limit: reading an argument is a call into the server.
    pub fn for_key<'a>(self, name: impl FnOnce() -> &'a [u8]) -> Policy {
        match self {
            Policy::Concurrency(c) => Policy::Concurrency(c.for_key(lease::key_check(name()))),
            Policy::Named(named) if named.holds_leases() => {
                Policy::Named(Arc::new((*named).clone().for_key(name)))
            }
            other => other,
        }
    }

    /// This policy as one defined by name ([`Policy::Named`]).
    pub fn named(self) -> Policy {
        match self {
            named @ Policy::Named(_) => named,
            other => Policy::Named(Arc::new(other)),
        }
    }

    /// Whether room comes back continuously as time passes (GCRA, BUCKET,
    /// RL.SHARE's rates), rather than at instants a window or a log entry
    /// sets.
    pub fn refills_continuously(&self) -> bool {
        match self {
            Policy::Share(_) => true,
            Policy::Named(named) => named.refills_continuously(),
            other => other.schedule().is_some(),
        }
    }

    /// Whether nothing charged in one window counts in the next (FIXED):
    /// room a window leaves may be taken without delaying anyone later.
    pub fn starts_afresh_each_window(&self) -> bool {
        match self {
            Policy::Fixed(_) => true,
            Policy::Named(named) => named.starts_afresh_each_window(),
            _ => false,
        }
    }

    /// The schedule of GCRA and BUCKET.
    pub fn schedule(&self) -> Option<&Schedule> {
        match self {
            Policy::Gcra(g) => Some(g.schedule()),
            Policy::Bucket(b) => Some(b.schedule()),
            Policy::Named(named) => named.schedule(),
            _ => None,
        }
    }
}

impl Transition {
    pub(crate) fn of(decision: Decision, write: Option<StateWrite>) -> Transition {
        Transition {
            decision,
            write,
            lease: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_policy_dispatches_to_its_own_kind_and_command() {
        let s = Micros::from_secs(1);
        let cases = [
            (
                Policy::Gcra(Gcra::new(2, s, 2).unwrap()),
                Kind::Gcra,
                "RL.GCRA",
            ),
            (
                Policy::Bucket(TokenBucket::new(2, 1, s).unwrap()),
                Kind::Bucket,
                "RL.BUCKET",
            ),
            (
                Policy::SlidingLog(SlidingLog::new(2, s)),
                Kind::SlidingLog,
                "RL.SLIDING EXACT",
            ),
            (
                Policy::SlidingApprox(SlidingApprox::new(2, s)),
                Kind::SlidingApprox,
                "RL.SLIDING APPROX",
            ),
            (
                Policy::SlidingSubwindows(SlidingSubwindows::new(2, s, 3)),
                Kind::SlidingSubwindows,
                "RL.SLIDING BUCKETS",
            ),
            (
                Policy::Fixed(FixedWindow::new(2, s, false)),
                Kind::Fixed,
                "RL.FIXED",
            ),
            (
                Policy::Fixed(FixedWindow::new(2, s, true)),
                Kind::FixedAligned,
                "RL.FIXED ALIGNED",
            ),
            (
                Policy::Sketch {
                    sketch: Sketch::new(2, s, 4, 2),
                    item: b"i".to_vec(),
                },
                Kind::Sketch,
                "RL.SKETCH",
            ),
            (
                Policy::Concurrency(Concurrency::new(2, s)),
                Kind::Concurrency,
                "RL.ACQUIRE",
            ),
        ];
        for (policy, kind, command) in cases {
            assert_eq!((policy.kind(), policy.command()), (kind, command));
            assert_eq!(policy.holds_leases(), kind == Kind::Concurrency);
            // What a policy writes carries its own tag.
            let mut value = None;
            let out = policy.decide(None, Micros::from_secs(100), 1).unwrap();
            out.write.unwrap().apply_to(&mut value);
            assert_eq!(value.and_then(|v| Kind::of(&v)), Some(kind));
        }
    }

    // The window limiters' own properties are in algorithm/window_props.rs;
    // these are the policy's: reading states written with other parameters
    // (or by no one) and converting them.
    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn changing_parameters_of_a_key_never_fails(
            evs in proptest::collection::vec((0u64..4, 1u64..8, 0u64..400, 0u64..6, 2u64..5), 1..60),
        ) {
            let mut log = None;
            let mut subwindows = None;
            let mut now = 1u64 << 33;
            for (window_pick, limit, dt, cost, n) in evs {
                now += dt;
                let window = Micros::new([50, 100, 1 << 33, 300][window_pick as usize]);
                let now = Micros::new(now);
                for (state, p) in [
                    (&mut log, Policy::SlidingLog(SlidingLog::new(limit, window))),
                    (&mut subwindows, Policy::SlidingSubwindows(SlidingSubwindows::new(limit, window, n))),
                ] {
                    let out = p.decide(state.as_deref(), now, cost).unwrap();
                    prop_assert!(!out.decision.allowed || cost <= limit);
                    if let Some(w) = &out.write {
                        w.apply_to(state);
                    }
                    // What was written reads back under the same parameters.
                    let again = p.decide(state.as_deref(), now, 0).unwrap().decision;
                    prop_assert!(again.remaining <= limit);
                }
            }
        }

        #[test]
        fn deciding_on_arbitrary_stored_bytes_never_panics(
            tag in prop_oneof![0xA3u8..=0xA8, Just(0xABu8)],
            bytes in proptest::collection::vec(any::<u8>(), 0..60),
            now in any::<u64>(),
            cost in 0u64..5,
            limit in 1u64..5,
            bytes_item in proptest::collection::vec(any::<u8>(), 0..4),
        ) {
            let mut v = vec![tag];
            v.extend(bytes);
            let us = Micros::new;
            for p in [
                Policy::SlidingLog(SlidingLog::new(limit, us(1 << 20))),
                Policy::SlidingLog(SlidingLog::new(limit, us(1 << 40))),
                Policy::SlidingApprox(SlidingApprox::new(limit, us(7))),
                Policy::SlidingSubwindows(SlidingSubwindows::new(limit, us(100), 2)),
                Policy::SlidingSubwindows(SlidingSubwindows::new(limit, Micros::MAX, 3)),
                Policy::Fixed(FixedWindow::new(limit, Micros::MAX, true)),
                Policy::Sketch { sketch: Sketch::new(limit, us(7), 1, 1), item: bytes_item.clone() },
            ] {
                let _ = p.decide(Some(&v), us(now), cost);
            }
        }
    }
}
