//! RL.FIXED [ALIGNED] as a policy: a window's start and count, stored
//! whole under the tag of its mode ([`window::encode_fixed`]).

use super::{Limiter, StateWrite, Transition};
use crate::algorithm::fixed_window::{FixedState, FixedWindow};
use crate::algorithm::Micros;
use crate::codec::{window, Kind, StateError};

impl Limiter for FixedWindow {
    fn interval(&self) -> Option<Micros> {
        Some(FixedWindow::interval(self))
    }

    /// Charged in the window where its admission starts, which admits
    /// nothing before that start (see `engine::reserve`).
    fn reserves(&self) -> bool {
        true
    }

    fn kind(&self) -> Kind {
        if self.aligned() {
            Kind::FixedAligned
        } else {
            Kind::Fixed
        }
    }

    fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError> {
        let state = stored.map(|v| decode(self, v)).transpose()?;
        let (decision, new) = FixedWindow::decide(self, state, now, cost);
        Ok(Transition::of(decision, new.map(|s| write(self, &s))))
    }

    fn refund_write(
        &self,
        value: &[u8],
        now: Micros,
        n: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        let state = decode(self, value)?;
        Ok(FixedWindow::refund(self, Some(state), now, n).map(|s| write(self, &s)))
    }

    fn holds_debt(&self) -> bool {
        true
    }

    fn force_write(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        let state = stored.map(|v| decode(self, v)).transpose()?;
        Ok(FixedWindow::force(self, state, now, cost).map(|s| write(self, &s)))
    }
}

fn write(f: &FixedWindow, state: &FixedState) -> StateWrite {
    StateWrite::Value(window::encode_fixed(f.kind(), state))
}

/// A fixed window's stored state. 0.1.0 kept both modes under one tag
/// ([`Kind::FixedLegacy`]), which is now only read: plain RL.FIXED takes
/// such a window as before; an aligned call takes it if it starts on one of
/// its boundaries (any other began at a first request, which is not aligned
/// state). Either rewrites it under its own tag at its next write.
pub(crate) fn decode(f: &FixedWindow, value: &[u8]) -> Result<FixedState, StateError> {
    match window::decode_fixed(value, f.kind()) {
        Err(StateError::OtherKind(Kind::FixedLegacy)) => {
            let legacy = window::decode_fixed(value, Kind::FixedLegacy)?;
            if !f.aligned() || f.is_boundary(legacy.start) {
                Ok(legacy)
            } else {
                Err(StateError::OtherKind(Kind::FixedLegacy))
            }
        }
        read => read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn aligned_and_first_request_windows_are_distinct_kinds() {
        let minute = Micros::from_secs(60);
        let plain = Policy::Fixed(FixedWindow::new(3, minute, false));
        let aligned = Policy::Fixed(FixedWindow::new(3, minute, true));
        let write = |p: &Policy, stored: Option<&[u8]>, at: u64| -> Vec<u8> {
            match p.decide(stored, Micros::from_secs(at), 1).unwrap().write {
                Some(StateWrite::Value(v)) => v.to_vec(),
                other => panic!("{other:?}"),
            }
        };
        let a = write(&aligned, None, 70);
        assert_eq!(a[0], 0xA7);
        assert_eq!(
            plain.decide(Some(&a), Micros::from_secs(70), 1),
            Err(StateError::OtherKind(Kind::FixedAligned))
        );
        // A window begun at a first request (70 s) is not aligned state.
        let p = write(&plain, None, 70);
        assert_eq!(
            aligned.decide(Some(&p), Micros::from_secs(70), 1),
            Err(StateError::OtherKind(Kind::Fixed))
        );
        // A plain window that happens to start on a boundary is still not
        // aligned state: its tag says so.
        let on_boundary = write(&plain, None, 120);
        assert_eq!(on_boundary[0], 0xAC);
        assert_eq!(
            aligned.decide(Some(&on_boundary), Micros::from_secs(130), 1),
            Err(StateError::OtherKind(Kind::Fixed))
        );
        // One on a boundary, as 0.1.0 stored aligned windows under 0xA6,
        // keeps counting and is rewritten under 0xA7.
        let legacy = window::encode_fixed(
            Kind::FixedLegacy,
            &FixedState {
                start: Micros::from_secs(60),
                count: 1,
            },
        );
        let out = aligned
            .decide(Some(&legacy), Micros::from_secs(80), 1)
            .unwrap();
        assert_eq!(out.decision.remaining, 1);
        let Some(StateWrite::Value(v)) = out.write else {
            panic!("no write")
        };
        assert_eq!(
            window::decode_fixed(&v, Kind::FixedAligned),
            Ok(FixedState {
                start: Micros::from_secs(60),
                count: 2
            })
        );
        // Plain RL.FIXED reads 0xA6 as before, whoever wrote it, and
        // rewrites it under its own tag.
        let out = plain
            .decide(Some(&legacy), Micros::from_secs(80), 1)
            .unwrap();
        assert_eq!(out.decision.remaining, 1);
        let Some(StateWrite::Value(v)) = out.write else {
            panic!("no write")
        };
        assert_eq!(v[0], 0xAC);
        // A legacy window begun at a first request is not aligned state.
        let first_request = window::encode_fixed(
            Kind::FixedLegacy,
            &FixedState {
                start: Micros::from_secs(70),
                count: 1,
            },
        );
        assert_eq!(
            aligned.decide(Some(&first_request), Micros::from_secs(80), 1),
            Err(StateError::OtherKind(Kind::FixedLegacy))
        );
        // A corrupt legacy value is reported as what it is.
        assert_eq!(
            aligned.decide(Some(&[0xA6, 0x80]), Micros::ZERO, 1),
            Err(StateError::Corrupt(Kind::FixedLegacy))
        );
    }
}
