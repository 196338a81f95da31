//! RL.SLIDING (EXACT, APPROX, BUCKETS n) and RL.FIXED against a real server
//! with the manual clock: boundary behaviour, exact waits, options, errors,
//! replication and the replication cost of the sliding log.

mod common;
use common::*;

fn at(c: &mut redis::Connection, us: u64) {
    clock_set(c, T0 + us);
}

#[test]
fn boundary_fixed_aligned_admits_four_exact_admits_two() {
    let s = Server::start();
    let mut c = s.conn();
    let fixed = ["RL.FIXED", "f", "2", "60", "ALIGNED"];
    let exact = ["RL.SLIDING", "e", "2", "60"];
    at(&mut c, 59 * SECOND);
    // One transaction: the aligned window's key lives 1 s of wall clock.
    let replies = atomically(&mut c, &[&fixed, &exact, &fixed, &exact]);
    let replies: Vec<[i64; 5]> = replies.iter().map(five).collect();
    assert_eq!(
        replies,
        [
            [1, 2, 1, -1, 1000],
            [1, 2, 1, -1, 60000],
            [1, 2, 0, -1, 1000],
            [1, 2, 0, -1, 60000]
        ]
    );
    at(&mut c, 61 * SECOND);
    // The TTL a write leaves is the reply's reset_after_ms.
    let (reply, written) = decide_timed(&mut c, &fixed);
    assert_eq!(reply, [1, 2, 1, -1, 59000]);
    assert_expires_after(&mut c, "f", 59000, written);
    assert_eq!(decide(&mut c, &exact), [0, 2, 0, 58000, 58000]);
    assert_eq!(decide(&mut c, &fixed), [1, 2, 0, -1, 59000]);
    assert_eq!(decide(&mut c, &exact), [0, 2, 0, 58000, 58000]);
    // Exactly one window after the 0:59 entries they have expired.
    at(&mut c, 119 * SECOND - 1);
    assert_eq!(decide(&mut c, &exact)[..4], [0, 2, 0, 1]);
    at(&mut c, 119 * SECOND);
    assert_eq!(decide(&mut c, &exact), [1, 2, 1, -1, 60000]);
}

#[test]
fn fixed_window_starts_at_the_first_request() {
    let s = Server::start();
    let mut c = s.conn();
    let fixed = ["RL.FIXED", "f", "2", "60"];
    at(&mut c, 0);
    // The TTL a write leaves is the reply's reset_after_ms.
    let (reply, written) = decide_timed(&mut c, &fixed);
    assert_eq!(reply, [1, 2, 1, -1, 60000]);
    assert_expires_after(&mut c, "f", 60000, written);
    at(&mut c, 10 * SECOND);
    assert_eq!(decide(&mut c, &fixed), [1, 2, 0, -1, 50000]);
    at(&mut c, 20 * SECOND);
    assert_eq!(decide(&mut c, &fixed), [0, 2, 0, 40000, 40000]);
    at(&mut c, 60 * SECOND);
    assert_eq!(decide(&mut c, &fixed), [1, 2, 1, -1, 60000]);
    // Not aligned: a window starting at 0:30 ends at 1:30.
    at(&mut c, 30 * SECOND);
    assert_eq!(
        decide(&mut c, &["RL.FIXED", "g", "1", "60"]),
        [1, 1, 0, -1, 60000]
    );
    at(&mut c, 89 * SECOND);
    assert_eq!(
        decide(&mut c, &["RL.FIXED", "g", "1", "60"]),
        [0, 1, 0, 1000, 1000]
    );
}

