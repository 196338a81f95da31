//! Every argument parser on arbitrary argument lists. The input is split
//! into arguments at 0x00 bytes (seeds are real command lines). Each
//! parser must return a value or an error whose message starts with `ERR`
//! and holds no line break, never panic (overflow checks are on).
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_ratelimit::args::{self, Common};
use redis_ratelimit::commands::{all, bucket, fixed, gcra, sliding, throttle};
use redis_ratelimit::error::Error;

fn check<T>(result: Result<T, Error>) {
    if let Err(e) = result {
        let m = e.to_string();
        assert!(m.starts_with("ERR ") || m.starts_with("WRONGTYPE "), "{m}");
        assert!(!m.contains('\r') && !m.contains('\n'), "{m}");
    }
}

fuzz_target!(|data: &[u8]| {
    let argv: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    check(gcra::parse(&argv));
    check(bucket::parse(&argv));
    check(throttle::parse(&argv));
    check(all::parse(&argv));
    check(sliding::parse(&argv));
    check(fixed::parse(&argv));
    check(gcra::parse_policy(&argv));
    check(bucket::parse_policy(&argv));
    check(sliding::parse_policy(&argv));
    check(fixed::parse_policy(&argv));
    check(Common::parse(&argv));
    // Each argument alone as a duration and as a count, and the bounds
    // from the first eight bytes.
    let bound = |i: usize| {
        data.get(i..i + 8)
            .map_or(u64::MAX, |b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    let (a, b) = (bound(0), bound(8));
    for arg in &argv {
        if let Ok(us) = args::duration(arg, "period").map(|d| d.as_u64()) {
            assert!(us >= 1_000 && us <= args::MAX_DURATION_MS * 1_000 && us % 1_000 == 0);
        }
        if let Ok(n) = args::integer(arg, "n", a.min(b), a.max(b)) {
            assert!(n >= a.min(b) && n <= a.max(b));
            assert!(arg.iter().all(u8::is_ascii_digit));
        }
    }
});
