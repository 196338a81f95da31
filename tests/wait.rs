//! `WAIT timeout`: blocking until admission, first come first served, on
//! the manual clock (exact, never sleeping): due times to the microsecond,
//! FIFO across costs, requests without WAIT held behind waiters, timeouts,
//! disconnects and CLIENT UNBLOCK, MULTI and EVAL deciding without blocking,
//! RL.ALL, INFO.

mod common;
use common::blocking::*;
use common::topology::info_field;
use common::*;
use redis::{Connection, Value};

const S: u64 = 1_000_000;
const H: u64 = 3_600 * S;

fn waits_field(c: &mut Connection, name: &str) -> u64 {
    let dict = info_field(c, "ratelimit", "ratelimit_waits").expect("ratelimit_waits");
    dict.split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {dict}"))
}

fn client_id(c: &mut Connection) -> i64 {
    redis::cmd("CLIENT").arg("ID").query(c).expect("CLIENT ID")
}

/// One per second, no burst.
const GCRA: [&str; 3] = ["RL.GCRA", "1", "1s"];

fn gcra(key: &str, extra: &[&str]) -> Vec<String> {
    let mut v = vec![GCRA[0].to_string(), key.to_string()];
    v.extend(GCRA[1..].iter().map(|s| s.to_string()));
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `RL.GCRA key 1 1s`, its key then kept without a TTL (in one
/// transaction): its state lives a second of wall clock, which setting up
/// waiters may take on a loaded machine; the module never reads a TTL, and
/// its next write sets one again.
fn prime(ctl: &mut Connection, key: &str) -> [i64; 5] {
    let decide = gcra(key, &[]);
    let replies = atomically(ctl, &[&strs(&decide), &["PERSIST", key]]);
    five(&replies[0])
}

#[test]
fn a_waiter_is_admitted_exactly_at_its_due_time() {
    let server = Server::start();
    let mut ctl = server.conn();
    let mut w = server.conn();
    clock_set(&mut ctl, T0);
    assert_eq!(prime(&mut ctl, "k")[0], 1);
    send(&mut w, &strs(&gcra("k", &["WAIT", "5s"])));
    await_waiting(&mut ctl, 1);
    // Other clients are served meanwhile.
    assert_eq!(decide(&mut ctl, &strs(&gcra("other", &[])))[0], 1);
    advance(&mut ctl, S - 1);
    assert_eq!(waiting(&mut ctl), 1, "1 µs early: still waiting");
    // The admission writes the key (a second of wall clock to live): kept
    // without a TTL in the same transaction, for the look after it.
    atomically(
        &mut ctl,
        &[&["RL.CLOCK", "ADVANCE", "1"], &["PERSIST", "k"]],
    );
    assert_eq!(waiting(&mut ctl), 0);
    assert_eq!(recv5(&mut w), [1, 1, 0, -1, 1000]);
    // The admission was charged at its moment: the next slot is 1 s later.
    assert_eq!(
        decide(&mut ctl, &strs(&gcra("k", &[]))),
        [0, 1, 0, 1000, 1000]
    );
    assert_eq!(waits_field(&mut ctl, "admitted"), 1);
    assert_eq!(waits_field(&mut ctl, "waited_us"), S);
}

#[test]
fn admitted_at_once_or_denied_at_once() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    // One an hour: the key outlives the test on the wall clock.
    let hourly = |wait: &[&'static str]| [&["RL.GCRA", "k", "1", "1h"][..], wait].concat();
    // Admitted: the reply at once, as without WAIT.
    assert_eq!(decide(&mut c, &hourly(&["WAIT", "1h"]))[0], 1);
    // The wait (1 h) is longer than the timeout: denied at once.
    assert_eq!(
        decide(&mut c, &hourly(&["WAIT", "3599999ms"])),
        [0, 1, 0, 3_600_000, 3_600_000]
    );
    // Never admittable (cost above the limit): denied at once.
    assert_eq!(decide(&mut c, &hourly(&["COST", "2", "WAIT", "1d"]))[3], -1);
    assert_eq!(waiting(&mut c), 0);
}

#[test]
fn three_waiters_are_admitted_in_arrival_order_whatever_their_costs() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    // 10 tokens, one more an hour (the key outlives the test on the wall
    // clock; expiring, it would wake the line): empty it.
    let bucket = |cost: &str, wait: Option<&str>| {
        let mut v = vec!["RL.BUCKET", "k", "10", "1", "1h", "COST", cost];
        if let Some(w) = wait {
            v.extend(["WAIT", w]);
        }
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    assert_eq!(decide(&mut ctl, &strs(&bucket("10", None)))[0], 1);
    let mut waiters: Vec<Connection> = (0..3).map(|_| server.conn()).collect();
    for (i, (w, cost)) in waiters.iter_mut().zip(["5", "1", "3"]).enumerate() {
        send(w, &strs(&bucket(cost, Some("1d"))));
        await_waiting(&mut ctl, i as u64 + 1);
    }
    // The 1-token waiter would fit after 1 h, but it came second.
    advance(&mut ctl, 5 * H - 1);
    assert_eq!(waiting(&mut ctl), 3);
    advance(&mut ctl, 1);
    assert_eq!(waiting(&mut ctl), 2);
    assert_eq!(recv5(&mut waiters[0])[0], 1);
    advance(&mut ctl, H);
    assert_eq!(recv5(&mut waiters[1])[0], 1);
    advance(&mut ctl, 3 * H - 1);
    assert_eq!(waiting(&mut ctl), 1);
    advance(&mut ctl, 1);
    assert_eq!(recv5(&mut waiters[2]), [1, 10, 0, -1, 36_000_000]);
}

#[test]
fn a_request_without_wait_is_denied_while_it_would_delay_a_waiter() {
    let server = Server::start();
    let mut ctl = server.conn();
    let mut w = server.conn();
    clock_set(&mut ctl, T0);
    prime(&mut ctl, "k");
    send(&mut w, &strs(&gcra("k", &["WAIT", "5s"])));
    await_waiting(&mut ctl, 1);
    // Behind the waiter (due at 1 s), the next slot is at 2 s.
    assert_eq!(
        decide(&mut ctl, &strs(&gcra("k", &[]))),
        [0, 1, 0, 2000, 1000]
    );
    // A second waiter with too short a timeout is denied at once.
    assert_eq!(
        decide(&mut ctl, &strs(&gcra("k", &["WAIT", "1s"])))[3],
        2000
    );
    advance(&mut ctl, S);
    assert_eq!(recv5(&mut w)[0], 1);
}

#[test]
fn a_deadline_passing_first_ends_the_wait_with_a_denial() {
    let server = Server::start();
    let mut ctl = server.conn();
    let (mut w1, mut w2) = (server.conn(), server.conn());
    clock_set(&mut ctl, T0);
    prime(&mut ctl, "k");
    send(&mut w1, &strs(&gcra("k", &["WAIT", "10s"])));
    await_waiting(&mut ctl, 1);
    send(&mut w2, &strs(&gcra("k", &["WAIT", "2s"])));
    await_waiting(&mut ctl, 2);
    // The key's state is replaced behind the queue's back with one whose
    // next slot is at 3 s: the head (due at 1 s) is denied and waits on.
    atomically(
        &mut ctl,
        &[
            &["RL.GCRA", "slow", "1", "3s"],
            &["COPY", "slow", "k", "REPLACE"],
            &["PERSIST", "k"],
        ],
    );
    advance(&mut ctl, 2 * S - 1);
    assert_eq!(waiting(&mut ctl), 2);
    // w2's deadline (2 s) passes with w1 still ahead of it: denied, told
    // to come back after w1's slot (3 s) and its own (4 s).
    advance(&mut ctl, 1);
    assert_eq!(recv5(&mut w2), [0, 1, 0, 2000, 1000]);
    assert_eq!(waiting(&mut ctl), 1);
    advance(&mut ctl, S);
    assert_eq!(recv5(&mut w1)[0], 1);
    assert_eq!(waits_field(&mut ctl, "timed_out"), 1);
    assert_eq!(waits_field(&mut ctl, "admitted"), 1);
}

#[test]
fn a_disconnect_gives_the_place_up_and_the_next_waiter_is_admitted() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    // One token an hour: the key outlives the test on the wall clock.
    let bucket = |cost: &str| {
        [
            "RL.BUCKET",
            "k",
            "10",
            "1",
            "1h",
            "COST",
            cost,
            "WAIT",
            "1d",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };
    decide(&mut ctl, &["RL.BUCKET", "k", "10", "1", "1h", "COST", "10"]);
    let mut w1 = server.conn();
    let mut w2 = server.conn();
    send(&mut w1, &strs(&bucket("8")));
    await_waiting(&mut ctl, 1);
    send(&mut w2, &strs(&bucket("2")));
    await_waiting(&mut ctl, 2);
    advance(&mut ctl, 3 * H);
    assert_eq!(waiting(&mut ctl), 2);
    drop(w1);
    // w2 had 2 tokens since 2 h: admitted as soon as the place is free.
    assert_eq!(recv5(&mut w2)[0], 1);
    assert_eq!(waiting(&mut ctl), 0);
    assert_eq!(waits_field(&mut ctl, "abandoned"), 1);
    // The abandoned request charged nothing: 1 token left (3 - 2).
    assert_eq!(
        decide(&mut ctl, &["RL.BUCKET", "k", "10", "1", "1h", "COST", "0"])[2],
        1
    );
}

#[test]
fn client_unblock_ends_a_wait_with_the_timeout_denial_or_an_error() {
    let server = Server::start();
    let mut ctl = server.conn();
    if !client_unblock_allowed(&mut ctl) {
        eprintln!("skipped: this server refuses CLIENT UNBLOCK of a waiter (INFO ratelimit_client_unblock:no)");
        return;
    }
    clock_set(&mut ctl, T0);
    prime(&mut ctl, "k");
    let mut w1 = server.conn();
    let mut w2 = server.conn();
    let id1 = client_id(&mut w1);
    let id2 = client_id(&mut w2);
    send(&mut w1, &strs(&gcra("k", &["WAIT", "1m"])));
    await_waiting(&mut ctl, 1);
    send(&mut w2, &strs(&gcra("k", &["WAIT", "1m"])));
    await_waiting(&mut ctl, 2);
    advance(&mut ctl, S / 4);
    let unblocked: i64 = redis::cmd("CLIENT")
        .arg("UNBLOCK")
        .arg(id1)
        .query(&mut ctl)
        .unwrap();
    assert_eq!(unblocked, 1);
    // The timeout's denial, as of now: after w2, now first (1 s), the
    // next slot is at 2 s, 1750 ms away.
    assert_eq!(recv5(&mut w1), [0, 1, 0, 1750, 750]);
    let unblocked: i64 = redis::cmd("CLIENT")
        .arg("UNBLOCK")
        .arg(id2)
        .arg("ERROR")
        .query(&mut ctl)
        .unwrap();
    assert_eq!(unblocked, 1);
    // Redis's error for an unblocked blocking command.
    let reply = match w2.recv_response() {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("{e:?}"),
    };
    assert!(reply.contains("UNBLOCKED"), "{reply}");
    assert_eq!(waiting(&mut ctl), 0);
    // Both connections still work, and nothing was charged.
    assert_eq!(
        decide(&mut w1, &strs(&gcra("k", &["COST", "0"]))),
        [1, 1, 0, -1, 750]
    );
}

#[test]
fn wait_inside_multi_and_eval_decides_without_blocking() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    decide(&mut c, &strs(&gcra("k", &[])));
    let (r,): (Vec<i64>,) = redis::pipe()
        .atomic()
        .cmd("RL.GCRA")
        .arg(&["k", "1", "1s", "WAIT", "5s"])
        .query(&mut c)
        .unwrap();
    assert_eq!(r, [0, 1, 0, 1000, 1000]);
    let r: Vec<i64> = redis::cmd("EVAL")
        .arg("return redis.call('RL.GCRA', KEYS[1], '1', '1s', 'WAIT', '5s')")
        .arg(1)
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, [0, 1, 0, 1000, 1000]);
    assert_eq!(waiting(&mut c), 0);
}

