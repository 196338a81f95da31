//! The concurrency limit's state and its lease identifiers.
//!
//! Layout v1 (tag 0xA9), little-endian: `tag, epoch: u64, next_seq: u64,
//! last: u64`, then 16-byte slots `expiry: u56, cost: u24, seq: u48`. A
//! held lease is one slot, so 16 bytes; an acquire, release or renew writes
//! one slot and 16 header bytes, whatever the limit or the number of leases.
//!
//! A lease identifier is 36 lowercase hex digits: epoch (14, its low 56
//! bits), seq (12), slot (6) and a 16-bit check of the key's name (4), so a
//! lease presented for another key is told apart from one merely unknown,
//! and a release finds its slot without a search.

use super::{body, Kind, Patch, StateError};
use crate::algorithm::concurrency::{
    Grant, Header, LeaseId, Leases, Slot, SlotChange, MAX_CONCURRENCY_LIMIT,
};
use crate::algorithm::Micros;

/// Tag, epoch, next_seq, last.
pub const HEADER_LEN: usize = 1 + 8 + 8 + 8;
pub const SLOT_LEN: usize = 16;
/// Length of a lease identifier.
pub const LEASE_LEN: usize = 36;

/// A stored state, read in place.
#[derive(Debug, Clone, Copy)]
pub struct StoredLeases<'a> {
    pub header: Header,
    slots: &'a [u8],
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
        let body = body(value, Kind::Concurrency)?;
        let corrupt = StateError::Corrupt(Kind::Concurrency);
        let (head, slots) = body.split_at_checked(HEADER_LEN - 1).ok_or(corrupt)?;
        let next_seq = le(&head[8..16]);
        let last = Micros::new(le(&head[16..24]));
        let count = slots.len() / SLOT_LEN;
        if next_seq == 0 || !slots.len().is_multiple_of(SLOT_LEN) {
            return Err(corrupt);
        }
        if count as u64 > MAX_CONCURRENCY_LIMIT {
            return Err(corrupt);
        }
        Ok(StoredLeases {
            header: Header {
                epoch: Micros::new(le(&head[0..8])),
                next_seq,
                last,
            },
            slots,
        })
    }
}

impl Leases for StoredLeases<'_> {
    fn slots(&self) -> usize {
        self.slots.len() / SLOT_LEN
    }

    fn slot(&self, i: usize) -> Slot {
        let Some(b) = self.slots.get(i * SLOT_LEN..(i + 1) * SLOT_LEN) else {
            return Slot::default();
        };
        // Two words, not sixteen bytes: acquires scan every slot.
        let (lo, hi) = b.split_at(8);
        let w0 = u64::from_le_bytes(lo.try_into().unwrap_or_default());
        let w1 = u64::from_le_bytes(hi.try_into().unwrap_or_default());
        Slot {
            expiry: Micros::new(w0 & ((1 << 56) - 1)),
            cost: (w0 >> 56) | ((w1 & 0xffff) << 8),
            seq: w1 >> 16,
        }
    }
}

fn encode_slot(slot: &Slot) -> [u8; SLOT_LEN] {
    let mut out = [0u8; SLOT_LEN];
    put_le(&mut out[0..7], slot.expiry.as_u64());
    put_le(&mut out[7..10], slot.cost);
    put_le(&mut out[10..16], slot.seq);
    out
}

fn slot_offset(index: usize) -> usize {
    HEADER_LEN + index * SLOT_LEN
}

/// The whole value of a key created by `grant`.
pub fn encode_new(grant: &Grant) -> Vec<u8> {
    let mut out = vec![0u8; slot_offset(grant.index + 1)];
    out[0] = Kind::Concurrency.tag();
    put_le(&mut out[1..9], grant.header.epoch.as_u64());
    put_le(&mut out[9..17], grant.header.next_seq);
    put_le(&mut out[17..25], grant.header.last.as_u64());
    let at = slot_offset(grant.index);
    out[at..at + SLOT_LEN].copy_from_slice(&encode_slot(&grant.slot));
    out
}

/// The in-place write of `grant` on an existing key: the counter and one
/// slot (appended when `index` is past the end).
pub fn grant_patch(grant: &Grant) -> Patch {
    let mut counters = grant.header.next_seq.to_le_bytes().to_vec();
    counters.extend_from_slice(&grant.header.last.as_u64().to_le_bytes());
    Patch::new(vec![
        (9, counters),
        (slot_offset(grant.index), encode_slot(&grant.slot).to_vec()),
    ])
}

/// The in-place write of a release or renewal: the last deadline and one
/// slot.
pub fn change_patch(change: &SlotChange) -> Patch {
    Patch::new(vec![
        (17, change.last.as_u64().to_le_bytes().to_vec()),
        (
            slot_offset(change.index),
            encode_slot(&change.slot).to_vec(),
        ),
    ])
}

/// A 16-bit check of a key's name (FNV-1a, folded).
pub fn key_check(name: &[u8]) -> u16 {
    let hash = name.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    ((hash >> 16) ^ (hash & 0xffff)) as u16
}

