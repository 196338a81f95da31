use super::*;
use crate::algorithm::sliding_log::apply;
use proptest::prelude::*;

/// Microseconds, for short stamps.
fn us(stamps: &[u64]) -> Vec<Micros> {
    stamps.iter().copied().map(Micros::new).collect()
}

fn edit(expired: usize, removed: usize, added: usize, at: u64, keep: usize) -> LogEdit {
    LogEdit {
        expired,
        removed,
        added,
        at: Micros::new(at),
        keep,
    }
}

/// Applies `e` to the stored `value` and checks it against the model.
fn applied(value: &[u8], e: &LogEdit, max_cap: usize) -> (Vec<u8>, LogWrite) {
    let log = StoredSlidingLog::decode(value).unwrap();
    let mut model = log.to_vec();
    apply(e, &mut model);
    let w = log.write(e, log.width(), max_cap);
    let mut after = value.to_vec();
    w.apply_to(&mut after);
    assert_eq!(StoredSlidingLog::decode(&after).unwrap().to_vec(), model);
    (after, w)
}

#[test]
fn a_charge_patches_the_header_and_its_new_slots_only() {
    let v = encode_sliding_log(4, 4, &us(&[100, 200, 300]));
    assert_eq!(v.len(), SLIDING_LOG_HEADER + 12);
    // Drop two, add two at 400: slots 3 and 0 (wrapping), header.
    let (after, w) = applied(&v, &edit(2, 0, 2, 400, 4), 100);
    let LogBytes::Patch(p) = &w.bytes else {
        panic!("{w:?}")
    };
    // Header and slot 0 are adjacent: one range, plus slot 3.
    assert_eq!(p.ranges().len(), 2);
    assert_eq!(w.written, 2);
    assert_eq!(
        StoredSlidingLog::decode(&after).unwrap().to_vec(),
        us(&[300, 400, 400])
    );
}

#[test]
fn a_refund_and_a_lower_limit_write_the_header_only() {
    let v = encode_sliding_log(4, 4, &us(&[100, 200, 300, 400]));
    let (after, w) = applied(&v, &edit(1, 1, 0, 400, 4), 100);
    assert_eq!(w.written, 0);
    let LogBytes::Patch(p) = &w.bytes else {
        panic!("{w:?}")
    };
    assert_eq!(p.ranges(), [(6, p.ranges()[0].1.clone())]);
    assert_eq!(p.ranges()[0].1.len(), 16);
    assert_eq!(
        StoredSlidingLog::decode(&after).unwrap().to_vec(),
        us(&[200, 300])
    );
    // Limit 2 keeps the newest 2, then refunds one.
    applied(&v, &edit(0, 1, 0, 400, 2), 100);
}

#[test]
fn a_wrapped_ring_grows_moving_its_smaller_part() {
    // Slots [5 6 _ _ 1 2 3 4]-like: tail 6 of 8, two entries wrapped.
    let mut v = encode_sliding_log(8, 4, &us(&[1, 2, 3, 4, 5, 6, 7, 8]));
    v = applied(&v, &edit(6, 0, 6, 9, 8), 100).0;
    let log = StoredSlidingLog::decode(&v).unwrap();
    assert_eq!(
        (log.cap(), log.to_vec()),
        (8, us(&[7, 8, 9, 9, 9, 9, 9, 9]))
    );
    // A higher limit: 8 entries + 4 need 12 slots; the ring doubles to 16,
    // moving the 2 entries at the old end (the smaller part) to the new end.
    let (after, w) = applied(&v, &edit(0, 0, 4, 10, 12), 100);
    assert_eq!(w.written, 2 + 4);
    let grown = StoredSlidingLog::decode(&after).unwrap();
    assert_eq!(grown.cap(), 16);
    // Bounded by the operator's bound, but never below what is needed.
    let (after, _) = applied(&v, &edit(0, 0, 5, 10, 13), 13);
    assert_eq!(StoredSlidingLog::decode(&after).unwrap().cap(), 13);
}

#[test]
fn a_wrapped_part_moved_past_a_bounded_new_end_wraps_again() {
    // Tail 4 of 8: 4 entries up to the end, 3 wrapped around it.
    let v = encode_sliding_log(8, 4, &us(&[1, 2, 3, 4, 5, 6, 7, 8]));
    let v = applied(&v, &edit(4, 0, 3, 9, 8), 100).0;
    // Growing to 9 slots (the bound): of the 3 wrapped entries, one moves
    // to the new last slot and two back to slots 0 and 1.
    let (after, w) = applied(&v, &edit(0, 0, 2, 10, 9), 9);
    assert_eq!(w.written, 3 + 2);
    let grown = StoredSlidingLog::decode(&after).unwrap();
    assert_eq!((grown.cap(), grown.count()), (9, 9));
}