#[test]
fn rl_all_waits_for_the_slowest_limit() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    // Periods of hours: the keys outlive the test on the wall clock (one
    // expiring would wake the line).
    let all = [
        "RL.ALL", "2", "a", "b", "BUCKET", "10", "1", "1h", "GCRA", "1", "3h",
    ];
    // a: a token in 1 h; b: its next slot in 3 h.
    decide(&mut ctl, &["RL.BUCKET", "a", "10", "1", "1h", "COST", "10"]);
    decide(&mut ctl, &["RL.GCRA", "b", "1", "3h"]);
    let mut w = server.conn();
    let mut args = all.to_vec();
    args.extend(["COST", "1", "WAIT", "10h"]);
    send(&mut w, &args);
    await_waiting(&mut ctl, 1);
    advance(&mut ctl, 3 * H - 1);
    assert_eq!(waiting(&mut ctl), 1);
    advance(&mut ctl, 1);
    let v: Vec<Value> = redis::from_redis_value(w.recv_response().unwrap()).unwrap();
    assert_eq!(v[0], Value::Int(1));
    assert_eq!(waiting(&mut ctl), 0);
}

#[test]
fn bad_wait_arguments_name_wait_and_block_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    for bad in [
        &["WAIT"][..],
        &["WAIT", "0"],
        &["WAIT", "-1"],
        &["WAIT", "soon"],
        &["WAIT", "36501d"],
        &["WAIT", "1s", "WAIT", "2s"],
    ] {
        for base in [
            &["RL.GCRA", "k", "1", "1s"][..],
            &["RL.ALL", "1", "k", "GCRA", "1", "1s"],
        ] {
            let args: Vec<&[u8]> = base.iter().chain(bad).map(|s| s.as_bytes()).collect();
            let (code, msg) = error_of(&mut c, &args);
            assert_eq!(code, "ERR", "{args:?}");
            assert!(msg.contains("WAIT"), "{args:?}: {msg}");
        }
    }
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    assert_eq!(waiting(&mut c), 0);
}

