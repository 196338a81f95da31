//! CL.THROTTLE: redis-cell's replies and storage, without its crashes.

mod common;
use common::*;

#[test]
fn readme_example() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // The key lives 2 s of wall clock: written and read again in one
    // transaction, so that it cannot expire in between.
    let first = ["CL.THROTTLE", "user123", "15", "30", "60", "1"];
    // The quantity defaults to 1.
    let second = ["CL.THROTTLE", "user123", "15", "30", "60"];
    let before = server_ms(&mut c);
    let replies = atomically(
        &mut c,
        &[
            &first,
            &["GET", "user123"],
            &["PEXPIRETIME", "user123"],
            &second,
        ],
    );
    let written = (before, server_ms(&mut c));
    assert_eq!(five(&replies[0]), [0, 16, 15, -1, 2]);
    // Stored as redis-cell stores it: the TAT in decimal nanoseconds.
    let tat: Vec<u8> = redis::from_redis_value(replies[1].clone()).unwrap();
    assert_eq!(tat, ((T0 + 2 * SECOND) * 1000).to_string().as_bytes());
    // It expires when the TAT comes: 2 s after it was written.
    let at: i64 = redis::from_redis_value(replies[2].clone()).unwrap();
    assert!(
        (written.0..=written.1).contains(&(at - 2000)),
        "expires at {at}, written within {written:?}"
    );
    assert_eq!(five(&replies[3]), [0, 16, 14, -1, 4]);
}

/// redis-cell's case table: limit 5 (max_burst 4), one per second.
#[test]
fn timed_cases_follow_redis_cell() {
    let s = Server::start();
    let mut c = s.conn();
    // (ms after start, quantity, reply)
    let cases: &[(u64, &str, [i64; 5])] = &[
        (0, "6", [1, 5, 5, -1, 0]),
        (0, "1", [0, 5, 4, -1, 1]),
        (0, "1", [0, 5, 3, -1, 2]),
        (0, "1", [0, 5, 2, -1, 3]),
        (0, "1", [0, 5, 1, -1, 4]),
        (0, "1", [0, 5, 0, -1, 5]),
        (0, "1", [1, 5, 0, 1, 5]),
        (3000, "1", [0, 5, 2, -1, 3]),
        (3100, "1", [0, 5, 1, -1, 4]),
        (4000, "1", [0, 5, 1, -1, 4]),
        (8000, "1", [0, 5, 4, -1, 1]),
        (9500, "1", [0, 5, 4, -1, 1]),
        (9500, "0", [0, 5, 4, -1, 1]),
        (9500, "2", [0, 5, 2, -1, 3]),
        (9500, "5", [1, 5, 2, 3, 3]),
    ];
    // The whole table in one transaction: the key lives up to 5 s of wall
    // clock, and the table's 9.5 s pass on the manual clock only.
    let times: Vec<String> = cases
        .iter()
        .map(|(at, _, _)| (T0 + at * MS).to_string())
        .collect();
    let mut commands: Vec<Vec<&str>> = Vec::new();
    for ((_, quantity, _), at) in cases.iter().zip(&times) {
        commands.push(vec!["RL.CLOCK", "SET", at]);
        commands.push(vec!["CL.THROTTLE", "cell", "4", "1", "1", quantity]);
    }
    let commands: Vec<&[&str]> = commands.iter().map(Vec::as_slice).collect();
    let replies = atomically(&mut c, &commands);
    for (i, (_, _, want)) in cases.iter().enumerate() {
        assert_eq!(&five(&replies[2 * i + 1]), want, "case {i}");
    }
}

#[test]
fn reads_keys_that_redis_cell_wrote() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // redis-cell left a TAT 3 s ahead (limit 5 per 5 s, 3 used), with the
    // 3 s of wall clock it lives; read in the same transaction.
    let tat_ns = ((T0 + 3 * SECOND) * 1000).to_string();
    let replies = atomically(
        &mut c,
        &[
            &["SET", "legacy", &tat_ns, "PX", "3000"],
            &["CL.THROTTLE", "legacy", "4", "5", "5"],
        ],
    );
    assert_eq!(five(&replies[1]), [0, 5, 1, -1, 4]);
}

