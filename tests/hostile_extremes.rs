//! Extremes against a real server: counts and costs of i64::MAX, the
//! longest accepted periods and horizons (and one past them), and the
//! manual clock at the very end of the signed 64-bit microsecond range.
//! No wraparound, no panic, every written key keeps a TTL.

mod common;
mod hostile;

use common::Server;
use hostile::*;

const MAX_S: &str = "9223372036854775807";
/// 1000 years and 36500 days in milliseconds.
const HORIZON_MS: i64 = 1_000 * 365 * 86_400_000;
const PERIOD_MS: i64 = 36_500 * 86_400_000;

fn decide(c: &mut Raw, args: &[&str]) -> Vec<i64> {
    c.ok(args).ints()
}

fn err(c: &mut Raw, args: &[&str]) -> String {
    let r = c.call(args);
    r.error()
        .unwrap_or_else(|| panic!("{args:?} succeeded: {r:?}"))
        .to_string()
}

fn pttl(c: &mut Raw, key: &str) -> i64 {
    c.ok(&["PTTL", key]).int()
}

/// Decisions in one transaction: the state the first writes (some with a
/// TTL of a millisecond) cannot expire on the wall clock before the next.
fn decide_together(c: &mut Raw, commands: &[&[&str]]) -> Vec<Vec<i64>> {
    c.atomically(commands).iter().map(Reply::ints).collect()
}

/// `args`' decision, and the server's wall clock (ms) read just before and
/// just after it: the key's expiry was set at a time in between.
fn decide_timed(c: &mut Raw, args: &[&str]) -> (Vec<i64>, (i64, i64)) {
    let before = c.server_ms();
    let r = decide(c, args);
    (r, (before, c.server_ms()))
}

/// `key` expires `ttl_ms` after a time within `written`.
fn assert_expires(c: &mut Raw, key: &str, ttl_ms: i64, written: (i64, i64)) {
    let at = c.ok(&["PEXPIRETIME", key]).int();
    assert!(
        (written.0..=written.1).contains(&(at - ttl_ms)),
        "{key}: expires at {at}, want {ttl_ms} ms after a time within {written:?}"
    );
}

