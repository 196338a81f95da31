//! Concurrency limits with leases (RL.ACQUIRE, RL.RELEASE, RL.RENEW and
//! RL.ALL's CONCURRENCY) on the manual clock: exact to the microsecond.
//! Leases last hours: keys expire on the server's real clock, also under
//! the manual one, and each key here outlives the test however slow the
//! machine (a key expiring would free its units and wake its line).

mod common;
use common::blocking::*;
use common::*;
use redis::{Connection, Value};

const S: u64 = 1_000_000;
const H: u64 = 3_600 * S;
/// An hour in milliseconds, as replies give times.
const H_MS: i64 = 3_600_000;

/// Runs `f`, with the server's wall clock read just before and just after:
/// a key it wrote got its expiry at a time in between.
fn timed<T>(c: &mut Connection, f: impl FnOnce(&mut Connection) -> T) -> (T, (i64, i64)) {
    let before = server_ms(c);
    let out = f(c);
    (out, (before, server_ms(c)))
}

/// An RL.ACQUIRE reply: the five integers and the lease.
fn acquire(c: &mut Connection, args: &[&str]) -> ([i64; 5], Option<String>) {
    let v: Vec<Value> = cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    reply6(v)
}

fn reply6(v: Vec<Value>) -> ([i64; 5], Option<String>) {
    assert_eq!(v.len(), 6, "{v:?}");
    let ints: Vec<i64> = v[..5]
        .iter()
        .map(|x| redis::from_redis_value(x.clone()).expect("integer"))
        .collect();
    let lease: Option<String> = redis::from_redis_value(v[5].clone()).expect("bulk or nil");
    (ints.try_into().expect("five"), lease)
}

fn int(c: &mut Connection, args: &[&str]) -> i64 {
    cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn release(c: &mut Connection, key: &str, lease: &str) -> i64 {
    int(c, &["RL.RELEASE", key, lease])
}

#[test]
fn acquire_to_the_limit_deny_release_and_acquire_again() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let (r, a) = acquire(&mut c, &["RL.ACQUIRE", "k", "2", "30h"]);
    assert_eq!(r, [1, 2, 1, -1, 30 * H_MS]);
    let a = a.expect("a lease");
    assert_eq!(a.len(), 44);
    advance(&mut c, 10 * H);
    let ((r, b), written) = timed(&mut c, |c| acquire(c, &["RL.ACQUIRE", "k", "2", "30h"]));
    assert_eq!(r, [1, 2, 0, -1, 30 * H_MS]);
    let b = b.expect("b lease");
    assert_ne!(a, b);
    // Full: the earliest lease (a) expires 20 h from now.
    advance(&mut c, 5 * H);
    let (r, none) = acquire(&mut c, &["RL.ACQUIRE", "k", "2", "30h"]);
    assert_eq!((r, none), ([0, 2, 0, 15 * H_MS, 25 * H_MS], None));
    // COST 2 must wait for both; COST 3 never fits.
    let (r, _) = acquire(&mut c, &["RL.ACQUIRE", "k", "2", "30h", "COST", "2"]);
    assert_eq!(r, [0, 2, 0, 25 * H_MS, 25 * H_MS]);
    let (r, _) = acquire(&mut c, &["RL.ACQUIRE", "k", "2", "30h", "COST", "3"]);
    assert_eq!(r, [0, 2, 0, -1, 25 * H_MS]);
    // The key lives as long as its last lease (set by the last write: b,
    // 30 h; denials write nothing).
    assert_expires_after(&mut c, "k", 30 * H_MS, written);
    assert_eq!(release(&mut c, "k", &a), 1);
    assert_eq!(release(&mut c, "k", &a), 0, "a second release");
    let (r, again) = acquire(&mut c, &["RL.ACQUIRE", "k", "2", "30h", "DRYRUN"]);
    assert_eq!((r[0], r[2], again), (1, 0, None));
    let (r, again) = acquire(&mut c, &["RL.ACQUIRE", "k", "2", "30h"]);
    assert_eq!(r[..3], [1, 2, 0]);
    assert!(again.is_some_and(|l| l != a && l != b));
}

