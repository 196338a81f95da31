//! The module survives what Redis survives: two replicas hold the primary's
//! exact state under a random workload over every command; restarts from
//! AOF (with and without the RDB preamble), DEBUG RELOAD, BGREWRITEAOF and
//! an RDB loaded without the module keep every value and expiry time; and
//! MODULE UNLOAD / MODULE LOAD keep live limiter keys.

mod common;
use common::topology::*;
use common::workload::*;
use common::*;

#[test]
fn two_replicas_hold_the_primarys_exact_state() {
    let primary = Server::start();
    let mut replicas = [
        Server::with(replica_config(&primary)),
        Server::with(replica_config(&primary)),
    ];
    for r in &replicas {
        wait_link_up(r);
    }
    wait_replicas_online(&primary, 2);
    let mut p = primary.conn();
    let mut rs: Vec<_> = replicas.iter().map(Server::conn).collect();
    // The replicas' own clocks must not matter: they apply effects.
    clock_set(&mut p, T0);
    for r in &mut rs {
        clock_set(r, 1);
    }
    // Connecting clients' probes (CLIENT SETINFO on 7.0) count as errors
    // too, so compare with the counts taken after connecting.
    let errors_before: Vec<String> = rs.iter_mut().map(|r| info(r, "errorstats")).collect();

    // Short windows expire on the real clock during the run: the primary
    // deletes them (lazily or actively) and replicates the DEL.
    let mut workload = Workload::new(61, Windows::Mixed);
    workload.keys = 3000;
    let mut tally = workload.run(&mut p, 4000);
    // Keep calling until some keys have expired on the real clock (bounded).
    wait_until("keys to expire during the workload", 20, || {
        let t = workload.run(&mut p, 500);
        tally.allowed += t.allowed;
        tally.denied += t.denied;
        info_field(&mut p, "stats", "expired_keys").as_deref() != Some("0")
    });
    let t = workload.run(&mut p, 3000);
    tally.allowed += t.allowed;
    tally.denied += t.denied;
    assert!(
        tally.allowed > 2000 && tally.denied > 1000,
        "a workload of both outcomes: {tally:?}"
    );
    workload.assert_both_outcomes();
    // Freeze expiry on the primary (replicas never expire keys themselves),
    // then let the replicas catch up: nothing changes between digests.
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg(0)
        .query(&mut p)
        .unwrap();
    wait_replicas(&mut p, 2);
    // Only commands that never expire a key lazily from here on: a read of
    // an expired key on the primary would delete it and replicate a DEL.
    let keys: usize = redis::cmd("DBSIZE").query(&mut p).unwrap();
    assert!(keys > 2000, "thousands of keys: {keys}");
    let expected = digest(&mut p);
    for (i, r) in rs.iter_mut().enumerate() {
        let replica_keys: usize = redis::cmd("DBSIZE").query(r).unwrap();
        assert_eq!(replica_keys, keys, "replica {i} key count");
        assert_eq!(
            digest(r),
            expected,
            "replica {i} digest (values and expiry)"
        );
        assert_eq!(
            info(r, "errorstats"),
            errors_before[i],
            "replica {i}: the replication stream caused errors"
        );
    }
    for (i, r) in replicas.iter_mut().enumerate() {
        assert!(
            r.alive(),
            "replica {i} died (propagation-error-behavior panic)"
        );
        assert!(
            !r.log().contains("sending an error to its master"),
            "replica {i} log:\n{}",
            r.log()
        );
    }
}

/// A server with the AOF on and a long-window workload applied.
fn loaded_aof_server(preamble: &str, seed: u64) -> (Server, redis::Connection) {
    let config = Config::default()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .arg("aof-use-rdb-preamble", preamble)
        // A command that fails while the AOF loads stops the server.
        .arg("propagation-error-behavior", "panic");
    let server = Server::with(config);
    let mut c = server.conn();
    clock_set(&mut c, T0);
    let mut workload = Workload::new(seed, Windows::Long);
    workload.run(&mut c, 3000);
    workload.assert_both_outcomes();
    (server, c)
}

#[test]
fn aof_restart_without_preamble_keeps_values_and_expiry() {
    let (server, mut c) = loaded_aof_server("no", 77);
    let before = snapshot(&mut c);
    let digest_before = digest(&mut c);
    drop(c);
    let server = server.restart();
    let mut c = server.conn();
    let digest_after = digest(&mut c);
    let after = snapshot(&mut c);
    assert_same_state(&before, &after, "AOF restart");
    // Byte for byte, values and expiry, unless a key expired on the wall
    // clock between the first read and the last (an aligned window may end
    // during the restart): then one snapshot is shorter.
    if after.len() == before.len() {
        assert_eq!(digest_after, digest_before);
    }
}

