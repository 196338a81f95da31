//! Replication and process helpers for the durability tests: replicas,
//! bounded waits, INFO fields, abrupt kills.

use super::{Config, Server};
use std::time::{Duration, Instant};

/// Polls `ready` every 20 ms until it holds; panics after `secs` seconds.
pub fn wait_until(what: &str, secs: u64, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn info(c: &mut redis::Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(c).expect("INFO")
}

/// (limits decided, waiters touched) so far: INFO's `ratelimit_work`.
pub fn work(c: &mut redis::Connection) -> (u64, u64) {
    let dict = info_field(c, "ratelimit", "ratelimit_work").expect("ratelimit_work");
    let field = |name: &str| -> u64 {
        dict.split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {dict}"))
    };
    (field("decisions"), field("waiters"))
}

/// One `name:value` field of an INFO section.
pub fn info_field(c: &mut redis::Connection, section: &str, name: &str) -> Option<String> {
    let prefix = format!("{name}:");
    info(c, section)
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().to_string()))
}

/// A replica of `primary` that dies on any error in the replication stream
/// (`propagation-error-behavior panic`), so such an error cannot go unseen.
pub fn replica_config(primary: &Server) -> Config {
    Config::default()
        .arg("replicaof", &format!("127.0.0.1 {}", primary.port))
        .arg("propagation-error-behavior", "panic")
}

/// A primary writing a plain-text AOF (no RDB preamble, so tests can read
/// the commands it logged) and one replica of it, online.
pub fn primary_with_aof_and_replica() -> (Server, Server) {
    let primary = Server::with(
        Config::default()
            .arg("appendonly", "yes")
            .arg("aof-use-rdb-preamble", "no"),
    );
    let replica = Server::with(replica_config(&primary));
    wait_link_up(&replica);
    wait_replicas_online(&primary, 1);
    (primary, replica)
}

/// Waits (bounded) until a replica's link to its primary is up.
pub fn wait_link_up(replica: &Server) {
    let mut c = replica.conn();
    wait_until("the replica's initial sync", 30, || {
        info(&mut c, "replication").contains("master_link_status:up")
    });
}

/// Waits (bounded) until the primary counts `n` replicas as online (a
/// replica's link is up slightly before its primary puts it online).
pub fn wait_replicas_online(primary: &Server, n: usize) {
    let mut c = primary.conn();
    wait_until("replicas online", 30, || {
        info(&mut c, "replication").matches("state=online").count() >= n
    });
}

/// `WAIT n 0`: until all `n` replicas have acknowledged, however long that
/// takes; a read timeout of a minute turns a hang into a failure.
pub fn wait_replicas(c: &mut redis::Connection, n: usize) {
    c.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    let acked: usize = redis::cmd("WAIT")
        .arg(n)
        .arg(0)
        .query(c)
        .expect("replicas did not acknowledge within a minute");
    c.set_read_timeout(None).expect("read timeout");
    assert_eq!(acked, n, "replicas did not acknowledge");
}

/// Kills the server's process with SIGKILL: no shutdown, no last
/// replication flush.
pub fn kill9(server: &mut Server) {
    let mut c = server.conn();
    let pid = info_field(&mut c, "server", "process_id").expect("process_id");
    let status = std::process::Command::new("kill")
        .args(["-9", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    wait_until("the killed server to exit", 10, || !server.alive());
}

/// How far into the replication stream a server is: as a primary, what it
/// has written; as a replica (linked or not), what it has applied.
pub fn repl_offset(c: &mut redis::Connection) -> u64 {
    info_field(c, "replication", "master_repl_offset")
        .and_then(|v| v.parse().ok())
        .expect("master_repl_offset")
}
