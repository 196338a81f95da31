//! The named policies' registry as servers load it: replicas keep
//! diskless loading (the data type handles read errors), an async load
//! serves the registry the replica had until the new one is swapped in
//! (and keeps it when the load is aborted), a full sync from a primary with
//! no policies leaves none, and where the server saves through `aux_save2`
//! an RDB with no policy loads on a server without the module.

mod common;
use common::named::ok;
use common::topology::{info_field, replica_config, wait_link_up, wait_until};
use common::*;
use redis::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn names(c: &mut redis::Connection) -> Vec<String> {
    redis::cmd("RL.POLICY").arg("LIST").query(c).unwrap()
}

fn primary() -> Server {
    Server::with(
        Config::default()
            .with_policies()
            .arg("repl-diskless-sync", "yes")
            .arg("rdbcompression", "no"),
    )
}

#[test]
fn a_replica_loads_diskless_on_an_empty_db() {
    let p = primary();
    let mut pc = p.conn();
    ok(&mut pc, &["RL.POLICY", "SET", "a", "FIXED", "5", "1h"]);
    let replica = Server::with(
        replica_config(&p)
            .with_policies()
            .arg("repl-diskless-load", "on-empty-db"),
    );
    wait_link_up(&replica);
    let mut rc = replica.conn();
    assert_eq!(names(&mut rc), ["a"]);
    let log = replica.log();
    assert!(log.contains("Loading DB in memory"), "{log}");
    assert!(!log.contains("Skipping diskless-load"), "{log}");
}

/// Mirrors Redis's own `Diskless load swapdb (async_loading)` tests, with
/// policies: the saved registry is read first (it precedes the keys), yet
/// the replica serves its old registry until the load succeeds.
#[test]
fn an_async_load_swaps_the_registry_in_only_when_it_succeeds() {
    let p = primary();
    let mut pc = p.conn();
    ok(&mut pc, &["RL.POLICY", "SET", "old", "FIXED", "5", "1h"]);
    // The replica answers between the keys it loads (every 1 KB).
    let replica = Server::with(
        replica_config(&p)
            .with_policies()
            .arg("repl-diskless-load", "swapdb")
            .arg("loading-process-events-interval-bytes", "1024"),
    );
    wait_link_up(&replica);
    let mut rc = replica.conn();
    assert_eq!(names(&mut rc), ["old"]);
    // Keys that take the primary 10 s to save (10 ms each), then a full
    // sync with the same replication id: the replica loads asynchronously.
    ok(&mut pc, &["DEBUG", "POPULATE", "1000", "key", "2000"]);
    ok(&mut pc, &["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    let _: Value = redis::pipe()
        .atomic()
        .cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .cmd("CONFIG")
        .arg("SET")
        .arg("repl-backlog-size")
        .arg("16384")
        .cmd("RL.POLICY")
        .arg(&["SET", "new", "GCRA", "5", "1h"][..])
        .cmd("SET")
        .arg("filler")
        .arg("A".repeat(40_000))
        .query(&mut pc)
        .unwrap();
    wait_until("async loading", 30, || {
        info_field(&mut rc, "replication", "master_link_status").as_deref() == Some("down")
            && info_field(&mut rc, "persistence", "async_loading").as_deref() == Some("1")
    });
    // The new registry has been read; the old one is served.
    assert_eq!(names(&mut rc), ["old"]);
    assert_eq!(
        info_field(&mut rc, "persistence", "async_loading").as_deref(),
        Some("1")
    );
    // Aborted part-way: the old registry stays.
    ok(&mut pc, &["CONFIG", "SET", "repl-diskless-sync-delay", "5"]);
    let _: Value = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "replica"][..])
        .query(&mut pc)
        .unwrap();
    wait_until("the load to abort", 30, || {
        info_field(&mut rc, "persistence", "async_loading").as_deref() == Some("0")
    });
    assert_eq!(names(&mut rc), ["old"]);
    // Then a load that succeeds swaps the new one in.
    ok(&mut pc, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    ok(&mut pc, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    wait_link_up(&replica);
    wait_until("the new registry", 30, || names(&mut rc) == ["new", "old"]);
    let log = replica.log();
    assert!(log.contains("Loading DB in memory"), "{log}");
    assert!(!log.contains("Skipping diskless-load"), "{log}");
}

#[test]
fn a_full_sync_from_a_primary_without_policies_leaves_none() {
    let a = primary();
    ok(
        &mut a.conn(),
        &["RL.POLICY", "SET", "a", "FIXED", "5", "1h"],
    );
    let b = primary();
    let replica = Server::with(
        replica_config(&a)
            .with_policies()
            .arg("repl-diskless-load", "swapdb"),
    );
    wait_link_up(&replica);
    let mut rc = replica.conn();
    assert_eq!(names(&mut rc), ["a"]);
    ok(&mut rc, &["REPLICAOF", "127.0.0.1", &b.port.to_string()]);
    wait_until("a sync from the new primary", 30, || {
        names(&mut rc).is_empty()
            && info_field(&mut rc, "replication", "master_link_status").as_deref() == Some("up")
    });
}

/// Starts `redis-server` without the module on `dir`; whether it came up,
/// and its log.
fn start_without_module(dir: &std::path::Path) -> (bool, String) {
    let port = free_port();
    let mut child = Command::new(server_binary())
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--logfile", "plain.log", "--save", ""])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the server binary is installed");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut up = false;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        let pong = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
        if pong.is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(dir.join("plain.log")).unwrap_or_default();
    (up, log)
}

#[test]
fn an_rdb_with_no_policy_loads_without_the_module_where_the_server_allows() {
    let s = Server::with(Config::default().with_policies());
    let mut c = s.conn();
    // The server says whether an empty registry writes nothing.
    let rdb = info_field(&mut c, "ratelimit", "ratelimit_policies_rdb").unwrap();
    ok(&mut c, &["RL.POLICY", "SET", "gone", "FIXED", "5", "1h"]);
    ok(&mut c, &["RL.POLICY", "DEL", "gone"]);
    ok(&mut c, &["SET", "plain", "value"]);
    ok(&mut c, &["SAVE"]);
    let (up, log) = start_without_module(&s.dir);
    match rdb.as_str() {
        "when_defined" => assert!(up, "{log}"),
        "always" => {
            assert!(!up);
            assert!(
                log.contains("no matching module 'rl-policy'"),
                "the log line the docs quote: {log}"
            );
        }
        other => panic!("ratelimit_policies_rdb:{other}"),
    }
    // With a policy defined the RDB needs the module, on every server.
    ok(&mut c, &["RL.POLICY", "SET", "kept", "FIXED", "5", "1h"]);
    ok(&mut c, &["SAVE"]);
    let (up, log) = start_without_module(&s.dir);
    assert!(!up);
    assert!(log.contains("no matching module 'rl-policy'"), "{log}");
    // And restarted with the module, it holds the policy.
    let s = s.restart();
    assert_eq!(names(&mut s.conn()), ["kept"]);
}