#[test]
fn module_unload_is_refused_while_clients_wait() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    prime(&mut ctl, "k");
    let mut w = server.conn();
    send(&mut w, &strs(&gcra("k", &["WAIT", "5s"])));
    await_waiting(&mut ctl, 1);
    let err = redis::cmd("MODULE")
        .arg("UNLOAD")
        .arg("ratelimit")
        .query::<Value>(&mut ctl)
        .unwrap_err();
    assert!(format!("{err}").contains("blocked clients"), "{err}");
    advance(&mut ctl, S);
    assert_eq!(recv5(&mut w)[0], 1);
}

#[test]
fn info_counts_waits_and_their_calls() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    prime(&mut ctl, "k");
    let mut w = server.conn();
    send(&mut w, &strs(&gcra("k", &["WAIT", "5s"])));
    await_waiting(&mut ctl, 1);
    let field = |c: &mut Connection| info_field(c, "ratelimit", "ratelimit_rl_gcra").unwrap();
    // A waiting call is a call; allowed or denied when it ends.
    assert_eq!(field(&mut ctl), "calls=2,allowed=1,denied=0,errors=0");
    assert_eq!(waits_field(&mut ctl, "started"), 1);
    advance(&mut ctl, 1_500_000);
    recv5(&mut w);
    assert_eq!(field(&mut ctl), "calls=2,allowed=2,denied=0,errors=0");
    assert_eq!(waits_field(&mut ctl, "admitted"), 1);
    // Admitted at its due time (1 s), though the clock jumped to 1.5 s.
    assert_eq!(waits_field(&mut ctl, "waited_us"), S);
    // Counted from the load: Redis's CONFIG RESETSTAT leaves them.
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut ctl)
        .unwrap();
    assert_eq!(waits_field(&mut ctl, "started"), 1);
    assert_eq!(waits_field(&mut ctl, "waited_us"), S);
}