/// The identifier as clients see it.
pub fn format_lease(id: &LeaseId) -> String {
    format!(
        "{:014x}{:012x}{:06x}{:04x}",
        id.epoch & 0xff_ffff_ffff_ffff,
        id.seq & 0xffff_ffff_ffff,
        id.slot & 0xff_ffff,
        id.check
    )
}

/// Reads an identifier; `None` unless 36 lowercase hex digits.
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
        check: hex(32..36)? as u16,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::concurrency::Concurrency;
    use proptest::prelude::*;

    #[test]
    fn a_key_written_then_patched_reads_back() {
        let c = Concurrency::new(3, Micros::new(500)).for_key(key_check(b"k"));
        let (_, g) = c.acquire(None, &[][..], Micros::new(100), 2);
        let g = g.unwrap();
        assert!(g.created);
        let mut value = encode_new(&g);
        assert_eq!(value.len(), HEADER_LEN + SLOT_LEN);
        assert_eq!(value[0], 0xA9);
        let stored = StoredLeases::decode(&value).unwrap();
        let (d, g2) = c.acquire(Some(stored.header), &stored, Micros::new(200), 1);
        assert_eq!(d.remaining, 0);
        let g2 = g2.unwrap();
        let patch = grant_patch(&g2);
        patch.apply_to(&mut value);
        let stored = StoredLeases::decode(&value).unwrap();
        assert_eq!(stored.slots(), 2);
        assert_eq!(stored.slot(1).seq, 2);
        assert_eq!(stored.header.next_seq, 3);
        let text = format_lease(&g2.lease);
        assert_eq!(text.len(), LEASE_LEN);
        assert_eq!(parse_lease(text.as_bytes()), Some(g2.lease));
    }

    #[test]
    fn what_a_write_replicates_does_not_grow_with_the_leases_held() {
        let c = Concurrency::new(MAX_CONCURRENCY_LIMIT, Micros::new(1_000_000));
        let (_, g) = c.acquire(None, &[][..], Micros::new(1), 1);
        let mut value = encode_new(&g.unwrap());
        let mut first = None;
        for i in 2..2_000u64 {
            let stored = StoredLeases::decode(&value).unwrap();
            let (_, g) = c.acquire(Some(stored.header), &stored, Micros::new(i), 1);
            let g = g.unwrap();
            let patch = grant_patch(&g);
            let bytes: usize = patch.ranges().iter().map(|r| r.1.len()).sum();
            assert_eq!(bytes, 16 + SLOT_LEN);
            patch.apply_to(&mut value);
            first.get_or_insert(g.lease);
        }
        assert_eq!(
            value.len(),
            HEADER_LEN + 1_999 * SLOT_LEN,
            "16 bytes a lease"
        );
        let stored = StoredLeases::decode(&value).unwrap();
        let change = crate::algorithm::concurrency::release(
            stored.header,
            &stored,
            first.unwrap(),
            Micros::new(5_000),
        )
        .unwrap();
        let bytes: usize = change_patch(&change)
            .ranges()
            .iter()
            .map(|r| r.1.len())
            .sum();
        assert_eq!(bytes, 8 + SLOT_LEN);
    }

    #[test]
    fn malformed_identifiers_and_states() {
        assert_eq!(parse_lease(b"abc"), None);
        assert_eq!(parse_lease(&[b'G'; 36]), None);
        assert_eq!(parse_lease(&[b'A'; 36]), None);
        assert_eq!(parse_lease(&[b'f'; 32]), None);
        assert!(parse_lease(&[b'f'; 36]).is_some());
        let corrupt = Err(StateError::Corrupt(Kind::Concurrency));
        assert_eq!(StoredLeases::decode(&[0xA9, 1]).map(|_| ()), corrupt);
        let mut v = vec![0xA9; HEADER_LEN + 3];
        assert_eq!(StoredLeases::decode(&v).map(|_| ()), corrupt);
        v.truncate(HEADER_LEN);
        assert!(StoredLeases::decode(&v).is_ok());
        assert_ne!(key_check(b"a"), key_check(b"b"));
    }

    proptest! {
        #[test]
        fn slots_and_identifiers_round_trip(
            expiry in 0u64..(1 << 56), cost in 0u64..(1 << 24), seq in 0u64..(1 << 48),
            epoch in 0u64..(1 << 56), check in any::<u16>(), index in 0u32..(1 << 24),
        ) {
            let slot = Slot { expiry: Micros::new(expiry), cost, seq };
            let mut value = vec![0xA9, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
            value.extend_from_slice(&[0; 8]);
            value.extend_from_slice(&encode_slot(&slot));
            prop_assert_eq!(StoredLeases::decode(&value).unwrap().slot(0), slot);
            let id = LeaseId { epoch, seq, slot: index, check };
            prop_assert_eq!(parse_lease(format_lease(&id).as_bytes()), Some(id));
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let mut v = vec![0xA9];
            v.extend(&bytes);
            if let Ok(s) = StoredLeases::decode(&v) {
                for i in 0..=s.slots() {
                    let _ = s.slot(i);
                }
            }
            let _ = parse_lease(&bytes);
        }
    }
}
