//! The state codec: how limiter state is laid out in a plain Redis string.
//!
//! Every value starts with one tag byte that names the algorithm and the
//! layout version. Tags live in `0xA1..=0xBF`: bytes that no UTF-8 text (they
//! are continuation bytes) and no decimal number can start with, so a value
//! written by anyone else is never mistaken for ours. A later layout of an algorithm gets a new tag;
//! the earlier one is still read (0xA3, the sliding log's first layout).
//! Taken: `0xA1..=0xAF`, `0xB2` and `0xB3` (a key in the penalty box: a
//! header before a limit's own state, `engine::penalty`); `0xB0` and `0xB1`
//! stay unused (the hostile tests write them as values that are not ours),
//! `0xB4..=0xBF` are free.
//!
//! Layout v1 of the schedule algorithms (GCRA, token bucket), little-endian:
//! `tag, tat_whole_us: u64 [, frac_num: varint, frac_den: varint]`; the
//! fraction is present only when the TAT is not a whole microsecond.
//! Layout v2 (tags 0xAE, 0xAF; [`encode_paced`]), written by named
//! policies, adds the pace the TAT was written at, so that a changed
//! definition knows the units used. Both are read by both.
//!
//! The window limiters' layouts (RL.SLIDING, RL.FIXED) are in [`window`],
//! but for the sliding log's (RL.SLIDING EXACT), in [`sliding_log`];
//! RL.SKETCH's is in [`sketch`]; CL.THROTTLE's (redis-cell's, untagged) is
//! in [`cell`]; the concurrency limit's leases in [`lease`] (whose layout
//! v1, tag 0xA9, is still read and converted on its next write); an
//! RL.SHARE node's TATs, fair-sharing times and definition in [`share`]
//! (whose layout v1, tag 0xAD, is still read).

pub mod block;
pub mod cell;
pub mod lease;
pub mod share;
pub mod sketch;
pub mod sliding_log;
#[cfg(test)]
mod stored_props;
pub mod window;

use crate::algorithm::schedule::{Pace, Tat};
use crate::algorithm::Micros;

/// The algorithms whose state the module stores, one tag each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gcra,
    Bucket,
    SlidingLog,
    SlidingApprox,
    SlidingSubwindows,
    /// RL.FIXED without ALIGNED: a window begun at a first request.
    Fixed,
    FixedAligned,
    /// RL.FIXED state written by 0.1.0 under one tag for both modes: a
    /// window begun at a first request, or an aligned one. Read, never
    /// written (see `policy/fixed_window.rs`).
    FixedLegacy,
    Sketch,
    /// RL.ACQUIRE's leases (RL.ALL's CONCURRENCY).
    Concurrency,
    /// A node of RL.SHARE: its TATs, fair-sharing times and definition.
    Share,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Gcra,
        Kind::Bucket,
        Kind::SlidingLog,
        Kind::SlidingApprox,
        Kind::SlidingSubwindows,
        Kind::Fixed,
        Kind::FixedAligned,
        Kind::FixedLegacy,
        Kind::Sketch,
        Kind::Concurrency,
        Kind::Share,
    ];

    pub const fn tag(self) -> u8 {
        match self {
            Kind::Gcra => 0xA1,
            Kind::Bucket => 0xA2,
            Kind::SlidingLog => 0xAB,
            Kind::SlidingApprox => 0xA4,
            Kind::SlidingSubwindows => 0xA5,
            Kind::FixedLegacy => 0xA6,
            Kind::FixedAligned => 0xA7,
            Kind::Fixed => 0xAC,
            Kind::Sketch => 0xA8,
            Kind::Concurrency => 0xAA,
            Kind::Share => 0xB2,
        }
    }

    /// How the kind is named in error messages.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Gcra => "RL.GCRA",
            Kind::Bucket => "RL.BUCKET",
            Kind::SlidingLog => "RL.SLIDING EXACT",
            Kind::SlidingApprox => "RL.SLIDING APPROX",
            Kind::SlidingSubwindows => "RL.SLIDING BUCKETS",
            Kind::Fixed | Kind::FixedLegacy => "RL.FIXED",
            Kind::FixedAligned => "RL.FIXED ALIGNED",
            Kind::Sketch => "RL.SKETCH",
            Kind::Concurrency => "RL.ACQUIRE",
            Kind::Share => "RL.SHARE",
        }
    }

    /// The tag of an earlier layout still read (and rewritten in the
    /// current one on the next write).
    pub const fn earlier_tag(self) -> Option<u8> {
        match self {
            Kind::Concurrency => Some(lease::V1_TAG),
            Kind::SlidingLog => Some(LEGACY_SLIDING_LOG_TAG),
            Kind::Share => Some(share::V1_TAG),
            _ => None,
        }
    }

    /// The tag of the layout that also records the schedule's pace
    /// (layout v2 of GCRA and the token bucket, written by named policies).
    pub const fn paced_tag(self) -> Option<u8> {
        match self {
            Kind::Gcra => Some(0xAE),
            Kind::Bucket => Some(0xAF),
            _ => None,
        }
    }

    /// The kind whose state `value` holds, by its tag.
    pub fn of(value: &[u8]) -> Option<Kind> {
        let tag = *value.first()?;
        Kind::ALL
            .into_iter()
            .find(|k| k.tag() == tag || k.earlier_tag() == Some(tag) || k.paced_tag() == Some(tag))
    }
}