/// `ratelimit_lines`: how many keys have waiters and how long the longest
/// waiting of them has waited, on the limiter clock, as clients arrive and
/// are admitted. Hour-scale limits: the keys outlive the test.
#[test]
fn info_reports_the_lines_and_the_longest_wait() {
    let server = Server::start();
    let mut ctl = server.conn();
    let lines = |c: &mut Connection| info_field(c, "ratelimit", "ratelimit_lines").unwrap();
    assert_eq!(lines(&mut ctl), "count=0,longest_wait_us=0");
    clock_set(&mut ctl, T0);
    let hourly = |key: &str, wait: &str| -> Vec<String> {
        ["RL.GCRA", key, "1", "1h", "WAIT", wait]
            .map(String::from)
            .to_vec()
    };
    for key in ["a", "b"] {
        assert_eq!(decide(&mut ctl, &strs(&hourly(key, "1s")))[0], 1);
    }
    let (mut w1, mut w2, mut w3) = (server.conn(), server.conn(), server.conn());
    send(&mut w1, &strs(&hourly("a", "2h")));
    await_waiting(&mut ctl, 1);
    advance(&mut ctl, 10 * S);
    send(&mut w2, &strs(&hourly("b", "2h")));
    await_waiting(&mut ctl, 2);
    send(&mut w3, &strs(&hourly("a", "3h")));
    await_waiting(&mut ctl, 3);
    // Two keys with waiters; the first arrival has waited 10 s.
    assert_eq!(
        lines(&mut ctl),
        format!("count=2,longest_wait_us={}", 10 * S)
    );
    advance(&mut ctl, 5 * S);
    assert_eq!(
        lines(&mut ctl),
        format!("count=2,longest_wait_us={}", 15 * S)
    );
    // At 1 h the heads of both lines are admitted: the one left (on `a`)
    // arrived at 10 s.
    advance(&mut ctl, H - 15 * S);
    assert_eq!(recv5(&mut w1)[0], 1);
    assert_eq!(recv5(&mut w2)[0], 1);
    assert_eq!(waiting(&mut ctl), 1);
    assert_eq!(
        lines(&mut ctl),
        format!("count=1,longest_wait_us={}", H - 10 * S)
    );
    advance(&mut ctl, H);
    assert_eq!(recv5(&mut w3)[0], 1);
    assert_eq!(lines(&mut ctl), "count=0,longest_wait_us=0");
}

