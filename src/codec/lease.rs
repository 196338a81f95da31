//! The concurrency limit's state and its lease identifiers.
//!
//! Layout v2 (tag 0xAA), little-endian: a 33-byte header `tag, epoch: u64,
//! next_seq: u64, last: u64, root: u32, free: u32`, then 32-byte slots
//! `expiry: u56, cost: u24, seq: u48, left: u24, right: u24, parent: u24,
//! sum: u48, height: u8`: the lease (16 bytes) and its place in the tree of
//! leases ordered by deadline (16 bytes; links are slot index + 1, 0 for
//! none; `sum` and `height` are the units and height of the subtree). A free
//! slot has cost 0 and links the next free one as `left`. A key holding n
//! leases takes 33 + 32·n bytes. An acquire, release or renew writes 24 header bytes and
//! the slots it changed, O(log n) of them ([`crate::algorithm::concurrency`]).
//!
//! Layout v1 (tag 0xA9): `tag, epoch: u64, next_seq: u64, last: u64`, then
//! 16-byte slots `expiry: u56, cost: u24, seq: u48` without a tree. It is
//! still read: [`StoredLeases::decode`] converts it (O(n log n) for its n
//! slots, at most `ratelimit.max-leases-per-key`), and the next write
//! stores the whole value in layout v2, once.
//!
//! A lease identifier is 44 lowercase hex digits: epoch (14, its low 56
//! bits), seq (12), slot (6) and a 48-bit check of the key's name (12), so
//! a lease presented for another key is refused (unless the two names'
//! hashes agree on those 48 bits: probability 2^-48 for names not chosen
//! to collide), and a release finds its slot without a search.

use super::{body, Kind, Patch, StateError};
use crate::algorithm::concurrency::tree::{link, Link};
use crate::algorithm::concurrency::{Grant, Header, LeaseId, Leases, Slot, SlotChange, MAX_LEASES};
use crate::algorithm::sketch::{fmix64, fnv1a64};
use crate::algorithm::Micros;
use crate::bounds::work::{self, Work};
use std::borrow::Cow;

/// The tag of layout v1, read and converted.
pub const V1_TAG: u8 = 0xA9;
const V1_HEADER_LEN: usize = 1 + 8 + 8 + 8;
const V1_SLOT_LEN: usize = 16;

/// Tag, epoch, next_seq, last, root, free.
pub const HEADER_LEN: usize = 1 + 8 + 8 + 8 + 4 + 4;
pub const SLOT_LEN: usize = 32;
/// Where the header's changing fields (next_seq, last, root, free) start.
const COUNTERS_AT: usize = 9;
const COUNTERS_LEN: usize = 24;
/// Length of a lease identifier.
pub const LEASE_LEN: usize = 44;

/// A stored state, read in place (layout v2) or converted (layout v1).
#[derive(Debug, Clone)]
pub struct StoredLeases<'a> {
    pub header: Header,
    bytes: Cow<'a, [u8]>,
}

fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

fn put_le(out: &mut [u8], x: u64) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = (x >> (8 * i)) as u8;
    }
}

impl<'a> StoredLeases<'a> {
    pub fn decode(value: &'a [u8]) -> Result<StoredLeases<'a>, StateError> {
        body(value, Kind::Concurrency)?;
        let corrupt = StateError::Corrupt(Kind::Concurrency);
        if value[0] == V1_TAG {
            return convert_v1(value).ok_or(corrupt);
        }
        let head = value.get(..HEADER_LEN).ok_or(corrupt)?;
        let count = (value.len() - HEADER_LEN) / SLOT_LEN;
        let header = Header {
            epoch: Micros::new(le(&head[1..9])),
            next_seq: le(&head[9..17]),
            last: Micros::new(le(&head[17..25])),
            root: le(&head[25..29]) as u32,
            free: le(&head[29..33]) as u32,
        };
        if header.next_seq == 0
            || !(value.len() - HEADER_LEN).is_multiple_of(SLOT_LEN)
            || count as u64 > MAX_LEASES
            || header.root as usize > count
            || header.free as usize > count
        {
            return Err(corrupt);
        }
        Ok(StoredLeases {
            header,
            bytes: Cow::Borrowed(value),
        })
    }

    /// The whole value to store after `patch` when the state was read in
    /// layout v1 (it is then written whole, once); `None` for layout v2,
    /// which is patched in place.
    pub fn converted_value(&self, patch: &Patch) -> Option<Vec<u8>> {
        let Cow::Owned(bytes) = &self.bytes else {
            return None;
        };
        let mut value = bytes.clone();
        patch.apply_to(&mut value);
        Some(value)
    }
}

impl Leases for StoredLeases<'_> {
    fn slots(&self) -> usize {
        (self.bytes.len() - HEADER_LEN) / SLOT_LEN
    }

