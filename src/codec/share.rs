//! An RL.SHARE node's state (tag 0xAD): its ceiling's TAT, then, for every
//! node but the root, its assured rate's TAT. Each TAT is
//! `whole_us: u64` little-endian, then its fraction as two varints
//! `frac_num, frac_den` (`0, 1` when whole), so the value's length tells
//! how many TATs it holds.
//!
//! A key that held a root's state and is now read as an inner node (or the
//! other way round) keeps its ceiling; an assured TAT read from nowhere is
//! a fresh one.

use super::{body, get_varint, put_varint, Kind, StateError};
use crate::algorithm::schedule::Tat;
use crate::algorithm::share::NodeState;
use crate::algorithm::Micros;

/// Longest encoding: tag and two TATs of 8 bytes and two 10-byte varints.
pub const SHARE_MAX_LEN: usize = 1 + 2 * (8 + 10 + 10);

/// The value holding `state`; a TAT never charged is written as 0 (a
/// time long past, the same as a fresh one).
pub fn encode(state: &NodeState, root: bool) -> Vec<u8> {
    let mut buf = [0u8; SHARE_MAX_LEN];
    buf[0] = Kind::Share.tag();
    let mut len = 1;
    let tats = [state.ceiling, state.assured];
    for tat in &tats[..if root { 1 } else { 2 }] {
        let tat = tat.unwrap_or(Tat::whole(Micros::ZERO));
        buf[len..len + 8].copy_from_slice(&tat.whole.as_u64().to_le_bytes());
        len += 8;
        let (num, den) = if tat.frac_num == 0 {
            (0, 1)
        } else {
            (tat.frac_num, tat.frac_den)
        };
        len += put_varint(&mut buf[len..], num);
        len += put_varint(&mut buf[len..], den);
    }
    buf[..len].to_vec()
}

pub fn decode(value: &[u8]) -> Result<NodeState, StateError> {
    let corrupt = StateError::Corrupt(Kind::Share);
    let mut rest = body(value, Kind::Share)?;
    let mut tats = [None, None];
    let mut n = 0;
    while !rest.is_empty() {
        let slot = tats.get_mut(n).ok_or(corrupt)?;
        let (whole, after) = rest.split_first_chunk::<8>().ok_or(corrupt)?;
        let (frac_num, after) = get_varint(after).ok_or(corrupt)?;
        let (frac_den, after) = get_varint(after).ok_or(corrupt)?;
        let whole = Micros::new(u64::from_le_bytes(*whole));
        *slot = Some(match frac_num {
            0 if frac_den == 1 => Tat::whole(whole),
            num if num > 0 && frac_den > num => Tat {
                whole,
                frac_num,
                frac_den,
            },
            _ => return Err(corrupt),
        });
        rest = after;
        n += 1;
    }
    if n == 0 {
        return Err(corrupt);
    }
    Ok(NodeState {
        ceiling: tats[0],
        assured: tats[1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tat(whole: u64, num: u64, den: u64) -> Tat {
        if num == 0 {
            Tat::whole(Micros::new(whole))
        } else {
            Tat {
                whole: Micros::new(whole),
                frac_num: num,
                frac_den: den,
            }
        }
    }

    #[test]
    fn layouts_and_refusals() {
        let s = NodeState {
            ceiling: Some(tat(5, 1, 3)),
            assured: Some(tat(7, 0, 1)),
        };
        let v = encode(&s, false);
        assert_eq!(v.len(), 1 + 10 + 10);
        assert_eq!(v[0], 0xAD);
        assert_eq!(decode(&v), Ok(s));
        let root = encode(&s, true);
        assert_eq!(root.len(), 11);
        assert_eq!(
            decode(&root),
            Ok(NodeState {
                ceiling: s.ceiling,
                assured: None
            })
        );
        assert_eq!(decode(&[0xAD]), Err(StateError::Corrupt(Kind::Share)));
        assert_eq!(decode(&v[..15]), Err(StateError::Corrupt(Kind::Share)));
        let three = [&v[..], &v[1..11]].concat();
        assert_eq!(decode(&three), Err(StateError::Corrupt(Kind::Share)));
        assert_eq!(decode(b"7"), Err(StateError::Foreign));
        assert_eq!(decode(&[0xA1, 0]), Err(StateError::OtherKind(Kind::Gcra)));
    }

    proptest! {
        #[test]
        fn round_trips_and_never_panics(
            w in any::<[u64; 2]>(), den in 2u64.., seed in any::<u64>(), root in any::<bool>(),
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let num = 1 + seed % (den - 1);
            let s = NodeState { ceiling: Some(tat(w[0], num, den)), assured: Some(tat(w[1], 0, 1)) };
            let want = NodeState { assured: if root { None } else { s.assured }, ..s };
            prop_assert_eq!(decode(&encode(&s, root)), Ok(want));
            let mut tagged = bytes.clone();
            tagged.insert(0, 0xAD);
            for v in [bytes, tagged] {
                if let Ok(d) = decode(&v) {
                    let again = encode(&d, d.assured.is_none());
                    prop_assert_eq!(decode(&again), Ok(d));
                }
            }
        }
    }
}