#[test]
fn hostile_keys_and_arguments_get_errors_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let _: () = redis::cmd("RPUSH")
        .arg("list")
        .arg("x")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("hash")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("not a number")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("neg")
        .arg("-5")
        .query(&mut c)
        .unwrap();
    // An hour: the key outlives the test on the wall clock.
    decide(&mut c, &["RL.GCRA", "ours", "1", "1h"]);
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[b"CL.THROTTLE", b"list", b"1", b"1", b"1"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            &[b"CL.THROTTLE", b"hash", b"1", b"1", b"1"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            &[b"CL.THROTTLE", b"text", b"1", b"1", b"1"],
            "WRONGTYPE key holds a string that is not CL.THROTTLE state",
        ),
        (
            &[b"CL.THROTTLE", b"neg", b"1", b"1", b"1"],
            "WRONGTYPE key holds a string that is not CL.THROTTLE state",
        ),
        (
            &[b"CL.THROTTLE", b"ours", b"1", b"1", b"1"],
            "WRONGTYPE key holds RL.GCRA state, not CL.THROTTLE state",
        ),
        (
            &[b"CL.THROTTLE", b"k", b"1", b"1", b"1", b"--1"],
            "ERR quantity must be an integer from -9223372036854775807 to 9223372036854775807",
        ),
        (
            &[b"CL.THROTTLE", b"k", b"-1", b"1", b"1"],
            "ERR max_burst must be an integer from 0 to 9223372036854775806",
        ),
        (
            &[b"CL.THROTTLE", b"k", b"1", b"0", b"1"],
            "ERR count per period must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"CL.THROTTLE", b"k", b"1", b"1", b"0"],
            "ERR period must be an integer from 1 to 3153600000",
        ),
        (
            &[b"CL.THROTTLE", b"k", b"1", b"1", b"\xff\xfe"],
            "ERR period must be an integer from 1 to 3153600000",
        ),
        (
            &[b"CL.THROTTLE", b"k", b"1", b"9223372036854775807", b"1"],
            "ERR count per period must be at most one per nanosecond",
        ),
        (
            &[b"CL.THROTTLE", b"k", b"9223372036854775806", b"1", b"1"],
            "ERR (max_burst + 1) * period / count must be at most 100 years",
        ),
        (
            &[b"CL.THROTTLE", b"k", b"1", b"1", b"1", b"1", b"1"],
            "ERR wrong number of arguments for 'cl.throttle' command",
        ),
    ];
    for (args, want) in cases {
        let (_, msg) = error_of(&mut c, args);
        assert_eq!(&msg, want, "{args:?}");
    }
    assert_eq!(get_bytes(&mut c, "text").unwrap(), b"not a number");
    assert_eq!(get_bytes(&mut c, "neg").unwrap(), b"-5");
    assert_eq!(get_bytes(&mut c, "k"), None);
    // A key name that is not UTF-8 is just a key (one an hour: it outlives
    // the test on the wall clock).
    let r: Vec<i64> = redis::cmd("CL.THROTTLE")
        .arg(&b"\xff\xfe"[..])
        .arg(1)
        .arg(1)
        .arg(3600)
        .query(&mut c)
        .unwrap();
    assert_eq!(r[0], 0);
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&b"\xff\xfe"[..])
        .query(&mut c)
        .unwrap();
    assert!(ttl > 0);
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn quantity_zero_peeks_without_writing() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    assert_eq!(
        decide(&mut c, &["CL.THROTTLE", "peek", "4", "1", "1", "0"]),
        [0, 5, 5, -1, 0]
    );
    assert_eq!(get_bytes(&mut c, "peek"), None);
}