#[test]
fn exact_waits_for_the_oldest_entries_to_expire() {
    let s = Server::start();
    let mut c = s.conn();
    let k = |cost: &'static str| ["RL.SLIDING", "e", "3", "1m", "EXACT", "COST", cost];
    for t in [0, 10, 20] {
        at(&mut c, t * SECOND);
        assert_eq!(decide(&mut c, &k("1"))[0], 1);
    }
    at(&mut c, 30 * SECOND);
    // Two entries must expire to fit a cost of 2: the 10 s one, at 70 s.
    assert_eq!(decide(&mut c, &k("2")), [0, 3, 0, 40000, 50000]);
    assert_eq!(decide(&mut c, &k("1")), [0, 3, 0, 30000, 50000]);
    at(&mut c, 70 * SECOND - 1);
    assert_eq!(decide(&mut c, &k("2"))[..4], [0, 3, 1, 1]);
    at(&mut c, 70 * SECOND);
    // The TTL a write leaves is the reply's reset_after_ms.
    let (reply, written) = decide_timed(&mut c, &k("2"));
    assert_eq!(reply, [1, 3, 0, -1, 60000]);
    assert_expires_after(&mut c, "e", 60000, written);
}

#[test]
fn approx_waits_exactly_for_the_estimate_to_admit() {
    let s = Server::start();
    let mut c = s.conn();
    let k = |cost: &'static str| ["RL.SLIDING", "a", "10", "60s", "APPROX", "COST", cost];
    at(&mut c, 30 * SECOND);
    // Windows are aligned: this one ends at 60 s, the key resets at 120 s.
    assert_eq!(decide(&mut c, &k("10")), [1, 10, 0, -1, 90000]);
    at(&mut c, 75 * SECOND);
    // Estimate 10 × 45/60 = 7.5; 7.5 + 2 ≤ 10.
    // The TTL a write leaves is the reply's reset_after_ms.
    let (reply, written) = decide_timed(&mut c, &k("2"));
    assert_eq!(reply, [1, 10, 0, -1, 105000]);
    assert_expires_after(&mut c, "a", 105000, written);
    // 7.5 + 2 + 1 > 10 until 10 × (60 − e)/60 ≤ 7: e = 18 s.
    assert_eq!(decide(&mut c, &k("1")), [0, 10, 0, 3000, 105000]);
    // 2 + 9 > 10 in this window; in the next, 2 × (60 − e)/60 ≤ 1: e = 30 s.
    assert_eq!(decide(&mut c, &k("9")), [0, 10, 0, 75000, 105000]);
    at(&mut c, 78 * SECOND - 1);
    assert_eq!(decide(&mut c, &k("1"))[..4], [0, 10, 0, 1]);
    at(&mut c, 78 * SECOND);
    assert_eq!(decide(&mut c, &k("1")), [1, 10, 0, -1, 102000]);
}

#[test]
fn buckets_count_the_partial_oldest_sub_window() {
    let s = Server::start();
    let mut c = s.conn();
    let k = |cost: &'static str| ["RL.SLIDING", "b", "2", "60", "BUCKETS", "4", "COST", cost];
    at(&mut c, 14 * SECOND);
    // Sub-window 0 (0..15 s) leaves the count when sub-window 5 starts.
    assert_eq!(decide(&mut c, &k("1")), [1, 2, 1, -1, 61000]);
    at(&mut c, 16 * SECOND);
    // The TTL a write leaves is the reply's reset_after_ms.
    let (reply, written) = decide_timed(&mut c, &k("1"));
    assert_eq!(reply, [1, 2, 0, -1, 74000]);
    assert_expires_after(&mut c, "b", 74000, written);
    at(&mut c, 62 * SECOND);
    assert_eq!(decide(&mut c, &k("1")), [0, 2, 0, 13000, 28000]);
    assert_eq!(decide(&mut c, &k("2")), [0, 2, 0, 28000, 28000]);
    at(&mut c, 75 * SECOND);
    // Remembered until its own sub-window (5) leaves: 150 s.
    assert_eq!(decide(&mut c, &k("1")), [1, 2, 0, -1, 75000]);
}

