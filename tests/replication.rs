//! Effects replication: replicas and a server restarted from its AOF hold
//! byte-identical values and expiry times.

mod common;
use common::*;
use rand::{Rng, SeedableRng};

/// A random call among the decision commands, with long periods so that no
/// key expires while the test runs (expiry would race the digests).
fn random_call(rng: &mut rand::rngs::StdRng) -> Vec<String> {
    let key = format!("k{}", rng.gen_range(0..300));
    let limit = rng.gen_range(1..20).to_string();
    let period = ["1m", "7m", "1h", "90s"][rng.gen_range(0..4)].to_string();
    let cost = rng.gen_range(0..4).to_string();
    let mut call: Vec<String> = match rng.gen_range(0..5) {
        3 => vec![
            "RL.ALL".into(),
            "2".into(),
            format!("a:{key}"),
            format!("a:org{}", rng.gen_range(0..5)),
            "GCRA".into(),
            limit.clone(),
            period.clone(),
            "BUCKET".into(),
            rng.gen_range(5..40).to_string(),
            "1".into(),
            period,
        ],
        4 => {
            let mode = ["EXACT", "APPROX", "BUCKETS 6"][rng.gen_range(0..3)];
            let mut all: Vec<String> = vec![
                "RL.ALL".into(),
                "2".into(),
                format!("w:{key}:{}", mode.len()),
                format!("w:org{}", rng.gen_range(0..5)),
                "SLIDING".into(),
                limit.clone(),
                period.clone(),
            ];
            all.extend(mode.split(' ').map(String::from));
            all.extend(["FIXED".into(), rng.gen_range(5..40).to_string(), period]);
            all
        }
        0 => vec!["RL.GCRA".into(), format!("g:{key}"), limit, period],
        1 => vec![
            "RL.BUCKET".into(),
            format!("b:{key}"),
            limit,
            rng.gen_range(1..5).to_string(),
            period,
        ],
        _ => {
            return vec![
                "CL.THROTTLE".into(),
                format!("c:{key}"),
                rng.gen_range(0..10).to_string(),
                limit,
                rng.gen_range(60..3600).to_string(),
                cost,
            ]
        }
    };
    call.extend(["COST".to_string(), cost]);
    if rng.gen_bool(0.1) {
        call.push("DRYRUN".into());
    }
    call
}

fn run_workload(c: &mut redis::Connection, seed: u64, calls: usize) -> (usize, usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (mut allowed, mut denied) = (0, 0);
    for _ in 0..calls {
        if rng.gen_bool(0.05) {
            advance(c, rng.gen_range(0..5 * SECOND));
        }
        let call = random_call(&mut rng);
        let args: Vec<&str> = call.iter().map(String::as_str).collect();
        let reply: Vec<redis::Value> = cmd(&args).query(c).unwrap();
        let first = matches!(reply[0], redis::Value::Int(1));
        let admitted = if args[0] == "CL.THROTTLE" {
            !first
        } else {
            first
        };
        if admitted {
            allowed += 1;
        } else {
            denied += 1;
        }
    }
    (allowed, denied)
}

fn wait_for_replicas(c: &mut redis::Connection, n: usize) {
    let acked: usize = redis::cmd("WAIT").arg(n).arg(10_000).query(c).unwrap();
    assert_eq!(acked, n, "replicas did not catch up");
}

#[test]
fn replica_digest_equals_primary_after_random_workload() {
    let primary = Server::start();
    let replica =
        Server::with(Config::default().arg("replicaof", &format!("127.0.0.1 {}", primary.port)));
    let mut p = primary.conn();
    let mut r = replica.conn();
    // Wait (bounded) for the initial sync.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "replica never synced");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    clock_set(&mut p, T0);
    // The replica's own clock must not matter: set it far away.
    clock_set(&mut r, 1);
    // Clients' own probes (CLIENT SETINFO on 7.0) count as errors: compare.
    let errors_before: String = redis::cmd("INFO").arg("errorstats").query(&mut r).unwrap();
    let (allowed, denied) = run_workload(&mut p, 7, 4000);
    assert!(
        allowed > 500 && denied > 500,
        "{allowed} allowed, {denied} denied"
    );
    wait_for_replicas(&mut p, 1);
    let keys: usize = redis::cmd("DBSIZE").query(&mut p).unwrap();
    assert!(keys > 100);
    assert_eq!(digest(&mut p), digest(&mut r));
    // Expiry times are identical too, not just values.
    for key in ["g:k1", "b:k2", "c:k3"] {
        assert_eq!(pexpiretime(&mut p, key), pexpiretime(&mut r, key), "{key}");
    }
    let errors: String = redis::cmd("INFO").arg("errorstats").query(&mut r).unwrap();
    assert_eq!(
        errors, errors_before,
        "the replication stream caused errors"
    );
    assert!(!replica.log().contains("sending an error to its master"));
}

#[test]
fn aof_restart_restores_identical_state() {
    for preamble in ["no", "yes"] {
        let config = Config::default()
            .arg("appendonly", "yes")
            .arg("appendfsync", "everysec")
            .arg("aof-use-rdb-preamble", preamble);
        let server = Server::with(config);
        let mut c = server.conn();
        clock_set(&mut c, T0);
        run_workload(&mut c, 11, 2000);
        if preamble == "yes" {
            // Rewrite into an RDB preamble, then add more to the tail.
            let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
            wait_rewrite(&mut c);
            run_workload(&mut c, 12, 500);
        }
        let before = digest(&mut c);
        let expire = pexpiretime(&mut c, "g:k1");
        drop(c);
        let server = server.restart();
        let mut c = server.conn();
        assert_eq!(digest(&mut c), before, "preamble {preamble}");
        assert_eq!(pexpiretime(&mut c, "g:k1"), expire);
    }
}

fn wait_rewrite(c: &mut redis::Connection) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "rewrite never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

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
    let dir = aof.dir.join("appendonlydir");
    let mut text = String::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".incr.aof") {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(path).unwrap()));
        }
    }
    assert!(!text.to_lowercase().contains("rl.gcra"), "{text}");
    assert!(!text.to_lowercase().contains("cl.throttle"), "{text}");
    assert_eq!(text.matches("PXAT").count(), 2, "{text}");
    assert!(text.contains("marker"));
}