#[test]
fn counts_and_costs_up_to_i64_max() {
    let mut s = Server::start();
    let mut c = Raw::connect(s.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    let m = i64::MAX;
    // The largest limit: one interval is far below a microsecond.
    assert_eq!(
        decide_together(
            &mut c,
            &[
                &["RL.GCRA", "g", MAX_S, "1s"],
                &["RL.GCRA", "g", MAX_S, "1s", "COST", MAX_S],
            ]
        ),
        [[1, m, m - 1, -1, 1], [0, m, m - 1, 1, 1]]
    );
    assert_eq!(
        decide_together(
            &mut c,
            &[
                &["RL.GCRA", "g2", MAX_S, "1s", "COST", MAX_S],
                &["RL.GCRA", "g2", MAX_S, "1s", "COST", "1"],
            ]
        ),
        [[1, m, 0, -1, 1000], [0, m, 0, 1, 1000]]
    );
    // i64::MAX everywhere, over the longest period.
    let all_max = [
        "RL.GCRA", "g3", MAX_S, "36500d", "BURST", MAX_S, "COST", MAX_S,
    ];
    let (r, written) = decide_timed(&mut c, &all_max);
    assert_eq!(r, [1, m, 0, -1, PERIOD_MS]);
    assert_expires(&mut c, "g3", PERIOD_MS, written);
    let bucket = ["RL.BUCKET", "b", MAX_S, MAX_S, "36500d", "COST", MAX_S];
    let (r, written) = decide_timed(&mut c, &bucket);
    assert_eq!(r, [1, m, 0, -1, PERIOD_MS]);
    assert_eq!(decide(&mut c, &bucket), [0, m, 0, PERIOD_MS, PERIOD_MS]);
    assert_expires(&mut c, "b", PERIOD_MS, written);
    // A cost above the limit can never be admitted.
    assert_eq!(
        decide(&mut c, &["RL.BUCKET", "b4", "1", "1", "1s", "COST", MAX_S]),
        [0, 1, 1, -1, 0]
    );
    // CL.THROTTLE: the largest quantity never fits; the largest burst and
    // rate that keep the TAT within 100 years of nanoseconds.
    assert_eq!(
        decide(&mut c, &["CL.THROTTLE", "c", "5", "10", "60", MAX_S]),
        [1, 6, 6, -1, 0]
    );
    let burst = "3153599999999999999";
    let r = decide(&mut c, &["CL.THROTTLE", "c2", burst, "1000000000", "1"]);
    assert_eq!(
        r[..3],
        [0, 3_153_600_000_000_000_000, 3_153_599_999_999_999_999]
    );
    assert_eq!(
        err(
            &mut c,
            &[
                "CL.THROTTLE",
                "c3",
                "3153600000000000000",
                "1000000000",
                "1"
            ]
        ),
        "ERR (max_burst + 1) * period / count must be at most 100 years"
    );
    assert_eq!(
        err(&mut c, &["CL.THROTTLE", "c3", "0", "1000000001", "1"]),
        "ERR count per period must be at most one per nanosecond"
    );
    assert!(c.ping() && s.alive());
}

#[test]
fn the_longest_period_and_horizon_and_one_past_them() {
    let s = Server::start();
    let mut c = Raw::connect(s.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    for period in [
        "36500d",
        "876000h",
        "52560000m",
        "3153600000",
        "3153600000s",
        "3153600000000ms",
    ] {
        let r = decide(&mut c, &["RL.GCRA", "p", "1", period, "DRYRUN"]);
        assert_eq!(r, [1, 1, 0, -1, PERIOD_MS], "{period}");
    }
    for period in [
        "36501d",
        "876001h",
        "52560001m",
        "3153600001",
        "3153600000001ms",
    ] {
        assert_eq!(
            err(&mut c, &["RL.GCRA", "p", "1", period]),
            "ERR period must be at most 36500d",
            "{period}"
        );
    }
    // Horizons: BURST × period / limit and capacity × period / refill up to
    // 1000 years, and not one microsecond more.
    let (r, written) = decide_timed(
        &mut c,
        &["RL.GCRA", "h", "1", "36500d", "BURST", "10", "COST", "10"],
    );
    assert_eq!(r, [1, 10, 0, -1, HORIZON_MS]);
    assert_expires(&mut c, "h", HORIZON_MS, written);
    assert_eq!(
        err(&mut c, &["RL.GCRA", "h", "1", "36500d", "BURST", "11"]),
        "ERR BURST * period / limit must be at most 1000 years"
    );
    let (r, written) = decide_timed(
        &mut c,
        &["RL.BUCKET", "hb", "10", "1", "36500d", "COST", "10"],
    );
    assert_eq!(r, [1, 10, 0, -1, HORIZON_MS]);
    assert_expires(&mut c, "hb", HORIZON_MS, written);
    assert_eq!(
        err(&mut c, &["RL.BUCKET", "hb", "11", "1", "36500d"]),
        "ERR capacity * period / refill must be at most 1000 years"
    );
    // 1000 years exactly, in a rate that does not divide the period.
    let burst = (u128::from(1_000u64 * 365 * 86_400 * 1_000_000) * 3 / 86_400_000_000).to_string();
    let r = decide(
        &mut c,
        &["RL.GCRA", "odd", "3", "1d", "BURST", &burst, "COST", &burst],
    );
    assert_eq!(r[..4], [1, burst.parse::<i64>().unwrap(), 0, -1]);
    // CL.THROTTLE's longest period, with a limit of 1.
    assert_eq!(
        decide(&mut c, &["CL.THROTTLE", "cp", "0", "1", "3153600000"]),
        [0, 1, 0, -1, 3_153_600_000]
    );
    assert_eq!(
        err(&mut c, &["CL.THROTTLE", "cp", "1", "1", "3153600000"]),
        "ERR (max_burst + 1) * period / count must be at most 100 years"
    );
    assert!(c.ping());
}

#[test]
fn the_end_of_the_microsecond_range() {
    let mut s = Server::start();
    let mut c = Raw::connect(s.port);
    let end = i64::MAX as u64;
    for at in [end, end - 1, end - 999_999, end - 86_400_000_000] {
        c.ok(&["RL.CLOCK", "SET", &at.to_string()]);
        let key = format!("end:{at}");
        // One transaction: the key's TTL is 100 ms, then 1 s, of wall clock.
        let replies = c.atomically(&[
            &["RL.GCRA", &key, "10", "1s"][..],
            &["GET", &key],
            &["RL.GCRA", &key, "10", "1s", "COST", "9"],
            &["RL.GCRA", &key, "10", "1s"],
            &["PTTL", &key],
            // The far-future state is used again below, whatever the time.
            &["PERSIST", &key],
        ]);
        // The TAT lies beyond i64::MAX µs but well inside the u64 state.
        assert_eq!(replies[0].ints(), [1, 10, 9, -1, 100]);
        let v = replies[1].bulk().unwrap();
        assert_eq!(v[0], 0xA1);
        let tat = u64::from_le_bytes(v[1..9].try_into().unwrap());
        assert_eq!(tat, at + 100_000, "no wraparound");
        assert_eq!(replies[2].ints(), [1, 10, 0, -1, 1000]);
        assert_eq!(replies[3].ints(), [0, 10, 0, 100, 1000]);
        assert!(replies[4].int() >= 0, "a TTL");
        let longest = ["RL.BUCKET", &key, "10", "1", "36500d", "COST", "10"];
        let bucket_key = format!("b{key}");
        let mut longest = longest.to_vec();
        longest[1] = &bucket_key;
        let (r, written) = decide_timed(&mut c, &longest);
        assert_eq!(r, [1, 10, 0, -1, HORIZON_MS]);
        assert_expires(&mut c, &bucket_key, HORIZON_MS, written);
        // CL.THROTTLE's nanoseconds end a thousand times earlier.
        assert_eq!(
            err(&mut c, &["CL.THROTTLE", "cell", "5", "10", "60"]),
            "ERR the clock is beyond what CL.THROTTLE's nanosecond state can represent"
        );
    }
    // The last times at which CL.THROTTLE still fits, and just past them.
    let last_us = i64::MAX as u64 / 1_000;
    c.ok(&["RL.CLOCK", "SET", &(last_us - 60_000_000).to_string()]);
    assert_eq!(
        decide(&mut c, &["CL.THROTTLE", "cell", "0", "1", "60"]),
        [0, 1, 0, -1, 60]
    );
    c.ok(&["RL.CLOCK", "SET", &(last_us - 59_999_999).to_string()]);
    assert_eq!(
        err(&mut c, &["CL.THROTTLE", "cell2", "0", "1", "60"]),
        "ERR the clock is beyond what CL.THROTTLE's nanosecond state can represent"
    );
    assert_eq!(c.ok(&["EXISTS", "cell2"]).int(), 0);
    // Time going backwards: state from the far future denies, exactly.
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    let key = format!("end:{end}");
    let r = decide(&mut c, &["RL.GCRA", &key, "10", "1s"]);
    assert_eq!(r[..3], [0, 10, 0]);
    assert!(r[3] > 0 && r[4] > 0, "{r:?}");
    assert!(c.ping() && s.alive());
}

#[test]
fn hostile_state_far_in_the_future_or_past() {
    let s = Server::start();
    let mut c = Raw::connect(s.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    let tat = |us: u64, tail: &[u8]| {
        let mut v = vec![0xA1];
        v.extend_from_slice(&us.to_le_bytes());
        v.extend_from_slice(tail);
        v
    };
    let huge_fraction = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    let mut den = huge_fraction.to_vec();
    den[0] = 0xfe;
    let values = [
        tat(u64::MAX, &[]),
        tat(u64::MAX, &[1, 2]),
        tat(0, &[]),
        tat(T0, &[]),
        tat(u64::MAX, &[&den[..], &huge_fraction[..]].concat()),
    ];
    for (i, v) in values.iter().enumerate() {
        let key = format!("h{i}");
        c.ok(&[&b"SET"[..], key.as_bytes(), v, b"PX", b"100000000"]);
        let before = c.ok(&[&b"DUMP"[..], key.as_bytes()]);
        for args in [
            vec!["RL.GCRA", &key, "10", "1s"],
            vec!["RL.GCRA", &key, MAX_S, "36500d", "COST", MAX_S],
            vec!["RL.GCRA", &key, "1", "1ms", "COST", "0"],
            vec!["RL.GCRA", &key, "3", "1s", "DRYRUN"],
        ] {
            let r = decide(&mut c, &args);
            assert!(r.iter().skip(1).all(|&x| x >= -1), "{args:?} {r:?}");
            assert!(r[2] <= r[1], "{args:?} {r:?}");
        }
        // A far-future TAT is never admitted over, and never rewritten.
        if v[1..9] == u64::MAX.to_le_bytes() {
            assert_eq!(c.ok(&[&b"DUMP"[..], key.as_bytes()]), before);
            assert!(pttl(&mut c, &key) > 0);
        }
        // Rewritten, the key has a TTL (of as little as 1 ms: it may be
        // gone by now).
        assert_ne!(pttl(&mut c, &key), -1, "{key} has no TTL");
    }
    assert!(c.ping());
}

/// Every command shape with each count at its largest accepted value,
/// the longest window, costs 1 and i64::MAX, at the start and at the very
/// end of the clock: a decision whose fields keep their promises and a key
/// with a TTL, or an `ERR` that names the bound; never a caught panic.
#[test]
fn every_shape_at_its_extremes_and_at_the_end_of_time() {
    let mut s = Server::with(common::Config::default().with_policies());
    let mut c = Raw::connect(s.port);
    define_named(&mut c);
    let end = i64::MAX as u64;
    let mut decided = 0;
    for (at_i, at) in [T0, end - 1_000_000, end].into_iter().enumerate() {
        for (i, shape) in SHAPES.iter().enumerate().filter(|(_, s)| s.keyed()) {
            // Each fixed argument at its valid value or at its maximum.
            for mask in 0..1u32 << shape.fixed.len() {
                let fixed: Vec<Vec<u8>> = shape
                    .fixed
                    .iter()
                    .enumerate()
                    .map(|(j, (valid, parse))| match parse {
                        _ if mask & (1 << j) == 0 => valid.as_bytes().to_vec(),
                        Parse::Count { max, .. }
                        | Parse::CellCount { max, .. }
                        | Parse::CellSigned { max, .. }
                        | Parse::Bounded { max, .. } => max.to_string().into_bytes(),
                        Parse::Duration { .. } => b"36500d".to_vec(),
                        // The longest item the tests send: 64 KiB of any bytes.
                        Parse::Item { .. } => (0..=255u8).cycle().take(1 << 16).collect(),
                    })
                    .collect();
                for cost in ["1", MAX_S] {
                    c.ok(&["RL.CLOCK", "SET", &at.to_string()]);
                    let key = format!("x:{at_i}:{i}:{mask}:{}", cost.len());
                    let rest: Vec<Vec<u8>> = if shape.options.iter().any(|o| o.word == "COST") {
                        vec![b"COST".to_vec(), cost.as_bytes().to_vec()]
                    } else {
                        Vec::new()
                    };
                    let args = shape.args(key.as_bytes(), &fixed, &rest);
                    let r = c.call(&args);
                    match &r {
                        Reply::Error(e) => {
                            assert!(
                                e.starts_with("ERR ") && !e.contains("internal"),
                                "{} -> {e}",
                                show(&args)
                            );
                            assert_eq!(c.ok(&["EXISTS", &key]).int(), 0, "{}", show(&args));
                        }
                        Reply::Array(Some(items)) => {
                            let f: Vec<i64> = if shape.combined() {
                                items[3].ints()
                            } else {
                                r.ints()
                            };
                            let cell = shape.name == "CL.THROTTLE";
                            let most = if cell { 2 * f[1] } else { f[1] };
                            assert!(
                                f[1] >= 1 && f[2] >= 0 && f[2] <= most && f[3] >= -1 && f[4] >= 0,
                                "{} -> {f:?}",
                                show(&args)
                            );
                            let ttl = c.ok(&["PTTL", &key]).int();
                            // 0: under a millisecond left (a 1 ms TTL).
                            assert!(ttl >= 0 || ttl == -2, "{} left PTTL {ttl}", show(&args));
                            decided += 1;
                        }
                        other => panic!("{} -> {other:?}", show(&args)),
                    }
                }
            }
        }
    }
    assert!(decided > 100, "only {decided} decisions");
    assert!(c.ping() && s.alive());
}

#[test]
fn windows_at_their_largest() {
    let s = Server::start();
    let mut c = Raw::connect(s.port);
    let m = i64::MAX;
    for at in [T0, i64::MAX as u64] {
        c.ok(&["RL.CLOCK", "SET", &at.to_string()]);
        for mode in [&["APPROX"][..], &["BUCKETS", "1024"], &[]] {
            let key = format!("w:{at}:{}", mode.join(""));
            let mut args = vec!["RL.SLIDING", &key, MAX_S, "36500d"];
            if mode.is_empty() {
                args = vec!["RL.FIXED", &key, MAX_S, "36500d", "ALIGNED"];
            }
            args.extend_from_slice(mode);
            let once = args.clone();
            args.extend_from_slice(&["COST", MAX_S]);
            let r = decide(&mut c, &args);
            assert_eq!(r[..4], [1, m, 0, -1], "{args:?}");
            // APPROX counts the window before the current one: two windows.
            assert!(r[4] > 0 && r[4] <= 2 * PERIOD_MS, "{args:?} {r:?}");
            assert!(pttl(&mut c, &key) > 0);
            let r = decide(&mut c, &once);
            assert_eq!(r[..3], [0, m, 0], "{once:?}");
        }
        // The exact log at its largest limit (ratelimit.max-log-entries).
        let key = format!("e:{at}");
        let r = decide(
            &mut c,
            &["RL.SLIDING", &key, "100000", "36500d", "COST", "100000"],
        );
        assert_eq!(r, [1, 100_000, 0, -1, PERIOD_MS]);
        let len = c.ok(&["STRLEN", &key]).int();
        assert!(len <= 22 + 8 * 100_000, "{len}");
    }
}