#[test]
fn a_lease_is_lost_exactly_at_its_ttl_and_renewal_never_revives_it() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let (_, a) = acquire(&mut c, &["RL.ACQUIRE", "k", "1", "10h"]);
    let a = a.unwrap();
    advance(&mut c, 10 * H - 1);
    let (r, _) = acquire(&mut c, &["RL.ACQUIRE", "k", "1", "10h"]);
    assert_eq!(r, [0, 1, 0, 1, 1], "1 µs before: still held");
    // Renewed for 10 h from now.
    assert_eq!(int(&mut c, &["RL.RENEW", "k", &a, "10h"]), 1);
    advance(&mut c, 10 * H - 1);
    assert_eq!(acquire(&mut c, &["RL.ACQUIRE", "k", "1", "10h"]).0[0], 0);
    advance(&mut c, 1);
    assert_eq!(int(&mut c, &["RL.RENEW", "k", &a, "10h"]), 0, "expired");
    assert_eq!(release(&mut c, "k", &a), 0);
    let (r, b) = acquire(&mut c, &["RL.ACQUIRE", "k", "1", "10h"]);
    assert_eq!(r[0], 1);
    assert_ne!(b.unwrap(), a);
}

#[test]
fn cost_holds_several_units_and_release_frees_them_all() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let (r, a) = acquire(&mut c, &["RL.ACQUIRE", "k", "5", "1h", "COST", "3"]);
    assert_eq!(r, [1, 5, 2, -1, H_MS]);
    assert_eq!(
        acquire(&mut c, &["RL.ACQUIRE", "k", "5", "1h", "COST", "3"]).0[0],
        0
    );
    assert_eq!(release(&mut c, "k", &a.unwrap()), 1);
    let (r, _) = acquire(&mut c, &["RL.ACQUIRE", "k", "5", "1h", "COST", "3"]);
    assert_eq!(r[..3], [1, 5, 2]);
    // COST 0 looks without holding anything.
    let (r, none) = acquire(&mut c, &["RL.ACQUIRE", "k", "5", "1h", "COST", "0"]);
    assert_eq!((r[..3].to_vec(), none), (vec![1, 5, 2], None));
}

#[test]
fn a_lease_from_before_the_key_was_recreated_releases_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let (_, old) = acquire(&mut c, &["RL.ACQUIRE", "k", "1", "1h"]);
    let old = old.unwrap();
    // The key expires (on the manual clock the server's own expiry does
    // not follow; delete it as its expiry would).
    advance(&mut c, H);
    let _: i64 = redis::cmd("DEL").arg("k").query(&mut c).unwrap();
    let (r, new) = acquire(&mut c, &["RL.ACQUIRE", "k", "1", "1h"]);
    assert_eq!(r[0], 1);
    let new = new.unwrap();
    assert_ne!(new, old);
    assert_eq!(release(&mut c, "k", &old), 0);
    assert_eq!(acquire(&mut c, &["RL.ACQUIRE", "k", "1", "1h"]).0[0], 0);
    assert_eq!(release(&mut c, "k", &new), 1);
}

