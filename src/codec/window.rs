//! State layouts of the window limiters (RL.SLIDING, RL.FIXED), version 1.
//! Integers are little-endian; "varint" is LEB128 ([`super::put_varint`]).
//!
//! **RL.SLIDING EXACT**, the sliding log (tag `0xAB`), is in
//! [`super::sliding_log`].
//!
//! **RL.SLIDING APPROX** (tag `0xA4`): `tag, index: varint, prev: varint,
//! cur: varint` — the aligned window index `now / window` and the counts of
//! that window and the one before.
//!
//! **RL.SLIDING BUCKETS**, the sub-window counts (tag `0xA5`): `tag, n:
//! u16, width: u8 (1, 2, 4 or 8, the fewest bytes that hold limit), newest:
//! u64, n + 1 counts of width bytes`; sub-window k's count is at slot
//! k % (n + 1). Fixed-size, so a request patches only the header and the
//! counts it changes.
//!
//! **RL.FIXED** (tag `0xAC`) and **RL.FIXED ALIGNED** (tag `0xA7`): `tag,
//! start_us: varint, count: varint`. Two kinds, as a window begun at a
//! first request is not an aligned one, even when it starts on a boundary.
//! 0.1.0 stored both under `0xA6` ([`Kind::FixedLegacy`]), which is read,
//! never written: see `policy/fixed_window.rs`.

use super::{body, get_varint, le_u64, put_varint, Bytes, Kind, Patch, StateError};
use crate::algorithm::fixed_window::FixedState;
use crate::algorithm::sliding_approx::ApproxState;
use crate::algorithm::sliding_subwindows::{SubwindowState, MAX_SUBWINDOWS, MIN_SUBWINDOWS};
use crate::algorithm::Micros;

/// The patch from `old` to `new` (same length): the ranges where they
/// differ, merging runs closer than `gap` bytes so that each range is worth
/// its command.
pub fn diff(old: &[u8], new: &[u8], gap: usize) -> Patch {
    let mut out = Vec::new();
    let mut i = 0;
    while i < new.len() {
        if old.get(i) == Some(&new[i]) {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        let mut j = end;
        while j < new.len() && j - end < gap {
            if old.get(j) != Some(&new[j]) {
                end = j + 1;
            }
            j += 1;
        }
        out.push((start, new[start..end].to_vec()));
        i = end;
    }
    Patch::new(out)
}

fn varints<const N: usize>(kind: Kind, xs: &[u64; N]) -> Bytes {
    const { assert!(N <= 3, "three varints at most: 31 bytes, held inline") };
    let mut out = [0u8; 32];
    out[0] = kind.tag();
    let mut len = 1;
    for &x in xs {
        len += put_varint(&mut out[len..], x);
    }
    Bytes::from_buf_and_len(out, len)
}

fn read_varints<const N: usize>(value: &[u8], kind: Kind) -> Result<[u64; N], StateError> {
    let mut rest = body(value, kind)?;
    let mut out = [0u64; N];
    for x in out.iter_mut() {
        let (v, r) = get_varint(rest).ok_or(StateError::Corrupt(kind))?;
        *x = v;
        rest = r;
    }
    if !rest.is_empty() {
        return Err(StateError::Corrupt(kind));
    }
    Ok(out)
}

pub fn encode_approx(s: &ApproxState) -> Bytes {
    varints(Kind::SlidingApprox, &[s.index, s.prev, s.cur])
}

pub fn decode_approx(value: &[u8]) -> Result<ApproxState, StateError> {
    let [index, prev, cur] = read_varints(value, Kind::SlidingApprox)?;
    Ok(ApproxState { index, prev, cur })
}

/// Encodes a fixed window under `kind`: [`Kind::Fixed`] or [`Kind::FixedAligned`].
pub fn encode_fixed(kind: Kind, s: &FixedState) -> Bytes {
    varints(kind, &[s.start.as_u64(), s.count])
}

pub fn decode_fixed(value: &[u8], kind: Kind) -> Result<FixedState, StateError> {
    let [start, count] = read_varints(value, kind)?;
    Ok(FixedState {
        start: Micros::new(start),
        count,
    })
}

pub const SUBWINDOWS_HEADER: usize = 12;

/// Bytes per count for counts up to `limit`.
pub fn count_width(limit: u64) -> usize {
    match limit {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        0x1_0000..=0xffff_ffff => 4,
        _ => 8,
    }
}

/// A decoded sub-window state (RL.SLIDING BUCKETS) and the layout it was stored with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSubwindows {
    pub n: u64,
    pub width: usize,
    pub state: SubwindowState,
}

