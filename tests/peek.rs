//! RL.PEEK: a look at a limiter that writes, replicates and touches
//! nothing; it runs on replicas and under OOM and breaks no WATCH. And what
//! the new charges send to replicas: nothing when they change nothing.

mod common;
use common::topology::*;
use common::*;

/// Every algorithm and mode with 10 units per 10 h: the decision command
/// and the same policy as RL.PEEK (and RL.ALL) write it. Keys expire on the
/// server's real clock, also under the manual one: with periods of hours
/// every key written here outlives the test, however slow the machine.
const ALGORITHMS: [(&str, &str); 6] = [
    ("RL.GCRA", "GCRA 10 10h"),
    ("RL.BUCKET", "BUCKET 10 1 1h"),
    ("RL.SLIDING", "SLIDING 10 10h EXACT"),
    ("RL.SLIDING", "SLIDING 10 10h APPROX"),
    ("RL.SLIDING", "SLIDING 10 10h BUCKETS 5"),
    ("RL.FIXED", "FIXED 10 10h"),
];

fn words(s: &str) -> Vec<&str> {
    s.split(' ').collect()
}

/// The decision command of algorithm `i` on `key`, then `extra`.
fn charge<'a>(i: usize, key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let (name, policy) = ALGORITHMS[i];
    let mut v = vec![name, key];
    v.extend(words(policy).into_iter().skip(1));
    v.extend_from_slice(extra);
    v
}

fn peek(i: usize, key: &str) -> Vec<&str> {
    let mut v = vec!["RL.PEEK", key];
    v.extend(words(ALGORITHMS[i].1));
    v
}

fn ints(c: &mut redis::Connection, args: &[&str]) -> Vec<i64> {
    cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[test]
fn peek_reports_what_would_be_admitted_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    for (i, (_, name)) in ALGORITHMS.iter().enumerate() {
        let key = format!("peek:{i}");
        assert_eq!(ints(&mut c, &peek(i, &key)), [1, 10, 10, -1, 0], "{name}");
        assert_eq!(
            call(&mut c, &["EXISTS", &key]).unwrap(),
            redis::Value::Int(0)
        );
        ints(&mut c, &charge(i, &key, &["COST", "7"]));
        let value = get_bytes(&mut c, &key);
        let expiry = pexpiretime(&mut c, &key);
        let seen = ints(&mut c, &peek(i, &key));
        assert_eq!(seen[..4], [1, 10, 3, -1], "{name}");
        assert_eq!(get_bytes(&mut c, &key), value, "{name}");
        assert_eq!(pexpiretime(&mut c, &key), expiry, "{name}");
        // The same as a dry run of cost 0 reports.
        let dry = ints(&mut c, &charge(i, &key, &["COST", "0", "DRYRUN"]));
        assert_eq!(seen[1..], dry[1..], "{name}");
        ints(&mut c, &charge(i, &key, &["COST", "3"]));
        let full = ints(&mut c, &peek(i, &key));
        let denied = ints(&mut c, &charge(i, &key, &["DRYRUN"]));
        assert_eq!(full, denied, "{name}: a peek when full is a denied unit");
        assert_eq!(full[0], 0);
    }
    // A policy that does not match the key's state, and bad input.
    ints(&mut c, &["RL.GCRA", "g", "10", "10h"]);
    let cases: [(&[&[u8]], &str); 4] = [
        (
            &[b"RL.PEEK", b"g", b"FIXED", b"10", b"10h"],
            "WRONGTYPE key holds RL.GCRA state, not RL.FIXED state",
        ),
        (
            &[b"RL.PEEK", b"g", b"GCRA", b"10", b"10h", b"COST", b"1"],
            "ERR syntax error: unknown option 'COST'",
        ),
        (
            &[b"RL.PEEK", b"g", b"LEAKY", b"10", b"10h"],
            "ERR syntax error: unknown policy 'LEAKY': expected GCRA, BUCKET, SLIDING, FIXED or CONCURRENCY",
        ),
        (
            &[b"RL.PEEK", b"g", b"GCRA", b"0", b"10h"],
            "ERR limit must be an integer from 1 to 9223372036854775807",
        ),
    ];
    for (args, msg) in cases {
        assert_eq!(error_of(&mut c, args).1, msg);
    }
}

