//! `INFO ratelimit`'s `ratelimit_leases`: the leases granted and neither
//! released nor past their deadline, counted as the commands change them
//! (RL.ACQUIRE, RL.RELEASE, RL.RENEW, RL.ALL, waiters admitted) and as
//! the manual clock passes their deadlines. Leases last hours: keys expire
//! on the server's real clock, also under the manual one.

mod common;
use common::blocking::*;
use common::*;
use redis::{Connection, Value};

const S: u64 = 1_000_000;
const H: u64 = 3_600 * S;

/// `ratelimit_leases`: [held, granted, released, expired].
fn leases(c: &mut Connection) -> [u64; 4] {
    let text: String = redis::cmd("INFO").arg("ratelimit").query(c).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("ratelimit_leases:"))
        .unwrap_or_else(|| panic!("no ratelimit_leases in {text}"));
    let field = |name: &str| -> u64 {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    [
        field("held"),
        field("granted"),
        field("released"),
        field("expired"),
    ]
}

/// An acquire's lease (`None`: denied).
fn acquire(c: &mut Connection, args: &[&str]) -> Option<String> {
    let v: Vec<Value> = cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert_eq!(v.len(), 6, "{v:?}");
    redis::from_redis_value(v[5].clone()).expect("bulk or nil")
}

fn int(c: &mut Connection, args: &[&str]) -> i64 {
    cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[test]
fn grants_releases_renewals_and_deadlines_are_counted_exactly() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    assert_eq!(leases(&mut c), [0, 0, 0, 0]);
    let a = acquire(&mut c, &["RL.ACQUIRE", "k", "3", "10h"]).unwrap();
    let b = acquire(&mut c, &["RL.ACQUIRE", "k", "3", "10h"]).unwrap();
    let _c = acquire(&mut c, &["RL.ACQUIRE", "k", "3", "10h", "COST", "1"]).unwrap();
    let _d = acquire(&mut c, &["RL.ACQUIRE", "other", "1", "10h"]).unwrap();
    // Denied, and a dry run: nothing held.
    assert_eq!(acquire(&mut c, &["RL.ACQUIRE", "other", "1", "10h"]), None);
    assert_eq!(
        acquire(&mut c, &["RL.ACQUIRE", "fresh", "1", "10h", "DRYRUN"]),
        None
    );
    assert_eq!(leases(&mut c), [4, 4, 0, 0]);
    assert_eq!(int(&mut c, &["RL.RELEASE", "k", &a]), 1);
    assert_eq!(int(&mut c, &["RL.RELEASE", "k", &a]), 0, "a second release");
    assert_eq!(leases(&mut c), [3, 4, 1, 0]);
    // b renewed at 1 h for 20 h: held until 21 h.
    advance(&mut c, H);
    assert_eq!(int(&mut c, &["RL.RENEW", "k", &b, "20h"]), 1);
    assert_eq!(leases(&mut c), [3, 4, 1, 0]);
    advance(&mut c, 9 * H - 1);
    assert_eq!(leases(&mut c), [3, 4, 1, 0], "1 µs before the deadline");
    advance(&mut c, 1);
    assert_eq!(leases(&mut c), [1, 4, 1, 2], "c and d at their deadline");
    advance(&mut c, 11 * H - 1);
    assert_eq!(leases(&mut c), [1, 4, 1, 2]);
    advance(&mut c, 1);
    assert_eq!(leases(&mut c), [0, 4, 1, 3]);
    // An expired lease is neither released nor renewed.
    assert_eq!(int(&mut c, &["RL.RELEASE", "k", &b]), 0);
    assert_eq!(int(&mut c, &["RL.RENEW", "k", &b, "1h"]), 0);
    assert_eq!(leases(&mut c), [0, 4, 1, 3]);
}

#[test]
fn rl_all_counts_its_concurrency_lease_only_when_every_limit_admits() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let all = |limit: &'static str| {
        [
            "RL.ALL",
            "2",
            "rate",
            "inflight",
            "GCRA",
            limit,
            "1h",
            "CONCURRENCY",
            "5",
            "30h",
        ]
    };
    call(&mut c, &all("1")).unwrap();
    assert_eq!(leases(&mut c), [1, 1, 0, 0]);
    // Denied by the rate: the concurrency limit holds nothing more.
    call(&mut c, &all("1")).unwrap();
    assert_eq!(leases(&mut c), [1, 1, 0, 0]);
    advance(&mut c, 30 * H);
    assert_eq!(leases(&mut c), [0, 1, 0, 1]);
}