    fn slot(&self, i: usize) -> Slot {
        let at = slot_offset(i);
        match self
            .bytes
            .get(at..at + SLOT_LEN)
            .and_then(|b| b.try_into().ok())
        {
            Some(b) => decode_slot(b),
            None => Slot::default(),
        }
    }
}

const M24: u64 = (1 << 24) - 1;
const M48: u64 = (1 << 48) - 1;
const M56: u64 = (1 << 56) - 1;

/// A slot as four little-endian words: the byte layout above, read and
/// written a word at a time (every call reads some tens of slots).
fn decode_slot(b: &[u8; SLOT_LEN]) -> Slot {
    let w0 = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let w1 = u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
    let w2 = u64::from_le_bytes([b[16], b[17], b[18], b[19], b[20], b[21], b[22], b[23]]);
    let w3 = u64::from_le_bytes([b[24], b[25], b[26], b[27], b[28], b[29], b[30], b[31]]);
    Slot {
        expiry: Micros::new(w0 & M56),
        cost: (w0 >> 56) | ((w1 & 0xffff) << 8),
        seq: w1 >> 16,
        left: (w2 & M24) as u32,
        right: ((w2 >> 24) & M24) as u32,
        parent: ((w2 >> 48) | ((w3 & 0xff) << 16)) as u32,
        sum: (w3 >> 8) & M48,
        height: (w3 >> 56) as u8,
    }
}

fn encode_slot(slot: &Slot) -> Vec<u8> {
    let cost = slot.cost & M24;
    let parent = u64::from(slot.parent) & M24;
    let w0 = (slot.expiry.as_u64() & M56) | (cost << 56);
    let w1 = (cost >> 8) | (slot.seq << 16);
    let w2 = (u64::from(slot.left) & M24) | ((u64::from(slot.right) & M24) << 24) | (parent << 48);
    let w3 = (parent >> 16) | ((slot.sum & M48) << 8) | (u64::from(slot.height) << 56);
    let mut out = Vec::with_capacity(SLOT_LEN);
    out.extend_from_slice(&w0.to_le_bytes());
    out.extend_from_slice(&w1.to_le_bytes());
    out.extend_from_slice(&w2.to_le_bytes());
    out.extend_from_slice(&w3.to_le_bytes());
    out
}

fn encode_counters(header: &Header) -> Vec<u8> {
    let mut out = vec![0u8; COUNTERS_LEN];
    put_le(&mut out[0..8], header.next_seq);
    put_le(&mut out[8..16], header.last.as_u64());
    put_le(&mut out[16..20], u64::from(header.root));
    put_le(&mut out[20..24], u64::from(header.free));
    out
}

fn encode_header(header: &Header) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[0] = Kind::Concurrency.tag();
    put_le(&mut out[1..9], header.epoch.as_u64());
    out[COUNTERS_AT..COUNTERS_AT + COUNTERS_LEN].copy_from_slice(&encode_counters(header));
    out
}

fn slot_offset(index: usize) -> usize {
    HEADER_LEN + index * SLOT_LEN
}

/// The header's counters and the changed slots, in place.
fn patch(header: &Header, slots: &[(usize, Slot)]) -> Patch {
    let mut ranges = vec![(COUNTERS_AT, encode_counters(header))];
    ranges.extend(slots.iter().map(|(i, s)| (slot_offset(*i), encode_slot(s))));
    Patch::new(ranges)
}

/// The whole value of a key created by `grant`.
pub fn encode_new(grant: &Grant) -> Vec<u8> {
    let mut out = encode_header(&grant.header).to_vec();
    patch(&grant.header, &grant.slots).apply_to(&mut out);
    out
}

