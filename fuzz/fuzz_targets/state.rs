//! The state decoders on arbitrary stored bytes: the schedule codec for
//! every kind, redis-cell's decimal TAT, and `Policy::decide` against a
//! value an attacker (or a bit flip) left in the key. The first 24 bytes
//! choose the limit, the time and the cost; the rest is the stored value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_ratelimit::api::{
    decode_cell_state, decode_tat, encode_tat, format_lease, log_codec, parse_lease, release,
    renew, sketch_codec, window, Concurrency, Entries, FixedWindow, Gcra, Kind, LeaseId, Leases,
    Micros, Policy, Sketch, SlidingApprox, SlidingLog, SlidingSubwindows, StateError, StoredLeases,
    TokenBucket, TAT_MAX_LEN,
};

fn word(data: &[u8], i: usize) -> u64 {
    data.get(i * 8..i * 8 + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

fuzz_target!(|data: &[u8]| {
    let (params, stored) = data.split_at(data.len().min(24));
    let (a, now, cost) = (word(params, 0), word(params, 1), word(params, 2));
    for kind in Kind::ALL {
        match decode_tat(stored, kind) {
            Ok(tat) => {
                assert!(tat.frac_num == 0 || tat.frac_num < tat.frac_den);
                let mut buf = [0; TAT_MAX_LEN];
                let n = encode_tat(kind, tat, &mut buf);
                assert_eq!(decode_tat(&buf[..n], kind), Ok(tat));
            }
            Err(StateError::OtherKind(k)) => assert_ne!(k, kind),
            Err(_) => {}
        }
    }
    if let Ok(n) = decode_cell_state(stored) {
        assert!(n >= 0);
    }
    // Every stored stamp reads back.
    if let Ok(log) = log_codec::StoredSlidingLog::decode(stored) {
        for i in 0..log.count() {
            let _ = log.stamp(i);
        }
    }
    let _ = window::decode_approx(stored);
    let _ = window::decode_fixed(stored, Kind::Fixed);
    let _ = window::decode_fixed(stored, Kind::FixedAligned);
    let _ = window::decode_fixed(stored, Kind::FixedLegacy);
    let _ = window::decode_subwindows(stored);
    let _ = sketch_codec::StoredSketch::decode(stored);
    // The lease decoder: every slot readable; release and renew of any
    // identifier never panic; an identifier that parses prints back.
    if let Ok(leases) = StoredLeases::decode(stored) {
        for i in 0..=leases.slots() {
            let _ = leases.slot(i);
        }
        let id = LeaseId {
            epoch: leases.header.epoch.as_u64(),
            seq: cost,
            slot: (a >> 40) as u32,
            check: 0,
        };
        let _ = release(leases.header, &leases, id, Micros::new(now));
        let _ = renew(leases.header, &leases, id, Micros::new(a), Micros::new(now));
    }
    if let Some(id) = parse_lease(stored) {
        assert_eq!(format_lease(&id).as_bytes(), stored);
    }
    // Small and huge limits alike: one from each end of `a`.
    let (limit, period) = (
        (a & 0xffff) + 1,
        Micros::new(((a >> 16) % 86_400_000_000) + 1),
    );
    let mut policies = Vec::new();
    if let Ok(g) = Gcra::new(limit, period, limit) {
        policies.push(Policy::Gcra(g));
    }
    if let Ok(b) = TokenBucket::new(limit, (a >> 48) + 1, period) {
        policies.push(Policy::Bucket(b));
    }
    let subwindows = 2 + (a >> 54) % 1023;
    policies.push(Policy::SlidingLog(SlidingLog::new(
        limit.min(1_000),
        period,
    )));
    policies.push(Policy::SlidingApprox(SlidingApprox::new(limit, period)));
    policies.push(Policy::SlidingSubwindows(SlidingSubwindows::new(
        limit, period, subwindows,
    )));
    policies.push(Policy::Fixed(FixedWindow::new(limit, period, a >> 63 == 1)));
    policies.push(Policy::Sketch {
        sketch: Sketch::new(limit, period, 1 + (a >> 40) % 64, 1 + (a >> 46) % 8),
        item: now.to_le_bytes().to_vec(),
    });
    policies.push(Policy::Concurrency(Concurrency::new(limit, period)));
    for p in policies {
        if let Ok(out) = p.decide(Some(stored), Micros::new(now), cost) {
            let d = out.decision;
            assert!(d.remaining <= d.limit);
            assert_eq!(out.write.is_some(), d.allowed && cost > 0);
        }
    }
});
