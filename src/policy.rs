//! A limit of any algorithm, as one value: what RL.ALL combines and what the
//! window commands decide through. Pure: bytes in, decision and bytes out.

use crate::algorithm::bucket::TokenBucket;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::schedule::Tat;
use crate::algorithm::Decision;
use crate::codec::{self, Kind, StateError, TAT_MAX_LEN};

/// One parsed limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    Gcra(Gcra),
    Bucket(TokenBucket),
}

/// How a decision changes the stored value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateWrite {
    /// Replace the whole value (replicated as `SET key value PXAT t`).
    Value(Vec<u8>),
    /// Overwrite byte ranges `(offset, bytes)` in place, exactly as
    /// `SETRANGE` does (the value grows, zero-filled, to reach an offset),
    /// replicated as `SETRANGE`s and one `PEXPIREAT`: what one request sends
    /// to replicas then does not grow with the size of the state. Only for a
    /// key that already holds this policy's state.
    Patch(Vec<(usize, Vec<u8>)>),
}

/// A decision and, when the state changes, the write to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    pub write: Option<StateWrite>,
}

impl Policy {
    /// The state kind this policy reads and writes.
    pub fn kind(&self) -> Kind {
        match self {
            Policy::Gcra(_) => Kind::Gcra,
            Policy::Bucket(_) => Kind::Bucket,
        }
    }

    /// The command whose state this policy shares, for error messages.
    pub fn command(&self) -> &'static str {
        match self {
            Policy::Gcra(_) => "RL.GCRA",
            Policy::Bucket(_) => "RL.BUCKET",
        }
    }

    /// Decides `cost` at `now_us` against the stored value (`None`: no key).
    /// The write is `Some` only when an admitted request changes the state.
    pub fn decide(
        &self,
        stored: Option<&[u8]>,
        now_us: u64,
        cost: u64,
    ) -> Result<Outcome, StateError> {
        match self {
            Policy::Gcra(g) => {
                let tat = decode_tat(stored, Kind::Gcra)?;
                let (decision, new) = g.decide(tat, now_us, cost);
                Ok(tat_outcome(Kind::Gcra, decision, new))
            }
            Policy::Bucket(b) => {
                let tat = decode_tat(stored, Kind::Bucket)?;
                let (decision, new) = b.decide(tat, now_us, cost);
                Ok(tat_outcome(Kind::Bucket, decision, new))
            }
        }
    }
}

fn decode_tat(stored: Option<&[u8]>, kind: Kind) -> Result<Option<Tat>, StateError> {
    stored.map(|v| codec::decode_tat(v, kind)).transpose()
}

fn tat_outcome(kind: Kind, decision: Decision, new: Option<Tat>) -> Outcome {
    let write = new.map(|tat| {
        let mut buf = [0u8; TAT_MAX_LEN];
        let len = codec::encode_tat(kind, tat, &mut buf);
        StateWrite::Value(buf[..len].to_vec())
    });
    Outcome { decision, write }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_read_their_own_state_only() {
        let g = Policy::Gcra(Gcra::new(2, 1_000_000, 2).unwrap());
        let b = Policy::Bucket(TokenBucket::new(2, 2, 1_000_000).unwrap());
        let out = g.decide(None, 0, 1).unwrap();
        let Some(StateWrite::Value(v)) = out.write else {
            panic!("no write")
        };
        assert_eq!(
            b.decide(Some(&v), 0, 1),
            Err(StateError::OtherKind(Kind::Gcra))
        );
        let again = g.decide(Some(&v), 0, 1).unwrap();
        assert!(again.decision.allowed);
        assert_eq!(again.decision.remaining, 0);
    }
}