#[test]
fn bad_leases_and_keys_are_errors_that_change_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let (_, a) = acquire(&mut c, &["RL.ACQUIRE", "k", "1", "1h"]);
    let a = a.unwrap();
    let before = get_bytes(&mut c, "k");
    let err = |c: &mut Connection, args: &[&str]| {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        error_of(c, &bytes).1
    };
    let malformed = "ERR lease must be 44 lowercase hex digits, as RL.ACQUIRE returns it";
    assert_eq!(err(&mut c, &["RL.RELEASE", "k", "nope"]), malformed);
    assert_eq!(
        err(&mut c, &["RL.RELEASE", "k", &a.to_uppercase()]),
        malformed
    );
    assert_eq!(err(&mut c, &["RL.RENEW", "k", &a[1..], "1h"]), malformed);
    assert_eq!(
        err(&mut c, &["RL.RELEASE", "other", &a]),
        "ERR lease was acquired under another key"
    );
    assert_eq!(
        err(&mut c, &["RL.RENEW", "k", &a, "0"]),
        "ERR ttl must be a positive integer with an optional unit ms, s, m, h or d"
    );
    assert_eq!(
        err(&mut c, &["RL.ACQUIRE", "k", "0", "1h"]),
        "ERR limit must be an integer from 1 to 9223372036854775807"
    );
    assert_eq!(
        err(&mut c, &["RL.ACQUIRE", "k", "100001", "1h"]),
        "ERR limit must be at most 100000 (ratelimit.max-leases-per-key)"
    );
    let _: () = redis::cmd("SET").arg("g").arg("x").query(&mut c).unwrap();
    let g_lease = format!("{}{}", &a[..32], "0".repeat(12));
    let e = err(&mut c, &["RL.RELEASE", "g", &g_lease]);
    assert!(
        e == "ERR lease was acquired under another key"
            || e == "WRONGTYPE key holds a string that is not RL.ACQUIRE state",
        "{e}"
    );
    assert_eq!(
        err(&mut c, &["RL.ACQUIRE", "g", "1", "1h"]),
        "WRONGTYPE key holds a string that is not RL.ACQUIRE state"
    );
    let _ = decide(&mut c, &["RL.GCRA", "gc", "1", "1h"]);
    assert_eq!(
        err(&mut c, &["RL.ACQUIRE", "gc", "1", "1h"]),
        "WRONGTYPE key holds RL.GCRA state, not RL.ACQUIRE state"
    );
    assert_eq!(get_bytes(&mut c, "k"), before);
    // A well-formed lease never issued is simply not held.
    let unknown = format!("{}{}", "0".repeat(32), &a[32..]);
    assert_eq!(release(&mut c, "k", &unknown), 0);
    let check = lease_check(&mut c, "missing");
    let unknown = format!("{}{check}", "0".repeat(32));
    assert_eq!(release(&mut c, "missing", &unknown), 0);
}

/// The check digits the server puts in leases of `key` (from a lease it
/// hands out on a scratch key of the same name in another database).
fn lease_check(c: &mut Connection, key: &str) -> String {
    let _: () = redis::cmd("SELECT").arg(9).query(c).unwrap();
    let (_, l) = acquire(c, &["RL.ACQUIRE", key, "1", "1h"]);
    let _: () = redis::cmd("FLUSHDB").query(c).unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(c).unwrap();
    l.unwrap()[32..].to_string()
}

#[test]
fn resp3_is_a_map_with_the_lease() {
    let server = Server::start();
    let mut c = server.conn_resp3();
    clock_set(&mut c, T0);
    let v: Value = cmd(&["RL.ACQUIRE", "k", "1", "1h"]).query(&mut c).unwrap();
    let fields = resp3_map(v);
    assert_eq!(
        names(&fields),
        [
            "allowed",
            "limit",
            "remaining",
            "retry_after_ms",
            "reset_after_ms",
            "lease"
        ]
    );
    let v: Value = cmd(&["RL.ACQUIRE", "k", "1", "1h"]).query(&mut c).unwrap();
    assert_eq!(resp3_map(v)[5].1, Value::Nil);
}