/// The sliding log's first layout, whose ring held exactly `limit` slots:
/// read as it is, and retagged on its next write (see [`window`]).
pub const LEGACY_SLIDING_LOG_TAG: u8 = 0xA3;

/// Why a stored value could not be read as the expected state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateError {
    /// Not written by this module.
    Foreign,
    /// Written by this module for another algorithm or mode.
    OtherKind(Kind),
    /// Has the right tag but not the right layout.
    Corrupt(Kind),
    /// Holds this kind's state made with other parameters that cannot be
    /// reinterpreted (RL.SKETCH's WIDTH, DEPTH or window).
    Mismatch(Mismatch),
}

/// A parameter of a stored state that differs from the call's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    pub kind: Kind,
    /// As the call names it: `WIDTH`, `DEPTH`, `window`.
    pub param: &'static str,
    pub stored: u64,
    pub given: u64,
    /// The values are durations in µs.
    pub duration: bool,
}

/// The little-endian `u32` at byte `at` of `b`, if `b` holds it: how every
/// layout reads its fixed-width fields.
pub(crate) fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u64` at byte `at` of `b`, if `b` holds it.
pub(crate) fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Checks the tag of `value` against `expected` and returns the body.
pub fn body(value: &[u8], expected: Kind) -> Result<&[u8], StateError> {
    match Kind::of(value) {
        Some(k) if k == expected => Ok(&value[1..]),
        Some(k) => Err(StateError::OtherKind(k)),
        None => Err(StateError::Foreign),
    }
}

/// An in-place change to a stored value: byte ranges `(offset, bytes)`,
/// each meaning exactly `SETRANGE key offset bytes` (the value grows,
/// zero-filled, to reach the end of a range). A request that changes a few
/// bytes of a large state writes, and replicates, only those bytes.
///
/// The ranges are in offset order and none touches the next, so each is
/// worth its own `SETRANGE`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patch {
    ranges: Vec<(usize, Vec<u8>)>,
}

impl Patch {
    /// The patch that writes `ranges`, which must not overlap: sorted by
    /// offset, with ranges that touch merged into one.
    pub fn new(mut ranges: Vec<(usize, Vec<u8>)>) -> Patch {
        ranges.sort_by_key(|r| r.0);
        let mut merged: Vec<(usize, Vec<u8>)> = Vec::with_capacity(ranges.len());
        for (off, bytes) in ranges {
            match merged.last_mut() {
                Some((o, b)) if *o + b.len() == off => b.extend_from_slice(&bytes),
                _ => merged.push((off, bytes)),
            }
        }
        Patch { ranges: merged }
    }

    /// The same patch on a value `by` bytes further on (a limit's state
    /// behind the penalty box's header).
    pub fn shifted(&self, by: usize) -> Patch {
        let ranges = self.ranges.iter().map(|(o, b)| (o + by, b.clone()));
        Patch {
            ranges: ranges.collect(),
        }
    }

    /// The ranges `(offset, bytes)`, in offset order.
    pub fn ranges(&self) -> &[(usize, Vec<u8>)] {
        &self.ranges
    }

    /// Applies the patch to `value` as `SETRANGE` does: for tests and
    /// benches of the core (the server writes through its own API).
    pub fn apply_to(&self, value: &mut Vec<u8>) {
        for (off, bytes) in &self.ranges {
            let end = off + bytes.len();
            if value.len() < end {
                value.resize(end, 0);
            }
            value[*off..end].copy_from_slice(bytes);
        }
    }
}

/// Longest encoding of a [`Tat`]: tag, 8 bytes, two 10-byte varints.
pub const TAT_MAX_LEN: usize = 1 + 8 + 10 + 10;

/// A whole stored value as a write carries it: up to 32 bytes inline (a
/// TAT, a window counter's varints, a paced TAT of usual sizes), so that
/// writing one allocates nothing; longer states are on the heap.
pub type Bytes = smallvec::SmallVec<[u8; 32]>;

/// Encodes a TAT under `kind`'s tag into `buf`; returns the length used.
pub fn encode_tat(kind: Kind, tat: Tat, buf: &mut [u8; TAT_MAX_LEN]) -> usize {
    buf[0] = kind.tag();
    buf[1..9].copy_from_slice(&tat.whole.as_u64().to_le_bytes());
    let mut len = 9;
    if tat.frac_num != 0 {
        len += put_varint(&mut buf[len..], tat.frac_num);
        len += put_varint(&mut buf[len..], tat.frac_den);
    }
    len
}

/// Longest encoding of a paced TAT: tag, 8 bytes, three 10-byte varints.
pub const PACED_MAX_LEN: usize = 1 + 8 + 10 + 10 + 10;

/// Encodes a TAT and the pace it was written at under `kind`'s paced tag
/// (layout v2: `tag, tat_whole_us: u64, interval_ticks: varint, den:
/// varint [, frac_num: varint]`, the fraction in `den`ths of a µs) into
/// `buf`; returns the length used.
pub fn encode_paced(kind: Kind, tat: Tat, pace: Pace, buf: &mut [u8; PACED_MAX_LEN]) -> usize {
    let den = pace.den.max(1);
    let tat = tat.with_den(den);
    buf[0] = kind.paced_tag().unwrap_or(kind.tag());
    buf[1..9].copy_from_slice(&tat.whole.as_u64().to_le_bytes());
    let mut len = 9;
    len += put_varint(&mut buf[len..], pace.interval_ticks.max(1));
    len += put_varint(&mut buf[len..], den);
    if tat.frac_num != 0 {
        len += put_varint(&mut buf[len..], tat.frac_num);
    }
    len
}

