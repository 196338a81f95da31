//! Free when unused: a server where nobody waits runs Redis's own commands
//! with no hook of the module in their way, whether the module's commands
//! ran or not. The command filter (which sees the commands that change a
//! waited key, and `CLIENT UNBLOCK`) is registered while clients wait; the
//! expiry and eviction events that wake the lines are subscribed when a
//! client first waits (Redis 7.0 cannot unsubscribe them). `INFO ratelimit`
//! says which are on (`ratelimit_hooks`); the instructions they cost are in
//! `scripts/bench_overhead.sh`.

mod common;
use common::blocking::*;
use common::topology::{info_field, wait_until, work};
use common::*;
use redis::Connection;
use std::time::Duration;

/// (command filter, keyspace events), each 0 or 1.
fn hooks(c: &mut Connection) -> (u64, u64) {
    let dict = info_field(c, "ratelimit", "ratelimit_hooks").expect("ratelimit_hooks");
    let field = |name: &str| -> u64 {
        dict.split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {dict}"))
    };
    (field("command_filter"), field("keyspace_events"))
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
        &["CONFIG", "RESETSTAT"],
        &["FLUSHALL"],
    ] {
        call(c, args).unwrap();
    }
}

#[test]
fn no_hook_until_used_and_no_keyspace_events_until_a_client_waits() {
    for config in [Config::default(), Config::real_clock().with_policies()] {
        let server = Server::with(config);
        let mut c = server.conn();
        assert_eq!(hooks(&mut c), (0, 0));
        redis_commands(&mut c);
        assert_eq!(hooks(&mut c), (0, 0), "after Redis's own commands");

        // A command of the module adds no hook either; its counters count
        // from the load (CONFIG RESETSTAT is Redis's, and leaves them).
        call(&mut c, &["RL.GCRA", "g", "1", "1h"]).unwrap();
        assert_eq!(hooks(&mut c), (0, 0));
        let calls = |c: &mut Connection| info_field(c, "ratelimit", "ratelimit_rl_gcra").unwrap();
        assert!(calls(&mut c).starts_with("calls=1,"), "{}", calls(&mut c));
        call(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
        assert!(calls(&mut c).starts_with("calls=1,"), "{}", calls(&mut c));
        redis_commands(&mut c);
        assert_eq!(hooks(&mut c), (0, 0), "no client waited yet");

        // The first client that waits brings the filter and subscribes the
        // wake-ups, and a DEL of its key admits it at once.
        call(&mut c, &["RL.GCRA", "g", "1", "1h"]).unwrap();
        let mut w = server.conn();
        send(&mut w, &["RL.GCRA", "g", "1", "1h", "WAIT", "100d"]);
        await_waiting(&mut c, 1);
        assert_eq!(hooks(&mut c), (1, 1));
        call(&mut c, &["DEL", "g"]).unwrap();
        assert_eq!(recv5(&mut w)[0], 1);
        assert_eq!(waiting(&mut c), 0);
        // Nobody waits: the filter leaves (in a later event-loop
        // iteration); the subscription stays (Redis 7.0 cannot undo it).
        wait_until("the filter gone", 10, || hooks(&mut c) == (0, 1));

        // And comes back with the next waiter.
        call(&mut c, &["RL.GCRA", "g", "1", "1h"]).unwrap();
        send(&mut w, &["RL.GCRA", "g", "1", "1h", "WAIT", "100d"]);
        await_waiting(&mut c, 1);
        assert_eq!(hooks(&mut c), (1, 1));
        call(&mut c, &["UNLINK", "g"]).unwrap();
        assert_eq!(recv5(&mut w)[0], 1);
        wait_until("the filter gone", 10, || hooks(&mut c) == (0, 1));
    }
}

/// Every command that changes or removes a waited key wakes its line: the
/// first waiter is decided at once against the new value, without any
/// clock move. A bucket of 10 spent whole; the waiter asks 5: after a
/// removal it finds 10 and leaves 5; after a copy of a bucket that has
/// 9 left it leaves 4. Also inside `MULTI` (the filter sees the command
/// when it is queued, the change happens at `EXEC`) and a script.
#[test]
fn every_command_that_changes_a_waited_key_wakes_its_line() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let bucket = |key: &str, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["RL.BUCKET", key, "10", "1", "1h"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |c: &mut Connection, args: &[&str]| {
        cmd(args).query::<redis::Value>(c).unwrap();
    };
    let cases: &[(&str, &[&[&str]], i64)] = &[
        ("DEL", &[&["DEL", "other", "b"]], 5),
        ("UNLINK", &[&["UNLINK", "b"]], 5),
        ("GETDEL", &[&["GETDEL", "b"]], 5),
        ("GETEX PXAT past", &[&["GETEX", "b", "PXAT", "1"]], 5),
        ("PEXPIREAT past", &[&["PEXPIREAT", "b", "1"]], 5),
        ("EXPIRE 0", &[&["expire", "b", "0"]], 5),
        ("RENAME", &[&["RENAME", "b", "elsewhere"]], 5),
        ("RENAMENX", &[&["RENAMENX", "b", "elsewhere2"]], 5),
        ("MOVE", &[&["MOVE", "b", "3"]], 5),
        ("COPY", &[&["COPY", "f", "b", "REPLACE"]], 4),
        ("SET … PX", &[&["SET", "b", "FROM_F", "PX", "3600000"]], 4),
        ("RESTORE", &[&["RESTORE", "b", "0", "DUMP_F", "REPLACE"]], 4),
        ("MULTI", &[&["MULTI"], &["DEL", "b"], &["EXEC"]], 5),
        (
            "EVAL",
            &[&["EVAL", "redis.call('DEL', KEYS[1])", "1", "b"]],
            5,
        ),
        ("SWAPDB", &[&["SWAPDB", "0", "4"]], 5),
    ];
    for (name, commands, left) in cases {
        decide(&mut c, &strs(&bucket("f", &["COST", "1"])));
        decide(&mut c, &strs(&bucket("b", &["COST", "10"])));
        let f = get_bytes(&mut c, "f").unwrap();
        let dump: Vec<u8> = cmd(&["DUMP", "f"]).query(&mut c).unwrap();
        let mut w = server.conn();
        // A missed wake fails the read instead of hanging the test.
        w.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        send(&mut w, &strs(&bucket("b", &["COST", "5", "WAIT", "100d"])));
        await_waiting(&mut c, 1);
        for command in commands.iter() {
            let mut line = redis::cmd(command[0]);
            for arg in &command[1..] {
                match *arg {
                    "FROM_F" => line.arg(&f[..]),
                    "DUMP_F" => line.arg(&dump[..]),
                    _ => line.arg(*arg),
                };
            }
            line.query::<redis::Value>(&mut c).unwrap();
        }
        assert_eq!(recv5(&mut w)[..3], [1, 10, *left], "{name}");
        assert_eq!(waiting(&mut c), 0, "{name}");
        if *name == "SWAPDB" {
            run(&mut c, &["SWAPDB", "0", "4"]);
        }
        run(&mut c, &["FLUSHALL"]);
    }
}

/// While a client waits, the filter sees every command; those that name
/// no waited key wake nothing: no decision is made for the waiter.
#[test]
fn commands_on_other_keys_wake_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    decide(&mut c, &["RL.GCRA", "g", "1", "1h"]);
    let mut w = server.conn();
    send(&mut w, &["RL.GCRA", "g", "1", "1h", "WAIT", "100d"]);
    await_waiting(&mut c, 1);
    let work = |c: &mut Connection| info_field(c, "ratelimit", "ratelimit_work").unwrap();
    let before = work(&mut c);
    for _ in 0..3 {
        redis_commands_but_flush(&mut c);
    }
    call(&mut c, &["PING"]).unwrap();
    assert_eq!(work(&mut c), before);
    assert_eq!(waiting(&mut c), 1);
}