/// The in-place write of `grant` on an existing key: the counters and the
/// slots it changed (one maybe appended past the end).
pub fn grant_patch(grant: &Grant) -> Patch {
    patch(&grant.header, &grant.slots)
}

/// The in-place write of a release or renewal: the counters and the slots
/// it changed.
pub fn change_patch(change: &SlotChange) -> Patch {
    patch(&change.header, &change.slots)
}

/// A layout v1 value in layout v2: the same slots at the same indexes,
/// the leases in a tree built balanced from their deadline order, the
/// others free. O(n log n) for n slots (the sort).
fn convert_v1(value: &[u8]) -> Option<StoredLeases<'static>> {
    let head = value.get(1..V1_HEADER_LEN)?;
    let rows = &value[V1_HEADER_LEN..];
    let count = rows.len() / V1_SLOT_LEN;
    let next_seq = le(&head[8..16]);
    if next_seq == 0 || !rows.len().is_multiple_of(V1_SLOT_LEN) || count as u64 > MAX_LEASES {
        return None;
    }
    let mut slots: Vec<Slot> = rows
        .chunks_exact(V1_SLOT_LEN)
        .map(|b| Slot {
            expiry: Micros::new(le(&b[0..7])),
            cost: le(&b[7..10]),
            seq: le(&b[10..16]),
            ..Slot::default()
        })
        .collect();
    let mut held: Vec<usize> = (0..count).filter(|&i| slots[i].cost > 0).collect();
    held.sort_unstable_by_key(|&i| (slots[i].expiry, slots[i].seq));
    let root = build_balanced(&mut slots, &held, 0);
    let mut free = 0;
    for (i, slot) in slots.iter_mut().enumerate().rev() {
        if slot.cost == 0 {
            *slot = Slot {
                left: free,
                ..Slot::default()
            };
            free = link(i);
        }
    }
    work::add(Work::Slots, count as u64);
    let header = Header {
        epoch: Micros::new(le(&head[0..8])),
        next_seq,
        last: Micros::new(le(&head[16..24])),
        root,
        free,
    };
    let mut bytes = encode_header(&header).to_vec();
    for slot in &slots {
        bytes.extend_from_slice(&encode_slot(slot));
    }
    Some(StoredLeases {
        header,
        bytes: Cow::Owned(bytes),
    })
}

/// Links the slots `order` names (in deadline order) into a tree as
/// balanced as can be under `parent`; returns its root.
fn build_balanced(slots: &mut [Slot], order: &[usize], parent: Link) -> Link {
    let Some(&at) = order.get(order.len() / 2) else {
        return 0;
    };
    let me = link(at);
    let left = build_balanced(slots, &order[..order.len() / 2], me);
    let right = build_balanced(slots, &order[order.len() / 2 + 1..], me);
    let child = |l: Link| match l {
        0 => Slot::default(),
        l => slots[l as usize - 1],
    };
    let (l, r) = (child(left), child(right));
    let s = &mut slots[at];
    s.left = left;
    s.right = right;
    s.parent = parent;
    s.height = 1 + l.height.max(r.height);
    s.sum = s.cost.saturating_add(l.sum).saturating_add(r.sum);
    me
}

/// A 48-bit check of a key's name.
pub fn key_check(name: &[u8]) -> u64 {
    fmix64(fnv1a64(name)) >> 16
}

/// The identifier as clients see it.
pub fn format_lease(id: &LeaseId) -> String {
    format!(
        "{:014x}{:012x}{:06x}{:012x}",
        id.epoch & 0xff_ffff_ffff_ffff,
        id.seq & 0xffff_ffff_ffff,
        id.slot & 0xff_ffff,
        id.check & 0xffff_ffff_ffff
    )
}

/// Reads an identifier; `None` unless 44 lowercase hex digits.
pub fn parse_lease(text: &[u8]) -> Option<LeaseId> {
    if text.len() != LEASE_LEN || !text.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let hex = |r: std::ops::Range<usize>| {
        let s = std::str::from_utf8(&text[r]).ok()?;
        u64::from_str_radix(s, 16).ok()
    };
    Some(LeaseId {
        epoch: hex(0..14)?,
        seq: hex(14..26)?,
        slot: hex(26..32)? as u32,
        check: hex(32..44)?,
    })
}

#[cfg(test)]
mod tests;