#[test]
fn cost_zero_dryrun_and_denials_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    at(&mut c, 0);
    let modes: [&[&str]; 5] = [
        &["RL.SLIDING", "e", "3", "1m"],
        &["RL.SLIDING", "a", "3", "1m", "APPROX"],
        &["RL.SLIDING", "b", "3", "1m", "BUCKETS", "6"],
        &["RL.FIXED", "f", "3", "1m"],
        &["RL.FIXED", "g", "3", "1m", "ALIGNED"],
    ];
    for mode in modes {
        let key = mode[1];
        let with = |extra: &[&'static str]| {
            let mut v: Vec<&str> = mode.to_vec();
            v.extend_from_slice(extra);
            v
        };
        // A fresh key: COST 0 and DRYRUN create nothing.
        assert_eq!(
            decide(&mut c, &with(&["COST", "0"])),
            [1, 3, 3, -1, 0],
            "{key}"
        );
        assert_eq!(decide(&mut c, &with(&["DRYRUN"]))[..3], [1, 3, 2], "{key}");
        assert_eq!(get_bytes(&mut c, key), None, "{key}");
        // A cost above the limit can never be admitted.
        assert_eq!(
            decide(&mut c, &with(&["COST", "4"])),
            [0, 3, 3, -1, 0],
            "{key}"
        );
        assert_eq!(
            decide(&mut c, &with(&["COST", "3"]))[..4],
            [1, 3, 0, -1],
            "{key}"
        );
        let value = get_bytes(&mut c, key);
        let expiry = pexpiretime(&mut c, key);
        advance(&mut c, SECOND);
        for extra in [
            &["COST", "0"][..],
            &["DRYRUN"],
            &["COST", "2", "DRYRUN"],
            &[],
        ] {
            let r = decide(&mut c, &with(extra));
            assert_eq!(r[2], 0, "{key} {extra:?}");
            assert_eq!(r[0], i64::from(extra == ["COST", "0"]), "{key} {extra:?}");
            assert_eq!(get_bytes(&mut c, key), value, "{key} {extra:?}");
            assert_eq!(pexpiretime(&mut c, key), expiry, "{key} {extra:?}");
        }
    }
}

#[test]
fn resp3_replies_are_maps() {
    let s = Server::start();
    let mut c = s.conn_resp3();
    clock_set(&mut c, T0);
    // BUCKETS 3 remembers its sub-window (20 s) for 80 s.
    for (args, retry) in [
        (&["RL.SLIDING", "s", "1", "1m", "BUCKETS", "3"][..], 80000),
        (&["RL.FIXED", "f", "1", "1m"], 60000),
    ] {
        let fields = resp3_map(call(&mut c, args).unwrap());
        assert_eq!(names(&fields), DECISION_FIELDS);
        assert_eq!(fields[0].1, redis::Value::Boolean(true));
        assert_eq!(fields[3].1, redis::Value::Int(-1));
        let fields = resp3_map(call(&mut c, args).unwrap());
        assert_eq!(fields[0].1, redis::Value::Boolean(false));
        assert_eq!(fields[3].1, redis::Value::Int(retry));
    }
}

