//! RL.SKETCH's decision on arbitrary stored bytes. The first 24 bytes
//! choose the limit, the time, the cost and the item; the rest is the
//! stored value. A value that holds a sketch is decided on with its own
//! WIDTH, DEPTH and window (any other is refused before reading it: the
//! refusal names the stored one, which the next try takes); an admitted
//! request's patch must leave a value of the same size that the same
//! policy reads again. The decoder alone is property-tested in the crate.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_ratelimit::api::{self, Micros, Policy, StateError, StateWrite};

fn word(data: &[u8], i: usize) -> u64 {
    data.get(i * 8..i * 8 + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

fn sketch(item: &[u8], limit: u64, width: u64, depth: u64, window_us: u64) -> Option<Policy> {
    if !window_us.is_multiple_of(1_000) {
        return None;
    }
    let args = [
        item.to_vec(),
        limit.to_string().into_bytes(),
        format!("{}ms", window_us / 1_000).into_bytes(),
        b"WIDTH".to_vec(),
        width.to_string().into_bytes(),
        b"DEPTH".to_vec(),
        depth.to_string().into_bytes(),
    ];
    api::parse("RL.SKETCH", &args).ok().map(|(p, _)| p)
}

fuzz_target!(|data: &[u8]| {
    let (params, stored) = data.split_at(data.len().min(24));
    let (a, now, cost) = (word(params, 0), word(params, 1), word(params, 2) % 8);
    let limit = (a & 0xffff_ffff) + 1;
    let item = (a >> 32).to_le_bytes();
    // WIDTH, DEPTH, window: each mismatch names the stored value.
    let (mut width, mut depth, mut window) = (1, 1, 1_000);
    let mut tries = 0;
    let (policy, out) = loop {
        let Some(policy) = sketch(&item, limit, width, depth, window) else {
            return;
        };
        match policy.decide(Some(stored), Micros::new(now), cost) {
            Ok(out) => break (policy, out),
            Err(StateError::Mismatch(m)) if tries < 3 => {
                let given = match m.param {
                    "WIDTH" => &mut width,
                    "DEPTH" => &mut depth,
                    "window" => &mut window,
                    other => panic!("a sketch has no {other}"),
                };
                assert_eq!(m.given, *given);
                assert_ne!(m.stored, m.given);
                *given = m.stored;
                tries += 1;
            }
            Err(StateError::Mismatch(m)) => panic!("still a mismatch: {m:?}"),
            Err(_) => return,
        }
    };
    let d = out.decision;
    assert!(d.remaining <= d.limit);
    assert_eq!(out.write.is_some(), d.allowed && cost > 0);
    if let Some(write) = out.write {
        assert!(matches!(write, StateWrite::Patch(_)));
        let mut value = Some(stored.to_vec());
        write.apply_to(&mut value);
        let value = value.unwrap();
        assert_eq!(value.len(), stored.len());
        policy
            .decide(Some(&value), Micros::new(now), 0)
            .expect("still a sketch of the same shape");
    }
});