pub fn encode_subwindows(width: usize, s: &SubwindowState) -> Vec<u8> {
    let n = s.counts.len().saturating_sub(1) as u16;
    let mut v = Vec::with_capacity(SUBWINDOWS_HEADER + s.counts.len() * width);
    v.push(Kind::SlidingSubwindows.tag());
    v.extend_from_slice(&n.to_le_bytes());
    v.push(width as u8);
    v.extend_from_slice(&s.newest.to_le_bytes());
    for &c in &s.counts {
        v.extend_from_slice(&c.to_le_bytes()[..width]);
    }
    v
}

pub fn decode_subwindows(value: &[u8]) -> Result<StoredSubwindows, StateError> {
    let corrupt = StateError::Corrupt(Kind::SlidingSubwindows);
    let b = body(value, Kind::SlidingSubwindows)?;
    let head = value.get(..SUBWINDOWS_HEADER).ok_or(corrupt)?;
    let n = u64::from(u16::from_le_bytes([head[1], head[2]]));
    let width = usize::from(head[3]);
    let newest = le_u64(head, 4).ok_or(corrupt)?;
    let counts = &b[SUBWINDOWS_HEADER - 1..];
    let valid = (MIN_SUBWINDOWS..=MAX_SUBWINDOWS).contains(&n)
        && matches!(width, 1 | 2 | 4 | 8)
        && counts.len() == (n as usize + 1) * width;
    if !valid {
        return Err(corrupt);
    }
    let counts = counts
        .chunks_exact(width)
        .map(|c| {
            let mut full = [0u8; 8];
            full[..width].copy_from_slice(c);
            u64::from_le_bytes(full)
        })
        .collect();
    Ok(StoredSubwindows {
        n,
        width,
        state: SubwindowState { newest, counts },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_states_round_trip() {
        let a = ApproxState {
            index: 29_000_000,
            prev: 3,
            cur: 7,
        };
        assert_eq!(decode_approx(&encode_approx(&a)), Ok(a));
        assert_eq!(encode_approx(&a).len(), 7);
        let f = FixedState {
            start: Micros::new(1_767_225_600_000_000),
            count: 9,
        };
        for kind in [Kind::Fixed, Kind::FixedAligned] {
            assert_eq!(decode_fixed(&encode_fixed(kind, &f), kind), Ok(f));
        }
        assert_eq!(
            decode_fixed(&encode_fixed(Kind::Fixed, &f), Kind::FixedAligned),
            Err(StateError::OtherKind(Kind::Fixed))
        );
        let sw = SubwindowState {
            newest: 77,
            counts: vec![1, 0, 300],
        };
        let v = encode_subwindows(2, &sw);
        assert_eq!(v.len(), SUBWINDOWS_HEADER + 6);
        assert_eq!(decode_subwindows(&v).unwrap().state, sw);
        assert_eq!(
            decode_fixed(&encode_approx(&a), Kind::Fixed),
            Err(StateError::OtherKind(Kind::SlidingApprox))
        );
    }

    #[test]
    fn diff_merges_close_changes() {
        assert_eq!(
            diff(b"abcdef", b"aXcdeY", 2).ranges(),
            [(1, b"X".to_vec()), (5, b"Y".to_vec())]
        );
        assert_eq!(
            diff(b"abcdef", b"aXcYef", 2).ranges(),
            [(1, b"XcY".to_vec())]
        );
        assert!(diff(b"abc", b"abc", 4).ranges().is_empty());
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(
            tag in 0xA4u8..=0xA7,
            bytes in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            let mut v = vec![tag];
            v.extend(bytes);
            let _ = decode_approx(&v);
            let _ = decode_fixed(&v, Kind::Fixed);
            let _ = decode_fixed(&v, Kind::FixedAligned);
            let _ = decode_subwindows(&v);
        }
    }
}