#[test]
fn aof_rewrite_with_preamble_then_restart_keeps_values_and_expiry() {
    let (server, mut c) = loaded_aof_server("yes", 72);
    // The rewrite turns the history into an RDB preamble; more follows in
    // the incremental file.
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_rewrite(&mut c);
    Workload::new(73, Windows::Long).run(&mut c, 1000);
    let before = snapshot(&mut c);
    drop(c);
    let server = server.restart();
    let mut c = server.conn();
    assert_same_state(&before, &snapshot(&mut c), "preamble AOF restart");
}

#[test]
fn debug_reload_and_rewrite_without_preamble_keep_values_and_expiry() {
    let (server, mut c) = loaded_aof_server("no", 74);
    let before = snapshot(&mut c);
    // DEBUG RELOAD: save an RDB, flush, load it back.
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_same_state(&before, &snapshot(&mut c), "DEBUG RELOAD");
    // A rewrite in plain commands, then a restart from it.
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_rewrite(&mut c);
    drop(c);
    let server = server.restart();
    let mut c = server.conn();
    assert_same_state(&before, &snapshot(&mut c), "rewritten AOF restart");
}

fn wait_rewrite(c: &mut redis::Connection) {
    wait_until("the AOF rewrite", 30, || {
        let p = info(c, "persistence");
        p.contains("aof_rewrite_in_progress:0") && p.contains("aof_rewrite_scheduled:0")
    });
}

#[test]
fn an_rdb_saved_with_the_module_loads_without_it() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    Workload::new(81, Windows::Long).run(&mut c, 2000);
    let before = snapshot(&mut c);
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    let dir = new_dir();
    std::fs::copy(server.dir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let plain = Server::start_in(Config::without_module(), dir);
    let mut p = plain.conn();
    assert_same_state(&before, &snapshot(&mut p), "RDB loaded without the module");
}

fn peek_all(c: &mut redis::Connection) -> Vec<redis::Value> {
    FAMILIES
        .iter()
        .map(|f| call_ok(c, &peeking(&(f.fixed)(&probe_key(f), 3), f.peek)))
        .collect()
}

fn probe_key(f: &Family) -> String {
    format!("{}:probe", f.prefix)
}

#[test]
fn module_unload_and_load_keep_limiter_keys() {
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, T0);
    // One key per family, limit 3, charged once.
    for f in FAMILIES {
        let reply = call_ok(&mut c, &(f.fixed)(&probe_key(f), 3));
        assert!((f.admitted)(&reply), "{}", f.prefix);
    }
    // A key as redis-cell writes it: the TAT in decimal ns, 3 s ahead.
    let cell_tat_ns = (T0 + 3 * SECOND) * 1000;
    let _: () = redis::cmd("SET")
        .arg("cell:legacy")
        .arg(cell_tat_ns.to_string())
        .arg("PX")
        .arg(60_000)
        .query(&mut c)
        .unwrap();
    let state = snapshot(&mut c);
    let replies = peek_all(&mut c);

    let _: () = redis::cmd("MODULE")
        .arg("UNLOAD")
        .arg("ratelimit")
        .query(&mut c)
        .unwrap();
    let (code, _) = error_of(&mut c, &[b"RL.GCRA", b"x", b"1", b"1m"]);
    assert_eq!(code, "ERR", "the command is gone");
    assert_same_state(&state, &snapshot(&mut c), "after MODULE UNLOAD");

    let module = module_path();
    let _: () = redis::cmd("MODULE")
        .arg("LOAD")
        .arg(module.to_str().unwrap())
        .arg("clock")
        .arg("manual")
        .query(&mut c)
        .unwrap();
    clock_set(&mut c, T0);
    assert_same_state(&state, &snapshot(&mut c), "after MODULE LOAD");
    assert_eq!(peek_all(&mut c), replies, "same decisions");

    // redis-cell's key: limit 10 per 10 s, 3 in use; one more leaves 6.
    let reply = decide(&mut c, &["CL.THROTTLE", "cell:legacy", "9", "10", "10"]);
    assert_eq!(reply, [0, 10, 6, -1, 4]);
    let stored = get_bytes(&mut c, "cell:legacy").unwrap();
    assert_eq!(stored, ((T0 + 4 * SECOND) * 1000).to_string().into_bytes());
}
