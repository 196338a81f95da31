//! The deny list (RL.DENY, RL.UNDENY, RL.DENIED, RL.DENYLIST) through a
//! real server: every decision command answers a denied key denied before
//! its limit, charging nothing; the list is bounded, listed by cursor,
//! counted, replicated and kept across restarts (RDB and AOF).

mod common;
use common::named::{err, ok, policies};
use common::topology::{info_field, replica_config, wait_link_up, wait_replicas};
use common::*;
use redis::Value;

/// RL.DENIED's reply: (ms left, reason), or `None`.
fn denied(c: &mut redis::Connection, key: &str) -> Option<(i64, String)> {
    match call(c, &["RL.DENIED", key]).unwrap() {
        Value::Nil => None,
        Value::Array(v) => match &v[..] {
            [Value::Int(ms), Value::BulkString(r)] => {
                Some((*ms, String::from_utf8(r.clone()).unwrap()))
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

fn int(c: &mut redis::Connection, args: &[&str]) -> i64 {
    cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[test]
fn a_denied_key_is_denied_by_every_decision_command_and_nothing_is_charged() {
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "k", "10", "1m"]),
        [1, 10, 9, -1, 6000]
    );
    ok(
        &mut c,
        &["RL.DENY", "k", "30s", "REASON", "credential stuffing"],
    );
    assert_eq!(
        denied(&mut c, "k"),
        Some((30_000, "credential stuffing".into()))
    );
    // Denied, the limit its own, nothing remaining, retry at the deny's end.
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "k", "10", "1m"]),
        [0, 10, 0, 30_000, 0]
    );
    for _ in 0..5 {
        decide(&mut c, &["RL.GCRA", "k", "10", "1m", "COST", "3"]);
    }
    // Nothing was charged: a look finds the one admitted unit, 1 s on.
    advance(&mut c, SECOND);
    let peek = decide(&mut c, &["RL.PEEK", "k", "GCRA", "10", "1m"]);
    assert_eq!(peek[..3], [1, 10, 9]);
    assert_eq!(
        decide(&mut c, &["RL.BUCKET", "k", "5", "5", "1m"])[..4],
        [0, 5, 0, 29_000]
    );
    assert_eq!(decide(&mut c, &["RL.FIXED", "k", "5", "1m"])[0], 0);
    assert_eq!(decide(&mut c, &["RL.SLIDING", "k", "5", "1m"])[0], 0);
    assert_eq!(decide(&mut c, &["RL.SKETCH", "k", "item", "5", "1m"])[0], 0);
    let acquire: Vec<Value> = cmd(&["RL.ACQUIRE", "k", "5", "1m"]).query(&mut c).unwrap();
    assert_eq!((&acquire[0], &acquire[5]), (&Value::Int(0), &Value::Nil));
    let (allowed, blocked_by, retry, _) = combined(
        &mut c,
        &[
            "RL.ALL", "2", "other", "k", "FIXED", "5", "1m", "FIXED", "5", "1m",
        ],
    );
    assert_eq!((allowed, blocked_by, retry), (0, 1, 29_000));
    // The other key of that call was not charged either.
    assert_eq!(
        decide(&mut c, &["RL.PEEK", "other", "FIXED", "5", "1m"])[2],
        5
    );
    let (allowed, ..) = combined(&mut c, &["RL.SHARE", "1", "k", "10", "1m"]);
    assert_eq!(allowed, 0);
    let cell: Vec<i64> = cmd(&["CL.THROTTLE", "k", "9", "10", "60"])
        .query(&mut c)
        .unwrap();
    assert_eq!(cell, [1, 10, 0, 29, 0]);
    ok(&mut c, &["RL.POLICY", "SET", "api", "FIXED", "5", "1m"]);
    assert_eq!(decide(&mut c, &["RL.CHECK", "k", "api"])[0], 0);
    assert_eq!(decide(&mut c, &["RL.CHECK", "free", "api"])[0], 1);
    // A shadow policy does not admit a denied key.
    ok(
        &mut c,
        &["RL.POLICY", "SET", "watch", "FIXED", "5", "1m", "SHADOW"],
    );
    assert_eq!(decide(&mut c, &["RL.CHECK", "k", "watch"])[0], 0);
    // WAIT does not wait out a denial.
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "k", "10", "1m", "WAIT", "1h"])[0],
        0
    );
    // Counted: in INFO and in the named policy's statistics.
    let info = info_field(&mut c, "ratelimit", "ratelimit_deny_list").unwrap();
    assert_eq!(info, "keys=1,denials=17,policy_denials=2");
    let stats: Vec<Value> = cmd(&["RL.POLICY", "STATS", "api"]).query(&mut c).unwrap();
    let at = stats
        .iter()
        .position(|v| *v == Value::BulkString(b"deny_listed".to_vec()))
        .unwrap();
    assert_eq!(stats[at + 1], Value::Int(1));
    assert_eq!(stats[5], Value::Int(1), "denied: {stats:?}");
    // The denial ends at its instant.
    advance(&mut c, 29 * SECOND - 1);
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "k", "10", "1m"])[..4],
        [0, 10, 0, 1]
    );
    advance(&mut c, 1);
    assert_eq!(denied(&mut c, "k"), None);
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "k", "10", "1m"])[..3],
        [1, 10, 9]
    );
    // FOREVER: never, until removed.
    ok(&mut c, &["RL.DENY", "k", "FOREVER"]);
    assert_eq!(denied(&mut c, "k"), Some((-1, String::new())));
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "k", "10", "1m"]),
        [0, 10, 0, -1, 0]
    );
    advance(&mut c, 3_650 * 86_400 * SECOND);
    assert_eq!(decide(&mut c, &["RL.GCRA", "k", "10", "1m"])[0], 0);
    assert_eq!(int(&mut c, &["RL.UNDENY", "k"]), 1);
    assert_eq!(int(&mut c, &["RL.UNDENY", "k"]), 0);
    assert_eq!(decide(&mut c, &["RL.GCRA", "k", "10", "1m"])[0], 1);
}

