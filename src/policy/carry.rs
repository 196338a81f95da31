//! A named policy as a limiter ([`Policy::Named`]): the definition behind a
//! name changes while keys hold state written under the one before, and a
//! caller must never be refused for that. Before deciding, the key's state
//! is read as the current definition's:
//!
//! - GCRA and BUCKET (one schedule seen from two sides) carry the units
//!   used: a state written in layout v2 records the pace it was written at,
//!   and its backlog is rescaled to the current pace ([`Schedule::carry`]),
//!   so a raised limit admits the difference at once and a cut denies until
//!   the used units drain under the new limit. A v1 state (written by a
//!   literal call, or before v2) carries its time, as a literal call reads it.
//!   Named schedules write layout v2.
//! - The window algorithms read their own state under a changed limit or
//!   window as they always do (their counts carry).
//! - A state of another algorithm restarts: the key decides as a fresh key,
//!   and its first write replaces the old state. Windows count events a
//!   schedule cannot place in time, and a concurrency limit's leases are not
//!   a rate: nothing exact can be carried across.
//!
//! A conversion is written with the key's next write (an admission, a
//! forced charge or a refund); until then each decision converts the stored
//! state again, so a denial writes nothing, as always.

use super::{ForceError, Limiter, Policy, StateWrite, Transition};
use crate::algorithm::schedule::Schedule;
use crate::algorithm::{Decision, Micros};
use crate::codec::{self, Kind, StateError, PACED_MAX_LEN, TAT_MAX_LEN};

/// A named policy's limiter: the policy it names, deciding on state
/// converted as the module doc says.
pub struct Carrying<'a>(pub &'a Policy);

/// The stored value as the named policy's algorithm reads it.
enum Input<'v> {
    /// Its own state (or none, or a value it refuses as not ours).
    Same(Option<&'v [u8]>),
    /// A conversion of another definition's state (`None`: restarted).
    Converted(Option<Vec<u8>>),
}

impl Input<'_> {
    fn value(&self) -> Option<&[u8]> {
        match self {
            Input::Same(v) => *v,
            Input::Converted(v) => v.as_deref(),
        }
    }
}

impl Carrying<'_> {
    fn schedule(&self) -> Option<&Schedule> {
        self.0.schedule()
    }

    /// The stored value as the policy's algorithm reads it.
    fn input<'v>(&self, stored: Option<&'v [u8]>, now: Micros) -> Input<'v> {
        let (Some(schedule), Some(value)) = (self.schedule(), stored) else {
            return Input::Same(stored);
        };
        let from = match Kind::of(value) {
            Some(k @ (Kind::Gcra | Kind::Bucket)) => k,
            _ => return Input::Same(stored),
        };
        let Ok((tat, pace)) = codec::decode_paced(value, from) else {
            // Corrupt: the algorithm reports it.
            return Input::Same(stored);
        };
        if from == self.0.kind() && pace.is_none_or(|p| p == schedule.pace()) {
            return Input::Same(stored);
        }
        let tat = pace.map_or(tat, |p| schedule.carry(tat, p, now));
        let mut buf = [0; TAT_MAX_LEN];
        let n = codec::encode_tat(self.0.kind(), tat, &mut buf);
        Input::Converted(Some(buf[..n].to_vec()))
    }

    /// Runs `op` on the stored value as the policy reads it: converted, or
    /// restarted when it holds another algorithm's state.
    fn run<T, E>(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        other_kind: impl Fn(&E) -> bool,
        op: impl Fn(Option<&[u8]>) -> Result<T, E>,
    ) -> Result<(T, Input<'_>), E>
    where
        T: Sized,
    {
        let input = self.input(stored, now);
        match op(input.value()) {
            Err(e) if other_kind(&e) && matches!(input, Input::Same(Some(_))) => {
                Ok((op(None)?, Input::Converted(None)))
            }
            Ok(out) => Ok((out, detach(input))),
            Err(e) => Err(e),
        }
    }

    /// The write to store for `write`, made against `input`: a schedule's
    /// in layout v2 with its pace; after a conversion, the whole value.
    fn output(&self, input: &Input<'_>, write: Option<StateWrite>) -> Option<StateWrite> {
        let write = write?;
        if let Some(schedule) = self.schedule() {
            return Some(match write {
                StateWrite::Value(v) => match codec::decode_tat(&v, self.0.kind()) {
                    Ok(tat) => {
                        let mut buf = [0; PACED_MAX_LEN];
                        let n = codec::encode_paced(self.0.kind(), tat, schedule.pace(), &mut buf);
                        StateWrite::Value(buf[..n].to_vec())
                    }
                    Err(_) => StateWrite::Value(v),
                },
                other => other,
            });
        }
        Some(match input {
            Input::Same(_) => write,
            Input::Converted(value) => {
                let mut after = value.clone();
                write.apply_to(&mut after);
                after.map_or(StateWrite::Delete, StateWrite::Value)
            }
        })
    }

    fn transition(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        op: impl Fn(Option<&[u8]>) -> Result<Transition, StateError>,
    ) -> Result<Transition, StateError> {
        let (out, input) = self.run(stored, now, is_other_kind, op)?;
        Ok(Transition {
            write: self.output(&input, out.write),
            ..out
        })
    }
}

/// An input that no longer borrows the stored value.
fn detach(input: Input<'_>) -> Input<'static> {
    match input {
        Input::Same(None) => Input::Same(None),
        // Its own state: written against as it is.
        Input::Same(Some(_)) => Input::Same(None),
        Input::Converted(v) => Input::Converted(v),
    }
}

fn is_other_kind(e: &StateError) -> bool {
    matches!(e, StateError::OtherKind(_))
}

impl Limiter for Carrying<'_> {
    fn kind(&self) -> Kind {
        self.0.kind()
    }

    fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError> {
        self.transition(stored, now, |s| self.0.decide(s, now, cost))
    }

    fn decision(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Decision, StateError> {
        let (out, _) = self.run(stored, now, is_other_kind, |s| {
            self.0.decision(s, now, cost)
        })?;
        Ok(out)
    }

    fn holds_leases(&self) -> bool {
        self.0.holds_leases()
    }

    fn refund(&self, stored: Option<&[u8]>, now: Micros, n: u64) -> Result<Transition, StateError> {
        self.transition(stored, now, |s| self.0.refund(s, now, n))
    }

    fn force(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, ForceError> {
        let other = |e: &ForceError| matches!(e, ForceError::State(s) if is_other_kind(s));
        let (out, input) = self.run(stored, now, other, |s| self.0.force(s, now, cost))?;
        Ok(Transition {
            write: self.output(&input, out.write),
            ..out
        })
    }

    fn admittable(&self, stored: Option<&[u8]>, now: Micros, most: u64) -> Result<u64, StateError> {
        let (out, _) = self.run(stored, now, is_other_kind, |s| {
            self.0.admittable(s, now, most)
        })?;
        Ok(out)
    }
}