/// A pace as layout v2 writes it: `interval_ticks` and `den`, varints.
fn pace_bytes(pace: Pace) -> ([u8; 20], usize) {
    let mut buf = [0; 20];
    let mut n = put_varint(&mut buf, pace.interval_ticks.max(1));
    n += put_varint(&mut buf[n..], pace.den.max(1));
    (buf, n)
}

/// Whether `value` is a layout-v2 state of `kind` written at `pace` (its
/// TAT and fraction unchecked): read as it is, with no conversion.
pub fn is_paced_at(value: &[u8], kind: Kind, pace: Pace) -> bool {
    let (bytes, n) = pace_bytes(pace);
    kind.paced_tag() == value.first().copied()
        && value
            .get(9..)
            .is_some_and(|tail| tail.starts_with(&bytes[..n]))
}

/// A layout-v1 state of `kind` as layout v2 at `pace` (what a named
/// schedule stores), written into `buf` without decoding the TAT; the
/// length, or `None` when `value` is not a v1 state whose fraction is in
/// `pace.den`ths.
pub fn repace(
    value: &[u8],
    kind: Kind,
    pace: Pace,
    buf: &mut [u8; PACED_MAX_LEN],
) -> Option<usize> {
    let paced_tag = kind.paced_tag()?;
    if value.first() != Some(&kind.tag()) {
        return None;
    }
    let (whole, fraction) = (value.get(1..9)?, &value[9..]);
    // The fraction's numerator, as its varint bytes.
    let mut num: &[u8] = &[];
    if !fraction.is_empty() {
        let (_, after_num) = get_varint(fraction)?;
        match get_varint(after_num) {
            Some((den, [])) if den == pace.den => {}
            _ => return None,
        }
        num = &fraction[..fraction.len() - after_num.len()];
    }
    let (bytes, n) = pace_bytes(pace);
    buf[0] = paced_tag;
    buf[1..9].copy_from_slice(whole);
    buf[9..9 + n].copy_from_slice(&bytes[..n]);
    buf[9 + n..9 + n + num.len()].copy_from_slice(num);
    Some(9 + n + num.len())
}

