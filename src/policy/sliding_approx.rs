//! RL.SLIDING APPROX as a policy: the two-window estimate, stored whole
//! (a few varints, [`window::encode_approx`]).

use super::{Limiter, StateWrite, Transition};
use crate::algorithm::sliding_approx::{ApproxState, SlidingApprox};
use crate::algorithm::Micros;
use crate::codec::{window, Kind, StateError};

impl Limiter for SlidingApprox {
    fn interval(&self) -> Option<Micros> {
        Some(SlidingApprox::interval(self))
    }

    /// Charged in the window where its admission starts, which admits
    /// nothing before that start (see `engine::reserve`).
    fn reserves(&self) -> bool {
        true
    }

    fn kind(&self) -> Kind {
        Kind::SlidingApprox
    }

    fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError> {
        let state = stored.map(window::decode_approx).transpose()?;
        let (decision, new) = SlidingApprox::decide(self, state, now, cost);
        Ok(Transition::of(decision, new.as_ref().map(write)))
    }

    fn refund_write(
        &self,
        value: &[u8],
        now: Micros,
        n: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        let state = window::decode_approx(value)?;
        Ok(SlidingApprox::refund(self, Some(state), now, n)
            .as_ref()
            .map(write))
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
        let state = stored.map(window::decode_approx).transpose()?;
        Ok(SlidingApprox::force(self, state, now, cost)
            .as_ref()
            .map(write))
    }
}

fn write(state: &ApproxState) -> StateWrite {
    StateWrite::Value(window::encode_approx(state))
}