/// redis-cell reads its arguments as Rust's `i64` parse does: a leading `+`
/// and `-0` are accepted, as here; any other sign, space or doubled sign is
/// an error, and nothing is written.
#[test]
fn arguments_take_signs_as_redis_cell_does() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Ten an hour: the keys outlive the test on the wall clock.
    let signed = decide(&mut c, &["CL.THROTTLE", "a", "+5", "+10", "+3600", "+2"]);
    let plain = decide(&mut c, &["CL.THROTTLE", "b", "5", "10", "3600", "2"]);
    assert_eq!(signed, plain);
    assert_eq!(signed, [0, 6, 4, -1, 720]);
    assert_eq!(get_bytes(&mut c, "a"), get_bytes(&mut c, "b"));
    // -0 and +0 are zero: a quantity that peeks, a burst of one.
    for zero in ["-0", "+0", "-00"] {
        assert_eq!(
            decide(&mut c, &["CL.THROTTLE", "a", "5", "10", "3600", zero]),
            [0, 6, 4, -1, 720],
            "{zero}"
        );
        assert_eq!(
            decide(&mut c, &["CL.THROTTLE", "z", zero, "10", "60", "0"])[..3],
            [0, 1, 1],
            "{zero}"
        );
    }
    assert_eq!(get_bytes(&mut c, "z"), None);
    let before = digest(&mut c);
    for bad in ["-5", "++5", "+", "-", " 5", "+-0", "+ 5", "5 "] {
        for (i, name) in [
            "max_burst must be an integer from 0 to 9223372036854775806",
            "count per period must be an integer from 1 to 9223372036854775807",
            "period must be an integer from 1 to 3153600000",
            "quantity must be an integer from -9223372036854775807 to 9223372036854775807",
        ]
        .iter()
        .enumerate()
        {
            if i == 3 && bad == "-5" {
                continue; // a give-back
            }
            let mut args: Vec<&[u8]> = vec![b"CL.THROTTLE", b"a", b"5", b"10", b"60", b"1"];
            args[2 + i] = bad.as_bytes();
            let (_, msg) = error_of(&mut c, &args);
            assert_eq!(msg, format!("ERR {name}"), "{bad:?} at {i}");
        }
    }
    // `-0` for count or period is zero, below their minimum.
    let (_, msg) = error_of(&mut c, &[b"CL.THROTTLE", b"a", b"5", b"-0", b"60"]);
    assert_eq!(
        msg,
        "ERR count per period must be an integer from 1 to 9223372036854775807"
    );
    assert_eq!(digest(&mut c), before);
    // The RL.* commands keep taking digits only.
    for bad in ["+5", "-0", "+0"] {
        let (_, msg) = error_of(&mut c, &[b"RL.GCRA", b"g", bad.as_bytes(), b"1s"]);
        assert_eq!(
            msg,
            "ERR limit must be an integer from 1 to 9223372036854775807"
        );
    }
}

/// A negative quantity gives back what a request took, as redis-cell's
/// users send it: the TAT moves back, never before now; a limiter full
/// again loses its key. Replicas receive the effect.
#[test]
fn a_negative_quantity_gives_back() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Five at once, ten an hour (the keys outlive the test on the wall clock).
    let taken = decide(&mut c, &["CL.THROTTLE", "g", "4", "10", "3600", "3"]);
    assert_eq!(taken, [0, 5, 2, -1, 1080]);
    let one = decide(&mut c, &["CL.THROTTLE", "h", "4", "10", "3600", "1"]);
    // Two back: as if one had been taken, stored alike.
    assert_eq!(
        decide(&mut c, &["CL.THROTTLE", "g", "4", "10", "3600", "-2"]),
        one
    );
    assert_eq!(get_bytes(&mut c, "g"), get_bytes(&mut c, "h"));
    let ttl =
        |c: &mut redis::Connection, k: &str| -> i64 { redis::cmd("PTTL").arg(k).query(c).unwrap() };
    assert!(
        (359_000..=360_000).contains(&ttl(&mut c, "g")),
        "{}",
        ttl(&mut c, "g")
    );
    // More than was taken: full, and the key goes.
    assert_eq!(
        decide(&mut c, &["CL.THROTTLE", "g", "4", "10", "3600", "-9"]),
        [0, 5, 5, -1, 0]
    );
    assert_eq!(get_bytes(&mut c, "g"), None);
    // No key: nothing to give back, nothing written.
    assert_eq!(
        decide(&mut c, &["CL.THROTTLE", "none", "4", "10", "3600", "-1"]),
        [0, 5, 5, -1, 0]
    );
    assert_eq!(get_bytes(&mut c, "none"), None);
    // A spent key admits again after a give-back.
    let spent = ["CL.THROTTLE", "s", "0", "10", "3600", "1"];
    assert_eq!(decide(&mut c, &spent)[0], 0);
    assert_eq!(decide(&mut c, &spent)[0], 1);
    decide(&mut c, &["CL.THROTTLE", "s", "0", "10", "3600", "-1"]);
    assert_eq!(decide(&mut c, &spent)[0], 0);
}
