//! Free when unused, and while clients merely wait: Redis's own commands
//! run with no hook of the module in their way. The expiry and eviction
//! events that wake the lines are subscribed when a client first waits
//! (Redis 7.0 cannot unsubscribe them); a command filter runs only from an
//! admission until its reply is sent, on servers that need it to see
//! `CLIENT UNBLOCK` (Redis 7.0). `INFO ratelimit` says which are on
//! (`ratelimit_hooks`); the instructions they cost are in
//! `scripts/bench_overhead.sh`.
//!
//! Nothing watches Redis's commands, so a waiter whose key `DEL`, `EXPIRE`,
//! `SET`… changed is decided on the new state at its planned time, or when
//! something else wakes its line: a release, a refund, the key's expiry,
//! `FLUSHDB`, `SWAPDB`, or the module's next command on the key, which
//! lets the waiters go first and is decided after them.

mod common;
use common::blocking::*;
use common::topology::{info_field, wait_until, work};
use common::*;
use redis::{Connection, Value};
use std::time::Duration;

/// The hooks now: (command filter on, its registrations so far, keyspace
/// events subscribed).
fn hooks(c: &mut Connection) -> (u64, u64, u64) {
    hooks_of(&info_field(c, "ratelimit", "ratelimit_hooks").expect("ratelimit_hooks"))
}

