//! An RL.SHARE node's state.
//!
//! Layout v2 (tag 0xB2): `tag, flags: u8`, the ceiling's TAT, then, for
//! every node but the root, the assured rate's TAT; then the fair-sharing
//! `finish` and `round` (`u64` little-endian each, when present); then the
//! node's definition as varints: `limit, period_us, burst`, for every node
//! but the root `ceil, cburst`, then `max_debt_us`. `flags`: bit 0 the
//! root, bit 1 a finish, bit 2 a round. Each TAT is `whole_us: u64`
//! little-endian, then its fraction as two varints `frac_num, frac_den`
//! (`0, 1` when whole).
//!
//! Layout v1 (tag 0xAD, still read): `tag`, the ceiling's TAT and, but for
//! the root, the assured rate's; no finish or round, no definition (the next call's
//! is adopted).
//!
//! A key that held a root's state and is now read as an inner node (or the
//! other way round) keeps its ceiling; an assured TAT read from nowhere is
//! a fresh one (the definition then differs, which the engine refuses).

use super::{body, get_varint, put_varint, Kind, StateError};
use crate::algorithm::schedule::Tat;
use crate::algorithm::share::{Definition, NodeState};
use crate::algorithm::Micros;

/// Layout v1's tag.
pub const V1_TAG: u8 = 0xAD;

/// Longest encoding: tag, flags, two TATs of 8 bytes and two 10-byte
/// varints, two virtual times of 8 bytes, six 10-byte varints.
pub const SHARE_MAX_LEN: usize = 2 + 2 * (8 + 10 + 10) + 2 * 8 + 6 * 10;

const ROOT: u8 = 1;
const FINISH: u8 = 2;
const ROUND: u8 = 4;

/// A node's state as stored: what it decides with and, but in layout v1,
/// the definition it was written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub state: NodeState,
    pub definition: Option<Definition>,
}

fn put_tat(buf: &mut [u8], len: &mut usize, tat: Option<Tat>) {
    let tat = tat.unwrap_or(Tat::whole(Micros::ZERO));
    buf[*len..*len + 8].copy_from_slice(&tat.whole.as_u64().to_le_bytes());
    *len += 8;
    let (num, den) = if tat.frac_num == 0 {
        (0, 1)
    } else {
        (tat.frac_num, tat.frac_den)
    };
    *len += put_varint(&mut buf[*len..], num);
    *len += put_varint(&mut buf[*len..], den);
}

/// The value holding `state` of a node defined by `definition`; a TAT
/// never charged is written as 0 (a time long past, the same as a fresh
/// one).
pub fn encode(state: &NodeState, definition: &Definition) -> Vec<u8> {
    let root = definition.ceil.is_none();
    let mut buf = [0u8; SHARE_MAX_LEN];
    buf[0] = Kind::Share.tag();
    let flag = |on: bool, bit: u8| if on { bit } else { 0 };
    buf[1] = flag(root, ROOT)
        | flag(state.finish.is_some(), FINISH)
        | flag(state.round.is_some(), ROUND);
    let mut len = 2;
    put_tat(&mut buf, &mut len, state.ceiling);
    if !root {
        put_tat(&mut buf, &mut len, state.assured);
    }
    for time in [state.finish, state.round].into_iter().flatten() {
        buf[len..len + 8].copy_from_slice(&time.to_le_bytes());
        len += 8;
    }
    let d = definition;
    let mut words = vec![d.limit, d.period.as_u64(), d.burst];
    if let Some(ceil) = d.ceil {
        words.extend([ceil, d.cburst]);
    }
    words.push(d.max_debt.as_u64());
    for w in words {
        len += put_varint(&mut buf[len..], w);
    }
    buf[..len].to_vec()
}

fn get_tat(rest: &[u8]) -> Option<(Tat, &[u8])> {
    let (whole, after) = rest.split_first_chunk::<8>()?;
    let (frac_num, after) = get_varint(after)?;
    let (frac_den, after) = get_varint(after)?;
    let whole = Micros::new(u64::from_le_bytes(*whole));
    let tat = match frac_num {
        0 if frac_den == 1 => Tat::whole(whole),
        num if num > 0 && frac_den > num => Tat {
            whole,
            frac_num,
            frac_den,
        },
        _ => return None,
    };
    Some((tat, after))
}

pub fn decode(value: &[u8]) -> Result<Stored, StateError> {
    let corrupt = StateError::Corrupt(Kind::Share);
    let rest = body(value, Kind::Share)?;
    if value.first() == Some(&V1_TAG) {
        return decode_v1(rest).ok_or(corrupt);
    }
    decode_v2(rest).ok_or(corrupt)
}

fn decode_v1(mut rest: &[u8]) -> Option<Stored> {
    let mut tats = [None, None];
    let mut n = 0;
    while !rest.is_empty() {
        let slot = tats.get_mut(n)?;
        let (tat, after) = get_tat(rest)?;
        *slot = Some(tat);
        rest = after;
        n += 1;
    }
    (n > 0).then_some(Stored {
        state: NodeState {
            ceiling: tats[0],
            assured: tats[1],
            ..NodeState::default()
        },
        definition: None,
    })
}