#[test]
fn peek_on_a_replica_agrees_and_nothing_unchanged_is_replicated() {
    let primary = Server::start();
    let replica = Server::with(replica_config(&primary));
    wait_link_up(&replica);
    wait_replicas_online(&primary, 1);
    let (mut p, mut r) = (primary.conn(), replica.conn());
    clock_set(&mut p, T0);
    clock_set(&mut r, T0);
    for i in 0..ALGORITHMS.len() {
        let key = format!("rep:{i}");
        ints(&mut p, &charge(i, &key, &["COST", "6"]));
    }
    wait_replicas(&mut p, 1);
    advance(&mut p, 5_400 * SECOND);
    advance(&mut r, 5_400 * SECOND);
    for (i, (_, name)) in ALGORITHMS.iter().enumerate() {
        let key = format!("rep:{i}");
        let on_primary = ints(&mut p, &peek(i, &key));
        assert_eq!(ints(&mut r, &peek(i, &key)), on_primary, "{name}");
        // A decision is refused on the replica; a peek is not.
        let refused = call(&mut r, &charge(i, &key, &[])).unwrap_err();
        assert_eq!(refused.code(), Some("READONLY"));
    }
    // Fill one limiter; then nothing that changes nothing moves the
    // replication stream.
    ints(&mut p, &["RL.GCRA", "full", "2", "10h", "COST", "2"]);
    wait_replicas(&mut p, 1);
    let offset = repl_offset(&mut p);
    let unchanged: [&[&str]; 5] = [
        &["RL.PEEK", "full", "GCRA", "2", "10h"],
        &["RL.GCRA", "full", "2", "10h", "DRYRUN"],
        &["RL.GCRA", "full", "2", "10h", "COST", "2", "PARTIAL"],
        &["RL.GCRA", "none", "2", "10h", "REFUND", "1"],
        &[
            "RL.ALL", "2", "full", "x", "GCRA", "2", "10h", "FIXED", "5", "1h", "PARTIAL", "COST",
            "3",
        ],
    ];
    for args in unchanged {
        call(&mut p, args).unwrap();
        assert_eq!(repl_offset(&mut p), offset, "{args:?}");
    }
    // A refund that changes the state is replicated, as its effect.
    ints(&mut p, &["RL.GCRA", "full", "2", "10h", "REFUND", "1"]);
    assert!(repl_offset(&mut p) > offset);
    wait_replicas(&mut p, 1);
    assert_eq!(get_bytes(&mut r, "full"), get_bytes(&mut p, "full"));
    assert_eq!(
        ints(&mut r, &["RL.PEEK", "full", "GCRA", "2", "10h"]),
        ints(&mut p, &["RL.PEEK", "full", "GCRA", "2", "10h"])
    );
}

#[test]
fn peek_runs_under_oom_and_breaks_no_watch() {
    let s = Server::with(Config::default().arg("maxmemory-policy", "noeviction"));
    let (mut c, mut w) = (s.conn(), s.conn());
    clock_set(&mut c, T0);
    ints(&mut c, &["RL.GCRA", "k", "10", "10h", "COST", "4"]);
    // WATCH survives a peek at the key (and at a missing one).
    for key in ["k", "missing"] {
        let _: () = redis::cmd("WATCH").arg(key).query(&mut w).unwrap();
        ints(&mut c, &["RL.PEEK", key, "GCRA", "10", "10h"]);
        let mut tx = redis::pipe();
        tx.atomic().cmd("SET").arg("marker").arg(1).ignore();
        let committed: redis::Value = tx.query(&mut w).unwrap();
        assert_ne!(committed, redis::Value::Nil, "{key}");
    }
    // Out of memory: decisions are refused, a peek answers.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let refused = call(&mut c, &["RL.GCRA", "k", "10", "10h"]).unwrap_err();
    assert_eq!(refused.code(), Some("OOM"));
    assert_eq!(
        ints(&mut c, &["RL.PEEK", "k", "GCRA", "10", "10h"]),
        [1, 10, 6, -1, 4 * 3_600_000]
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query(&mut c)
        .unwrap();
}
