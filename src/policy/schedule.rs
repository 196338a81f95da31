//! The schedule algorithms as policies: GCRA ([`super::gcra`]) and the
//! token bucket ([`super::token_bucket`]) are one [`Schedule`] seen from two
//! sides, stored as its theoretical arrival time under each one's own tag.
//! Each names its kind and its schedule ([`Scheduled`]); the rest is here,
//! once.

use super::{Limiter, StateWrite, Transition};
use crate::algorithm::schedule::{Schedule, Tat};
use crate::algorithm::Micros;
use crate::codec::{self, Bytes, Kind, StateError, TAT_MAX_LEN};

/// An algorithm that is a [`Schedule`] stored under the tag of `KIND`.
pub trait Scheduled {
    const KIND: Kind;
    fn schedule(&self) -> &Schedule;
}

impl<S: Scheduled> Limiter for S {
    fn interval(&self) -> Option<Micros> {
        Some(self.schedule().interval())
    }

    fn kind(&self) -> Kind {
        S::KIND
    }

    fn reserves(&self) -> bool {
        true
    }

    fn holds_debt(&self) -> bool {
        true
    }

    fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError> {
        let tat = stored.map(|v| codec::decode_tat(v, S::KIND)).transpose()?;
        let (decision, new) = self.schedule().decide(tat, now, cost);
        Ok(Transition::of(decision, new.map(tat_write::<S>)))
    }

    fn refund_write(
        &self,
        value: &[u8],
        now: Micros,
        n: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        let tat = codec::decode_tat(value, S::KIND)?;
        Ok(self
            .schedule()
            .refund(Some(tat), now, n)
            .map(tat_write::<S>))
    }

    fn force_write(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        let tat = stored.map(|v| codec::decode_tat(v, S::KIND)).transpose()?;
        Ok(self.schedule().force(tat, now, cost).map(tat_write::<S>))
    }
}

/// The whole value holding `tat`.
fn tat_write<S: Scheduled>(tat: Tat) -> StateWrite {
    let mut buf = [0u8; TAT_MAX_LEN];
    let len = codec::encode_tat(S::KIND, tat, &mut buf);
    StateWrite::Value(Bytes::from_slice(&buf[..len]))
}

#[cfg(test)]
mod tests {
    use crate::algorithm::gcra::Gcra;
    use crate::algorithm::token_bucket::TokenBucket;
    use crate::algorithm::Micros;
    use crate::codec::{Kind, StateError};
    use crate::policy::{Policy, StateWrite};

    #[test]
    fn policies_read_their_own_state_only() {
        let second = Micros::from_secs(1);
        let g = Policy::Gcra(Gcra::new(2, second, 2).unwrap());
        let b = Policy::Bucket(TokenBucket::new(2, 2, second).unwrap());
        let out = g.decide(None, Micros::ZERO, 1).unwrap();
        let Some(StateWrite::Value(v)) = out.write else {
            panic!("no write")
        };
        assert_eq!(
            b.decide(Some(&v), Micros::ZERO, 1),
            Err(StateError::OtherKind(Kind::Gcra))
        );
        let again = g.decide(Some(&v), Micros::ZERO, 1).unwrap();
        assert!(again.decision.allowed);
        assert_eq!(again.decision.remaining, 0);
    }
}