fn decode_v2(rest: &[u8]) -> Option<Stored> {
    let (&flags, rest) = rest.split_first()?;
    if flags & !(ROOT | FINISH | ROUND) != 0 {
        return None;
    }
    let root = flags & ROOT != 0;
    let (ceiling, mut rest) = get_tat(rest)?;
    let mut assured = None;
    if !root {
        let (tat, after) = get_tat(rest)?;
        (assured, rest) = (Some(tat), after);
    }
    let mut times = [None, None];
    for (slot, bit) in times.iter_mut().zip([FINISH, ROUND]) {
        if flags & bit != 0 {
            let (bytes, after) = rest.split_first_chunk::<8>()?;
            (*slot, rest) = (Some(u64::from_le_bytes(*bytes)), after);
        }
    }
    let mut words = [0u64; 6];
    let n = if root { 4 } else { 6 };
    for w in &mut words[..n] {
        let (x, after) = get_varint(rest)?;
        (*w, rest) = (x, after);
    }
    if !rest.is_empty() {
        return None;
    }
    let definition = if root {
        Definition {
            limit: words[0],
            period: Micros::new(words[1]),
            burst: words[2],
            ceil: None,
            cburst: words[2],
            max_debt: Micros::new(words[3]),
        }
    } else {
        Definition {
            limit: words[0],
            period: Micros::new(words[1]),
            burst: words[2],
            ceil: Some(words[3]),
            cburst: words[4],
            max_debt: Micros::new(words[5]),
        }
    };
    Some(Stored {
        state: NodeState {
            ceiling: Some(ceiling),
            assured,
            finish: times[0],
            round: times[1],
        },
        definition: Some(definition),
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

    fn def(ceil: Option<u64>) -> Definition {
        Definition {
            limit: 10,
            period: Micros::from_secs(1),
            burst: 10,
            ceil,
            cburst: 10,
            max_debt: Micros::from_secs(60),
        }
    }

    #[test]
    fn layouts_and_refusals() {
        let s = NodeState {
            ceiling: Some(tat(5, 1, 3)),
            assured: Some(tat(7, 0, 1)),
            finish: Some(u64::MAX),
            round: None,
        };
        let inner = def(Some(50));
        let v = encode(&s, &inner);
        assert_eq!(v[0], 0xB2);
        // Tag and flags, two TATs, one finish, the definition's six varints
        // (1 s and 60 s take 3 and 4 bytes).
        assert_eq!(v.len(), 2 + 10 + 10 + 8 + (1 + 3 + 1 + 1 + 1 + 4));
        assert_eq!(
            decode(&v),
            Ok(Stored {
                state: s,
                definition: Some(inner)
            })
        );
        let root = encode(&s, &def(None));
        assert_eq!(
            decode(&root).map(|d| d.state),
            Ok(NodeState { assured: None, ..s })
        );
        assert_eq!(decode(&[0xB2]), Err(StateError::Corrupt(Kind::Share)));
        assert_eq!(decode(&v[..15]), Err(StateError::Corrupt(Kind::Share)));
        let longer = [&v[..], &[0]].concat();
        assert_eq!(decode(&longer), Err(StateError::Corrupt(Kind::Share)));
        assert_eq!(decode(b"7"), Err(StateError::Foreign));
        assert_eq!(decode(&[0xA1, 0]), Err(StateError::OtherKind(Kind::Gcra)));
    }

    #[test]
    fn layout_v1_is_still_read() {
        // Tag 0xAD, a ceiling's TAT of 5 + 1/3 µs and an assured one of 7.
        let mut v = vec![0xAD];
        v.extend(5u64.to_le_bytes());
        v.extend([1, 3]);
        v.extend(7u64.to_le_bytes());
        v.extend([0, 1]);
        let read = decode(&v).unwrap();
        assert_eq!(read.definition, None);
        assert_eq!(read.state.ceiling, Some(tat(5, 1, 3)));
        assert_eq!(read.state.assured, Some(tat(7, 0, 1)));
        assert_eq!(decode(&v[..11]).unwrap().state.assured, None);
        assert_eq!(decode(&[0xAD]), Err(StateError::Corrupt(Kind::Share)));
        assert_eq!(decode(&v[..15]), Err(StateError::Corrupt(Kind::Share)));
        let three = [&v[..], &v[1..11]].concat();
        assert_eq!(decode(&three), Err(StateError::Corrupt(Kind::Share)));
    }

    proptest! {
        #[test]
        fn round_trips_and_never_panics(
            w in any::<[u64; 2]>(), den in 2u64.., seed in any::<u64>(), root in any::<bool>(),
            times in any::<(Option<u64>, Option<u64>)>(), words in any::<[u64; 6]>(),
            bytes in proptest::collection::vec(any::<u8>(), 0..60),
        ) {
            let num = 1 + seed % (den - 1);
            let s = NodeState {
                ceiling: Some(tat(w[0], num, den)),
                assured: Some(tat(w[1], 0, 1)),
                finish: times.0,
                round: times.1,
            };
            let d = Definition {
                limit: words[0],
                period: Micros::new(words[1]),
                burst: words[2],
                ceil: (!root).then_some(words[3]),
                cburst: if root { words[2] } else { words[4] },
                max_debt: Micros::new(words[5]),
            };
            let want = NodeState { assured: if root { None } else { s.assured }, ..s };
            prop_assert_eq!(decode(&encode(&s, &d)), Ok(Stored { state: want, definition: Some(d) }));
            for tag in [0xAD, 0xB2] {
                let mut tagged = bytes.clone();
                tagged.insert(0, tag);
                if let Ok(read) = decode(&tagged) {
                    let d = read.definition.unwrap_or(def(Some(50)));
                    let again = encode(&read.state, &d);
                    prop_assert!(decode(&again).is_ok());
                }
            }
            let _ = decode(&bytes);
        }
    }
}
