//! RL.SLIDING EXACT at the operator's bound (`ratelimit.max-log-entries`):
//! with one key's log full, every call reads and writes (INFO ratelimit's
//! `entries`) and replicates its cost plus a binary search, not the log.
//! Manual clock, a one-hour window.

mod common;
use common::*;
use redis::Connection;

const BOUND: u64 = 100_000;
const LIMIT: &str = "100000";

/// INFO ratelimit's count of sliding-log entries read or written.
fn entries(c: &mut Connection) -> u64 {
    let work = topology::info_field(c, "ratelimit", "ratelimit_work").expect("work counters");
    work.split(',')
        .find_map(|f| f.strip_prefix("entries="))
        .and_then(|n| n.parse().ok())
        .expect("entries")
}

/// What a call cost: entries touched and replication bytes.
fn cost_of<R>(c: &mut Connection, call: impl FnOnce(&mut Connection) -> R) -> (R, u64, u64) {
    let (e0, r0) = (entries(c), topology::repl_offset(c));
    let out = call(c);
    (out, entries(c) - e0, topology::repl_offset(c) - r0)
}

/// Entries a call may touch: its cost and a few binary searches over the
/// bound's 17 levels.
fn at_most(cost: u64) -> u64 {
    cost + 5 * (17 + 2)
}

/// Bytes a call may replicate: a few SETRANGEs of the header (and of its
/// stamps, 4 bytes each) and a PEXPIREAT.
fn bytes_at_most(cost: u64) -> u64 {
    300 + 4 * cost
}

#[test]
fn a_full_log_costs_each_call_its_cost_and_a_binary_search() {
    let primary = Server::start();
    let replica = Server::with(topology::replica_config(&primary));
    topology::wait_link_up(&replica);
    let mut p = primary.conn();
    clock_set(&mut p, T0);
    // Fill the log to the bound: 1,000 calls of 100 units, 1 ms apart.
    let mut pipe = redis::pipe();
    for i in 0..1_000u64 {
        pipe.cmd("RL.CLOCK")
            .arg("SET")
            .arg(T0 + i * MS)
            .ignore()
            .cmd("RL.SLIDING")
            .arg("log")
            .arg(LIMIT)
            .arg("1h")
            .arg("COST")
            .arg(100)
            .ignore();
    }
    let _: () = pipe.query(&mut p).expect("the fill");
    let full = T0 + 1_000 * MS;
    clock_set(&mut p, full);
    let strlen: u64 = cmd(&["STRLEN", "log"]).query(&mut p).unwrap();
    assert_eq!(strlen, 22 + 4 * BOUND);
    fn sliding<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        let mut v = vec!["RL.SLIDING", "log", LIMIT, "1h"];
        v.extend_from_slice(extra);
        v
    }
    let mut check = |what: &str, args: Vec<&str>, cost: u64| -> Vec<i64> {
        let (r, e, bytes) = cost_of(&mut p, |c| {
            let reply: Vec<i64> = cmd(&args).query(c).unwrap();
            reply
        });
        println!("{what}: {e} entries, {bytes} replication bytes");
        assert!(e <= at_most(cost), "{what}: {e} entries");
        assert!(bytes <= bytes_at_most(cost), "{what}: {bytes} bytes");
        r
    };
    // Full: a denial, a dry run and a zero cost read only.
    assert_eq!(check("denial", sliding(&[]), 0)[..3], [0, 100_000, 0]);
    assert_eq!(
        check("dry run", sliding(&["DRYRUN"]), 0)[..3],
        [0, 100_000, 0]
    );
    assert_eq!(check("cost 0", sliding(&["COST", "0"]), 0)[0], 1);
    // REFUND 1 moves the header; a charge writes one stamp.
    assert_eq!(
        check("REFUND 1", sliding(&["REFUND", "1"]), 0)[..3],
        [1, 100_000, 1]
    );
    assert_eq!(check("charge", sliding(&[]), 1)[..3], [1, 100_000, 0]);
    assert_eq!(check("REFUND 10", sliding(&["REFUND", "10"]), 0)[2], 10);
    assert_eq!(
        check("PARTIAL", sliding(&["COST", "25", "PARTIAL"]), 10)[2],
        0
    );
    assert_eq!(check("FORCE", sliding(&["COST", "20", "FORCE"]), 20)[0], 0);
    // Another limit: cut (a denial, then a refund that trims the log in
    // the header) and raised back (charges in place).
    let cut = ["RL.SLIDING", "log", "60000", "1h"];
    assert_eq!(check("cut: denial", cut.to_vec(), 0)[..3], [0, 60_000, 0]);
    let mut refund_cut = cut.to_vec();
    refund_cut.extend(["REFUND", "5"]);
    assert_eq!(check("cut: REFUND 5", refund_cut, 0)[..3], [1, 60_000, 5]);
    assert_eq!(
        check("raised: charge", sliding(&["COST", "7"]), 7)[..3],
        [1, 100_000, 39_998]
    );
    // RL.PEEK reads.
    let (r, e, bytes): (Vec<i64>, u64, u64) = cost_of(&mut p, |c| {
        cmd(&["RL.PEEK", "log", "SLIDING", LIMIT, "1h", "EXACT"])
            .query(c)
            .unwrap()
    });
    println!("RL.PEEK: {e} entries, {bytes} replication bytes");
    assert_eq!(r[2], 39_998);
    assert!(e <= at_most(0) && bytes == 0, "{e} {bytes}");
    // The replica holds what the primary does.
    topology::wait_until("the replica to catch up", 10, || {
        let mut r = replica.conn();
        get_bytes(&mut r, "log") == get_bytes(&mut p, "log")
    });
}