#[test]
fn errors_name_the_argument_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[b"RL.SLIDING", b"k", b"10", b"1m", b"EXACT", b"APPROX"],
            "ERR syntax error: EXACT, APPROX and BUCKETS are mutually exclusive",
        ),
        (
            &[
                b"RL.SLIDING",
                b"k",
                b"10",
                b"1m",
                b"BUCKETS",
                b"4",
                b"APPROX",
            ],
            "ERR syntax error: EXACT, APPROX and BUCKETS are mutually exclusive",
        ),
        (
            &[b"RL.SLIDING", b"k", b"10", b"1m", b"approx", b"APPROX"],
            "ERR syntax error: APPROX given more than once",
        ),
        (
            &[b"RL.SLIDING", b"k", b"10", b"1m", b"BUCKETS", b"1"],
            "ERR BUCKETS must be an integer from 2 to 1024",
        ),
        (
            &[b"RL.SLIDING", b"k", b"10", b"1m", b"BUCKETS", b"1025"],
            "ERR BUCKETS must be an integer from 2 to 1024",
        ),
        (
            &[b"RL.SLIDING", b"k", b"10", b"1m", b"BUCKETS", b"x"],
            "ERR BUCKETS must be an integer from 2 to 1024",
        ),
        (
            &[b"RL.SLIDING", b"k", b"10", b"1m", b"BUCKETS"],
            "ERR syntax error: BUCKETS needs a value",
        ),
        (
            &[b"RL.SLIDING", b"k", b"100001", b"1m"],
            "ERR limit must be at most 100000 with EXACT (ratelimit.max-log-entries)",
        ),
        (
            &[b"RL.SLIDING", b"k", b"0", b"1m"],
            "ERR limit must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"RL.SLIDING", b"k", b"10", b"1y"],
            "ERR window must be a positive integer with an optional unit ms, s, m, h or d",
        ),
        (
            &[b"RL.SLIDING", b"k", b"10", b"36501d", b"APPROX"],
            "ERR window must be at most 36500d",
        ),
        (
            &[b"RL.SLIDING", b"k", b"10", b"1m", b"ALIGNED"],
            "ERR syntax error: unknown option 'ALIGNED'",
        ),
        (
            &[b"RL.SLIDING", b"k", b"10", b"1m", b"COST", b"-1"],
            "ERR COST must be an integer from 0 to 9223372036854775807",
        ),
        (
            &[b"RL.SLIDING", b"k", b"10"],
            "ERR wrong number of arguments for 'rl.sliding' command",
        ),
        (
            &[b"RL.FIXED", b"k", b"10", b"1m", b"ALIGNED", b"aligned"],
            "ERR syntax error: ALIGNED given more than once",
        ),
        (
            &[b"RL.FIXED", b"k", b"10", b"1m", b"APPROX"],
            "ERR syntax error: unknown option 'APPROX'",
        ),
        (
            &[b"RL.FIXED", b"k", b"x", b"1m"],
            "ERR limit must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"RL.FIXED", b"k", b"10", b"0"],
            "ERR window must be a positive integer with an optional unit ms, s, m, h or d",
        ),
        (
            &[b"RL.FIXED", b"k", b"10", b"1m", b"DRYRUN", b"DRYRUN"],
            "ERR syntax error: DRYRUN given more than once",
        ),
        (
            &[b"RL.FIXED", b"k", b"10"],
            "ERR wrong number of arguments for 'rl.fixed' command",
        ),
    ];
    for (args, want) in cases {
        let (code, msg) = error_of(&mut c, args);
        assert_eq!(code, "ERR", "{args:?}");
        assert_eq!(&msg, want, "{args:?}");
    }
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn state_of_another_kind_is_refused_and_kept() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Periods of an hour: the keys outlive the test on the wall clock.
    decide(&mut c, &["RL.SLIDING", "exact", "5", "1h"]);
    decide(&mut c, &["RL.SLIDING", "approx", "5", "1h", "APPROX"]);
    decide(
        &mut c,
        &["RL.SLIDING", "buckets", "5", "1h", "BUCKETS", "3"],
    );
    decide(&mut c, &["RL.FIXED", "fixed", "5", "1h"]);
    decide(&mut c, &["RL.FIXED", "aligned", "5", "1h", "ALIGNED"]);
    decide(&mut c, &["RL.GCRA", "gcra", "5", "1h"]);
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("hello")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("list")
        .arg("x")
        .query(&mut c)
        .unwrap();
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[b"RL.SLIDING", b"approx", b"5", b"1h"],
            "WRONGTYPE key holds RL.SLIDING APPROX state, not RL.SLIDING EXACT state",
        ),
        (
            &[b"RL.SLIDING", b"exact", b"5", b"1h", b"BUCKETS", b"3"],
            "WRONGTYPE key holds RL.SLIDING EXACT state, not RL.SLIDING BUCKETS state",
        ),
        (
            &[b"RL.SLIDING", b"buckets", b"5", b"1h", b"APPROX"],
            "WRONGTYPE key holds RL.SLIDING BUCKETS state, not RL.SLIDING APPROX state",
        ),
        (
            &[b"RL.FIXED", b"gcra", b"5", b"1h"],
            "WRONGTYPE key holds RL.GCRA state, not RL.FIXED state",
        ),
        (
            &[b"RL.SLIDING", b"fixed", b"5", b"1h"],
            "WRONGTYPE key holds RL.FIXED state, not RL.SLIDING EXACT state",
        ),
        (
            &[b"RL.FIXED", b"aligned", b"5", b"1h"],
            "WRONGTYPE key holds RL.FIXED ALIGNED state, not RL.FIXED state",
        ),
        (
            &[b"RL.SLIDING", b"aligned", b"5", b"1h", b"APPROX"],
            "WRONGTYPE key holds RL.FIXED ALIGNED state, not RL.SLIDING APPROX state",
        ),
        (
            &[b"RL.GCRA", b"exact", b"5", b"1h"],
            "WRONGTYPE key holds RL.SLIDING EXACT state, not RL.GCRA state",
        ),
        (
            &[b"RL.FIXED", b"text", b"5", b"1h"],
            "WRONGTYPE key holds a string that is not RL.FIXED state",
        ),
        (
            &[b"RL.SLIDING", b"list", b"5", b"1h"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
    ];
    let before = digest(&mut c);
    for (args, want) in cases {
        let (code, msg) = error_of(&mut c, args);
        assert_eq!(code, "WRONGTYPE", "{args:?}");
        assert_eq!(&msg, want, "{args:?}");
    }
    // A value with our tag but a broken layout is reported, not trusted.
    for (tag, name) in [
        (0xA3u8, "RL.SLIDING EXACT"),
        (0xA4, "RL.SLIDING APPROX"),
        (0xA5, "RL.SLIDING BUCKETS"),
        (0xA6, "RL.FIXED"),
        (0xA7, "RL.FIXED ALIGNED"),
        (0xAC, "RL.FIXED"),
    ] {
        let key = format!("bad{tag}");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(&[tag, 0xff][..])
            .query(&mut c)
            .unwrap();
        let mut args: Vec<&[u8]> = if tag >= 0xA6 {
            vec![b"RL.FIXED", key.as_bytes(), b"5", b"1h"]
        } else {
            vec![b"RL.SLIDING", key.as_bytes(), b"5", b"1h"]
        };
        match tag {
            0xA4 => args.push(b"APPROX"),
            0xA5 => args.extend([&b"BUCKETS"[..], b"3"]),
            0xA7 => args.push(b"ALIGNED"),
            _ => {}
        }
        let (code, msg) = error_of(&mut c, &args);
        assert_eq!(code, "ERR");
        assert_eq!(msg, format!("ERR key holds corrupt {name} state"));
        let _: () = redis::cmd("DEL").arg(&key).query(&mut c).unwrap();
    }
    assert_eq!(digest(&mut c), before);
}