#[test]
fn the_list_is_bounded_and_its_errors_name_the_argument() {
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    ok(&mut c, &["CONFIG", "SET", "ratelimit.max-denied-keys", "2"]);
    ok(&mut c, &["RL.DENY", "a", "1s"]);
    ok(&mut c, &["RL.DENY", "b", "FOREVER"]);
    assert_eq!(
        err(&mut c, &["RL.DENY", "c", "1h"]),
        "ERR the deny list is full: at most 2 keys (ratelimit.max-denied-keys)"
    );
    assert_eq!(denied(&mut c, "c"), None);
    // A listed key may be denied again; once `a` has ended there is room.
    ok(&mut c, &["RL.DENY", "b", "1h", "REASON", "again"]);
    advance(&mut c, SECOND);
    ok(&mut c, &["RL.DENY", "c", "1h"]);
    let long = "x".repeat(257);
    assert_eq!(
        err(&mut c, &["RL.DENY", "d", "1h", "REASON", &long]),
        "ERR REASON must be at most 256 bytes"
    );
    assert!(err(&mut c, &["RL.DENY", "d", "0"]).contains("duration"));
    assert!(err(&mut c, &["RL.DENY", "d", "1h", "BECAUSE", "x"]).contains("'BECAUSE'"));
    assert!(err(&mut c, &["RL.DENY", "d", "UNTIL", "soon"]).contains("UNTIL"));
    assert!(err(&mut c, &["RL.DENYLIST", "0", "COUNT", "0"]).contains("COUNT"));
    assert!(err(&mut c, &["RL.DENYLIST", "x"]).contains("cursor"));
    assert!(err(&mut c, &["RL.DENY", "d"]).contains("wrong number of arguments"));
    // Without `policies on` the list is off, and says how to turn it on.
    let plain = Server::start();
    let mut p = plain.conn();
    assert_eq!(
        err(&mut p, &["RL.DENY", "k", "1h"]),
        "ERR the deny list is off: load the module with 'policies on'"
    );
}

/// Every key of the list through RL.DENYLIST pages of `count`.
fn scan_all(c: &mut redis::Connection, count: &str) -> Vec<(String, i64, String)> {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let (next, page): (String, Vec<(String, i64, String)>) =
            cmd(&["RL.DENYLIST", &cursor, "COUNT", count])
                .query(c)
                .unwrap();
        assert!(page.len() <= count.parse().unwrap());
        out.extend(page);
        if next == "0" {
            return out;
        }
        cursor = next;
    }
    panic!("the scan did not end");
}

#[test]
fn the_listing_pages_through_every_key_once() {
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    for i in 0..25 {
        ok(
            &mut c,
            &[
                "RL.DENY",
                &format!("user:{i}"),
                &format!("{}s", i + 1),
                "REASON",
                "r",
            ],
        );
    }
    let all = scan_all(&mut c, "10");
    assert_eq!(all.len(), 25);
    let mut keys: Vec<&str> = all.iter().map(|e| e.0.as_str()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 25);
    assert!(all.contains(&("user:4".into(), 5_000, "r".into())));
    // Ended denials are not listed.
    advance(&mut c, 10 * SECOND);
    assert_eq!(scan_all(&mut c, "7").len(), 15);
}

