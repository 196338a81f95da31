//! RL.GCRA and RL.BUCKET against a real server with the manual clock.

mod common;
use common::*;

/// The decisions of one transaction (no key expires on the wall clock
/// between two of them).
fn decide_atomically(c: &mut redis::Connection, commands: &[&[&str]]) -> Vec<[i64; 5]> {
    atomically(c, commands).iter().map(five).collect()
}

#[test]
fn gcra_burst_then_denial_then_admission_exactly_when_told() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // 5 per 10 s: one every 2 s, burst 5. The TTL a write leaves is the
    // reply's reset_after_ms.
    for left in (0..5).rev() {
        let (r, written) = decide_timed(&mut c, &["RL.GCRA", "u", "5", "10s"]);
        assert_eq!(r[..4], [1, 5, left, -1]);
        assert_expires_after(&mut c, "u", r[4], written);
    }
    let denied = decide(&mut c, &["RL.GCRA", "u", "5", "10s"]);
    assert_eq!(denied, [0, 5, 0, 2000, 10000]);
    // One microsecond early: still denied, the wait counts down exactly.
    advance(&mut c, 2000 * MS - 1);
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "u", "5", "10s"])[..4],
        [0, 5, 0, 1]
    );
    advance(&mut c, 1);
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "u", "5", "10s"])[..4],
        [1, 5, 0, -1]
    );
}

#[test]
fn bucket_burst_then_denial_then_admission_exactly_when_told() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // 4 tokens, 1 token per 250 ms: the key lives a second of wall clock
    // at most, so the whole timeline runs in one transaction.
    let one = ["RL.BUCKET", "b", "4", "1", "250ms"];
    let three = ["RL.BUCKET", "b", "4", "1", "250ms", "COST", "3"];
    let five_tokens = ["RL.BUCKET", "b", "4", "1", "250ms", "COST", "5"];
    let advance_750ms = ["RL.CLOCK", "ADVANCE", "750000"];
    let before = server_ms(&mut c);
    let replies = atomically(
        &mut c,
        &[
            &one,
            &one,
            &one,
            &one,
            &one,
            &three,
            &advance_750ms,
            &three,
            &five_tokens,
            &["PEXPIRETIME", "b"],
        ],
    );
    let written = (before, server_ms(&mut c));
    let decisions: Vec<[i64; 5]> = replies[..6]
        .iter()
        .chain(&replies[7..9])
        .map(five)
        .collect();
    for (i, left) in (0..4).rev().enumerate() {
        assert_eq!(decisions[i][..4], [1, 4, left, -1]);
    }
    assert_eq!(decisions[4], [0, 4, 0, 250, 1000]);
    // Three tokens at once need 750 ms of refill.
    assert_eq!(decisions[5], [0, 4, 0, 750, 1000]);
    assert_eq!(decisions[6], [1, 4, 0, -1, 1000]);
    // More than the capacity can never be admitted.
    assert_eq!(decisions[7], [0, 4, 0, -1, 1000]);
    // The TTL the last write left is its reset_after_ms.
    let expiry: i64 = redis::from_redis_value(replies[9].clone()).unwrap();
    assert!(
        (written.0..=written.1).contains(&(expiry - 1000)),
        "expires at {expiry}, written within {written:?}"
    );
}

#[test]
fn cost_zero_and_dryrun_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // On a fresh key neither creates the key.
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "g", "10", "1m", "COST", "0"]),
        [1, 10, 10, -1, 0]
    );
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "g", "10", "1m", "COST", "4", "DRYRUN"]),
        [1, 10, 6, -1, 24000]
    );
    assert_eq!(get_bytes(&mut c, "g"), None);

    decide(&mut c, &["RL.GCRA", "g", "10", "1m", "COST", "3"]);
    let value = get_bytes(&mut c, "g");
    let expire = pexpiretime(&mut c, "g");
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "g", "10", "1m", "COST", "0"]),
        [1, 10, 7, -1, 18000]
    );
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "g", "10", "1m", "DRYRUN", "COST", "7"]),
        [1, 10, 0, -1, 60000]
    );
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "g", "10", "1m", "DRYRUN", "COST", "8"]),
        [0, 10, 7, 6000, 18000]
    );
    assert_eq!(get_bytes(&mut c, "g"), value);
    assert_eq!(pexpiretime(&mut c, "g"), expire);
    // DRYRUN on a bucket too.
    assert_eq!(
        decide(&mut c, &["RL.BUCKET", "b", "3", "1", "1s", "DRYRUN"]),
        [1, 3, 2, -1, 1000]
    );
    assert_eq!(get_bytes(&mut c, "b"), None);
}

