//! RL.SKETCH's state (tag `0xA8`), version 1, little-endian: a fixed
//! 26-byte header and `width × depth` counters of 12 bytes, row-major. Its
//! size depends only on `width × depth`: `26 + 12 × width × depth` bytes.
//!
//! ```text
//! 0      tag 0xA8
//! 1      depth: u8, rows (1..=8)
//! 2..6   width: u32, counters per row (1..=262,144)
//! 6..14  window: u64, µs
//! 14..22 index: u64, the latest window index (now / window) written
//! 22..26 sweep: u32, the next counter a write rolls forward
//! 26..   counters; counter i (row × width + column) at 26 + 12 i:
//!        tag: u32 (window index mod 2^32), prev: u32, cur: u32
//! ```
//!
//! An admitted request patches the header's `index` and `sweep` and at most
//! `depth + 1` counters: what it replicates grows with `depth`, not `width`.
//! The first write to a missing key is a patch too: `SETRANGE` creates the
//! value zero-filled (an all-zero counter counts nothing), and the patch
//! always reaches the last counter, so the value has its full size at once.

use super::{body, le_u32, le_u64, Kind, Patch, StateError};
#[cfg(test)]
use crate::algorithm::sketch::SketchState;
use crate::algorithm::sketch::{
    Counter, Sketch, SketchChange, SketchCounters, MAX_DEPTH, MAX_WIDTH,
};
use crate::algorithm::Micros;

pub const SKETCH_HEADER: usize = 26;
pub const COUNTER_BYTES: usize = 12;
const INDEX_AT: usize = 14;

/// The size of a sketch's value: `26 + 12 × width × depth` bytes.
pub fn sketch_len(width: usize, depth: usize) -> usize {
    SKETCH_HEADER + COUNTER_BYTES * width * depth
}

/// A stored sketch, read in place (nothing is copied).
#[derive(Debug, Clone, Copy)]
pub struct StoredSketch<'a> {
    pub depth: usize,
    pub width: usize,
    pub window: Micros,
    index: u64,
    sweep: usize,
    counters: &'a [u8],
}

impl<'a> StoredSketch<'a> {
    pub fn decode(value: &'a [u8]) -> Result<StoredSketch<'a>, StateError> {
        let corrupt = StateError::Corrupt(Kind::Sketch);
        body(value, Kind::Sketch)?;
        let head = value.get(..SKETCH_HEADER).ok_or(corrupt)?;
        let depth = usize::from(head[1]);
        let width = le_u32(head, 2).unwrap_or_default() as usize;
        let window = le_u64(head, 6).unwrap_or_default();
        let sweep = le_u32(head, 22).unwrap_or_default() as usize;
        let valid = (1..=MAX_DEPTH as usize).contains(&depth)
            && (1..=MAX_WIDTH as usize).contains(&width)
            && window > 0
            && sweep < width * depth
            && value.len() == sketch_len(width, depth);
        if !valid {
            return Err(corrupt);
        }
        Ok(StoredSketch {
            depth,
            width,
            window: Micros::new(window),
            index: le_u64(head, INDEX_AT).unwrap_or_default(),
            sweep,
            counters: &value[SKETCH_HEADER..],
        })
    }
}

impl SketchCounters for StoredSketch<'_> {
    fn index(&self) -> u64 {
        self.index
    }

    fn sweep(&self) -> usize {
        self.sweep
    }

    fn counter(&self, i: usize) -> Counter {
        let at = i * COUNTER_BYTES;
        Counter {
            tag: le_u32(self.counters, at).unwrap_or_default(),
            prev: le_u32(self.counters, at + 4).unwrap_or_default(),
            cur: le_u32(self.counters, at + 8).unwrap_or_default(),
        }
    }
}

fn cell_bytes(c: Counter) -> Vec<u8> {
    let mut v = Vec::with_capacity(COUNTER_BYTES);
    v.extend_from_slice(&c.tag.to_le_bytes());
    v.extend_from_slice(&c.prev.to_le_bytes());
    v.extend_from_slice(&c.cur.to_le_bytes());
    v
}

fn header(sketch: &Sketch, index: u64, sweep: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(SKETCH_HEADER);
    v.push(Kind::Sketch.tag());
    v.push(sketch.depth() as u8);
    v.extend_from_slice(&(sketch.width() as u32).to_le_bytes());
    v.extend_from_slice(&sketch.window().as_u64().to_le_bytes());
    v.extend_from_slice(&index.to_le_bytes());
    v.extend_from_slice(&(sweep as u32).to_le_bytes());
    v
}

/// The patch that applies `change`; `creating` when the key does not exist
/// yet (then the whole header is written and the last counter reached).
pub fn patch(sketch: &Sketch, change: &SketchChange, creating: bool) -> Patch {
    let head = header(sketch, change.index, change.sweep);
    let mut ranges = if creating {
        vec![(0, head)]
    } else {
        vec![(INDEX_AT, head[INDEX_AT..].to_vec())]
    };
    let last = sketch.counters() - 1;
    let cell_at = |i: usize| SKETCH_HEADER + i * COUNTER_BYTES;
    ranges.extend(
        change
            .counters
            .iter()
            .map(|&(i, c)| (cell_at(i), cell_bytes(c))),
    );
    if creating && change.counters.last().map(|(i, _)| *i) != Some(last) {
        ranges.push((cell_at(last), cell_bytes(Counter::default())));
    }
    Patch::new(ranges)
}

