//! Free when unused: a server that merely loads the module runs Redis's own
//! commands with no hook of the module in their way. The command filter
//! (the `CONFIG RESETSTAT` and `CLIENT UNBLOCK` watch) is registered when
//! a command of the module first runs; the keyspace events that wake the
//! lines are subscribed when a client first waits. `INFO ratelimit` says
//! which are on (`ratelimit_hooks`); the instructions they cost are in
//! `scripts/bench_overhead.sh`.

mod common;
use common::blocking::*;
use common::topology::{info_field, wait_until};
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

        // A command of the module: its counters can move, so the watch
        // for CONFIG RESETSTAT is on, and it works.
        call(&mut c, &["RL.GCRA", "g", "1", "1h"]).unwrap();
        assert_eq!(hooks(&mut c), (1, 0));
        let calls = |c: &mut Connection| info_field(c, "ratelimit", "ratelimit_rl_gcra").unwrap();
        assert!(calls(&mut c).starts_with("calls=1,"), "{}", calls(&mut c));
        call(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
        assert!(calls(&mut c).starts_with("calls=0,"), "{}", calls(&mut c));
        redis_commands(&mut c);
        assert_eq!(hooks(&mut c), (1, 0), "no client waited yet");

        // The first client that waits subscribes the wake-ups, and a DEL of
        // its key admits it at once.
        call(&mut c, &["RL.GCRA", "g", "1", "1h"]).unwrap();
        let mut w = server.conn();
        send(&mut w, &["RL.GCRA", "g", "1", "1h", "WAIT", "100d"]);
        await_waiting(&mut c, 1);
        assert_eq!(hooks(&mut c), (1, 1));
        call(&mut c, &["DEL", "g"]).unwrap();
        assert_eq!(recv5(&mut w)[0], 1);
        assert_eq!(waiting(&mut c), 0);
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
