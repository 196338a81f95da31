//! Effects replication: what an admitted request sends to replicas and the
//! AOF is its effect (`SET key <state> PXAT <ms>`), never the command, and a
//! denied request sends nothing. Replicas and AOF restarts under a random
//! workload over every command are in durability.rs (byte-identical values
//! and expiry times, `DEBUG DIGEST` equal).

mod common;
use common::*;

#[test]
fn replication_stream_carries_effects_not_commands() {
    // The AOF receives exactly what replicas receive.
    let aof = Server::with(
        Config::default()
            .arg("appendonly", "yes")
            .arg("aof-use-rdb-preamble", "no"),
    );
    let mut a = aof.conn();
    clock_set(&mut a, T0);
    decide(&mut a, &["RL.GCRA", "x", "1", "1m"]);
    decide(&mut a, &["RL.GCRA", "x", "1", "1m"]); // denied: nothing logged
    decide(&mut a, &["CL.THROTTLE", "y", "1", "1", "60"]);
    let _: () = redis::cmd("SET")
        .arg("marker")
        .arg("1")
        .query(&mut a)
        .unwrap();
    // The AOF is written after the reply on some servers (Valkey 8): read it
    // until the last write, the marker, is in it (bounded).
    let dir = aof.dir.join("appendonlydir");
    let read_aof = || {
        let mut text = String::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().ends_with(".incr.aof") {
                text.push_str(&String::from_utf8_lossy(&std::fs::read(path).unwrap()));
            }
        }
        text
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut text = read_aof();
    while !text.contains("marker") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
        text = read_aof();
    }
    assert!(!text.to_lowercase().contains("rl.gcra"), "{text}");
    assert!(!text.to_lowercase().contains("cl.throttle"), "{text}");
    assert_eq!(text.matches("PXAT").count(), 2, "{text}");
    assert!(text.contains("marker"));
}
