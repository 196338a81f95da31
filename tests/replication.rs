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
    let text = aof_through(&aof, "marker");
    assert!(!text.to_lowercase().contains("rl.gcra"), "{text}");
    assert!(!text.to_lowercase().contains("cl.throttle"), "{text}");
    assert_eq!(text.matches("PXAT").count(), 2, "{text}");
    assert!(text.contains("marker"));
}