#[test]
fn a_denied_request_leaves_value_and_ttl_untouched() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    for cmd in [
        &["RL.GCRA", "k1", "1", "1h"][..],
        &["RL.BUCKET", "k2", "1", "1", "1h"][..],
    ] {
        let key = cmd[1];
        assert_eq!(decide(&mut c, cmd)[0], 1);
        let value = get_bytes(&mut c, key);
        let expire = pexpiretime(&mut c, key);
        advance(&mut c, 10 * SECOND);
        assert_eq!(decide(&mut c, cmd)[0], 0);
        assert_eq!(get_bytes(&mut c, key), value);
        assert_eq!(pexpiretime(&mut c, key), expire);
    }
}

#[test]
fn burst_option_and_gcra_spacing() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // 1 per second sustained, 3 at once (in one transaction: the key lives
    // a second of wall clock after the first).
    let x = ["RL.GCRA", "x", "1", "1", "BURST", "3"];
    let decisions = decide_atomically(&mut c, &[&x, &x, &x, &x]);
    for (i, left) in [2, 1, 0].into_iter().enumerate() {
        assert_eq!(decisions[i][..3], [1, 3, left]);
    }
    assert_eq!(decisions[3], [0, 3, 0, 1000, 3000]);
}

#[test]
fn resp3_replies_are_maps_with_a_boolean() {
    let s = Server::start();
    let mut c = s.conn_resp3();
    clock_set(&mut c, T0);
    let fields = resp3_map(call(&mut c, &["RL.GCRA", "r3", "2", "1s"]).unwrap());
    assert_eq!(names(&fields), DECISION_FIELDS);
    assert_eq!(fields[0].1, redis::Value::Boolean(true));
    assert_eq!(fields[1].1, redis::Value::Int(2));
    assert_eq!(fields[2].1, redis::Value::Int(1));
    assert_eq!(fields[3].1, redis::Value::Int(-1));
    assert_eq!(fields[4].1, redis::Value::Int(500));
    call(&mut c, &["RL.GCRA", "r3", "2", "1s"]).unwrap();
    let fields =
        resp3_map(call(&mut c, &["RL.BUCKET", "r4", "1", "1", "1s", "COST", "2"]).unwrap());
    assert_eq!(fields[0].1, redis::Value::Boolean(false));
}

#[test]
fn no_drift_under_constant_overload() {
    let s = Server::start();
    let mut c = s.conn();
    // 3 per second and 7 per minute: intervals of 333333.33 µs and
    // 8571428.57 µs. After the burst, the j-th admission is at exactly
    // ceil(j × period / limit): denied 1 µs before, admitted at it.
    // Each key's whole timeline in one transaction: its state lives a
    // third of a second of wall clock, which may pass between two calls.
    for (limit, period_s, key) in [(3u64, 1u64, "d3"), (7, 60, "d7")] {
        let t0 = T0.to_string();
        let period = period_s.to_string();
        let args = ["RL.GCRA", key, &limit.to_string(), &period];
        let mut timeline: Vec<Vec<String>> = vec![vec!["RL.CLOCK".into(), "SET".into(), t0]];
        timeline.extend((0..limit).map(|_| args.map(String::from).to_vec()));
        let mut expected = vec![(1, "the burst".to_string()); limit as usize];
        for j in 1..=60u64 {
            let exact = u128::from(j * period_s * SECOND);
            let at = T0 + exact.div_ceil(u128::from(limit)) as u64;
            for (when, admitted, what) in [(at - 1, 0, "early"), (at, 1, "on time")] {
                timeline.push(vec!["RL.CLOCK".into(), "SET".into(), when.to_string()]);
                timeline.push(args.map(String::from).to_vec());
                expected.push((admitted, format!("{key} j={j} {what}")));
            }
        }
        let commands: Vec<Vec<&str>> = timeline
            .iter()
            .map(|v| v.iter().map(String::as_str).collect())
            .collect();
        let commands: Vec<&[&str]> = commands.iter().map(Vec::as_slice).collect();
        let decisions = atomically(&mut c, &commands)
            .iter()
            .filter(|r| matches!(r, redis::Value::Array(_)))
            .map(five)
            .collect::<Vec<_>>();
        assert_eq!(decisions.len(), expected.len());
        for (decision, (admitted, what)) in decisions.iter().zip(&expected) {
            assert_eq!(decision[0], *admitted, "{what}");
        }
    }
}

