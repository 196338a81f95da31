//! Every argument parser on arbitrary argument lists. The input is split
//! into arguments at 0x00 bytes (seeds are real command lines). Each
//! parser must return a value or an error whose message starts with `ERR`
//! and holds no line break, never panic (overflow checks are on).
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_ratelimit::api::{self, Error, MAX_DURATION};

fn check<T>(result: Result<T, Error>) {
    if let Err(e) = result {
        let m = e.to_string();
        assert!(m.starts_with("ERR ") || m.starts_with("WRONGTYPE "), "{m}");
        assert!(!m.contains('\r') && !m.contains('\n'), "{m}");
    }
}

fuzz_target!(|data: &[u8]| {
    let argv: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    // Every command's and every policy's parser, from the command table.
    for command in ["RL.GCRA", "RL.BUCKET", "RL.SLIDING", "RL.FIXED"] {
        check(api::parse(command, &argv));
    }
    for policy in api::POLICIES {
        check(policy.parse_prefix(&argv));
    }
    check(api::parse_throttle(&argv));
    check(api::parse_all(&argv));
    check(api::parse_peek(&argv));
    check(api::parse_common(&argv));
    // A parsed request is one the decision path can take: PARTIAL and
    // FORCE charge at least one unit, a refund has nothing to dry-run.
    if let Ok(call) = api::parse_all(&argv) {
        let r = &call.request;
        if let Some(costs) = &r.costs {
            assert_eq!(costs.len(), call.numkeys);
            assert!(r.charge != api::Charge::Partial);
        }
        if matches!(r.charge, api::Charge::Partial) {
            assert!(r.cost >= 1);
        }
        assert!(!(r.charge == api::Charge::Refund && r.dryrun));
    }
    // Each argument alone as a duration and as a count, and the bounds
    // from the first eight bytes.
    let bound = |i: usize| {
        data.get(i..i + 8)
            .map_or(u64::MAX, |b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    let (a, b) = (bound(0), bound(8));
    for arg in &argv {
        if let Ok(d) = api::duration(arg, "period") {
            let us = d.as_u64();
            assert!(us >= 1_000 && us <= MAX_DURATION.as_u64() && us % 1_000 == 0);
        }
        if let Ok(n) = api::integer(arg, "n", a.min(b), a.max(b)) {
            assert!(n >= a.min(b) && n <= a.max(b));
            assert!(arg.iter().all(u8::is_ascii_digit));
        }
    }
});