/// The real clock: the module's one timer admits a waiter and times one
/// out, with no RL.CLOCK. The outcomes are the proof, not how long they
/// took: a waiter the timer missed would be denied at its deadline (an
/// hour away) or still waiting when the read gives up (a hang guard).
#[test]
fn real_clock_the_timer_admits_and_times_out() {
    let server = Server::with(Config::real_clock());
    let mut c = server.conn();
    let mut w = server.conn();
    w.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    // Charged, then a waiter at once (one pipeline: nothing between the
    // two but the server): its slot is due within the second, its
    // deadline an hour away.
    let limit = ["RL.GCRA", "rk", "1", "1s"];
    let mut args = limit.to_vec();
    args.extend(["WAIT", "1h"]);
    let (first, waited): (Vec<i64>, Vec<i64>) = redis::pipe()
        .add_command(cmd(&limit))
        .add_command(cmd(&args))
        .query(&mut w)
        .unwrap();
    assert_eq!((first[0], waited[0]), (1, 1));
    // A head whose slot is moved an hour away behind its back: its deadline
    // comes first. Queued with its slot due in 2 s and its deadline in 3 s;
    // the move lands well within the 2 s.
    let limit = ["RL.GCRA", "rk2", "1", "2s"];
    assert_eq!(decide(&mut c, &limit)[0], 1);
    let mut args = limit.to_vec();
    args.extend(["WAIT", "3s"]);
    send(&mut w, &args);
    await_waiting(&mut c, 1);
    let (_, copied): (Vec<i64>, i64) = redis::pipe()
        .add_command(cmd(&["RL.GCRA", "slow", "1", "1h"]))
        .add_command(cmd(&["COPY", "slow", "rk2", "REPLACE"]))
        .query(&mut c)
        .unwrap();
    assert_eq!(copied, 1);
    assert_eq!(recv5(&mut w)[0], 0);
    assert_eq!(waits_field(&mut c, "admitted"), 1);
    assert_eq!(waits_field(&mut c, "timed_out"), 1);
    assert_eq!(waiting(&mut c), 0);
}