#[test]
fn denials_reach_replicas_with_their_end_and_survive_restarts() {
    // After the server's real time, where an AOF replays: a denial whose
    // end has passed when it replays is over.
    const LATER: u64 = 3_000_000_000 * SECOND;
    let primary = Server::with(
        Config::default()
            .with_policies()
            .arg("appendonly", "yes")
            .arg("aof-use-rdb-preamble", "no"),
    );
    let replica = Server::with(replica_config(&primary).with_policies());
    wait_link_up(&replica);
    let mut p = primary.conn();
    let mut r = replica.conn();
    clock_set(&mut p, LATER);
    clock_set(&mut r, LATER);
    ok(&mut p, &["RL.DENY", "k", "1h", "REASON", "abuse"]);
    ok(&mut p, &["RL.DENY", "gone", "1h"]);
    assert_eq!(int(&mut p, &["RL.UNDENY", "gone"]), 1);
    ok(&mut p, &["RL.DENY", "forever", "FOREVER"]);
    wait_replicas(&mut p, 1);
    // The replica ends the denial at the primary's instant, not an hour
    // after it received it.
    advance(&mut r, 60 * SECOND);
    assert_eq!(denied(&mut r, "k"), Some((3_540_000, "abuse".into())));
    assert_eq!(denied(&mut r, "gone"), None);
    assert_eq!(denied(&mut r, "forever"), Some((-1, String::new())));
    let e = err(&mut r, &["RL.DENY", "x", "1h"]);
    assert!(e.starts_with("READONLY"), "{e}");
    // The AOF replays the denial with its instant.
    let until = (LATER + 3_600 * SECOND).to_string();
    let text = aof_through(&primary, "FOREVER");
    assert!(
        text.contains(&format!("UNTIL\r\n${}\r\n{until}", until.len())),
        "{text}"
    );
    drop(replica);
    let primary = primary.restart();
    let mut p = primary.conn();
    clock_set(&mut p, LATER + 30 * 60 * SECOND);
    assert_eq!(denied(&mut p, "k"), Some((1_800_000, "abuse".into())));
    assert_eq!(denied(&mut p, "gone"), None);
    assert_eq!(decide(&mut p, &["RL.FIXED", "forever", "5", "1m"])[0], 0);
}

#[test]
fn the_list_is_saved_in_the_rdb() {
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    ok(&mut c, &["RL.DENY", "k", "1h", "REASON", "abuse"]);
    ok(&mut c, &["RL.DENY", "forever", "FOREVER"]);
    ok(&mut c, &["SAVE"]);
    let s = s.restart();
    let mut c = s.conn();
    clock_set(&mut c, T0 + 45 * 60 * SECOND);
    assert_eq!(denied(&mut c, "k"), Some((900_000, "abuse".into())));
    assert_eq!(denied(&mut c, "forever"), Some((-1, String::new())));
    // An RDB saved with an empty list loads as none.
    assert_eq!(int(&mut c, &["RL.UNDENY", "k"]), 1);
    assert_eq!(int(&mut c, &["RL.UNDENY", "forever"]), 1);
    ok(&mut c, &["SAVE"]);
    let s = s.restart();
    let mut c = s.conn();
    assert_eq!(scan_all(&mut c, "10"), Vec::new());
}

/// Closed-loop clients on one key, each with several calls in flight
/// (pipelines), while the operator denies and lifts the key: every
/// admitted reply was charged and no denied one was, as the server's own
/// state says; once denied, every call is denied.
#[test]
fn clients_hammering_a_key_while_it_is_denied_are_charged_only_for_admissions() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let mut w = s.conn();
            w.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut admitted = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    let mut pipe = redis::pipe();
                    for _ in 0..8 {
                        pipe.cmd("RL.FIXED").arg("k").arg("100000").arg("1h");
                    }
                    let replies: Vec<Vec<i64>> = pipe.query(&mut w).unwrap();
                    admitted += replies.iter().map(|r| r[0]).sum::<i64>();
                }
                admitted
            })
        })
        .collect();
    for round in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        ok(
            &mut c,
            &["RL.DENY", "k", "1h", "REASON", &format!("round {round}")],
        );
        for _ in 0..10 {
            assert_eq!(decide(&mut c, &["RL.FIXED", "k", "100000", "1h"])[0], 0);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(int(&mut c, &["RL.UNDENY", "k"]), 1);
    }
    stop.store(true, Ordering::Relaxed);
    let admitted: i64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(admitted > 0);
    let peek = decide(&mut c, &["RL.PEEK", "k", "FIXED", "100000", "1h"]);
    assert_eq!(peek[2], 100_000 - admitted, "admitted {admitted}");
    let info = info_field(&mut c, "ratelimit", "ratelimit_deny_list").unwrap();
    assert!(info.starts_with("keys=0,"), "{info}");
}