/// A schedule's TAT and, in layout v2, the pace it was written at
/// (`None`: layout v1, which does not record it).
pub fn decode_paced(value: &[u8], kind: Kind) -> Result<(Tat, Option<Pace>), StateError> {
    let body = body(value, kind)?;
    if kind.paced_tag() != value.first().copied() {
        return decode_v1(body, kind).map(|tat| (tat, None));
    }
    let corrupt = StateError::Corrupt(kind);
    let (whole, rest) = body.split_first_chunk::<8>().ok_or(corrupt)?;
    let whole = Micros::new(u64::from_le_bytes(*whole));
    let (interval_ticks, rest) = get_varint(rest).ok_or(corrupt)?;
    let (den, rest) = get_varint(rest).ok_or(corrupt)?;
    if interval_ticks == 0 || den == 0 {
        return Err(corrupt);
    }
    let pace = Pace {
        interval_ticks,
        den,
    };
    if rest.is_empty() {
        return Ok((Tat::whole(whole), Some(pace)));
    }
    let (frac_num, rest) = get_varint(rest).ok_or(corrupt)?;
    if !rest.is_empty() || frac_num == 0 || den <= frac_num {
        return Err(corrupt);
    }
    let tat = Tat {
        whole,
        frac_num,
        frac_den: den,
    };
    Ok((tat, Some(pace)))
}

/// A schedule's TAT, in either layout.
pub fn decode_tat(value: &[u8], kind: Kind) -> Result<Tat, StateError> {
    decode_paced(value, kind).map(|(tat, _)| tat)
}

/// Layout v1's body: the TAT alone.
fn decode_v1(body: &[u8], kind: Kind) -> Result<Tat, StateError> {
    let corrupt = StateError::Corrupt(kind);
    let (whole, rest) = body.split_first_chunk::<8>().ok_or(corrupt)?;
    let whole = Micros::new(u64::from_le_bytes(*whole));
    if rest.is_empty() {
        return Ok(Tat::whole(whole));
    }
    let (frac_num, rest) = get_varint(rest).ok_or(corrupt)?;
    let (frac_den, rest) = get_varint(rest).ok_or(corrupt)?;
    if !rest.is_empty() || frac_num == 0 || frac_den <= frac_num {
        return Err(corrupt);
    }
    Ok(Tat {
        whole,
        frac_num,
        frac_den,
    })
}

/// LEB128: 7 bits a byte, low bits first. Returns the bytes written.
pub fn put_varint(buf: &mut [u8], mut x: u64) -> usize {
    let mut i = 0;
    loop {
        let byte = (x & 0x7f) as u8;
        x >>= 7;
        if x == 0 {
            buf[i] = byte;
            return i + 1;
        }
        buf[i] = byte | 0x80;
        i += 1;
    }
}