#[test]
fn rl_all_with_gcra_and_concurrency_admits_only_if_both_do() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let all = [
        "RL.ALL",
        "2",
        "{u:7}:rate",
        "{u:7}:inflight",
        "GCRA",
        "2",
        "1h",
        "CONCURRENCY",
        "1",
        "30h",
    ];
    let v: Vec<Value> = cmd(&all).query(&mut c).unwrap();
    assert_eq!(v.len(), 5);
    let head: Vec<i64> = v[..3]
        .iter()
        .map(|x| redis::from_redis_value(x.clone()).unwrap())
        .collect();
    assert_eq!(head, [1, -1, -1]);
    let rate: Vec<i64> = redis::from_redis_value(v[3].clone()).unwrap();
    assert_eq!(rate.len(), 5);
    let inflight: Vec<Value> = redis::from_redis_value(v[4].clone()).unwrap();
    let (r, lease) = reply6(inflight);
    assert_eq!(r, [1, 1, 0, -1, 30 * H_MS]);
    let lease = lease.unwrap();
    // Denied by the concurrency limit: nothing written, not even the rate.
    let rate_before = get_bytes(&mut c, "{u:7}:rate");
    let v: Vec<Value> = cmd(&all).query(&mut c).unwrap();
    let head: Vec<i64> = v[..3]
        .iter()
        .map(|x| redis::from_redis_value(x.clone()).unwrap())
        .collect();
    assert_eq!(head, [0, 1, 30 * H_MS]);
    let (_, none) = reply6(redis::from_redis_value(v[4].clone()).unwrap());
    assert_eq!(none, None);
    assert_eq!(get_bytes(&mut c, "{u:7}:rate"), rate_before);
    // Released: admitted again (the rate allows 2 an hour)...
    assert_eq!(release(&mut c, "{u:7}:inflight", &lease), 1);
    let v: Vec<Value> = cmd(&all).query(&mut c).unwrap();
    let (r, lease) = reply6(redis::from_redis_value(v[4].clone()).unwrap());
    assert_eq!(r[0], 1);
    assert_eq!(release(&mut c, "{u:7}:inflight", &lease.unwrap()), 1);
    // ...then denied by the rate: no lease taken.
    let inflight_before = get_bytes(&mut c, "{u:7}:inflight");
    let v: Vec<Value> = cmd(&all).query(&mut c).unwrap();
    let head: Vec<i64> = v[..3]
        .iter()
        .map(|x| redis::from_redis_value(x.clone()).unwrap())
        .collect();
    assert_eq!(head[..2], [0, 0]);
    assert_eq!(get_bytes(&mut c, "{u:7}:inflight"), inflight_before);
}

#[test]
fn a_waiter_is_admitted_by_a_release_at_once_and_by_an_expiry_on_time() {
    let server = Server::start();
    let mut c = server.conn();
    let mut w = server.conn();
    clock_set(&mut c, T0);
    let (_, a) = acquire(&mut c, &["RL.ACQUIRE", "k", "1", "10h"]);
    send(&mut w, &["RL.ACQUIRE", "k", "1", "10h", "WAIT", "1d"]);
    await_waiting(&mut c, 1);
    // A release hands the unit to the waiter with no clock movement.
    assert_eq!(release(&mut c, "k", &a.unwrap()), 1);
    assert_eq!(waiting(&mut c), 0);
    let (r, b) = reply6(redis::from_redis_value(w.recv_response().unwrap()).unwrap());
    assert_eq!(r, [1, 1, 0, -1, 10 * H_MS]);
    let b = b.unwrap();
    // Nobody else got in ahead of it.
    assert_eq!(acquire(&mut c, &["RL.ACQUIRE", "k", "1", "10h"]).0[0], 0);
    // The next waiter is admitted when b expires, 10 h later, to the µs.
    send(&mut w, &["RL.ACQUIRE", "k", "1", "10h", "WAIT", "1d"]);
    await_waiting(&mut c, 1);
    advance(&mut c, 10 * H - 1);
    assert_eq!(waiting(&mut c), 1, "1 µs early: still waiting");
    advance(&mut c, 1);
    assert_eq!(waiting(&mut c), 0);
    let (r, d) = reply6(redis::from_redis_value(w.recv_response().unwrap()).unwrap());
    assert_eq!(r, [1, 1, 0, -1, 10 * H_MS]);
    assert_ne!(d.unwrap(), b);
    assert_eq!(release(&mut c, "k", &b), 0, "b expired");
}

