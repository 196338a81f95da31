//! What a request does besides an ordinary charge, for every policy:
//! give units back (REFUND), charge whether or not it fits (FORCE), and
//! find the most that fits now (PARTIAL, RL.PEEK). Each is one pure
//! function per algorithm; the decision reported is always that of the
//! state after, read back through [`Policy::decide`], so every field
//! (and every wait) is exactly what the next request will see.

use super::{
    decode_fixed, load_subwindows, sliding_log, tat_outcome, write_subwindows, Outcome, Policy,
    StateWrite,
};
use crate::algorithm::{Decision, Micros, RetryAfter};
use crate::codec::window;
use crate::codec::{self, Kind, StateError};

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

impl Policy {
    /// Gives back `n` units, never beyond the full, untouched state. The
    /// decision is admitted and describes the state after; the write is
    /// `None` when nothing changes (no key, or nothing to give back).
    pub fn refund(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        n: u64,
    ) -> Result<Outcome, StateError> {
        if let Policy::SlidingLog(l) = self {
            return sliding_log::refund(l, stored, now, n);
        }
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
        Ok(Outcome::of(decision, write))
    }

    fn refund_write(
        &self,
        value: &[u8],
        now: Micros,
        n: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        Ok(match self {
            Policy::Gcra(g) => {
                let tat = codec::decode_tat(value, Kind::Gcra)?;
                g.refund(Some(tat), now, n)
                    .and_then(|t| tat_outcome(Kind::Gcra, zero(), Some(t)).write)
            }
            Policy::Bucket(b) => {
                let tat = codec::decode_tat(value, Kind::Bucket)?;
                b.refund(Some(tat), now, n)
                    .and_then(|t| tat_outcome(Kind::Bucket, zero(), Some(t)).write)
            }
            Policy::Fixed(f) => f
                .refund(Some(decode_fixed(f, value)?), now, n)
                .map(|s| StateWrite::Value(window::encode_fixed(self.kind(), &s))),
            Policy::SlidingApprox(a) => a
                .refund(Some(window::decode_approx(value)?), now, n)
                .map(|s| StateWrite::Value(window::encode_approx(&s))),
            Policy::SlidingSubwindows(w) => {
                let loaded = load_subwindows(w, Some(value), now)?;
                w.refund(Some(&loaded.state), now, n)
                    .map(|s| write_subwindows(w, &loaded, &s))
            }
            // Refunded in place by `sliding_log::refund`.
            Policy::SlidingLog(_) => None,
            // RL.SKETCH's grammar refuses REFUND: lowering counters that
            // other items share could under-count them; a lease is released,
            // not refunded. Nothing changes.
            Policy::Sketch { .. } | Policy::Concurrency(_) => None,
        })
    }

    /// Charges `cost` whether or not it fits, and writes the state either
    /// way. The decision is admitted when the charge fitted; when it did
    /// not, its wait is the one until a request of cost 1 is admitted.
    pub fn force(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Outcome, ForceError> {
        if let Policy::SlidingLog(l) = self {
            return Ok(sliding_log::force(l, stored, now, cost)?);
        }
        let plain = self.decide(stored, now, cost)?;
        if plain.decision.allowed {
            return Ok(plain);
        }
        let write = Some(self.force_write(stored, now, cost)?);
        let after = after(stored, write.as_ref());
        let next = self.decide(after.as_deref(), now, 1)?.decision;
        let decision = Decision {
            allowed: false,
            retry_after: match next.retry_after {
                RetryAfter::NotNeeded => RetryAfter::After(Micros::ZERO),
                wait => wait,
            },
            ..self.decide(after.as_deref(), now, 0)?.decision
        };
        Ok(Outcome::of(decision, write))
    }

    fn force_write(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<StateWrite, ForceError> {
        let tat = |kind| stored.map(|v| codec::decode_tat(v, kind)).transpose();
        let write = match self {
            Policy::Gcra(g) => g
                .force(tat(Kind::Gcra)?, now, cost)
                .and_then(|t| tat_outcome(Kind::Gcra, zero(), Some(t)).write),
            Policy::Bucket(b) => b
                .force(tat(Kind::Bucket)?, now, cost)
                .and_then(|t| tat_outcome(Kind::Bucket, zero(), Some(t)).write),
            Policy::Fixed(f) => {
                let state = stored.map(|v| decode_fixed(f, v)).transpose()?;
                f.force(state, now, cost)
                    .map(|s| StateWrite::Value(window::encode_fixed(self.kind(), &s)))
            }
            Policy::SlidingApprox(a) => {
                let state = stored.map(window::decode_approx).transpose()?;
                a.force(state, now, cost)
                    .map(|s| StateWrite::Value(window::encode_approx(&s)))
            }
            Policy::SlidingSubwindows(w) => {
                let loaded = load_subwindows(w, stored, now)?;
                w.force(Some(&loaded.state), now, cost)
                    .map(|s| write_subwindows(w, &loaded, &s))
            }
            // Charged in place by `sliding_log::force`.
            Policy::SlidingLog(_) => None,
            // The grammar refuses FORCE for both: a debt in a sketch's shared
            // counter is every colliding item's debt, and a lease is held or
            // not.
            Policy::Sketch { .. } | Policy::Concurrency(_) => None,
        };
        write.ok_or(ForceError::TooLarge)
    }

    /// The most units, up to `most`, that one request could be charged now:
    /// a request of that cost is admitted and one of a unit more is not.
    pub fn admittable(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        most: u64,
    ) -> Result<u64, StateError> {
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

/// A placeholder decision for building a write with `tat_outcome`.
fn zero() -> Decision {
    Decision {
        allowed: true,
        limit: 0,
        remaining: 0,
        retry_after: RetryAfter::NotNeeded,
        reset_after: Micros::ZERO,
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
