use super::*;
use crate::algorithm::concurrency::{release, renew, Concurrency};
use proptest::prelude::*;

fn apply(value: &mut Vec<u8>, patch: &Patch) -> usize {
    patch.apply_to(value);
    patch.ranges().iter().map(|r| r.1.len()).sum()
}

#[test]
fn a_key_written_then_patched_reads_back() {
    let c = Concurrency::new(3, Micros::new(500)).for_key(key_check(b"k"));
    let (_, g) = c.acquire(None, &[][..], Micros::new(100), 2);
    let g = g.unwrap();
    assert!(g.created);
    let mut value = encode_new(&g);
    assert_eq!(value.len(), HEADER_LEN + SLOT_LEN);
    assert_eq!(value[0], 0xAA);
    let stored = StoredLeases::decode(&value).unwrap();
    assert_eq!(stored.header, g.header);
    let (d, g2) = c.acquire(Some(stored.header), &stored, Micros::new(200), 1);
    assert_eq!(d.remaining, 0);
    let g2 = g2.unwrap();
    apply(&mut value, &grant_patch(&g2));
    let stored = StoredLeases::decode(&value).unwrap();
    assert_eq!(stored.slots(), 2);
    assert_eq!(stored.slot(1).seq, 2);
    assert_eq!(stored.header.next_seq, 3);
    assert_eq!(stored.header, g2.header);
    let text = format_lease(&g2.lease);
    assert_eq!(text.len(), LEASE_LEN);
    assert_eq!(parse_lease(text.as_bytes()), Some(g2.lease));
}

#[test]
fn what_a_write_replicates_grows_with_the_log_of_the_leases_held() {
    let n = 20_000u64;
    let c = Concurrency::new(n, Micros::new(1_000_000_000));
    let (_, g) = c.acquire(None, &[][..], Micros::new(1), 1);
    let mut value = encode_new(&g.unwrap());
    let mut ids = Vec::new();
    let bound = COUNTERS_LEN + (4 * 15 + 8) * SLOT_LEN;
    for i in 2..=n {
        let stored = StoredLeases::decode(&value).unwrap();
        let (_, g) = c.acquire(Some(stored.header), &stored, Micros::new(i), 1);
        let g = g.unwrap();
        ids.push(g.lease);
        assert!(apply(&mut value, &grant_patch(&g)) <= bound);
    }
    assert_eq!(
        value.len(),
        HEADER_LEN + n as usize * SLOT_LEN,
        "32 bytes a lease"
    );
    for (i, id) in ids.iter().enumerate().step_by(97) {
        let now = Micros::new(n + 1);
        let stored = StoredLeases::decode(&value).unwrap();
        let change = if i % 2 == 0 {
            release(stored.header, &stored, *id, now)
        } else {
            renew(stored.header, &stored, *id, Micros::new(i as u64), now)
        };
        assert!(apply(&mut value, &change_patch(&change.unwrap())) <= bound);
    }
}

/// A layout v1 value, as it was written: header and 16-byte slots.
fn v1(epoch: u64, next_seq: u64, last: u64, slots: &[(u64, u64, u64)]) -> Vec<u8> {
    let mut v = vec![V1_TAG];
    v.extend_from_slice(&epoch.to_le_bytes());
    v.extend_from_slice(&next_seq.to_le_bytes());
    v.extend_from_slice(&last.to_le_bytes());
    for &(expiry, cost, seq) in slots {
        let mut b = [0u8; 16];
        put_le(&mut b[0..7], expiry);
        put_le(&mut b[7..10], cost);
        put_le(&mut b[10..16], seq);
        v.extend_from_slice(&b);
    }
    v
}

