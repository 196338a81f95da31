//! A concurrency key at the operator bound (100,000 leases) on a real
//! server with the manual clock: every call reads and writes O(log n) lease
//! slots (INFO ratelimit's work counter), and what a write replicates is a
//! few slots, never the value.

mod common;

/// The five integers of a decision reply (RL.ACQUIRE adds the lease).
fn decide(c: &mut Connection, args: &[&str]) -> [i64; 5] {
    let v: Vec<Value> = cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let ints: Vec<i64> = v[..5]
        .iter()
        .map(|x| redis::from_redis_value(x.clone()).expect("integer"))
        .collect();
    ints.try_into().expect("five")
}
use common::topology::{self, info_field};
use common::{advance, call, clock_set, cmd, error_of, get_bytes, Server, T0};
use redis::{Connection, Value};

const N: u64 = 100_000;
/// 4·log2(N) + 8.
const SLOTS_BOUND: u64 = 4 * 17 + 8;

fn slots_worked(c: &mut Connection) -> u64 {
    let work = info_field(c, "ratelimit", "ratelimit_work").expect("ratelimit_work");
    work.split(',')
        .find_map(|f| f.strip_prefix("slots="))
        .and_then(|n| n.parse().ok())
        .expect("slots=")
}

/// The slots `args` touched, and its reply.
fn worked(c: &mut Connection, args: &[&str]) -> (u64, Value) {
    let before = slots_worked(c);
    let reply = call(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    (slots_worked(c) - before, reply)
}

fn lease_of(reply: &Value) -> String {
    let Value::Array(v) = reply else {
        panic!("{reply:?}")
    };
    redis::from_redis_value(v[5].clone()).expect("a lease")
}

/// Fills `key` with `n` leases of limit `N`, deadlines an hour from now
/// and a millisecond apart in a scattered order; returns the leases. Sent
/// as raw pipelined RESP, 10,000 commands a round trip, and read back
/// as bytes: a client library's parsing would take longer than the server.
fn fill(port: u16, key: &str, n: u64) -> Vec<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut leases = Vec::new();
    for start in (0..n).step_by(10_000) {
        let batch = (start + 10_000).min(n) - start;
        let mut out = Vec::new();
        for i in start..start + batch {
            let ttl = format!("{}ms", 3_600_000 + (i * 7_919) % N);
            let limit = N.to_string();
            let args = ["RL.ACQUIRE", key, &limit, &ttl];
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
            }
        }
        s.write_all(&out).expect("write");
        // Every reply ends with its lease: `$44\r\n` and 44 digits.
        let mut replies = Vec::new();
        let mut buf = [0u8; 1 << 16];
        let (mut found, mut scanned, mut last) = (0, 0, 0);
        // Until the last lease is read whole, with its `\r\n`.
        while found < batch || replies.len() < last + 5 + 44 + 2 {
            let got = s.read(&mut buf).expect("read");
            assert!(got > 0, "connection closed");
            replies.extend_from_slice(&buf[..got]);
            found += count(&replies, &mut scanned, &mut last) as u64;
        }
        let text = String::from_utf8(replies).expect("ascii");
        leases.extend(text.split("$44\r\n").skip(1).map(|l| l[..44].to_string()));
    }
    leases
}

/// Lease headings `$44\r\n` at `from` or later, read whole; moves `from`
/// past them and `last` to the latest.
fn count(replies: &[u8], from: &mut usize, last: &mut usize) -> usize {
    let mut found = 0;
    while *from + 5 <= replies.len() {
        if replies[*from] == b'$' && &replies[*from..*from + 5] == b"$44\r\n" {
            found += 1;
            *last = *from;
        }
        *from += 1;
    }
    found
}