/// Reads one LEB128 value; `None` if truncated or longer than a `u64`.
pub fn get_varint(buf: &[u8]) -> Option<(u64, &[u8])> {
    let mut x: u64 = 0;
    for (i, &byte) in buf.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        if i == 9 && bits > 1 {
            return None;
        }
        x |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((x, &buf[i + 1..]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn whole_tat_takes_nine_bytes() {
        let mut buf = [0; TAT_MAX_LEN];
        let tat = Tat::whole(Micros::new(42));
        let n = encode_tat(Kind::Gcra, tat, &mut buf);
        assert_eq!(n, 9);
        assert_eq!(buf[0], 0xA1);
        assert_eq!(decode_tat(&buf[..n], Kind::Gcra), Ok(tat));
    }

    #[test]
    fn a_paced_tat_round_trips_and_reads_as_a_tat() {
        let mut buf = [0; PACED_MAX_LEN];
        // GCRA 100 1m: 600,000 µs a unit, whole.
        let pace = Pace {
            interval_ticks: 600_000,
            den: 1,
        };
        let tat = Tat::whole(Micros::new(42));
        let n = encode_paced(Kind::Gcra, tat, pace, &mut buf);
        assert_eq!((n, buf[0]), (13, 0xAE));
        assert_eq!(decode_paced(&buf[..n], Kind::Gcra), Ok((tat, Some(pace))));
        assert_eq!(decode_tat(&buf[..n], Kind::Gcra), Ok(tat));
        assert_eq!(Kind::of(&buf[..n]), Some(Kind::Gcra));
        assert_eq!(
            decode_paced(&buf[..n], Kind::Bucket),
            Err(StateError::OtherKind(Kind::Gcra))
        );
        // A fraction is in the pace's denominator.
        let pace = Pace {
            interval_ticks: 1_000_000,
            den: 3,
        };
        let tat = Tat {
            whole: Micros::new(7),
            frac_num: 2,
            frac_den: 3,
        };
        let n = encode_paced(Kind::Bucket, tat, pace, &mut buf);
        assert_eq!(buf[0], 0xAF);
        assert_eq!(decode_paced(&buf[..n], Kind::Bucket), Ok((tat, Some(pace))));
        // Layout v1 reads with no pace.
        let mut v1 = [0; TAT_MAX_LEN];
        let n = encode_tat(Kind::Gcra, tat, &mut v1);
        assert_eq!(decode_paced(&v1[..n], Kind::Gcra), Ok((tat, None)));
        // Corrupt: no pace, a zero pace, an improper fraction, a tail.
        for bad in [
            &[0xAE, 0, 0, 0, 0, 0, 0, 0, 0][..],
            &[0xAE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            &[0xAE, 0, 0, 0, 0, 0, 0, 0, 0, 5, 3, 3],
            &[0xAE, 0, 0, 0, 0, 0, 0, 0, 0, 5, 3, 1, 0],
        ] {
            assert_eq!(
                decode_paced(bad, Kind::Gcra),
                Err(StateError::Corrupt(Kind::Gcra)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn repacing_a_v1_state_is_encoding_it_paced() {
        let pace = Pace {
            interval_ticks: 1_000_000,
            den: 3,
        };
        for tat in [
            Tat::whole(Micros::new(9)),
            Tat {
                whole: Micros::new(7),
                frac_num: 2,
                frac_den: 3,
            },
        ] {
            let mut v1 = [0; TAT_MAX_LEN];
            let n = encode_tat(Kind::Bucket, tat, &mut v1);
            let mut buf = [0; PACED_MAX_LEN];
            let len = repace(&v1[..n], Kind::Bucket, pace, &mut buf).unwrap();
            let value = buf[..len].to_vec();
            let mut paced = [0; PACED_MAX_LEN];
            let m = encode_paced(Kind::Bucket, tat, pace, &mut paced);
            assert_eq!(value, paced[..m]);
            assert!(is_paced_at(&value, Kind::Bucket, pace));
            assert!(!is_paced_at(&value, Kind::Gcra, pace));
            let other = Pace { den: 7, ..pace };
            assert!(!is_paced_at(&value, Kind::Bucket, other));
            // Not v1 (already paced), or a fraction in other units: no.
            assert_eq!(repace(&value, Kind::Bucket, pace, &mut buf), None);
        }
        let tat = Tat {
            whole: Micros::new(7),
            frac_num: 1,
            frac_den: 2,
        };
        let mut v1 = [0; TAT_MAX_LEN];
        let n = encode_tat(Kind::Gcra, tat, &mut v1);
        let mut buf = [0; PACED_MAX_LEN];
        assert_eq!(repace(&v1[..n], Kind::Gcra, pace, &mut buf), None);
    }

    #[test]
    fn classification() {
        let mut buf = [0; TAT_MAX_LEN];
        let n = encode_tat(Kind::Bucket, Tat::whole(Micros::new(1)), &mut buf);
        assert_eq!(
            decode_tat(&buf[..n], Kind::Gcra),
            Err(StateError::OtherKind(Kind::Bucket))
        );
        assert_eq!(decode_tat(b"12345", Kind::Gcra), Err(StateError::Foreign));
        assert_eq!(decode_tat(b"", Kind::Gcra), Err(StateError::Foreign));
        assert_eq!(
            decode_tat(&[0xA1, 1, 2], Kind::Gcra),
            Err(StateError::Corrupt(Kind::Gcra))
        );
        // A fraction must be proper and non-zero.
        assert_eq!(
            decode_tat(&[0xA1, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3], Kind::Gcra),
            Err(StateError::Corrupt(Kind::Gcra))
        );
        assert!(Kind::ALL
            .iter()
            .all(|k| std::str::from_utf8(&[k.tag()]).is_err()));
    }

    #[test]
    fn a_patch_is_ordered_and_merges_ranges_that_touch() {
        let p = Patch::new(vec![(6, vec![1, 2]), (0, vec![9]), (4, vec![3, 4])]);
        assert_eq!(p.ranges(), [(0, vec![9]), (4, vec![3, 4, 1, 2])]);
        let mut value = vec![7, 7];
        p.apply_to(&mut value);
        assert_eq!(value, [9, 7, 0, 0, 3, 4, 1, 2]);
        assert!(Patch::new(Vec::new()).ranges().is_empty());
    }

    proptest! {
        #[test]
        fn tat_round_trips(whole in any::<u64>(), den in 2u64.., num_seed in any::<u64>()) {
            let num = 1 + num_seed % (den - 1);
            let tat = Tat { whole: Micros::new(whole), frac_num: num, frac_den: den };
            let mut buf = [0; TAT_MAX_LEN];
            let n = encode_tat(Kind::Gcra, tat, &mut buf);
            prop_assert_eq!(decode_tat(&buf[..n], Kind::Gcra), Ok(tat));
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode_tat(&bytes, Kind::Gcra);
            let _ = get_varint(&bytes);
        }
    }
}
