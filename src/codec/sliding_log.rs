//! RL.SLIDING EXACT's state, the sliding log (tag `0xAB`): a ring of
//! timestamps behind a fixed 22-byte header. Integers are little-endian.
//!
//! ```text
//! 0      tag 0xAB
//! 1      width: bytes per stamp, 4 or 8
//! 2..6   cap: u32, ring slots
//! 6..10  tail: u32, slot of the oldest entry
//! 10..14 len: u32, entries as of the last write
//! 14..22 last: u64, µs of the newest entry (of the last write)
//! 22..   slots, `width` bytes each; entry i (oldest first) is in slot
//!        (tail + i) % cap. The value grows (zero-filled, as SETRANGE
//!        does) only as slots are first used, up to cap slots.
//! ```
//!
//! Every change is at the log's ends ([`LogEdit`]): expired entries leave
//! at the tail and refunded ones at the head by moving `tail` and `len`;
//! new entries are written into their own slots. So a write patches the
//! header and the slots it adds, never the rest: its cost, and what it
//! replicates, is its cost in entries, plus the O(log n) reads of the
//! binary search that finds the live part.
//!
//! `cap` is not the limit: a lower limit uses the same ring (a log holds
//! at most the limit of its last write), and a higher one grows it when
//! its entries no longer fit, to twice the slots (at most
//! `ratelimit.max-log-entries`, at least what is needed). Growing moves
//! the smaller of the two parts of a ring that wraps around its end, so
//! the moved entries are at most half the ring: at most half the operator
//! bound, once per doubling.
//!
//! Width 8 stores absolute µs. Width 4 (windows up to 2^32 µs, 71.5 min)
//! stores the low 32 bits: every write first drops expired entries, so
//! each stored entry is less than one window older than `last`, and
//! `last − ((last − stamp) mod 2^32)` recovers it exactly. A call whose
//! window needs the other width rewrites the log whole (at most its limit
//! of entries).
//!
//! The first layout (tag `0xA3`) is the same ring with `cap` equal to the
//! limit that wrote it; it is read as it is and retagged by its next
//! write, which is otherwise an ordinary one.

use super::{body, le_u32, le_u64, Kind, Patch, StateError, LEGACY_SLIDING_LOG_TAG};
use crate::algorithm::sliding_log::{Entries, LogEdit, MAX_SLIDING_LOG_LIMIT};
use crate::algorithm::Micros;
use std::cell::Cell;

pub const SLIDING_LOG_HEADER: usize = 22;
const CAP_AT: usize = 2;
const TAIL_AT: usize = 6;

/// The largest ring the first layout allowed (its largest limit).
const LEGACY_MAX_CAP: usize = 1_000_000;

/// Bytes per stamp for a window of `window`.
pub fn stamp_width(window: Micros) -> usize {
    if window.as_u64() <= 1 << 32 {
        4
    } else {
        8
    }
}

/// The stored sliding log, read in place. It counts the entries read
/// through it ([`StoredSlidingLog::reads`]).
#[derive(Debug, Clone)]
pub struct StoredSlidingLog<'a> {
    slots: &'a [u8],
    width: usize,
    cap: usize,
    tail: usize,
    len: usize,
    last: Micros,
    legacy: bool,
    reads: Cell<usize>,
}

/// What a log write stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogBytes {
    /// Changes in place (`SETRANGE`s).
    Patch(Patch),
    /// A whole new value (a new key, or another stamp width).
    Whole(Vec<u8>),
}

/// A log write and the entries it writes (moved or added).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogWrite {
    pub bytes: LogBytes,
    pub written: usize,
}

impl LogWrite {
    /// Applies the write as Redis does: for tests of the core.
    #[cfg(test)]
    pub fn apply_to(&self, value: &mut Vec<u8>) {
        match &self.bytes {
            LogBytes::Patch(p) => p.apply_to(value),
            LogBytes::Whole(v) => *value = v.clone(),
        }
    }
}