#[test]
fn a_layout_v1_value_is_read_and_written_whole_in_layout_v2_once() {
    // Three slots: a lease until 500 (2 units), a released one, a lease
    // until 900 (1 unit).
    let old = v1(7, 4, 900, &[(500, 2, 1), (300, 0, 2), (900, 1, 3)]);
    let stored = StoredLeases::decode(&old).unwrap();
    assert_eq!(stored.slots(), 3);
    // The two leases in order under the root, the released slot free.
    let root = stored.slot(stored.header.root as usize - 1);
    assert_eq!((root.sum, root.height), (3, 2));
    assert_eq!(stored.header.free, 2);
    assert_eq!(stored.slot(1).cost, 0);
    assert_eq!(
        (stored.header.epoch, stored.header.next_seq),
        (Micros::new(7), 4)
    );
    let c = Concurrency::new(4, Micros::new(1_000));
    let (d, g) = c.acquire(Some(stored.header), &stored, Micros::new(100), 1);
    assert_eq!((d.allowed, d.remaining), (true, 0));
    let g = g.unwrap();
    assert_eq!(g.lease.slot, 1, "the free slot");
    let patch = grant_patch(&g);
    let whole = stored.converted_value(&patch).expect("written whole");
    assert_eq!(whole[0], 0xAA);
    let new = StoredLeases::decode(&whole).unwrap();
    assert!(new.converted_value(&patch).is_none(), "then patched");
    // Full until the first lease ends at 500: exact.
    let (d, _) = c.acquire(Some(new.header), &new, Micros::new(200), 2);
    assert_eq!(
        d.retry_after,
        crate::algorithm::RetryAfter::After(Micros::new(300))
    );
    // An old lease is released through its slot and number.
    let id = LeaseId {
        epoch: 7,
        seq: 3,
        slot: 2,
        check: 0,
    };
    assert!(release(new.header, &new, id, Micros::new(200)).is_some());
}

#[test]
fn malformed_identifiers_and_states() {
    assert_eq!(parse_lease(b"abc"), None);
    assert_eq!(parse_lease(&[b'G'; 44]), None);
    assert_eq!(parse_lease(&[b'A'; 44]), None);
    assert_eq!(parse_lease(&[b'f'; 36]), None);
    assert!(parse_lease(&[b'f'; 44]).is_some());
    let corrupt = Err(StateError::Corrupt(Kind::Concurrency));
    assert_eq!(StoredLeases::decode(&[0xAA, 1]).map(|_| ()), corrupt);
    assert_eq!(StoredLeases::decode(&[0xA9, 1]).map(|_| ()), corrupt);
    let mut v = vec![0xAA; HEADER_LEN + 3];
    assert_eq!(StoredLeases::decode(&v).map(|_| ()), corrupt);
    v.truncate(HEADER_LEN);
    v[25..33].fill(0);
    assert!(StoredLeases::decode(&v).is_ok());
    assert_ne!(key_check(b"a"), key_check(b"b"));
    assert!(key_check(b"user:7") < 1 << 48);
}

proptest! {
    #[test]
    fn slots_and_identifiers_round_trip(
        expiry in 0u64..(1 << 56), cost in 0u64..(1 << 24), seq in 0u64..(1 << 48),
        links in prop::array::uniform3(0u32..(1 << 24)), sum in 0u64..(1 << 48), height in any::<u8>(),
        epoch in 0u64..(1 << 56), check in 0u64..(1 << 48), index in 0u32..(1 << 24),
    ) {
        let slot = Slot {
            expiry: Micros::new(expiry), cost, seq,
            left: links[0], right: links[1], parent: links[2], sum, height,
        };
        let bytes: [u8; SLOT_LEN] = encode_slot(&slot).try_into().unwrap();
        prop_assert_eq!(decode_slot(&bytes), slot);
        let id = LeaseId { epoch, seq, slot: index, check };
        prop_assert_eq!(parse_lease(format_lease(&id).as_bytes()), Some(id));
    }

    /// Whatever the bytes (links that loop included), reading and deciding
    /// end without a panic.
    #[test]
    fn deciding_on_arbitrary_bytes_never_panics(
        tag in prop_oneof![Just(0xAAu8), Just(0xA9u8)],
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        now in 0u64..2_000,
    ) {
        let mut v = vec![tag];
        v.extend(&bytes);
        let c = Concurrency::new(5, Micros::new(100));
        if let Ok(s) = StoredLeases::decode(&v) {
            for i in 0..=s.slots() {
                let _ = s.slot(i);
            }
            let _ = c.acquire(Some(s.header), &s, Micros::new(now), 2);
            let id = LeaseId { epoch: s.header.epoch.as_u64() & 0xff_ffff_ffff_ffff, seq: 1, slot: 0, check: 0 };
            let _ = release(s.header, &s, id, Micros::new(now));
            let _ = renew(s.header, &s, id, Micros::new(5), Micros::new(now));
        }
        let _ = parse_lease(&bytes);
    }
}