#[test]
fn a_waiter_admitted_by_a_release_holds_the_lease() {
    let server = Server::start();
    let mut c = server.conn();
    let mut w = server.conn();
    clock_set(&mut c, T0);
    let a = acquire(&mut c, &["RL.ACQUIRE", "k", "1", "10h"]).unwrap();
    send(&mut w, &["RL.ACQUIRE", "k", "1", "10h", "WAIT", "1d"]);
    await_waiting(&mut c, 1);
    assert_eq!(int(&mut c, &["RL.RELEASE", "k", &a]), 1);
    let v: Vec<Value> = redis::from_redis_value(w.recv_response().unwrap()).unwrap();
    let admitted: Option<String> = redis::from_redis_value(v[5].clone()).unwrap();
    assert!(admitted.is_some());
    assert_eq!(leases(&mut c), [1, 2, 1, 0]);
    // The next waiter is admitted when that lease expires.
    send(&mut w, &["RL.ACQUIRE", "k", "1", "10h", "WAIT", "1d"]);
    await_waiting(&mut c, 1);
    advance(&mut c, 10 * H);
    let _ = w.recv_response().unwrap();
    assert_eq!(leases(&mut c), [1, 3, 1, 1]);
}

/// A key deleted outside the module (DEL, FLUSHALL) keeps its leases
/// counted until their deadlines: the module sees no such event.
#[test]
fn leases_of_a_deleted_key_are_counted_until_their_deadlines() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    acquire(&mut c, &["RL.ACQUIRE", "k", "2", "10h"]).unwrap();
    acquire(&mut c, &["RL.ACQUIRE", "k", "2", "10h"]).unwrap();
    int(&mut c, &["DEL", "k"]);
    assert_eq!(leases(&mut c), [2, 2, 0, 0]);
    // The key created anew: its leases are others (a later epoch).
    advance(&mut c, 1);
    acquire(&mut c, &["RL.ACQUIRE", "k", "2", "10h"]).unwrap();
    assert_eq!(leases(&mut c), [3, 3, 0, 0]);
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(leases(&mut c), [3, 3, 0, 0]);
    advance(&mut c, 10 * H - 1);
    assert_eq!(leases(&mut c), [1, 3, 0, 2]);
    advance(&mut c, 1);
    assert_eq!(leases(&mut c), [0, 3, 0, 3]);
}

/// 1,000 times the happy path: 1,000 keys of 3 leases each, half of them
/// released, a third renewed; the count is exact at every step.
#[test]
fn a_thousand_keys_of_leases_are_counted_exactly() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    // The hot-key counters (on by default) hold key names in the same heap.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "ratelimit.hot-key-counters", "0"])
        .query(&mut c)
        .unwrap();
    let heap_before = heap_bytes(&mut c);
    let mut held = Vec::new();
    for k in 0..1_000 {
        let key = format!("k{k}");
        for _ in 0..3 {
            let lease = acquire(&mut c, &["RL.ACQUIRE", &key, "3", "10h"]).unwrap();
            held.push((key.clone(), lease));
        }
    }
    assert_eq!(leases(&mut c), [3_000, 3_000, 0, 0]);
    // The record's memory, one entry per lease held (key names of 2 to 4
    // bytes here), in the module's heap.
    let per_lease = (heap_bytes(&mut c) - heap_before) / 3_000;
    assert!((40..=400).contains(&per_lease), "{per_lease} bytes a lease");
    for (key, lease) in held.iter().step_by(2) {
        assert_eq!(int(&mut c, &["RL.RELEASE", key, lease]), 1);
    }
    assert_eq!(leases(&mut c), [1_500, 3_000, 1_500, 0]);
    // Of the 1,500 left (odd places), those at places 1, 7, 13, ... (a
    // third: 500) renewed for 20 h.
    advance(&mut c, H);
    for (key, lease) in held.iter().skip(1).step_by(6) {
        assert_eq!(int(&mut c, &["RL.RENEW", key, lease, "20h"]), 1);
    }
    advance(&mut c, 9 * H);
    assert_eq!(leases(&mut c), [500, 3_000, 1_500, 1_000]);
    advance(&mut c, 11 * H);
    assert_eq!(leases(&mut c), [0, 3_000, 1_500, 1_500]);
    // Every entry gone with its lease.
    let left = heap_bytes(&mut c).saturating_sub(heap_before);
    assert!(left < 16 * 1024, "{left} bytes left");
}

fn heap_bytes(c: &mut Connection) -> i64 {
    let text: String = redis::cmd("INFO").arg("ratelimit").query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("ratelimit_heap_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no ratelimit_heap_bytes in {text}"))
}

/// Replication carries the effects of lease commands, not the commands:
/// the count is the primary's; a replica holding the same keys counts none.
#[test]
fn the_count_is_the_primarys() {
    use common::topology::{replica_config, wait_link_up, wait_replicas};
    let primary = Server::start();
    let replica = Server::with(replica_config(&primary));
    wait_link_up(&replica);
    let mut p = primary.conn();
    let mut r = replica.conn();
    clock_set(&mut p, T0);
    clock_set(&mut r, T0);
    acquire(&mut p, &["RL.ACQUIRE", "k", "2", "10h"]).unwrap();
    wait_replicas(&mut p, 1);
    assert_eq!(leases(&mut p), [1, 1, 0, 0]);
    assert!(get_bytes(&mut r, "k").is_some(), "the replica has the key");
    assert_eq!(leases(&mut r), [0, 0, 0, 0]);
}