impl<'a> StoredSlidingLog<'a> {
    pub fn decode(value: &'a [u8]) -> Result<StoredSlidingLog<'a>, StateError> {
        let corrupt = StateError::Corrupt(Kind::SlidingLog);
        body(value, Kind::SlidingLog)?;
        let legacy = value.first() == Some(&LEGACY_SLIDING_LOG_TAG);
        let head = value.get(..SLIDING_LOG_HEADER).ok_or(corrupt)?;
        let width = usize::from(head[1]);
        let field = |at| le_u32(head, at).map(|x| x as usize).ok_or(corrupt);
        let (cap, tail, len) = (field(CAP_AT)?, field(TAIL_AT)?, field(10)?);
        let last = Micros::new(le_u64(head, 14).ok_or(corrupt)?);
        let slots = &value[SLIDING_LOG_HEADER..];
        let max_cap = if legacy {
            LEGACY_MAX_CAP
        } else {
            MAX_SLIDING_LOG_LIMIT as usize
        };
        let valid = (width == 4 || width == 8)
            && (1..=max_cap).contains(&cap)
            && tail < cap
            && len <= cap
            && slots.len().is_multiple_of(width);
        if !valid {
            return Err(corrupt);
        }
        let physical = slots.len() / width;
        // Every slot holding an entry must exist.
        let fits = if tail + len <= cap {
            tail + len <= physical
        } else {
            physical >= cap
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
            legacy,
            reads: Cell::new(0),
        })
    }

    #[cfg(test)]
    pub fn cap(&self) -> usize {
        self.cap
    }

    #[cfg(test)]
    pub fn width(&self) -> usize {
        self.width
    }

    /// Entries read through [`Entries::stamp`] so far.
    pub fn reads(&self) -> usize {
        self.reads.get()
    }

    /// Every stored entry, oldest first (tests: reads them all).
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<Micros> {
        (0..self.len).map(|i| self.stamp(i)).collect()
    }

    /// The stored bytes of slots `from..to`, copied as they are (a 4-byte
    /// stamp's low bits do not depend on `last`).
    fn slot_run(&self, from: usize, to: usize) -> Vec<u8> {
        let bytes = self.slots.get(from * self.width..to * self.width);
        bytes.unwrap_or_default().to_vec()
    }

    /// The write that applies `edit` for a log of stamp `width` (see
    /// [`write_log`]); a ring that must grow grows to at most `max_cap`
    /// slots (or what the entries need, if more).
    fn write(&self, edit: &LogEdit, width: usize, max_cap: usize) -> LogWrite {
        if width != self.width {
            return rewrite(Some(self), edit, width);
        }
        let a = edit.after(self.len);
        let len = a.len();
        let mut tail = (self.tail + a.from) % self.cap;
        let mut cap = self.cap;
        let mut ranges = Vec::new();
        let mut written = 0;
        if len > cap {
            let grown = len.max(cap.saturating_mul(2).min(max_cap));
            let wrapped = (tail + a.kept).saturating_sub(cap);
            let upper = cap - tail;
            if wrapped > 0 && wrapped <= upper {
                // Move the wrapped-around entries after the old end, those
                // beyond the new end back to its start (the patch holds
                // the old bytes, so the ranges may overlap what they move).
                let fits = wrapped.min(grown - cap);
                ranges.push((slot_at(cap, self.width), self.slot_run(0, fits)));
                if fits < wrapped {
                    ranges.push((slot_at(0, self.width), self.slot_run(fits, wrapped)));
                }
                written += wrapped;
            } else if wrapped > 0 {
                // Move the entries up to the old end to the new end.
                let moved = self.slot_run(tail, cap);
                tail = grown - upper;
                ranges.push((slot_at(tail, self.width), moved));
                written += upper;
            }
            self.reads.set(self.reads.get() + written);
            cap = grown;
        }
        let mut stamp = Vec::with_capacity(self.width);
        put_stamp(&mut stamp, edit.at, self.width);
        let mut pos = (tail + a.kept) % cap;
        let mut left = a.added;
        while left > 0 {
            let run = left.min(cap - pos);
            ranges.push((slot_at(pos, self.width), stamp.repeat(run)));
            left -= run;
            pos = 0;
        }
        written += a.added;
        let last = if a.added > 0 {
            edit.at
        } else if a.kept > 0 {
            self.stamp(a.from + a.kept - 1)
        } else {
            self.last
        };
        let mut header = Vec::with_capacity(20);
        if cap != self.cap {
            header.extend_from_slice(&(cap as u32).to_le_bytes());
        }
        header.extend_from_slice(&(tail as u32).to_le_bytes());
        header.extend_from_slice(&(len as u32).to_le_bytes());
        header.extend_from_slice(&last.as_u64().to_le_bytes());
        ranges.push((SLIDING_LOG_HEADER - header.len(), header));
        if self.legacy {
            ranges.push((0, vec![Kind::SlidingLog.tag()]));
        }
        LogWrite {
            bytes: LogBytes::Patch(Patch::new(ranges)),
            written,
        }
    }
}

fn slot_at(slot: usize, width: usize) -> usize {
    SLIDING_LOG_HEADER + slot * width
}