/// Acquires, a release, a renewal and a released waiter reach two replicas
/// and the AOF as effects; all hold the same bytes; a promoted replica
/// honours the leases held before the failover.
#[test]
fn replicas_and_aof_hold_the_same_leases_and_a_promoted_replica_honours_them() {
    use common::topology::{kill9, replica_config, wait_link_up, wait_replicas};
    let mut primary = Server::with(Config::default().arg("appendonly", "yes"));
    let r1 = Server::with(replica_config(&primary));
    let r2 = Server::with(replica_config(&primary));
    wait_link_up(&r1);
    wait_link_up(&r2);
    let mut p = primary.conn();
    for s in [&primary, &r1, &r2] {
        clock_set(&mut s.conn(), T0);
    }
    let (_, a) = acquire(&mut p, &["RL.ACQUIRE", "k", "3", "1h"]);
    let (_, b) = acquire(&mut p, &["RL.ACQUIRE", "k", "3", "1h", "COST", "2"]);
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(acquire(&mut p, &["RL.ACQUIRE", "k", "3", "1h"]).0[0], 0);
    assert_eq!(int(&mut p, &["RL.RENEW", "k", &b, "2h"]), 1);
    let mut w = primary.conn();
    send(&mut w, &["RL.ACQUIRE", "k", "3", "1h", "WAIT", "1m"]);
    await_waiting(&mut p, 1);
    assert_eq!(release(&mut p, "k", &a), 1);
    let (r, c) = reply6(redis::from_redis_value(w.recv_response().unwrap()).unwrap());
    assert_eq!(r[0], 1);
    let c = c.unwrap();
    wait_replicas(&mut p, 2);
    let value = get_bytes(&mut p, "k");
    let d = digest(&mut p);
    for r in [&r1, &r2] {
        let mut rc = r.conn();
        assert_eq!(get_bytes(&mut rc, "k"), value);
        assert_eq!(digest(&mut rc), d);
    }
    // The AOF replays to the same state.
    let restarted = primary.restart();
    assert_eq!(get_bytes(&mut restarted.conn(), "k"), value);
    primary = restarted;
    kill9(&mut primary);
    // Promoted: b (2 units) and c (1) are held, a is gone.
    let mut n = r1.conn();
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut n)
        .unwrap();
    assert_eq!(
        acquire(&mut n, &["RL.ACQUIRE", "k", "3", "1h"]).0[..3],
        [0, 3, 0]
    );
    assert_eq!(release(&mut n, "k", &a), 0);
    assert_eq!(release(&mut n, "k", &c), 1);
    assert_eq!(
        acquire(&mut n, &["RL.ACQUIRE", "k", "3", "1h"]).0[..3],
        [1, 3, 0]
    );
    assert_eq!(release(&mut n, "k", &b), 1);
}

#[test]
fn a_waiter_waits_for_a_release_even_when_the_expiry_is_beyond_its_timeout() {
    let server = Server::start();
    let mut c = server.conn();
    let mut w = server.conn();
    clock_set(&mut c, T0);
    let (_, a) = acquire(&mut c, &["RL.ACQUIRE", "k", "1", "1h"]);
    // The lease expires in an hour; the waiter gives up after 5 s.
    send(&mut w, &["RL.ACQUIRE", "k", "1", "1h", "WAIT", "5s"]);
    await_waiting(&mut c, 1);
    advance(&mut c, 5 * S);
    assert_eq!(waiting(&mut c), 0);
    let (r, none) = reply6(redis::from_redis_value(w.recv_response().unwrap()).unwrap());
    assert_eq!((r[0], r[3], none), (0, 3_595_000, None));
    // The next one is admitted by a release within its timeout.
    send(&mut w, &["RL.ACQUIRE", "k", "1", "1h", "WAIT", "5s"]);
    await_waiting(&mut c, 1);
    advance(&mut c, S);
    assert_eq!(release(&mut c, "k", &a.unwrap()), 1);
    let (r, lease) = reply6(redis::from_redis_value(w.recv_response().unwrap()).unwrap());
    assert_eq!((r[0], lease.is_some()), (1, true));
}

#[test]
fn a_lease_can_be_released_and_renewed_over_maxmemory() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let (_, a) = acquire(&mut c, &["RL.ACQUIRE", "k", "1", "1h"]);
    let a = a.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let err = cmd(&["RL.ACQUIRE", "k2", "1", "1h"])
        .query::<Value>(&mut c)
        .unwrap_err();
    assert_eq!(err.code(), Some("OOM"));
    assert_eq!(int(&mut c, &["RL.RENEW", "k", &a, "2h"]), 1);
    assert_eq!(release(&mut c, "k", &a), 1);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query(&mut c)
        .unwrap();
}