#[test]
fn clock_commands() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, 42);
    assert_eq!(clock(&mut c), 42);
    advance(&mut c, 8);
    assert_eq!(clock(&mut c), 50);
    let (code, msg) = error_of(&mut c, &[b"RL.CLOCK", b"FOO", b"1"]);
    assert_eq!(code, "ERR");
    assert_eq!(
        msg,
        "ERR unknown subcommand 'FOO' for RL.CLOCK: try SET, ADVANCE or HELP"
    );
    let (_, msg) = error_of(&mut c, &[b"RL.CLOCK", b"SET", b"-1"]);
    assert_eq!(
        msg,
        "ERR microseconds must be an integer from 0 to 9223372036854775807"
    );
    clock_set(&mut c, i64::MAX as u64 - 5);
    let (_, msg) = error_of(&mut c, &[b"RL.CLOCK", b"ADVANCE", b"6"]);
    assert_eq!(msg, "ERR microseconds must be an integer from 0 to 5");
    // Decisions near the end of time neither wrap nor fail.
    let r = decide(&mut c, &["RL.GCRA", "end", "1", "36500d"]);
    assert_eq!(r[0], 1);

    // Without `clock manual`, the clock is real and cannot be moved.
    let real = Server::with(Config::real_clock());
    let mut c = real.conn();
    let wall_us = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64
    };
    // The server reads the machine's clock between our two readings; on
    // servers without microseconds it follows a monotonic estimate that may
    // stray up to 1 s (and 1 ms of rounding) before it re-anchors.
    let (sent, before, answered) = (wall_us(), clock(&mut c), wall_us());
    let stray = SECOND + MS;
    assert!(
        (sent - stray..=answered + stray).contains(&before),
        "{before} outside {sent}..={answered}"
    );
    assert!(clock(&mut c) >= before);
    let (code, msg) = error_of(&mut c, &[b"RL.CLOCK", b"SET", b"1"]);
    assert_eq!(code, "ERR");
    assert_eq!(
        msg,
        "ERR RL.CLOCK SET and ADVANCE need the module loaded with 'clock manual'"
    );
    let (_, msg) = error_of(&mut c, &[b"RL.CLOCK", b"ADVANCE", b"1"]);
    assert!(msg.contains("clock manual"));
}

#[test]
fn command_metadata() {
    let s = Server::start();
    let mut c = s.conn();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RL.GCRA")
        .arg("user:1")
        .arg("10")
        .arg("1s")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["user:1"]);
    // `fast` only where the work is O(1) whatever other clients did: not
    // where a key's waiters make it O(log(N)).
    for (name, fast) in [
        ("rl.gcra", false),
        ("rl.bucket", false),
        ("cl.throttle", true),
    ] {
        let info = call(&mut c, &["COMMAND", "INFO", name]).unwrap();
        let text = format!("{info:?}");
        assert!(text.contains("write"), "{name}: {text}");
        assert!(text.contains("denyoom"), "{name}: {text}");
        assert_eq!(text.contains("fast"), fast, "{name}: {text}");
    }
    // Redis itself enforces the arity that SetCommandInfo declared.
    let (_, msg) = error_of(&mut c, &[b"RL.GCRA", b"k", b"1"]);
    assert_eq!(msg, "ERR wrong number of arguments for 'rl.gcra' command");
}