/// A plain window that happens to start on a boundary of its length is
/// still a plain window: its tag says so, and RL.FIXED ALIGNED refuses it
/// (and the other way round), so the two modes never share a count.
#[test]
fn a_plain_window_on_a_boundary_is_not_aligned_state() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Windows of an hour: the keys outlive the test on the wall clock.
    assert_eq!(T0 % (3_600 * SECOND), 0);
    assert_eq!(
        decide(&mut c, &["RL.FIXED", "p", "3", "1h", "COST", "2"]),
        [1, 3, 1, -1, 3_600_000]
    );
    assert_eq!(get_bytes(&mut c, "p").unwrap()[0], 0xAC);
    let (_, err) = error_of(&mut c, &[b"RL.FIXED", b"p", b"3", b"1h", b"ALIGNED"]);
    assert_eq!(
        err,
        "WRONGTYPE key holds RL.FIXED state, not RL.FIXED ALIGNED state"
    );
    assert_eq!(
        decide(&mut c, &["RL.FIXED", "a", "3", "1h", "ALIGNED"])[..3],
        [1, 3, 2]
    );
    let (_, err) = error_of(&mut c, &[b"RL.FIXED", b"a", b"3", b"1h"]);
    assert_eq!(
        err,
        "WRONGTYPE key holds RL.FIXED ALIGNED state, not RL.FIXED state"
    );
    assert_eq!(
        decide(&mut c, &["RL.FIXED", "p", "3", "1h"])[..3],
        [1, 3, 0]
    );
}

