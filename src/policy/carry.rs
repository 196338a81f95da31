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
use crate::codec::{self, Bytes, Kind, StateError, PACED_MAX_LEN, TAT_MAX_LEN};

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

    /// The stored value as the policy's algorithm reads it. A schedule's
    /// state that cannot be read is corrupt, whichever of the two wrote it.
    fn input<'v>(&self, stored: Option<&'v [u8]>, now: Micros) -> Result<Input<'v>, StateError> {
        let (Some(schedule), Some(value)) = (self.schedule(), stored) else {
            return Ok(Input::Same(stored));
        };
        // Its own state, written by a literal call or at its own pace: as
        // it is (the common case, checked without decoding).
        let kind = self.0.kind();
        if value.first() == Some(&kind.tag()) || codec::is_paced_at(value, kind, schedule.pace()) {
            return Ok(Input::Same(stored));
        }
        let from = match Kind::of(value) {
            Some(k @ (Kind::Gcra | Kind::Bucket)) => k,
            _ => return Ok(Input::Same(stored)),
        };
        let (tat, pace) = codec::decode_paced(value, from)?;
        if from == self.0.kind() && pace.is_none_or(|p| p == schedule.pace()) {
            return Ok(Input::Same(stored));
        }
        let tat = pace.map_or(tat, |p| schedule.carry(tat, p, now));
        let mut buf = [0; TAT_MAX_LEN];
        let n = codec::encode_tat(self.0.kind(), tat, &mut buf);
        Ok(Input::Converted(Some(buf[..n].to_vec())))
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
        E: From<StateError>,
    {
        let input = self.input(stored, now)?;
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
            let (kind, pace) = (self.0.kind(), schedule.pace());
            return Some(match write {
                StateWrite::Value(v) => {
                    let mut buf = [0; PACED_MAX_LEN];
                    let len = codec::repace(&v, kind, pace, &mut buf).or_else(|| {
                        // A fraction in other units: decoded and encoded.
                        let tat = codec::decode_tat(&v, kind).ok()?;
                        Some(codec::encode_paced(kind, tat, pace, &mut buf))
                    });
                    StateWrite::Value(len.map_or(v, |n| Bytes::from_slice(&buf[..n])))
                }
                other => other,
            });
        }
        Some(match input {
            Input::Same(_) => write,
            Input::Converted(value) => {
                let mut after = value.clone();
                write.apply_to(&mut after);
                after.map_or(StateWrite::Delete, |v| StateWrite::Value(v.into()))
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
    fn interval(&self) -> Option<Micros> {
        self.0.interval()
    }

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

    fn reserves(&self) -> bool {
        self.0.reserves()
    }

    fn holds_debt(&self) -> bool {
        self.0.holds_debt()
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

#[cfg(test)]
mod tests {
    use crate::algorithm::fixed_window::FixedWindow;
    use crate::algorithm::gcra::Gcra;
    use crate::algorithm::sliding_log::SlidingLog;
    use crate::algorithm::token_bucket::TokenBucket;
    use crate::algorithm::Micros;
    use crate::codec::Kind;
    use crate::policy::{Policy, StateWrite};

    const HOUR: Micros = Micros::from_secs(3_600);

    /// Decides `n` requests of one unit on `state`; how many were admitted.
    fn admit(p: &Policy, state: &mut Option<Vec<u8>>, now: Micros, n: u64) -> u64 {
        let mut admitted = 0;
        for _ in 0..n {
            let out = p.decide(state.as_deref(), now, 1).unwrap();
            if let Some(w) = &out.write {
                w.apply_to(state);
            }
            admitted += u64::from(out.decision.allowed);
        }
        admitted
    }

    fn gcra(n: u64) -> Policy {
        Policy::Gcra(Gcra::new(n, HOUR, n).unwrap()).named()
    }

    #[test]
    fn a_named_schedule_writes_its_pace_and_carries_units_across_a_change() {
        let now = Micros::from_secs(1_000);
        let mut state = None;
        assert_eq!(admit(&gcra(2), &mut state, now, 3), 2);
        assert_eq!(state.as_ref().map(|v| v[0]), Some(0xAE));
        assert_eq!(admit(&gcra(4), &mut state, now, 3), 2);
        // To a bucket of the same pace: the four used stay used.
        let bucket = Policy::Bucket(TokenBucket::new(6, 4, HOUR).unwrap()).named();
        assert_eq!(admit(&bucket, &mut state, now, 3), 2);
        assert_eq!(state.as_ref().map(|v| v[0]), Some(0xAF));
        // A literal GCRA reads the bucket's state as another kind.
        let literal = Policy::Gcra(Gcra::new(4, HOUR, 4).unwrap());
        assert!(literal.decide(state.as_deref(), now, 1).is_err());
    }

    #[test]
    fn another_algorithm_restarts_and_its_first_write_is_the_whole_value() {
        let now = Micros::from_secs(1_000);
        let fixed = Policy::Fixed(FixedWindow::new(3, HOUR, false)).named();
        let mut state = None;
        assert_eq!(admit(&fixed, &mut state, now, 3), 3);
        // A sliding log writes patches; on a restart it writes its whole
        // state in place of the window's.
        let log = Policy::SlidingLog(SlidingLog::new(3, HOUR)).named();
        let out = log.decide(state.as_deref(), now, 1).unwrap();
        assert!(out.decision.allowed);
        assert_eq!(out.decision.remaining, 2);
        let Some(StateWrite::Value(v)) = &out.write else {
            panic!("{:?}", out.write)
        };
        assert_eq!(Kind::of(v), Some(Kind::SlidingLog));
        out.write.unwrap().apply_to(&mut state);
        assert_eq!(admit(&log, &mut state, now, 3), 2);
        // A denial, a look or a refund with nothing to give back writes
        // nothing: the old state stays until the key's next write.
        let mut state = None;
        assert_eq!(admit(&fixed, &mut state, now, 1), 1);
        let before = state.clone();
        let g = gcra(1);
        assert!(g.decision(state.as_deref(), now, 2).is_ok());
        assert_eq!(g.admittable(state.as_deref(), now, 5), Ok(1));
        assert_eq!(state, before);
    }
}
