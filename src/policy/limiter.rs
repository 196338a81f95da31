//! [`Limiter`]: what every algorithm does as a policy, on its stored bytes.
//!
//! Each algorithm implements it once, in its own file under `src/policy/`
//! (the algorithm itself is in `src/algorithm/`, its layout in
//! `src/codec/`). The operations besides an ordinary charge have one
//! shared meaning, written here once as default methods: give units back
//! (REFUND), charge whether or not it fits (FORCE), and find the most that
//! fits now (PARTIAL, RL.PEEK). An algorithm supplies only the write each
//! makes; the decision reported is always that of the state after, read
//! back through [`Limiter::decide`], so every field (and every wait) is
//! exactly what the next request will see.

use super::{StateWrite, Transition};
use crate::algorithm::{Decision, Micros, RetryAfter};
use crate::codec::{Kind, StateError};

/// Why a forced charge was refused; nothing is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForceError {
    State(StateError),
    /// The state after the charge is more than this policy can represent
    /// (a schedule beyond `MAX_HORIZON`, a count beyond `u64`).
    TooLarge,
}

impl From<StateError> for ForceError {
    fn from(e: StateError) -> ForceError {
        ForceError::State(e)
    }
}

/// One algorithm deciding on its stored state: bytes in, decision and
/// write out, with the time passed in. `stored` is the key's value
/// (`None`: no key).
pub trait Limiter {
    /// The state kind it reads and writes (its tag, and its name in errors).
    fn kind(&self) -> Kind;

    /// Decides `cost` at `now`. The write is `Some` only when an admitted
    /// request changes the state.
    fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError>;

    /// The decision alone, for looks that write nothing. An algorithm whose
    /// write costs more than its decision prepares none here.
    fn decision(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Decision, StateError> {
        Ok(self.decide(stored, now, cost)?.decision)
    }

    /// Whether an admitted request holds a lease (its reply carries it).
    fn holds_leases(&self) -> bool {
        false
    }

    /// The deadline of a lease granted at `now` (`None` without leases).
    fn lease_deadline(&self, _now: Micros) -> Option<Micros> {
        None
    }

    /// The time in which it admits one unit on average (a schedule's
    /// emission interval, a window over its limit): what a jittered wait
    /// spreads a key's denied clients by (see `engine::jitter`).
    fn interval(&self) -> Option<Micros> {
        None
    }

    /// Whether a request may be admitted now for a start later
    /// (`RESERVE`): the state its decision at the start writes may be
    /// written at once, and read at any instant before the start it admits
    /// nothing a waiter admitted then would not let in ahead of it. A
    /// schedule's TAT is such a state as it is; a window, a sub-window or
    /// a log entry that starts after now admits nothing before its start
    /// (`algorithm::not_before`). False where a start cannot be foreseen
    /// (leases come back when released) or is shared (a sketch's counters).
    fn reserves(&self) -> bool {
        false
    }

    /// Whether its state can hold a debt: a charge beyond what fits, waited
    /// off (what `FORCE` and `COUNTDENIALS` write). True where
    /// [`Limiter::force_write`] writes; a log of one stamp per admitted
    /// unit has no room for one.
    fn holds_debt(&self) -> bool {
        false
    }

    /// The write that gives back `n` units of the stored `value`, never
    /// beyond the full, untouched state; `None` when nothing changes (the
    /// default: an algorithm that cannot give units back).
    fn refund_write(
        &self,
        value: &[u8],
        now: Micros,
        n: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        let _ = (value, now, n);
        Ok(None)
    }

    /// The write that charges `cost` whether or not it fits; `None` when
    /// the state after is more than the algorithm can represent (the
    /// default: an algorithm that cannot be forced).
    fn force_write(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        let _ = (stored, now, cost);
        Ok(None)
    }

    /// Gives back `n` units, never beyond the full, untouched state. The
    /// decision is admitted and describes the state after; the write is
    /// `None` when nothing changes (no key, or nothing to give back).
    fn refund(&self, stored: Option<&[u8]>, now: Micros, n: u64) -> Result<Transition, StateError> {
        let write = match stored {
            None => None,
            Some(value) => self.refund_write(value, now, n)?,
        };
        let after = after(stored, write.as_ref());
        let decision = Decision {
            allowed: true,
            retry_after: RetryAfter::NotNeeded,
            ..self.decide(after.as_deref(), now, 0)?.decision
        };
        // Back to full: no key says the same, and leaves none to expire.
        let write = match write {
            Some(_) if decision.reset_after == Micros::ZERO => Some(StateWrite::Delete),
            other => other,
        };
        Ok(Transition::of(decision, write))
    }

    /// Charges `cost` whether or not it fits, and writes the state either
    /// way. The decision is admitted when the charge fitted; when it did
    /// not, its wait is the one until a request of cost 1 is admitted.
    fn force(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, ForceError> {
        let plain = self.decide(stored, now, cost)?;
        if plain.decision.allowed {
            return Ok(plain);
        }
        let write = self
            .force_write(stored, now, cost)?
            .ok_or(ForceError::TooLarge)?;
        let after = after(stored, Some(&write));
        let next = self.decide(after.as_deref(), now, 1)?.decision;
        let decision = forced(next, self.decide(after.as_deref(), now, 0)?.decision);
        Ok(Transition::of(decision, Some(write)))
    }

    /// The most units, up to `most`, that one request could be charged now:
    /// a request of that cost is admitted and one of a unit more is not.
    fn admittable(&self, stored: Option<&[u8]>, now: Micros, most: u64) -> Result<u64, StateError> {
        let look = self.decision(stored, now, 0)?;
        let cap = most.min(look.limit);
        let fits = |cost: u64| -> Result<bool, StateError> {
            Ok(cost == 0 || self.decision(stored, now, cost)?.allowed)
        };
        // `remaining` is the answer for every policy but a schedule whose
        // interval is shorter than the clock's microsecond; check it.
        let guess = look.remaining.min(cap);
        if fits(guess)? && (guess == cap || !fits(guess + 1)?) {
            return Ok(guess);
        }
        // Admission is monotone in the cost: bisect.
        let (mut lo, mut hi) = (0, cap);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if fits(mid)? {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Ok(lo)
    }
}

/// The decision of a forced charge that did not fit: the look at the state
/// after (`look`, cost 0), denied, waiting as long as a request of cost 1
/// (`next`) would; at least not "never".
pub(super) fn forced(next: Decision, look: Decision) -> Decision {
    Decision {
        allowed: false,
        retry_after: match next.retry_after {
            RetryAfter::NotNeeded => RetryAfter::After(Micros::ZERO),
            wait => wait,
        },
        ..look
    }
}

/// The value after `write`.
fn after(stored: Option<&[u8]>, write: Option<&StateWrite>) -> Option<Vec<u8>> {
    let mut value = stored.map(<[u8]>::to_vec);
    if let Some(w) = write {
        w.apply_to(&mut value);
    }
    value
}

#[cfg(test)]
mod props;