#[test]
fn a_primary_turned_replica_admits_no_waiter() {
    let other = Server::start();
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    prime(&mut ctl, "k");
    let mut w = server.conn();
    send(&mut w, &strs(&gcra("k", &["WAIT", "5s"])));
    await_waiting(&mut ctl, 1);
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(other.port)
        .query(&mut ctl)
        .unwrap();
    // Redis unblocks blocked clients with an error when the role changes.
    let reply = match w.recv_response() {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("{e:?}"),
    };
    assert!(reply.contains("UNBLOCKED"), "{reply}");
    assert_eq!(waiting(&mut ctl), 0);
    advance(&mut ctl, 10 * S);
    assert_eq!(waits_field(&mut ctl, "admitted"), 0);
}

#[test]
fn a_resp3_waiter_gets_the_resp3_map() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    prime(&mut ctl, "k");
    let mut w = server.conn_resp3();
    send(&mut w, &strs(&gcra("k", &["WAIT", "5s"])));
    await_waiting(&mut ctl, 1);
    advance(&mut ctl, S);
    let fields = resp3_map(w.recv_response().unwrap());
    assert_eq!(
        names(&fields),
        [
            "allowed",
            "limit",
            "remaining",
            "retry_after_ms",
            "reset_after_ms"
        ]
    );
    assert_eq!(fields[0].1, Value::Boolean(true));
}

/// A server whose key `g` (one per second) is spent at T0, with one client
/// waiting on it (`WAIT 10s`, due at 1 s): the server, a control
/// connection and the waiter's.
fn one_waiter_on_g() -> (Server, Connection, Connection) {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    prime(&mut ctl, "g");
    let mut w = server.conn();
    send(&mut w, &strs(&gcra("g", &["WAIT", "10s"])));
    await_waiting(&mut ctl, 1);
    (server, ctl, w)
}

/// FORCE is written whether or not the key has waiters; the waiter's due
/// time moves with it.
#[test]
fn force_beside_a_waiter_writes_its_charge() {
    let (_server, mut ctl, mut w) = one_waiter_on_g();
    // 3 more units of debt: the next slot moves from 1 s to 4 s. The key
    // written lives 4 s of wall clock (expiring, it would wake the line):
    // persisted in the same transaction.
    let force = gcra("g", &["COST", "3", "FORCE"]);
    let replies = atomically(&mut ctl, &[&strs(&force), &["PERSIST", "g"]]);
    assert_eq!(five(&replies[0]), [0, 1, 0, 4000, 4000]);
    advance(&mut ctl, 4 * S - 1);
    assert_eq!(waiting(&mut ctl), 1);
    advance(&mut ctl, 1);
    assert_eq!(recv5(&mut w)[0], 1);
}