#[test]
fn every_lease_call_on_a_full_key_touches_o_log_n_slots_and_replicates_a_few() {
    let primary = Server::start();
    let mut c = primary.conn();
    clock_set(&mut c, T0);
    let small = fill(primary.port, "small", 16);
    let started = std::time::Instant::now();
    let leases = fill(primary.port, "big", N);
    assert_eq!(leases.len(), N as usize);
    println!("filled in {:?}", started.elapsed());
    // Attached once full: what it replicates from then on is measured.
    let replica = Server::with(topology::replica_config(&primary));
    topology::wait_link_up(&replica);
    let value_len = get_bytes(&mut c, "big").unwrap().len();
    assert_eq!(value_len, 33 + 32 * N as usize, "32 bytes a lease");
    advance(&mut c, 1_000_000);
    let ttl = "3600s";
    let limit = N.to_string();
    let mut most = 0;
    // RL.PEEK makes five decisions (one unit, none, and what fits).
    let mut check = |what: &str, (slots, reply): (u64, Value)| {
        println!("{what}: {slots} slots");
        let decisions = if what == "RL.PEEK" { 5 } else { 1 };
        assert!(
            slots <= decisions * SLOTS_BOUND,
            "{what}: {slots} slots, {reply:?}"
        );
        most = most.max(slots / decisions);
        reply
    };
    for (i, lease) in leases.iter().enumerate().step_by(9_973) {
        let full = check(
            "denied acquire",
            worked(&mut c, &["RL.ACQUIRE", "big", &limit, ttl]),
        );
        let Value::Array(v) = &full else { panic!() };
        assert_eq!(v[0], Value::Int(0));
        check(
            "denied acquire of 50 units",
            worked(&mut c, &["RL.ACQUIRE", "big", &limit, ttl, "COST", "50"]),
        );
        check(
            "RL.PEEK",
            worked(&mut c, &["RL.PEEK", "big", "CONCURRENCY", &limit, ttl]),
        );
        let renewed = check(
            "renewal",
            worked(
                &mut c,
                &["RL.RENEW", "big", lease, &format!("{}ms", 7_200_000 + i)],
            ),
        );
        assert_eq!(renewed, Value::Int(1));
        let released = check("release", worked(&mut c, &["RL.RELEASE", "big", lease]));
        assert_eq!(released, Value::Int(1));
        let admitted = check(
            "admitted acquire",
            worked(&mut c, &["RL.ACQUIRE", "big", &limit, ttl]),
        );
        let Value::Array(v) = &admitted else { panic!() };
        assert_eq!(v[..3], [Value::Int(1), Value::Int(N as i64), Value::Int(0)]);
        check(
            "RL.ALL dry run",
            worked(
                &mut c,
                &["RL.ALL", "1", "big", "CONCURRENCY", &limit, ttl, "DRYRUN"],
            ),
        );
    }
    assert!(most >= 17, "the tree is walked: {most} slots at most");

    // Replication: bytes per write on 16 leases and on 100,000.
    let per_write = |c: &mut Connection, key: &str, lease: &str| {
        let before = topology::repl_offset(c);
        for i in 0..8 {
            let ttl = format!("{}ms", 5_000_000 + i);
            assert_eq!(
                call(c, &["RL.RENEW", key, lease, &ttl]).unwrap(),
                Value::Int(1)
            );
        }
        (topology::repl_offset(c) - before) / 8
    };
    let few = per_write(&mut c, "small", &small[3]);
    let many = per_write(&mut c, "big", &leases[N as usize / 2]);
    println!("RL.RENEW replication bytes per call: 16 leases: {few}, 100,000 leases: {many}");
    // A SETRANGE of at most SLOTS_BOUND slots, the header and a PEXPIREAT.
    assert!(many <= 80 * SLOTS_BOUND, "{many}");
    assert!(many < value_len as u64 / 100, "{many}");
    topology::wait_replicas(&mut c, 1);
    let mut r = replica.conn();
    assert_eq!(get_bytes(&mut r, "big"), get_bytes(&mut c, "big"));
}