/// A large layout v1 value converts to a balanced tree that later calls
/// keep balanced and exact.
#[test]
fn a_large_layout_v1_value_converts_to_a_balanced_tree() {
    let rows: Vec<(u64, u64, u64)> = (0..1_000u64)
        .map(|i| (10_000 + (i * 7_919) % 1_000, u64::from(i % 5 != 0), i + 1))
        .collect();
    let old = v1(7, 1_001, 20_000, &rows);
    let stored = StoredLeases::decode(&old).unwrap();
    let c = Concurrency::new(1_000, Micros::new(1_000));
    let held = rows.iter().filter(|r| r.1 > 0).count() as u64;
    let (d, _) = c.acquire(Some(stored.header), &stored, Micros::new(9_000), 1);
    assert_eq!(d.remaining, 1_000 - held - 1);
    // Half the leases gone by 10,500: exact counts from the tree.
    let (d, _) = c.acquire(Some(stored.header), &stored, Micros::new(10_500), 0);
    let live = rows.iter().filter(|r| r.1 > 0 && r.0 > 10_500).count() as u64;
    assert_eq!(d.remaining, 1_000 - live);
    let root = stored.slot(stored.header.root as usize - 1);
    assert_eq!(root.sum, held);
    assert!(root.height <= 11, "{}", root.height);
    assert_eq!(well_formed(&stored), held as usize);
    // Written once whole, then released from and acquired into in place.
    let (_, g) = c.acquire(Some(stored.header), &stored, Micros::new(9_000), 1);
    let mut value = stored.converted_value(&grant_patch(&g.unwrap())).unwrap();
    for (i, r) in rows.iter().enumerate().filter(|(_, r)| r.1 > 0).step_by(7) {
        let s = StoredLeases::decode(&value).unwrap();
        let id = LeaseId {
            epoch: 7,
            seq: r.2,
            slot: i as u32,
            check: 0,
        };
        let change = release(s.header, &s, id, Micros::new(9_500)).unwrap();
        change_patch(&change).apply_to(&mut value);
        let s = StoredLeases::decode(&value).unwrap();
        let (_, g) = c.acquire(Some(s.header), &s, Micros::new(9_500), 2);
        grant_patch(&g.unwrap()).apply_to(&mut value);
        well_formed(&StoredLeases::decode(&value).unwrap());
    }
}

/// Checks the tree's links, order, sums and AVL balance; returns its size.
fn well_formed(s: &StoredLeases) -> usize {
    let mut stack = vec![(s.header.root, 0u32)];
    let mut seen = 0;
    while let Some((at, parent)) = stack.pop() {
        if at == 0 {
            continue;
        }
        seen += 1;
        let n = s.slot(at as usize - 1);
        let child = |l: u32| {
            if l == 0 {
                Slot::default()
            } else {
                s.slot(l as usize - 1)
            }
        };
        let (l, r) = (child(n.left), child(n.right));
        assert_eq!(n.parent, parent);
        assert_eq!(n.sum, n.cost + l.sum + r.sum);
        assert_eq!(n.height, 1 + l.height.max(r.height));
        assert!(l.height.abs_diff(r.height) <= 1);
        assert!(n.left == 0 || (l.expiry, l.seq) <= (n.expiry, n.seq));
        assert!(n.right == 0 || (r.expiry, r.seq) >= (n.expiry, n.seq));
        stack.push((n.left, at));
        stack.push((n.right, at));
    }
    seen
}