fn hooks_of(dict: &str) -> (u64, u64, u64) {
    let field = |name: &str| -> u64 {
        dict.split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in {dict}"))
    };
    (
        field("command_filter"),
        field("command_filter_registrations"),
        field("keyspace_events"),
    )
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn redis_commands(c: &mut Connection) {
    for args in [
        &["SET", "k", "1"][..],
        &["GET", "k"],
        &["INCR", "k"],
        &["EXPIRE", "k", "100"],
        &["SET", "k", "v", "PX", "60000"],
        &["DEL", "k"],
        &["LPUSH", "l", "v"],
        &["RENAME", "l", "l2"],
        &["CONFIG", "RESETSTAT"],
    ] {
        call(c, args).unwrap();
    }
}

/// No hook until a client waits; while clients wait only the expiry and
/// eviction events; the command filter never while they merely wait, and
/// after an admission it is gone again in a later event-loop iteration.
#[test]
fn no_hook_until_used_and_no_filter_while_clients_wait() {
    for config in [Config::default(), Config::real_clock().with_policies()] {
        let server = Server::with(config);
        let mut c = server.conn();
        assert_eq!(hooks(&mut c), (0, 0, 0));
        redis_commands(&mut c);
        assert_eq!(hooks(&mut c), (0, 0, 0), "after Redis's own commands");

        // A command of the module adds no hook either; its counters count
        // from the load (CONFIG RESETSTAT is Redis's, and leaves them).
        call(&mut c, &["RL.GCRA", "g", "1", "1h"]).unwrap();
        assert_eq!(hooks(&mut c), (0, 0, 0));
        let calls = |c: &mut Connection| info_field(c, "ratelimit", "ratelimit_rl_gcra").unwrap();
        assert!(calls(&mut c).starts_with("calls=1,"), "{}", calls(&mut c));
        call(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
        assert!(calls(&mut c).starts_with("calls=1,"), "{}", calls(&mut c));
        redis_commands(&mut c);
        assert_eq!(hooks(&mut c), (0, 0, 0), "no client waited yet");

        // A client waits: the expiry and eviction events are subscribed,
        // and no filter runs; Redis's commands, on the waited key too, do
        // no work of the module.
        call(&mut c, &["RL.GCRA", "g", "1", "1h"]).unwrap();
        let mut w = server.conn();
        send(&mut w, &["RL.GCRA", "g", "1", "1h", "WAIT", "100d"]);
        await_waiting(&mut c, 1);
        assert_eq!(hooks(&mut c), (0, 0, 1));
        let before = work(&mut c);
        redis_commands(&mut c);
        call(&mut c, &["DEL", "g"]).unwrap();
        assert_eq!(
            work(&mut c),
            before,
            "Redis's commands while a client waits"
        );
        assert_eq!((hooks(&mut c), waiting(&mut c)), ((0, 0, 1), 1));

        // The module's next command on the deleted key lets the waiter go
        // first: it is admitted, the command itself denied after it.
        let plain = decide(&mut c, &["RL.GCRA", "g", "1", "1h"]);
        assert_eq!(recv5(&mut w)[0], 1);
        assert_eq!(plain[0], 0);
        assert_eq!(waiting(&mut c), 0);
        // At most one registration for that admission (only where the
        // server needs it), gone in a later event-loop iteration.
        let registered = hooks(&mut c).1;
        assert!(registered <= 1, "{registered}");
        wait_until("the filter gone", 10, || {
            hooks(&mut c) == (0, registered, 1)
        });
    }
}

/// The filter is on only while an admitted reply is pending: a command in
/// the admission's own event-loop turn (the same pipeline) sees it on
/// where the server needs it, registered once for the whole batch of
/// admissions; once the replies are sent it is gone.
#[test]
fn the_filter_lives_only_while_admitted_replies_are_pending() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    call(&mut c, &["RL.GCRA", "g", "5", "5s", "COST", "5"]).unwrap();
    let mut waiters: Vec<Connection> = (0..5)
        .map(|_| {
            let mut w = server.conn();
            send(&mut w, &["RL.GCRA", "g", "5", "5s", "WAIT", "100d"]);
            w
        })
        .collect();
    await_waiting(&mut c, 5);
    let (_, before, _) = hooks(&mut c);
    let (_, dict): (Value, String) = redis::pipe()
        .cmd("RL.CLOCK")
        .arg("ADVANCE")
        .arg(10 * SECOND)
        .cmd("INFO")
        .arg("ratelimit")
        .query(&mut c)
        .unwrap();
    let line = dict
        .lines()
        .find_map(|l| l.strip_prefix("ratelimit_hooks:"))
        .expect("ratelimit_hooks");
    let (on, registered, _) = hooks_of(line);
    // On in the admissions' turn exactly where it was registered for them.
    assert_eq!(on, registered - before, "{line}");
    assert!(registered - before <= 1, "{line}");
    for w in &mut waiters {
        assert_eq!(recv5(w)[0], 1);
    }
    wait_until("the filter gone", 10, || hooks(&mut c).0 == 0);
    assert_eq!(hooks(&mut c).1, registered);
}

/// What wakes a line at once, with no clock move: a release, a refund,
/// `FLUSHDB`, `FLUSHALL`, `SWAPDB`, the key's expiry (Redis's own, on the
/// real clock), and the module's next command on a key that `DEL`,
/// `UNLINK`, `EXPIRE`, `RENAME`, `MULTI`/`EXEC` or a script
/// changed. A bucket of 10 spent whole; the waiter asks 5: after a removal
/// it finds 10 and leaves 5; after the refund of 5, none.
#[test]
fn what_wakes_a_line_at_once() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let bucket = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["RL.BUCKET", "b", "10", "1", "1h"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let next_command = &["RL.BUCKET", "b", "10", "1", "1h", "COST", "0"][..];
    let cases: &[(&str, &[&[&str]], i64)] = &[
        (
            "REFUND",
            &[&["RL.BUCKET", "b", "10", "1", "1h", "REFUND", "5"]],
            0,
        ),
        ("FLUSHDB", &[&["FLUSHDB"]], 5),
        ("FLUSHALL", &[&["FLUSHALL"]], 5),
        ("SWAPDB", &[&["SWAPDB", "0", "4"]], 5),
        ("expiry", &[&["PEXPIRE", "b", "1"]], 5),
        (
            "DEL, then the module",
            &[&["DEL", "other", "b"], next_command],
            5,
        ),
        (
            "UNLINK, then the module",
            &[&["UNLINK", "b"], next_command],
            5,
        ),
        (
            "EXPIRE 0, then the module",
            &[&["EXPIRE", "b", "0"], next_command],
            5,
        ),
        (
            "RENAME, then the module",
            &[&["RENAME", "b", "elsewhere"], next_command],
            5,
        ),
        (
            "MULTI, then the module",
            &[&["MULTI"], &["DEL", "b"], &["EXEC"], next_command],
            5,
        ),
        (
            "EVAL, then the module",
            &[
                &["EVAL", "redis.call('DEL', KEYS[1])", "1", "b"],
                next_command,
            ],
            5,
        ),
    ];
    for (name, commands, left) in cases {
        decide(&mut c, &strs(&bucket(&["COST", "10"])));
        let mut w = server.conn();
        // A missed wake fails the read instead of hanging the test.
        w.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        send(&mut w, &strs(&bucket(&["COST", "5", "WAIT", "100d"])));
        await_waiting(&mut c, 1);
        for command in commands.iter() {
            let _ = call(&mut c, command);
        }
        assert_eq!(recv5(&mut w)[..3], [1, 10, *left], "{name}");
        wait_until("no waiter", 10, || waiting(&mut c) == 0);
        if *name == "SWAPDB" {
            call(&mut c, &["SWAPDB", "0", "4"]).unwrap();
        }
        call(&mut c, &["FLUSHALL"]).unwrap();
    }
}

/// A waited key that Redis's commands changed is decided at the waiter's
/// planned time at the latest, on the new state, and never later; until
/// then it waits (nothing watches those commands).
#[test]
fn a_key_changed_by_redis_is_decided_at_the_planned_time_at_the_latest() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    // 10 per hour, spent whole: 5 come back in 30 minutes.
    let bucket = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["RL.BUCKET", "b", "10", "10", "1h"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let planned = 30 * 60 * SECOND;
    for change in [
        &["DEL", "b"][..],
        &["UNLINK", "b"],
        &["PEXPIREAT", "b", "1"],
        &["EXPIRE", "b", "100000"],
        &["PERSIST", "b"],
        &["SET", "b", "FROM_F", "PX", "3600000"],
    ] {
        clock_set(&mut c, T0);
        // Another bucket with 9 left, whose value a SET puts in place.
        let f: Vec<String> = ["RL.BUCKET", "f", "10", "10", "1h"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        decide(&mut c, &strs(&f));
        let f = get_bytes(&mut c, "f").unwrap();
        decide(&mut c, &strs(&bucket(&["COST", "10"])));
        let mut w = server.conn();
        send(&mut w, &strs(&bucket(&["COST", "5", "WAIT", "100d"])));
        await_waiting(&mut c, 1);
        let before = work(&mut c);
        let mut line = redis::cmd(change[0]);
        for arg in &change[1..] {
            match *arg {
                "FROM_F" => line.arg(&f[..]),
                _ => line.arg(*arg),
            };
        }
        line.query::<Value>(&mut c).unwrap();
        assert_eq!(work(&mut c), before, "{change:?}: no work of the module");
        advance(&mut c, planned - 1);
        assert_eq!(waiting(&mut c), 1, "{change:?}");
        advance(&mut c, 1);
        let reply = recv5(&mut w);
        assert_eq!(reply[0], 1, "{change:?}: admitted at its planned time");
        assert_eq!(waiting(&mut c), 0);
        call(&mut c, &["FLUSHALL"]).unwrap();
    }
}

/// A request without `WAIT` never goes ahead of a line whose key Redis
/// deleted: the waiters its value admits go first, in order, and the
/// request is decided after them (here denied: they took the room).
#[test]
fn after_a_del_a_plain_request_never_cuts_into_the_line() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);

    // GCRA, 2 per hour, used up; three waiters of 1.
    decide(&mut c, &["RL.GCRA", "g", "2", "1h", "COST", "2"]);
    let mut waiters: Vec<Connection> = (0..3)
        .map(|_| {
            let mut w = server.conn();
            send(&mut w, &["RL.GCRA", "g", "2", "1h", "WAIT", "100d"]);
            w
        })
        .collect();
    await_waiting(&mut c, 3);
    call(&mut c, &["DEL", "g"]).unwrap();
    assert_eq!(waiting(&mut c), 3);
    let plain = decide(&mut c, &["RL.GCRA", "g", "2", "1h"]);
    // The first two are admitted (the deleted key has room for two), in
    // order; the third still waits; the plain request is denied behind it.
    assert_eq!(recv5(&mut waiters[0])[..3], [1, 2, 1]);
    assert_eq!(recv5(&mut waiters[1])[..3], [1, 2, 0]);
    assert_eq!(plain[0], 0, "{plain:?}");
    assert_eq!(waiting(&mut c), 1);
    // The third is admitted at its planned time, before any plain request.
    advance(&mut c, 30 * 60 * SECOND);
    assert_eq!(recv5(&mut waiters[2])[0], 1);
    call(&mut c, &["FLUSHALL"]).unwrap();

    // Concurrency, 2 units, one lease of 2 held for an hour; a waiter
    // asks 2. After a DEL, a plain request of 1 would leave too little for
    // the waiter: the waiter goes first.
    let held: Vec<Value> = cmd(&["RL.ACQUIRE", "c", "2", "1h", "COST", "2"])
        .query(&mut c)
        .unwrap();
    assert_eq!(held[0], Value::Int(1));
    let mut w = server.conn();
    send(
        &mut w,
        &["RL.ACQUIRE", "c", "2", "1h", "COST", "2", "WAIT", "100d"],
    );
    await_waiting(&mut c, 1);
    call(&mut c, &["DEL", "c"]).unwrap();
    let plain: Vec<Value> = cmd(&["RL.ACQUIRE", "c", "2", "1h"]).query(&mut c).unwrap();
    let admitted: Vec<Value> = redis::from_redis_value(w.recv_response().unwrap()).unwrap();
    assert_eq!(admitted[0], Value::Int(1), "{admitted:?}");
    assert_eq!(plain[0], Value::Int(0), "{plain:?}");
    assert_eq!(waiting(&mut c), 0);
}

