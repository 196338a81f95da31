//! Every argument parser on arbitrary argument lists. The input is split
//! into arguments at 0x00 bytes (seeds are real command lines). Each
//! parser must return a value or an error whose message starts with `ERR`
//! and holds no line break, never panic (overflow checks are on). The
//! integer and duration readers alone are property-tested in the crate.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_ratelimit::api::{self, Charge, Error};

fn check<T>(result: Result<T, Error>) {
    if let Err(e) = result {
        let m = e.to_string();
        assert!(m.starts_with("ERR ") || m.starts_with("WRONGTYPE "), "{m}");
        assert!(!m.contains('\r') && !m.contains('\n'), "{m}");
    }
}

fuzz_target!(|data: &[u8]| {
    let argv: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    // Every single-key command's and every RL.ALL policy's parser.
    for command in [
        "RL.GCRA",
        "RL.BUCKET",
        "RL.SLIDING",
        "RL.FIXED",
        "RL.SKETCH",
        "RL.ACQUIRE",
    ] {
        check(api::parse(command, &argv));
    }
    for keyword in ["GCRA", "BUCKET", "SLIDING", "FIXED", "CONCURRENCY"] {
        check(api::parse_policy(keyword, &argv));
    }
    check(api::parse_throttle(&argv));
    check(api::parse_all(&argv));
    check(api::parse_peek(&argv));
    check(api::parse_share(&argv));
    // A named policy's definition (RL.POLICY SET, and the RDB's copy),
    // a path's nodes after SHARE included.
    check(api::parse_definition(&argv));
    let mut path: Vec<&[u8]> = vec![b"SHARE", b"10", b"1s", b"CEIL", b"20"];
    path.extend(&argv);
    check(api::parse_definition(&path));
    // The common options, after a policy's own arguments.
    let mut common: Vec<&[u8]> = vec![b"10", b"1s"];
    common.extend(&argv);
    check(api::parse("RL.GCRA", &common));
    // A parsed request is one the decision path can take: PARTIAL and
    // FORCE charge at least one unit, a refund has nothing to dry-run.
    if let Ok(call) = api::parse_all(&argv) {
        let r = &call.request;
        if let Some(costs) = &r.costs {
            assert_eq!(costs.len(), call.numkeys);
            assert!(r.charge != Charge::Partial);
        }
        if matches!(r.charge, Charge::Partial) {
            assert!(r.cost >= 1);
        }
        assert!(!(r.charge == Charge::Refund && r.dryrun));
    }
});
