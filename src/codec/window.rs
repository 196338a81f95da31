//! State layouts of the window limiters (RL.SLIDING, RL.FIXED), version 1.
//! Integers are little-endian; "varint" is LEB128 ([`super::put_varint`]).
//!
//! **RL.SLIDING EXACT**, the sliding log (tag `0xA3`): a ring buffer of
//! timestamps behind a fixed 22-byte header, so that an admitted request
//! rewrites only the header fields and its own slots (a `SETRANGE` patch):
//! the bytes sent to replicas do not grow with `limit`.
//!
//! ```text
//! 0      tag 0xA3
//! 1      width: bytes per stamp, 4 or 8
//! 2..6   cap: u32, ring slots (= the limit that wrote it)
//! 6..10  tail: u32, slot of the oldest live entry
//! 10..14 len: u32, live entries as of the last write
//! 14..22 last: u64, µs of the newest entry (the last write)
//! 22..   slots, `width` bytes each; entry i (oldest first) is in slot
//!        (tail + i) % cap. The value grows (zero-filled, as SETRANGE
//!        does) only as slots are first used, up to cap slots.
//! ```
//!
//! Width 8 stores absolute µs. Width 4 (windows up to 2^32 µs, 71.5 min)
//! stores the low 32 bits: every write first drops expired entries, so
//! each stored entry is less than one window older than `last`, and
//! `last − ((last − stamp) mod 2^32)` recovers it exactly.
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
//! never written: see `policy::decode_fixed`.

use super::{body, get_varint, put_varint, Kind, Patch, StateError};
use crate::algorithm::fixed_window::FixedState;
use crate::algorithm::sliding_approx::ApproxState;
use crate::algorithm::sliding_log::{Entries, LogChange, MAX_SLIDING_LOG_LIMIT};
use crate::algorithm::sliding_subwindows::{SubwindowState, MAX_SUBWINDOWS, MIN_SUBWINDOWS};
use crate::algorithm::Micros;

pub const SLIDING_LOG_HEADER: usize = 22;

/// Bytes per stamp for a window of `window`.
pub fn stamp_width(window: Micros) -> usize {
    if window.as_u64() <= 1 << 32 {
        4
    } else {
        8
    }
}

/// The stored sliding log (RL.SLIDING EXACT), read in place.
#[derive(Debug, Clone, Copy)]
pub struct StoredSlidingLog<'a> {
    slots: &'a [u8],
    width: usize,
    cap: usize,
    tail: usize,
    len: usize,
    last: Micros,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

