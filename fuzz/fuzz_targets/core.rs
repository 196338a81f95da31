//! The pure core over its whole input range, through the policies the
//! commands parse: GCRA and the token bucket with any parameters their
//! parsers accept, any stored state, time and cost, each charge (FORCE,
//! REFUND) through the engine; and CL.THROTTLE's arithmetic likewise.
//! Built with overflow checks, so any wraparound is a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_ratelimit::api::{self, Charge, MemoryStore, Micros, Policy, Request, RetryAfter};

/// The longest a forced charge's debt lasts: 1,000 years.
const MAX_HORIZON: Micros = Micros::from_secs(1_000 * 365 * 86_400);
/// How far ahead of now CL.THROTTLE's state may lie: 100 years.
const MAX_TOLERANCE: Micros = Micros::from_secs(100 * 365 * 86_400);

fn word(data: &[u8], i: usize) -> u64 {
    data.get(i * 8..i * 8 + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

/// An RL.ALL policy from its words, if they parse.
fn policy(keyword: &str, words: &[String]) -> Option<Policy> {
    api::parse_policy(keyword, words).ok().map(|(p, _)| p)
}

/// `request` under `policy` on `stored` through the engine: the state
/// it leaves, if it decided.
fn charge(
    policy: &Policy,
    stored: Option<&[u8]>,
    now: Micros,
    request: Request,
) -> Option<Vec<u8>> {
    let mut store = MemoryStore::new(1);
    store.values[0] = stored.map(<[u8]>::to_vec);
    api::decide(&mut store, std::slice::from_ref(policy), now, &request).ok()?;
    store.values[0].take()
}

fuzz_target!(|data: &[u8]| {
    let w = |i| word(data, i);
    // The stored state: none, or the bytes after the 18 words.
    let stored = (w(3) & 1 == 1).then(|| data.get(18 * 8..).unwrap_or(&[]));
    let (limit, burst) = ((w(0) >> 1).to_string(), (w(1) >> 1).to_string());
    let period = format!("{}ms", w(2) % 3_153_600_000_000 + 1);
    let schedules = [
        policy(
            "GCRA",
            &[limit.clone(), period.clone(), "BURST".into(), burst.clone()],
        ),
        policy("BUCKET", &[limit, burst, period]),
    ];
    for s in schedules.into_iter().flatten() {
        let (now, cost) = (Micros::new(w(7)), w(8));
        let Ok(out) = s.decide(stored, now, cost) else {
            continue;
        };
        let d = out.decision;
        assert!(d.remaining <= d.limit);
        assert_eq!(out.write.is_some(), d.allowed && cost > 0);
        assert_eq!(d.allowed, d.retry_after == RetryAfter::NotNeeded);
        // A refund never goes beyond full; a forced charge is bounded by
        // the horizon, and the state it writes decides without a panic.
        let refund = Request {
            cost: w(17).max(1),
            charge: Charge::Refund,
            ..Request::default()
        };
        if let Some(t) = charge(&s, stored, now, refund) {
            let full = s.decide(Some(&t), now, 0).unwrap().decision;
            assert!(full.remaining <= full.limit);
        }
        let force = Request {
            cost: cost.max(1),
            charge: Charge::Force,
            ..Request::default()
        };
        if let Some(t) = charge(&s, stored, now, force) {
            let after = s.decide(Some(&t), now, 1).unwrap().decision;
            assert!(after.remaining <= after.limit);
            assert!(after.reset_after <= MAX_HORIZON.saturating_add(Micros::new(1)));
        }
        // Follow-ups from the state it wrote, later by a chosen step.
        if let Some(write) = &out.write {
            let mut value = stored.map(<[u8]>::to_vec);
            write.apply_to(&mut value);
            let later = now.saturating_add(Micros::new(w(9) % 1_000_000_000));
            let d2 = s.decide(value.as_deref(), later, 1).unwrap().decision;
            assert!(d2.remaining <= d2.limit);
        }
    }
    // redis-cell over the ranges CL.THROTTLE's parser accepts.
    let args = [
        (w(10) % (i64::MAX as u64)).to_string(),
        ((w(11) % (i64::MAX as u64)) + 1).to_string(),
        ((w(12) % (36_500 * 86_400)) + 1).to_string(),
        (w(16) >> 1).to_string(),
    ];
    if let Ok(call) = api::parse_throttle(&args) {
        let now = Micros::new(w(13) % (i64::MAX as u64 / 1_000));
        let tat = (w(15) >> 1).to_string();
        let stored = (w(14) & 1 == 1).then_some(tat.as_bytes());
        if let Ok((r, write)) = call.decide(stored, now) {
            assert!(r.remaining >= 0 && r.reset_after_s >= 0 && r.retry_after_s >= -1);
            assert_eq!(write.is_some(), !r.limited && call.quantity > 0);
            if let Some((_, ttl)) = write {
                assert!(ttl <= MAX_TOLERANCE);
            }
        }
    }
});