fn redis_commands_but_flush(c: &mut Connection) {
    for args in [
        &["SET", "k", "1"][..],
        &["GET", "k"],
        &["INCR", "k"],
        &["EXPIRE", "k", "100"],
        &["SET", "k", "v", "PX", "60000"],
        &["DEL", "k"],
        &["RENAME", "l", "l2"],
        &["LPUSH", "l", "v"],
    ] {
        let _ = call(c, args);
    }
}

/// The classes the lazy subscription covers still wake a line: a waited
/// key that expires (Redis's own expiry, on the real clock), one renamed
/// away, one flushed.
#[test]
fn expiry_rename_and_flush_of_a_waited_key_wake_its_line() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    for how in ["expire", "rename", "flushdb"] {
        call(&mut c, &["RL.GCRA", "g", "1", "1h"]).unwrap();
        let mut w = server.conn();
        w.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        send(&mut w, &["RL.GCRA", "g", "1", "1h", "WAIT", "100d"]);
        await_waiting(&mut c, 1);
        match how {
            // Setting the TTL wakes nothing that can go (the key is still
            // spent); its expiry, a moment later, does.
            "expire" => call(&mut c, &["PEXPIRE", "g", "1"]).unwrap(),
            "rename" => call(&mut c, &["RENAME", "g", "elsewhere"]).unwrap(),
            _ => call(&mut c, &["FLUSHDB"]).unwrap(),
        };
        assert_eq!(recv5(&mut w)[0], 1, "{how}");
        wait_until("no waiter", 10, || waiting(&mut c) == 0);
        call(&mut c, &["FLUSHDB"]).unwrap();
    }
}

/// The names with a line at 1,000 lines (1,000 times one): a `DEL` of
/// 1,000 names without a line decides nothing; a `DEL` of the 1,000
/// waited names wakes each line's waiter, decided once and admitted.
#[test]
fn a_thousand_lines_are_woken_by_their_names_and_by_no_other() {
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
    let mut others = vec!["DEL".to_string()];
    others.extend((0..n).map(|i| format!("other:{i}")));
    call(&mut c, &strs(&others)).unwrap();
    call(&mut c, &["PING"]).unwrap();
    assert_eq!(work(&mut c), before, "names without a line");
    assert_eq!(waiting(&mut c), n as u64);

    let mut waited = vec!["DEL".to_string()];
    waited.extend(names.iter().cloned());
    call(&mut c, &strs(&waited)).unwrap();
    for w in &mut waiters {
        assert_eq!(recv5(w)[0], 1);
    }
    wait_until("no waiter", 30, || waiting(&mut c) == 0);
    let after = work(&mut c);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (n as u64, 2 * n as u64),
        "per line one decision, and its waiter touched twice: woken, admitted"
    );
}
