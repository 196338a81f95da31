//! Every decoder on arbitrary stored bytes (a value an attacker, or a bit
//! flip, left in a key): no panic, and what decodes round-trips. The fuzz
//! targets reach the decoders through the policies; these reach the
//! codecs' own promises, which no policy shows.

use super::cell::decode_cell_state;
use super::lease::{format_lease, parse_lease, StoredLeases};
use super::sketch::{sketch_len, StoredSketch};
use super::sliding_log::StoredSlidingLog;
use super::{decode_tat, encode_tat, window, Kind, StateError, TAT_MAX_LEN};
use crate::algorithm::concurrency::{release, renew, LeaseId, Leases};
use crate::algorithm::sliding_log::Entries;
use crate::algorithm::Micros;
use proptest::prelude::*;

/// Arbitrary bytes, and bytes that start with each tag (so that every
/// layout's body is reached).
fn stored() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..200)).prop_map(|(tag, mut v)| {
            v.insert(0, tag);
            v
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn every_decoder_on_any_bytes(v in stored(), a in any::<u64>(), now in any::<u64>(), seq in any::<u64>()) {
        for kind in Kind::ALL {
            match decode_tat(&v, kind) {
                Ok(tat) => {
                    prop_assert!(tat.frac_num == 0 || tat.frac_num < tat.frac_den);
                    let mut buf = [0; TAT_MAX_LEN];
                    let n = encode_tat(kind, tat, &mut buf);
                    prop_assert_eq!(decode_tat(&buf[..n], kind), Ok(tat));
                }
                Err(StateError::OtherKind(k)) => prop_assert_ne!(k, kind),
                Err(_) => {}
            }
        }
        if let Ok(n) = decode_cell_state(&v) {
            prop_assert!(n >= 0);
        }
        // Every stored stamp reads back.
        if let Ok(log) = StoredSlidingLog::decode(&v) {
            for i in 0..log.count() {
                let _ = log.stamp(i);
            }
        }
        let _ = window::decode_approx(&v);
        let _ = window::decode_fixed(&v, Kind::Fixed);
        let _ = window::decode_fixed(&v, Kind::FixedAligned);
        let _ = window::decode_fixed(&v, Kind::FixedLegacy);
        let _ = window::decode_subwindows(&v);
        // An RL.SHARE node: what decodes encodes back to the same.
        if let Ok(node) = super::share::decode(&v) {
            if let Some(definition) = node.definition {
                let again = super::share::encode(&node.state, &definition);
                prop_assert_eq!(super::share::decode(&again), Ok(node));
            }
        }
        // The sketch decoder checks no parameters, and a sketch has the
        // size its WIDTH and DEPTH give.
        match StoredSketch::decode(&v) {
            Ok(found) => prop_assert_eq!(v.len(), sketch_len(found.width, found.depth)),
            Err(StateError::Mismatch(m)) => prop_assert!(false, "a mismatch: {:?}", m),
            Err(_) => {}
        }
        // The lease decoder: every slot readable; release and renew of any
        // identifier never panic; an identifier that parses prints back.
        if let Ok(leases) = StoredLeases::decode(&v) {
            for i in 0..=leases.slots() {
                let _ = leases.slot(i);
            }
            let id = LeaseId {
                epoch: leases.header.epoch.as_u64(),
                seq,
                slot: (a >> 40) as u32,
                check: 0,
            };
            let _ = release(leases.header, &leases, id, Micros::new(now));
            let _ = renew(leases.header, &leases, id, Micros::new(a), Micros::new(now));
        }
        if let Some(id) = parse_lease(&v) {
            prop_assert_eq!(format_lease(&id).into_bytes(), v);
        }
    }
}