/// PARTIAL always says what it was granted, and RL.PEEK answers as a new
/// request would: behind the line.
#[test]
fn partial_and_peek_behind_a_waiter() {
    let (_server, mut ctl, mut w) = one_waiter_on_g();
    advance(&mut ctl, S / 2);
    let partial: Vec<i64> = cmd(&strs(&gcra("g", &["COST", "1", "PARTIAL"])))
        .query(&mut ctl)
        .unwrap();
    // Behind the waiter (1 s), the next slot is at 2 s; nothing granted.
    assert_eq!(partial, [0, 1, 0, 1500, 500, 0]);
    assert_eq!(
        decide(&mut ctl, &["RL.PEEK", "g", "GCRA", "1", "1s"]),
        [0, 1, 0, 1500, 500]
    );
    advance(&mut ctl, S / 2);
    assert_eq!(recv5(&mut w)[0], 1);
}

/// A sketch's items are limited each on its own; one line per key would
/// make them wait for each other, so RL.SKETCH does not take WAIT.
#[test]
fn rl_sketch_refuses_wait() {
    let server = Server::start();
    let mut ctl = server.conn();
    let (_, message) = error_of(
        &mut ctl,
        &[b"RL.SKETCH", b"s", b"ip1", b"1", b"1s", b"WAIT", b"1s"],
    );
    assert_eq!(
        message,
        "ERR syntax error: WAIT cannot be combined with RL.SKETCH"
    );
    assert_eq!(waiting(&mut ctl), 0);
}

/// A change that may admit sooner wakes the line at once: the key
/// deleted (seen by the module's next command on it), every key flushed,
/// units refunded.
#[test]
fn del_flushall_and_refund_wake_the_line() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    let bucket = |extra: &[&str]| {
        let mut v: Vec<String> = ["RL.BUCKET", "b", "10", "1", "1h"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    for wake in ["DEL", "FLUSHALL", "REFUND"] {
        decide(&mut ctl, &strs(&bucket(&["COST", "10"])));
        let mut w = server.conn();
        send(&mut w, &strs(&bucket(&["COST", "5", "WAIT", "100d"])));
        await_waiting(&mut ctl, 1);
        match wake {
            "DEL" => {
                let _: i64 = redis::cmd("DEL").arg("b").query(&mut ctl).unwrap();
                // Its waiter goes first; then this look, which takes nothing.
                decide(&mut ctl, &strs(&bucket(&["COST", "0"])));
            }
            "FLUSHALL" => {
                let _: () = redis::cmd("FLUSHALL").query(&mut ctl).unwrap();
            }
            _ => {
                decide(&mut ctl, &strs(&bucket(&["REFUND", "5"])));
            }
        }
        // Admitted with no clock move: after a deletion 5 of the 10 tokens
        // are left, after the refund of 5 none.
        let left = if wake == "REFUND" { 0 } else { 5 };
        assert_eq!(recv5(&mut w)[..3], [1, 10, left], "{wake}");
        let _: () = redis::cmd("FLUSHALL").query(&mut ctl).unwrap();
    }
}

/// A waiter admitted by a release and unblocked by `CLIENT UNBLOCK` in the
/// same event-loop turn gets the admission's reply (it was charged).
#[test]
fn client_unblock_racing_an_admission_gets_the_admission() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    let held: Vec<Value> = cmd(&["RL.ACQUIRE", "gpu", "1", "1h"])
        .query(&mut ctl)
        .unwrap();
    let lease: String = redis::from_redis_value(held[5].clone()).unwrap();
    let mut w = server.conn();
    let id = client_id(&mut w);
    send(&mut w, &["RL.ACQUIRE", "gpu", "1", "1h", "WAIT", "1m"]);
    await_waiting(&mut ctl, 1);
    let (released, unblocked): (i64, i64) = redis::pipe()
        .cmd("RL.RELEASE")
        .arg("gpu")
        .arg(&lease)
        .cmd("CLIENT")
        .arg("UNBLOCK")
        .arg(id)
        .query(&mut ctl)
        .unwrap();
    assert_eq!(released, 1);
    let reply: Vec<Value> = redis::from_redis_value(w.recv_response().unwrap()).unwrap();
    assert_eq!(reply[0], Value::Int(1), "unblocked {unblocked}: {reply:?}");
    assert!(matches!(reply[5], Value::BulkString(_)), "{reply:?}");
}