#[test]
fn a_release_keeps_the_key_until_the_latest_deadline_handed_out() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    // The manual clock stands still: each write sets the key's expiry to
    // the latest deadline's distance from now, on the wall clock.
    let (_, a) = acquire(&mut c, &["RL.ACQUIRE", "k", "2", "30m"]);
    let (_, b) = acquire(&mut c, &["RL.ACQUIRE", "k", "2", "1h"]);
    let (released, written) = timed(&mut c, |c| release(c, "k", &a.unwrap()));
    assert_eq!(released, 1);
    assert_expires_after(&mut c, "k", H_MS, written);
    let (released, written) = timed(&mut c, |c| release(c, "k", &b.unwrap()));
    assert_eq!(released, 1, "released, the key still lives to b's deadline");
    assert_expires_after(&mut c, "k", H_MS, written);
    // A renewal past it moves it on.
    let (_, d) = acquire(&mut c, &["RL.ACQUIRE", "k", "2", "30m"]);
    let (renewed, written) = timed(&mut c, |c| int(c, &["RL.RENEW", "k", &d.unwrap(), "2h"]));
    assert_eq!(renewed, 1);
    assert_expires_after(&mut c, "k", 2 * H_MS, written);
}

/// Hostile leases and TTLs: every reply is an error that changes nothing,
/// or 0/1; the server stays up and every key keeps a TTL.
#[test]
fn hostile_release_and_renew_arguments_never_crash_or_change_anything_on_error() {
    use rand::{Rng, SeedableRng};
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let (_, a) = acquire(&mut c, &["RL.ACQUIRE", "k", "5", "1h"]);
    let a = a.unwrap().into_bytes();
    let _ = decide(&mut c, &["RL.GCRA", "g", "5", "1d"]);
    let _: () = redis::cmd("RPUSH").arg("l").arg("x").query(&mut c).unwrap();
    let hostile: &[&[u8]] = &[
        b"",
        b"0",
        b"-1",
        b"1.5",
        b"1e3",
        b"\xff\xfe",
        b"\r\n",
        b"9223372036854775807",
        b"18446744073709551616",
        b"36501d",
        b"1ms",
        b"1h",
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    // Answered 0, 1, an error.
    let mut answered = [0; 3];
    for _ in 0..3_000 {
        let mut lease = a.clone();
        match rng.gen_range(0..5) {
            0 => lease = hostile[rng.gen_range(0..hostile.len())].to_vec(),
            4 => {} // the real lease
            1 => {
                let i = rng.gen_range(0..lease.len());
                lease[i] = rng.gen();
            }
            2 => lease.truncate(rng.gen_range(0..lease.len())),
            _ => lease.push(b'0'),
        }
        let key: &[u8] = [&b"k"[..], b"g", b"l", b"none"][rng.gen_range(0..4)];
        let name = ["RL.RELEASE", "RL.RENEW"][rng.gen_range(0..2)];
        let mut command = redis::cmd(name);
        command.arg(key).arg(&lease[..]);
        if name == "RL.RENEW" {
            command.arg(hostile[rng.gen_range(0..hostile.len())]);
        }
        // The key's dump before and after, in one transaction with the
        // call: a renewal may have left it a millisecond to live, and no
        // key expires during EXEC.
        let (before, reply, after) = dumped_around(&mut c, key, &command);
        match reply {
            Value::Int(n) => {
                assert!(n == 0 || n == 1);
                answered[n as usize] += 1;
            }
            Value::ServerError(e) => {
                answered[2] += 1;
                assert!(matches!(e.code(), "ERR" | "WRONGTYPE"), "{e:?}");
                assert_eq!(after, before, "{e:?}");
            }
            other => panic!("{other:?}"),
        }
    }
    let _: () = redis::cmd("PING").query(&mut c).unwrap();
    assert!(answered.iter().all(|&n| n > 0), "{answered:?}");
    assert!(pttl(&mut c, "k") > 0);
}

/// `DUMP key`, `command` and `DUMP key` in one MULTI/EXEC: their replies,
/// the command's error as a value.
fn dumped_around(c: &mut Connection, key: &[u8], command: &redis::Cmd) -> (Value, Value, Value) {
    redis::pipe()
        .atomic()
        .ignore_errors()
        .cmd("DUMP")
        .arg(key)
        .add_command(command.clone())
        .cmd("DUMP")
        .arg(key)
        .query(c)
        .unwrap()
}