impl StoredSlidingLog<'_> {
    /// The stamp stored in `b` (`width` bytes).
    fn decode_stamp(&self, b: &[u8]) -> Micros {
        if self.width == 8 {
            return Micros::new(u64::from_le_bytes(b.try_into().unwrap_or_default()));
        }
        let low = u32::from_le_bytes(b.try_into().unwrap_or_default());
        let age = (self.last.as_u64() as u32).wrapping_sub(low);
        self.last.saturating_sub(Micros::new(u64::from(age)))
    }

    /// Calls `f` with entries `from..from + n`, oldest first, read in the
    /// ring's (at most two) runs of slots.
    fn each_stamp(&self, from: usize, n: usize, mut f: impl FnMut(Micros)) {
        self.reads.set(self.reads.get() + n);
        let start = (self.tail + from) % self.cap;
        let first = n.min(self.cap - start);
        for (at, count) in [(start, first), (0, n - first)] {
            let run = self.slots.get(at * self.width..(at + count) * self.width);
            for b in run.unwrap_or_default().chunks_exact(self.width) {
                f(self.decode_stamp(b));
            }
        }
    }
}

impl Entries for StoredSlidingLog<'_> {
    fn count(&self) -> usize {
        self.len
    }

    fn stamp(&self, i: usize) -> Micros {
        self.reads.set(self.reads.get() + 1);
        let at = (self.tail + i) % self.cap * self.width;
        self.decode_stamp(self.slots.get(at..at + self.width).unwrap_or_default())
    }
}

/// Appends `t` in `width` bytes: all of it, or its low 32 bits.
fn put_stamp(v: &mut Vec<u8>, t: Micros, width: usize) {
    if width == 8 {
        v.extend_from_slice(&t.as_u64().to_le_bytes());
    } else {
        v.extend_from_slice(&(t.as_u64() as u32).to_le_bytes());
    }
}

/// Appends `n` stamps `t`.
fn put_stamps(v: &mut Vec<u8>, t: Micros, width: usize, n: usize) {
    let mut one = Vec::with_capacity(width);
    put_stamp(&mut one, t, width);
    v.extend_from_slice(&one.repeat(n));
}

/// A whole log value of `cap` slots (at least one) holding `len` entries,
/// the newest `last`, whose stamps `fill` appends.
fn whole(
    cap: usize,
    width: usize,
    len: usize,
    last: Micros,
    fill: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut v = Vec::with_capacity(SLIDING_LOG_HEADER + len * width);
    v.push(Kind::SlidingLog.tag());
    v.push(width as u8);
    v.extend_from_slice(&(cap.max(1) as u32).to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&(len as u32).to_le_bytes());
    v.extend_from_slice(&last.as_u64().to_le_bytes());
    fill(&mut v);
    v
}

/// A whole new log of `cap` slots holding `entries` (oldest first): for
/// tests of the layout.
#[cfg(test)]
pub fn encode_sliding_log(cap: usize, width: usize, entries: &[Micros]) -> Vec<u8> {
    let last = entries.last().copied().unwrap_or_default();
    whole(cap, width, entries.len(), last, |v| {
        for &t in entries {
            put_stamp(v, t, width);
        }
    })
}

/// The write that applies `edit` to `stored` (`None`: no key) for a log
/// of stamp `width`: the one way a log is written. A stored log of that
/// width is patched in place; a new key, or a log whose stamps have the
/// other width, is written whole.
pub fn write_log(
    stored: Option<&StoredSlidingLog>,
    edit: &LogEdit,
    width: usize,
    max_cap: usize,
) -> LogWrite {
    match stored {
        Some(log) => log.write(edit, width, max_cap),
        None => rewrite(None, edit, width),
    }
}

/// The whole value that applies `edit` to `stored` (`None`: no key), its
/// stamps `width` bytes each.
fn rewrite(stored: Option<&StoredSlidingLog>, edit: &LogEdit, width: usize) -> LogWrite {
    let a = edit.after(stored.map_or(0, |log| log.len));
    let len = a.len();
    let last = match stored {
        Some(log) if a.added == 0 && a.kept > 0 => log.stamp(a.from + a.kept - 1),
        _ => edit.at,
    };
    let value = whole(edit.keep.max(len), width, len, last, |v| {
        if let Some(log) = stored {
            log.each_stamp(a.from, a.kept, |t| put_stamp(v, t, width));
        }
        put_stamps(v, edit.at, width, a.added);
    });
    LogWrite {
        bytes: LogBytes::Whole(value),
        written: len,
    }
}

#[cfg(test)]
mod tests;