/// The whole value of a sketch held in memory: for tests.
#[cfg(test)]
pub fn encode(sketch: &Sketch, state: &SketchState) -> Vec<u8> {
    let mut v = header(sketch, state.index, state.sweep);
    for &c in &state.counters {
        v.extend_from_slice(&cell_bytes(c));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// What the fuzz target `sketch` checks, on values with a plausible
        /// header and arbitrary counters: a decoded sketch decides, and an
        /// admitted request's patch keeps it the same size and decodable.
        #[test]
        fn any_stored_cells_decide_and_stay_a_sketch(
            width in 1u32..6, depth in 1u8..4, window in 1u64..1000,
            index in any::<u64>(), sweep_seed in any::<u32>(),
            counters in proptest::collection::vec(any::<u32>(), 3 * 18),
            now in any::<u64>(), cost in 0u64..4, limit in 1u64..10, item in any::<u16>(),
        ) {
            let n = width as usize * usize::from(depth);
            let mut v = vec![0xA8, depth];
            v.extend_from_slice(&width.to_le_bytes());
            v.extend_from_slice(&window.to_le_bytes());
            v.extend_from_slice(&index.to_le_bytes());
            v.extend_from_slice(&(sweep_seed % n as u32).to_le_bytes());
            for c in &counters[..3 * n] {
                v.extend_from_slice(&c.to_le_bytes());
            }
            let found = StoredSketch::decode(&v).unwrap();
            let sketch = Sketch::new(limit, Micros::new(window), width.into(), depth.into());
            let (d, change) = found_decide(&sketch, &found, &item.to_le_bytes(), now, cost);
            prop_assert!(d.remaining <= limit);
            prop_assert_eq!(change.is_some(), d.allowed && cost > 0);
            if let Some(c) = change {
                let mut after = v.clone();
                patch(&sketch, &c, false).apply_to(&mut after);
                prop_assert_eq!(after.len(), v.len());
                prop_assert!(StoredSketch::decode(&after).is_ok());
            }
        }
    }

    fn found_decide(
        sketch: &Sketch,
        found: &StoredSketch,
        item: &[u8],
        now: u64,
        cost: u64,
    ) -> (crate::algorithm::Decision, Option<SketchChange>) {
        sketch.decide(Some(found), item, Micros::new(now), cost)
    }

    #[test]
    fn layout_and_validation() {
        let sketch = Sketch::new(10, Micros::from_secs(60), 4, 2);
        let mut state = SketchState::new(&sketch);
        state.index = 7;
        state.sweep = 3;
        state.counters[5] = Counter {
            tag: 7,
            prev: 1,
            cur: 2,
        };
        let v = encode(&sketch, &state);
        assert_eq!(v.len(), sketch_len(4, 2));
        assert_eq!(v.len(), 26 + 96);
        assert_eq!(&v[..2], &[0xA8, 2]);
        let s = StoredSketch::decode(&v).unwrap();
        assert_eq!((s.width, s.depth, s.window), (4, 2, Micros::from_secs(60)));
        assert_eq!((s.index(), s.sweep()), (7, 3));
        assert_eq!(s.counter(5), state.counters[5]);
        let corrupt = Err(StateError::Corrupt(Kind::Sketch));
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = v.clone();
            f(&mut b);
            StoredSketch::decode(&b).map(|_| ())
        };
        assert_eq!(bad(&|b| b.truncate(25)), corrupt);
        assert_eq!(bad(&|b| b.push(0)), corrupt);
        assert_eq!(bad(&|b| b.truncate(b.len() - 1)), corrupt);
        assert_eq!(bad(&|b| b[1] = 0), corrupt);
        assert_eq!(bad(&|b| b[1] = 9), corrupt);
        assert_eq!(
            bad(&|b| b[2..6].copy_from_slice(&0u32.to_le_bytes())),
            corrupt
        );
        assert_eq!(
            bad(&|b| b[6..14].copy_from_slice(&0u64.to_le_bytes())),
            corrupt
        );
        assert_eq!(
            bad(&|b| b[22..26].copy_from_slice(&8u32.to_le_bytes())),
            corrupt
        );
        assert_eq!(
            StoredSketch::decode(&[0xA4, 0]).map(|_| ()),
            Err(StateError::OtherKind(Kind::SlidingApprox))
        );
    }

    #[test]
    fn a_first_write_creates_the_whole_value() {
        let sketch = Sketch::new(10, Micros::from_secs(60), 8, 3);
        let (_, change) = sketch.decide::<SketchState>(None, b"a", Micros::from_secs(600), 1);
        let change = change.unwrap();
        let mut value = Vec::new();
        patch(&sketch, &change, true).apply_to(&mut value);
        let mut state = SketchState::new(&sketch);
        state.apply(&change);
        assert_eq!(value, encode(&sketch, &state));
        // Later writes patch the header's index and sweep and the counters.
        let stored = StoredSketch::decode(&value).unwrap();
        let (_, change) = sketch.decide(Some(&stored), b"b", Micros::from_secs(600), 1);
        let p = patch(&sketch, &change.unwrap(), false);
        assert_eq!(p.ranges()[0].0, 14);
        assert!(p.ranges().iter().map(|(_, b)| b.len()).sum::<usize>() <= 12 + 4 * 12);
    }
}
