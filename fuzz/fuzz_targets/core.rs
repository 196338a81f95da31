//! The pure core over its whole input range: schedules (GCRA, token
//! bucket) and redis-cell's arithmetic with arbitrary parameters, stored
//! state, times and costs. Built with overflow checks, so any wraparound
//! is a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_ratelimit::api::{Cell, Micros, RetryAfter, Schedule, Tat};

fn word(data: &[u8], i: usize) -> u64 {
    data.get(i * 8..i * 8 + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

fuzz_target!(|data: &[u8]| {
    let w = |i| word(data, i);
    if let Ok(s) = Schedule::new(w(0), w(1), Micros::new(w(2))) {
        let stored = (w(3) & 1 == 1).then(|| Tat {
            whole: Micros::new(w(4)),
            frac_num: w(5),
            frac_den: w(6),
        });
        let (now, cost) = (Micros::new(w(7)), w(8));
        let (d, new) = s.decide(stored, now, cost);
        assert!(d.remaining <= d.limit);
        assert_eq!(new.is_some(), d.allowed && cost > 0);
        assert_eq!(d.allowed, d.retry_after == RetryAfter::NotNeeded);
        // A refund never goes beyond full; a forced charge is bounded by
        // the horizon, and the state it writes decides without a panic.
        if let Some(t) = s.refund(stored, now, w(17)) {
            let (full, _) = s.decide(Some(t), now, 0);
            assert!(full.remaining <= full.limit);
        }
        if let Some(t) = s.force(stored, now, cost) {
            let (after, _) = s.decide(Some(t), now, 1);
            assert!(after.remaining <= after.limit);
            assert!(
                after.reset_after
                    <= redis_ratelimit::api::MAX_HORIZON.saturating_add(Micros::new(1))
            );
        }
        // Follow-ups from the state it wrote, later by a chosen step.
        if let Some(t) = new {
            let later = now.saturating_add(Micros::new(w(9) % 1_000_000_000));
            let (d2, _) = s.decide(Some(t), later, 1);
            assert!(d2.remaining <= d2.limit);
        }
    }
    // redis-cell over the ranges CL.THROTTLE's parser accepts.
    let max_burst = (w(10) % (i64::MAX as u64)) as i64;
    let count = (w(11) % (i64::MAX as u64)) as i64 + 1;
    let period = (w(12) % (36_500 * 86_400)) as i64 + 1;
    let tolerance = 100 * 365 * 86_400 * 1_000_000_000i128;
    if let Ok(c) = Cell::new(max_burst, count, period, tolerance) {
        let now = (w(13) >> 1) as i64;
        let stored = (w(14) & 1 == 1).then_some((w(15) >> 1) as i64);
        let quantity = (w(16) >> 1) as i64;
        let (r, write) = c.throttle(stored, now, quantity);
        assert!(r.remaining >= 0 && r.reset_after_s >= 0 && r.retry_after_s >= -1);
        assert_eq!(write.is_some(), !r.limited && quantity > 0);
        if let Some(wr) = write {
            assert!(wr.ttl_ns >= 0 && i128::from(wr.ttl_ns) <= c.tolerance_ns());
        }
    }
});
