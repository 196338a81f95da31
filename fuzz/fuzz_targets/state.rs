//! Every policy's decision on arbitrary stored bytes: a value an attacker
//! (or a bit flip) left in the key, for every kind of state, CL.THROTTLE's
//! decimal TAT included, and the engine's charges on it. The first 24
//! bytes choose the limit, the time and the cost; the rest is the stored
//! value. The codecs' own round trips (the schedule's TAT, lease
//! identifiers, the lease operations) are property-tested in the crate.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_ratelimit::api::{self, Charge, MemoryStore, Micros, Policy, Request};

fn word(data: &[u8], i: usize) -> u64 {
    data.get(i * 8..i * 8 + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

/// A policy from an RL.ALL policy's words, if they parse.
fn policy(keyword: &str, words: &[String]) -> Option<Policy> {
    api::parse_policy(keyword, words).ok().map(|(p, _)| p)
}

fuzz_target!(|data: &[u8]| {
    let (params, stored) = data.split_at(data.len().min(24));
    let (a, now, cost) = (word(params, 0), word(params, 1), word(params, 2));
    // Small and huge limits alike: one from each end of `a`.
    let limit = (a & 0xffff) + 1;
    let period = format!("{}ms", ((a >> 16) % 86_400_000) + 1);
    let words = |keyword: &str, rest: &[String]| {
        let mut w = vec![limit.to_string(), period.clone()];
        w.extend_from_slice(rest);
        policy(keyword, &w)
    };
    let subwindows = (2 + (a >> 54) % 1023).to_string();
    let mut policies = vec![
        words("GCRA", &[]),
        policy(
            "BUCKET",
            &[
                limit.to_string(),
                ((a >> 48) + 1).to_string(),
                period.clone(),
            ],
        ),
        policy("SLIDING", &[limit.min(1_000).to_string(), period.clone()]),
        words("SLIDING", &["APPROX".into()]),
        words("SLIDING", &["BUCKETS".into(), subwindows]),
        words("FIXED", &[]),
        words("FIXED", &["ALIGNED".into()]),
        words("CONCURRENCY", &[]),
    ];
    let sketch = [
        now.to_le_bytes().to_vec(),
        limit.to_string().into_bytes(),
        period.clone().into_bytes(),
        b"WIDTH".to_vec(),
        (1 + (a >> 40) % 64).to_string().into_bytes(),
        b"DEPTH".to_vec(),
        (1 + (a >> 46) % 8).to_string().into_bytes(),
    ];
    policies.push(api::parse("RL.SKETCH", &sketch).ok().map(|(p, _)| p));
    for p in policies.into_iter().flatten() {
        if let Ok(out) = p.decide(Some(stored), Micros::new(now), cost) {
            let d = out.decision;
            assert!(d.remaining <= d.limit);
            assert_eq!(out.write.is_some(), d.allowed && cost > 0);
        }
        // Every charge through the engine, on the same bytes.
        for charge in [
            Charge::Normal,
            Charge::Force,
            Charge::Partial,
            Charge::Refund,
            Charge::Peek,
        ] {
            let mut store = MemoryStore::new(1);
            store.values[0] = Some(stored.to_vec());
            let request = Request {
                cost: cost.max(1),
                charge,
                ..Request::default()
            };
            let _ = api::decide(
                &mut store,
                std::slice::from_ref(&p),
                Micros::new(now),
                &request,
            );
        }
    }
    // CL.THROTTLE's decimal TAT.
    let cell = [(limit - 1).to_string(), limit.to_string(), "60".to_string()];
    if let Ok(call) = api::parse_throttle(&cell) {
        if let Ok((r, write)) = call.decide(Some(stored), Micros::new(now)) {
            assert!(r.remaining >= 0);
            assert_eq!(write.is_some(), !r.limited && call.quantity > 0);
        }
    }
});