#[test]
fn errors_name_the_argument_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let max = "9223372036854775807";
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[b"RL.GCRA", b"k", b"0", b"1"],
            "ERR limit must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"RL.GCRA", b"k", b"-1", b"1"],
            "ERR limit must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"RL.GCRA", b"k", b"1.5", b"1"],
            "ERR limit must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"RL.GCRA", b"k", b"9223372036854775808", b"1"],
            "ERR limit must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"RL.GCRA", b"k", b"1", b"0"],
            "ERR period must be a positive integer with an optional unit ms, s, m, h or d",
        ),
        (
            &[b"RL.GCRA", b"k", b"1", b"1w"],
            "ERR period must be a positive integer with an optional unit ms, s, m, h or d",
        ),
        (
            &[b"RL.GCRA", b"k", b"1", b"99999999999d"],
            "ERR period must be at most 36500d",
        ),
        (
            &[b"RL.GCRA", b"k", b"1", b"1", b"BURST"],
            "ERR syntax error: BURST needs a value",
        ),
        (
            &[b"RL.GCRA", b"k", b"1", b"1", b"BURST", b"0"],
            "ERR BURST must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"RL.GCRA", b"k", b"1", b"1", b"BURST", b"2", b"BURST", b"2"],
            "ERR syntax error: BURST given more than once",
        ),
        (
            &[b"RL.GCRA", b"k", b"1", b"1", b"COST", b"-1"],
            "ERR COST must be an integer from 0 to 9223372036854775807",
        ),
        (
            &[b"RL.GCRA", b"k", b"1", b"1", b"FAST"],
            "ERR syntax error: unknown option 'FAST'",
        ),
        (
            &[b"RL.GCRA", b"k", b"1", b"1", b"\xff\r\n"],
            "ERR syntax error: unknown option '???'",
        ),
        (
            &[b"RL.GCRA", b"k", b"1", b"36500d", b"BURST", max.as_bytes()],
            "ERR BURST * period / limit must be at most 1000 years",
        ),
        (
            &[b"RL.BUCKET", b"k", b"0", b"1", b"1"],
            "ERR capacity must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"RL.BUCKET", b"k", b"1", b"0", b"1"],
            "ERR refill must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"RL.BUCKET", b"k", b"1", b"1", b"1x"],
            "ERR period must be a positive integer with an optional unit ms, s, m, h or d",
        ),
        (
            &[b"RL.BUCKET", b"k", b"1", b"1", b"1", b"DRYRUN", b"DRYRUN"],
            "ERR syntax error: DRYRUN given more than once",
        ),
        (
            &[b"RL.BUCKET", b"k", max.as_bytes(), b"1", b"36500d"],
            "ERR capacity * period / refill must be at most 1000 years",
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
fn foreign_values_are_refused_and_kept() {
    let s = Server::start();
    let mut c = s.conn();
    let _: () = redis::cmd("RPUSH")
        .arg("list")
        .arg("a")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("hello")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("num")
        .arg("12345")
        .query(&mut c)
        .unwrap();
    decide(&mut c, &["RL.BUCKET", "bucket", "1", "1", "1"]);
    decide(&mut c, &["RL.GCRA", "gcra", "1", "1"]);
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[b"RL.GCRA", b"list", b"1", b"1"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            &[b"RL.GCRA", b"text", b"1", b"1"],
            "WRONGTYPE key holds a string that is not RL.GCRA state",
        ),
        (
            &[b"RL.GCRA", b"num", b"1", b"1"],
            "WRONGTYPE key holds a string that is not RL.GCRA state",
        ),
        (
            &[b"RL.GCRA", b"bucket", b"1", b"1"],
            "WRONGTYPE key holds RL.BUCKET state, not RL.GCRA state",
        ),
        (
            &[b"RL.BUCKET", b"gcra", b"1", b"1", b"1"],
            "WRONGTYPE key holds RL.GCRA state, not RL.BUCKET state",
        ),
        (
            &[b"RL.BUCKET", b"list", b"1", b"1", b"1"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
    ];
    for (args, want) in cases {
        let (code, msg) = error_of(&mut c, args);
        assert_eq!(code, "WRONGTYPE", "{args:?}");
        assert_eq!(&msg, want, "{args:?}");
    }
    assert_eq!(get_bytes(&mut c, "text").unwrap(), b"hello");
    assert_eq!(get_bytes(&mut c, "num").unwrap(), b"12345");
    assert_eq!(pttl(&mut c, "text"), -1);
    // A corrupt value with our tag.
    let _: () = redis::cmd("SET")
        .arg("bad")
        .arg(&[0xA1u8, 1, 2][..])
        .query(&mut c)
        .unwrap();
    let (code, msg) = error_of(&mut c, &[b"RL.GCRA", b"bad", b"1", b"1"]);
    assert_eq!(
        (code.as_str(), msg.as_str()),
        ("ERR", "ERR key holds corrupt RL.GCRA state")
    );
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn state_is_a_compact_tagged_string() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Each write and its read in one transaction: the keys live 100 ms and
    // 333 ms of wall clock.
    let replies = atomically(
        &mut c,
        &[
            &["RL.GCRA", "g", "10", "1s"],
            &["GET", "g"],
            &["TYPE", "g"],
            &["RL.BUCKET", "b", "3", "1", "1s"],
            &["GET", "b"],
        ],
    );
    let bytes = |r: &redis::Value| -> Vec<u8> { redis::from_redis_value(r.clone()).unwrap() };
    let v = bytes(&replies[1]);
    assert_eq!(v[0], 0xA1);
    assert_eq!(v.len(), 9);
    assert_eq!(
        u64::from_le_bytes(v[1..9].try_into().unwrap()),
        T0 + 100_000
    );
    assert_eq!(replies[2], redis::Value::SimpleString("string".into()));
    assert_eq!(bytes(&replies[4])[0], 0xA2);
}