/// 1,000 lines (1,000 times one): a `DEL` of the 1,000 waited names does
/// no work of the module; at their planned time the 1,000 are decided once
/// each and admitted, in batches of `wait-events-per-tick`, with at most
/// one filter registration per batch.
#[test]
fn a_thousand_changed_lines_cost_nothing_until_their_time() {
    let n = 1000;
    let server = Server::with(Config::default().arg("maxclients", "1200"));
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let names: Vec<String> = (0..n).map(|i| format!("w:{i}")).collect();
    let mut waiters: Vec<Connection> = names
        .iter()
        .map(|name| {
            decide(&mut c, &["RL.GCRA", name, "1", "1h"]);
            let mut w = server.conn();
            w.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            send(&mut w, &["RL.GCRA", name, "1", "1h", "WAIT", "100d"]);
            w
        })
        .collect();
    await_waiting(&mut c, n as u64);
    let before = work(&mut c);
    let (_, registered, _) = hooks(&mut c);
    let mut del = vec!["DEL".to_string()];
    del.extend(names.iter().cloned());
    call(&mut c, &strs(&del)).unwrap();
    call(&mut c, &["PING"]).unwrap();
    assert_eq!(work(&mut c), before, "a DEL of 1,000 waited names");
    assert_eq!(waiting(&mut c), n as u64);

    advance(&mut c, 3600 * SECOND);
    for w in &mut waiters {
        assert_eq!(recv5(w)[0], 1);
    }
    wait_until("no waiter", 30, || waiting(&mut c) == 0);
    let after = work(&mut c);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (n as u64, 2 * n as u64),
        "per line one decision, and its waiter touched twice: decided, admitted"
    );
    let batches = (n as u64).div_ceil(100);
    let (_, now_registered, _) = hooks(&mut c);
    assert!(
        now_registered - registered <= batches,
        "{} registrations for {batches} batches",
        now_registered - registered
    );
    wait_until("the filter gone", 10, || hooks(&mut c).0 == 0);
}