#[test]
fn a_limit_above_the_operator_bound_is_an_error_naming_the_setting() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let err = |c: &mut Connection, args: &[&str]| {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        error_of(c, &bytes).1
    };
    let above = "ERR limit must be at most 100000 (ratelimit.max-leases-per-key)";
    assert_eq!(err(&mut c, &["RL.ACQUIRE", "k", "100001", "1s"]), above);
    assert_eq!(
        err(&mut c, &["RL.ALL", "1", "k", "CONCURRENCY", "100001", "1s"]),
        above
    );
    assert_eq!(
        err(&mut c, &["RL.PEEK", "k", "CONCURRENCY", "100001", "1s"]),
        above
    );
    assert_eq!(decide(&mut c, &["RL.ACQUIRE", "k", "100000", "1s"])[0], 1);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("ratelimit.max-leases-per-key")
        .arg(10)
        .query(&mut c)
        .unwrap();
    assert_eq!(
        err(&mut c, &["RL.ALL", "1", "k", "CONCURRENCY", "11", "1s"]),
        "ERR limit must be at most 10 (ratelimit.max-leases-per-key)"
    );
    assert_eq!(decide(&mut c, &["RL.ACQUIRE", "k", "10", "1s"])[0], 1);
}

#[test]
fn a_lease_of_another_key_is_refused() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let (reply, _) = (
        call(&mut c, &["RL.ACQUIRE", "user:7", "5", "1h"]).unwrap(),
        (),
    );
    let lease = lease_of(&reply);
    assert_eq!(lease.len(), 44);
    let _ = call(&mut c, &["RL.ACQUIRE", "user:486", "5", "1h"]).unwrap();
    let e = error_of(&mut c, &[b"RL.RELEASE", b"user:486", lease.as_bytes()]).1;
    assert_eq!(e, "ERR lease was acquired under another key");
    assert_eq!(
        call(&mut c, &["RL.RELEASE", "user:7", &lease]).unwrap(),
        Value::Int(1)
    );
}

/// A key stored in the earlier layout (tag 0xA9) is read, decided on, and
/// written whole in the current one (tag 0xAA) on its next write.
#[test]
fn a_key_in_the_earlier_layout_is_converted_on_its_next_write() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let mut v = vec![0xA9u8];
    v.extend_from_slice(&(T0 - 1_000).to_le_bytes());
    v.extend_from_slice(&3u64.to_le_bytes());
    v.extend_from_slice(&(T0 + 60_000_000).to_le_bytes());
    for (expiry, cost, seq) in [(T0 + 60_000_000, 2u64, 1u64), (T0 + 30_000_000, 1, 2)] {
        let mut slot = [0u8; 16];
        slot[..7].copy_from_slice(&expiry.to_le_bytes()[..7]);
        slot[7..10].copy_from_slice(&cost.to_le_bytes()[..3]);
        slot[10..16].copy_from_slice(&seq.to_le_bytes()[..6]);
        v.extend_from_slice(&slot);
    }
    let _: () = redis::cmd("SET")
        .arg("old")
        .arg(&v[..])
        .arg("PX")
        .arg(3_600_000)
        .query(&mut c)
        .unwrap();
    // Three units held, the earliest unit free in 30 s: read as it was.
    assert_eq!(
        decide(&mut c, &["RL.ACQUIRE", "old", "3", "1h"]),
        [0, 3, 0, 30_000, 60_000]
    );
    assert_eq!(
        get_bytes(&mut c, "old").unwrap(),
        v,
        "a denial writes nothing"
    );
    assert_eq!(
        decide(&mut c, &["RL.ACQUIRE", "old", "4", "1h"]),
        [1, 4, 0, -1, 3_600_000]
    );
    let now = get_bytes(&mut c, "old").unwrap();
    assert_eq!((now[0], now.len()), (0xAA, 33 + 3 * 32));
    advance(&mut c, 30_000_000);
    assert_eq!(
        decide(&mut c, &["RL.ACQUIRE", "old", "4", "1h"])[..3],
        [1, 4, 0]
    );
}