impl<'a> StoredSlidingLog<'a> {
    pub fn decode(value: &'a [u8]) -> Result<StoredSlidingLog<'a>, StateError> {
        let corrupt = StateError::Corrupt(Kind::SlidingLog);
        body(value, Kind::SlidingLog)?;
        let head = value.get(..SLIDING_LOG_HEADER).ok_or(corrupt)?;
        let width = usize::from(head[1]);
        let field = |at| u32_at(head, at).map(|x| x as usize).ok_or(corrupt);
        let (cap, tail, len) = (field(2)?, field(6)?, field(10)?);
        let last = Micros::new(u64_at(head, 14).ok_or(corrupt)?);
        let slots = &value[SLIDING_LOG_HEADER..];
        let valid = (width == 4 || width == 8)
            && (1..=MAX_SLIDING_LOG_LIMIT as usize).contains(&cap)
            && tail < cap
            && len <= cap
            && slots.len().is_multiple_of(width);
        if !valid {
            return Err(corrupt);
        }
        let physical = slots.len() / width;
        // Every live slot must exist.
        let fits = if tail + len <= cap {
            tail + len <= physical
        } else {
            physical == cap
        };
        if !fits {
            return Err(corrupt);
        }
        Ok(StoredSlidingLog {
            slots,
            width,
            cap,
            tail,
            len,
            last,
        })
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// Every stored entry, oldest first.
    pub fn to_vec(&self) -> Vec<Micros> {
        (0..self.len).map(|i| self.stamp(i)).collect()
    }

    /// The patch that applies an admitted request's change.
    pub fn patch(&self, change: &LogChange) -> Patch {
        let expired = change.expired.min(self.len);
        let added = change.added as usize;
        let tail = (self.tail + expired) % self.cap;
        let len = self.len - expired + added;
        let mut header = Vec::with_capacity(16);
        header.extend_from_slice(&(tail as u32).to_le_bytes());
        header.extend_from_slice(&(len as u32).to_le_bytes());
        header.extend_from_slice(&change.at.as_u64().to_le_bytes());
        let mut ranges = vec![(6, header)];
        let stamp = encode_stamp(change.at, self.width);
        let mut pos = (self.tail + self.len) % self.cap;
        let mut left = added.min(self.cap);
        while left > 0 {
            let run = left.min(self.cap - pos);
            ranges.push((SLIDING_LOG_HEADER + pos * self.width, stamp.repeat(run)));
            left -= run;
            pos = 0;
        }
        Patch::new(ranges)
    }
}

impl Entries for StoredSlidingLog<'_> {
    fn count(&self) -> usize {
        self.len
    }

    fn stamp(&self, i: usize) -> Micros {
        let slot = (self.tail + i) % self.cap;
        let at = slot * self.width;
        if self.width == 8 {
            Micros::new(u64_at(self.slots, at).unwrap_or(0))
        } else {
            let low = u32_at(self.slots, at).unwrap_or(0);
            let age = (self.last.as_u64() as u32).wrapping_sub(low);
            self.last.saturating_sub(Micros::new(u64::from(age)))
        }
    }
}

fn encode_stamp(t: Micros, width: usize) -> Vec<u8> {
    if width == 8 {
        t.as_u64().to_le_bytes().to_vec()
    } else {
        (t.as_u64() as u32).to_le_bytes().to_vec()
    }
}

/// A whole new log of `cap` slots holding `entries` (oldest first).
pub fn encode_sliding_log(cap: usize, width: usize, entries: &[Micros]) -> Vec<u8> {
    let mut v = Vec::with_capacity(SLIDING_LOG_HEADER + entries.len() * width);
    v.push(Kind::SlidingLog.tag());
    v.push(width as u8);
    v.extend_from_slice(&(cap as u32).to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    let last = entries.last().copied().unwrap_or_default();
    v.extend_from_slice(&last.as_u64().to_le_bytes());
    for &t in entries {
        v.extend_from_slice(&encode_stamp(t, width));
    }
    v
}

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

fn varints(kind: Kind, xs: &[u64]) -> Vec<u8> {
    let mut v = vec![kind.tag()];
    let mut buf = [0u8; 10];
    for &x in xs {
        let n = put_varint(&mut buf, x);
        v.extend_from_slice(&buf[..n]);
    }
    v
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

pub fn encode_approx(s: &ApproxState) -> Vec<u8> {
    varints(Kind::SlidingApprox, &[s.index, s.prev, s.cur])
}

pub fn decode_approx(value: &[u8]) -> Result<ApproxState, StateError> {
    let [index, prev, cur] = read_varints(value, Kind::SlidingApprox)?;
    Ok(ApproxState { index, prev, cur })
}

/// Encodes a fixed window under `kind`: [`Kind::Fixed`] or [`Kind::FixedAligned`].
pub fn encode_fixed(kind: Kind, s: &FixedState) -> Vec<u8> {
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
    let newest = u64_at(head, 4).ok_or(corrupt)?;
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

    /// Microseconds, for short stamps.
    fn us(stamps: &[u64]) -> Vec<Micros> {
        stamps.iter().copied().map(Micros::new).collect()
    }

    #[test]
    fn sliding_log_patch_touches_header_and_new_slots_only() {
        let v = encode_sliding_log(4, 4, &us(&[100, 200, 300]));
        assert_eq!(v.len(), SLIDING_LOG_HEADER + 12);
        let log = StoredSlidingLog::decode(&v).unwrap();
        assert_eq!(log.to_vec(), us(&[100, 200, 300]));
        // Drop two, add two at 400: slots 3 and 0 (wrapping), header.
        let patch = log.patch(&LogChange {
            expired: 2,
            added: 2,
            at: Micros::new(400),
        });
        let mut applied = v.clone();
        patch.apply_to(&mut applied);
        // Header and slot 0 are adjacent: one range, plus slot 3.
        assert_eq!(patch.ranges().len(), 2);
        assert_eq!(
            StoredSlidingLog::decode(&applied).unwrap().to_vec(),
            us(&[300, 400, 400])
        );
    }

    #[test]
    fn narrow_stamps_wrap_exactly() {
        let base = (1u64 << 32) * 5 - 10;
        let v = encode_sliding_log(3, 4, &us(&[base, base + 20]));
        assert_eq!(
            StoredSlidingLog::decode(&v).unwrap().to_vec(),
            us(&[base, base + 20])
        );
    }

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
            tag in 0xA3u8..=0xA7,
            bytes in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            let mut v = vec![tag];
            v.extend(bytes);
            if let Ok(log) = StoredSlidingLog::decode(&v) {
                let _ = log.to_vec();
                let _ = log.patch(&LogChange { expired: 1, added: 2, at: Micros::new(5) });
            }
            let _ = decode_approx(&v);
            let _ = decode_fixed(&v, Kind::Fixed);
            let _ = decode_fixed(&v, Kind::FixedAligned);
            let _ = decode_subwindows(&v);
        }

        #[test]
        fn well_formed_headers_with_any_fields_never_panic(
            width in prop_oneof![Just(4u8), Just(8u8)],
            cap in 1u32..6, tail in 0u32..6, len in 0u32..7, last in any::<u64>(),
            slots in proptest::collection::vec(any::<u8>(), 0..48),
        ) {
            let mut v = vec![0xA3, width];
            for x in [cap, tail, len] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            v.extend_from_slice(&last.to_le_bytes());
            v.extend(slots);
            if let Ok(log) = StoredSlidingLog::decode(&v) {
                let _ = log.to_vec();
                let _ = log.patch(&LogChange { expired: 7, added: 3, at: Micros::new(last) });
            }
        }
    }
}