#[test]
fn another_width_rewrites_the_kept_entries() {
    let v = encode_sliding_log(4, 4, &us(&[100, 200, 300]));
    let log = StoredSlidingLog::decode(&v).unwrap();
    let w = log.write(&edit(1, 0, 1, 400, 4), 8, 100);
    let mut after = v.clone();
    w.apply_to(&mut after);
    let log = StoredSlidingLog::decode(&after).unwrap();
    assert_eq!((log.width(), log.to_vec()), (8, us(&[200, 300, 400])));
}

#[test]
fn the_first_layout_is_read_and_retagged_by_its_next_write() {
    let mut v = encode_sliding_log(4, 4, &us(&[100, 200]));
    v[0] = LEGACY_SLIDING_LOG_TAG;
    let (after, _) = applied(&v, &edit(0, 0, 1, 300, 4), 100);
    let mut want = encode_sliding_log(4, 4, &us(&[100, 200, 300]));
    want[0] = Kind::SlidingLog.tag();
    assert_eq!(after, want);
    // Its rings were at most 1,000,000 slots.
    let mut big = encode_sliding_log(1_000_001, 4, &[]);
    assert!(StoredSlidingLog::decode(&big).is_ok());
    big[0] = LEGACY_SLIDING_LOG_TAG;
    assert!(StoredSlidingLog::decode(&big).is_err());
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

proptest! {
    #[test]
    fn decoding_arbitrary_bytes_never_panics(
        tag in prop_oneof![Just(0xA3u8), Just(0xABu8)],
        bytes in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        let mut v = vec![tag];
        v.extend(bytes);
        if let Ok(log) = StoredSlidingLog::decode(&v) {
            let _ = log.to_vec();
            let _ = log.write(&edit(1, 1, 2, 5, 3), 4, 8);
        }
    }

    #[test]
    fn well_formed_headers_with_any_fields_never_panic(
        tag in prop_oneof![Just(0xA3u8), Just(0xABu8)],
        width in prop_oneof![Just(4u8), Just(8u8)],
        cap in 1u32..6, tail in 0u32..6, len in 0u32..7, last in any::<u64>(),
        slots in proptest::collection::vec(any::<u8>(), 0..48),
        (expired, removed, added, keep) in (0usize..8, 0usize..3, 0usize..9, 1usize..9),
    ) {
        let mut v = vec![tag, width];
        for x in [cap, tail, len] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&last.to_le_bytes());
        v.extend(slots);
        if let Ok(log) = StoredSlidingLog::decode(&v) {
            let e = edit(expired, removed, added, last, keep);
            let w = log.write(&e, usize::from(width), 16);
            let mut after = v.clone();
            w.apply_to(&mut after);
            let back = StoredSlidingLog::decode(&after);
            prop_assert!(back.is_ok());
            let mut model = log.to_vec();
            apply(&e, &mut model);
            prop_assert_eq!(back.unwrap().count(), model.len());
        }
    }

    /// Any sequence of edits, on a ring that starts small and grows,
    /// stores exactly the model's entries.
    #[test]
    fn edits_store_what_the_model_holds(
        wide in any::<bool>(),
        ops in proptest::collection::vec((0usize..4, 0usize..3, 0usize..7, 0u64..5, 1usize..12), 1..60),
        max_cap in 1usize..20,
    ) {
        let width = if wide { 8 } else { 4 };
        let mut value: Option<Vec<u8>> = None;
        let mut model: Vec<Micros> = Vec::new();
        let mut now = 1u64 << 33;
        for (expired, removed, added, dt, keep) in ops {
            now += dt;
            let e = edit(expired, removed, added, now, keep);
            let log = value.as_deref().map(|v| StoredSlidingLog::decode(v).unwrap());
            let w = write_log(log.as_ref(), &e, width, max_cap);
            let mut v = value.take().unwrap_or_default();
            w.apply_to(&mut v);
            apply(&e, &mut model);
            let stored = StoredSlidingLog::decode(&v).unwrap();
            prop_assert_eq!(stored.to_vec(), model.clone());
            prop_assert!(stored.cap() <= max_cap.max(keep).max(model.len()).max(12));
            value = Some(v);
        }
    }
}