#[test]
fn changing_the_limit_keeps_the_newest_entries() {
    let s = Server::start();
    let mut c = s.conn();
    at(&mut c, 0);
    for t in 0..4 {
        at(&mut c, t * SECOND);
        decide(&mut c, &["RL.SLIDING", "e", "4", "1m"]);
    }
    // Down to 2: the two newest (2 s, 3 s) are kept; the next frees at 62 s.
    assert_eq!(
        decide(&mut c, &["RL.SLIDING", "e", "2", "1m"]),
        [0, 2, 0, 59000, 60000]
    );
    // Up to 6: all four count.
    assert_eq!(
        decide(&mut c, &["RL.SLIDING", "e", "6", "1m", "COST", "2"])[..3],
        [1, 6, 0]
    );
    // BUCKETS with another n folds the counts into the current sub-window.
    decide(
        &mut c,
        &["RL.SLIDING", "b", "4", "1m", "BUCKETS", "4", "COST", "3"],
    );
    assert_eq!(
        decide(
            &mut c,
            &["RL.SLIDING", "b", "4", "1m", "BUCKETS", "6", "COST", "2"]
        )[..3],
        [0, 4, 1]
    );
}

/// A replica of `primary`, synced. (Random workloads over every mode, with
/// replicas and AOF restarts, are in durability.rs.)
fn start_replica_of(primary: &Server) -> Server {
    let replica = Server::with(topology::replica_config(primary));
    topology::wait_link_up(&replica);
    replica
}

fn repl_offset(c: &mut redis::Connection) -> i64 {
    topology::repl_offset(c) as i64
}

/// Replication bytes per admitted cost-1 EXACT request, with the log
/// already holding most of `limit` entries.
fn exact_bytes_per_request(p: &mut redis::Connection, limit: u64) -> i64 {
    let key = format!("log{limit}");
    let l = limit.to_string();
    let fill = (limit - 8).to_string();
    assert_eq!(
        decide(p, &["RL.SLIDING", &key, &l, "10m", "COST", &fill])[0],
        1
    );
    let before = repl_offset(p);
    for _ in 0..8 {
        advance(p, MS);
        assert_eq!(decide(p, &["RL.SLIDING", &key, &l, "10m"])[0], 1);
    }
    (repl_offset(p) - before) / 8
}

#[test]
fn exact_replication_bytes_do_not_grow_with_limit() {
    let primary = Server::start();
    let _replica = start_replica_of(&primary);
    let mut p = primary.conn();
    clock_set(&mut p, T0);
    let small = exact_bytes_per_request(&mut p, 10);
    let large = exact_bytes_per_request(&mut p, 10_000);
    println!(
        "EXACT replication bytes per admitted request: limit 10: {small}, limit 10000: {large}"
    );
    // The only differences are the key name (3 more bytes, in each of the
    // SETRANGEs and the PEXPIREAT) and the digits of the slot offset.
    assert!(small < 400, "{small}");
    assert!(
        large - small <= 24,
        "limit 10: {small}, limit 10000: {large}"
    );
}