#[test]
fn exact_limits_beyond_the_bound_are_refused_naming_the_setting() {
    let s = Server::start();
    let mut c = s.conn();
    let refused = "ERR limit must be at most 100000 with EXACT (ratelimit.max-log-entries)";
    for args in [
        &[&b"RL.SLIDING"[..], b"k", b"100001", b"1m"][..],
        &[b"RL.SLIDING", b"k", b"100001", b"1m", b"EXACT", b"DRYRUN"],
        &[b"RL.ALL", b"1", b"k", b"SLIDING", b"100001", b"1m"],
        &[b"RL.PEEK", b"k", b"SLIDING", b"100001", b"1m"],
    ] {
        assert_eq!(error_of(&mut c, args).1, refused, "{args:?}");
    }
    // APPROX and BUCKETS keep no log: no such bound.
    assert_eq!(
        decide(&mut c, &["RL.SLIDING", "a", "100001", "1m", "APPROX"])[0],
        1
    );
    assert_eq!(
        decide(&mut c, &["RL.SLIDING", "old", "20", "1m", "COST", "20"])[0],
        1
    );
    // The operator sets the bound.
    let _: () = cmd(&["CONFIG", "SET", "ratelimit.max-log-entries", "10"])
        .query(&mut c)
        .unwrap();
    // A log written under the higher bound works with limits within the
    // new one: its 20 entries deny, and a write keeps the newest 10.
    assert_eq!(
        decide(&mut c, &["RL.SLIDING", "old", "10", "1m"])[..3],
        [0, 10, 0]
    );
    assert_eq!(
        decide(&mut c, &["RL.SLIDING", "old", "10", "1m", "REFUND", "1"])[..3],
        [1, 10, 1]
    );
    assert_eq!(
        error_of(&mut c, &[b"RL.SLIDING", b"k", b"11", b"1m"]).1,
        "ERR limit must be at most 10 with EXACT (ratelimit.max-log-entries)"
    );
    assert_eq!(decide(&mut c, &["RL.SLIDING", "k", "10", "1m"])[0], 1);
    assert_eq!(get_bytes(&mut c, "k").map(|v| v[0]), Some(0xAB));
}
