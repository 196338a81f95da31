//! Redis Cluster as it is: three primaries and three replicas started here,
//! driven by the redis crate's cluster client. A limiter in each of the
//! 16384 slots and a random workload over every command decide and
//! replicate (each shard's replica has its primary's digest); RL.ALL,
//! RL.SHARE and RL.SHARE.PEEK answer CROSSSLOT for keys in different slots
//! and work with hash tags;
//! a slot moved with SETSLOT/MIGRATE and 50 slots resharded the same way
//! keep their limiter state; a primary killed mid-run
//! fails over to its caught-up replica and no key admits more than its
//! limit. A client waiting (`WAIT`) on a key whose slot moves away is denied,
//! never admitted on the old node. No node is judged failed for being slow
//! (a node timeout of a minute): the one failover is the test's own.
//!
//! The test moves slots itself rather than with `redis-cli --cluster
//! reshard`: a server that replicates `CLUSTER SETSLOT` before running it
//! (Valkey 8) waits for its replicas' acknowledgement only as long as the
//! command's `TIMEOUT` says (2 s if none), and redis-cli passes none. The
//! test passes `TIMEOUT 0` (no limit) to servers that take the option.
//!
//! One test, so that the cluster is built once (about two seconds).

mod common;
use common::topology::*;
use common::workload::*;
use common::*;
use redis::cluster::{ClusterClient, ClusterConnection};
use std::time::{Duration, Instant};

struct Cluster {
    nodes: Vec<Server>,
    /// Whether `CLUSTER SETSLOT` takes `TIMEOUT` (learnt by trying it).
    setslot_takes_timeout: bool,
}

/// A minute: how long a step that waits on other nodes may take before
/// the test calls it hung. No assertion depends on it.
const HUNG: Duration = Duration::from_secs(60);

impl Cluster {
    fn start() -> Cluster {
        let config = Config::default()
            .arg("cluster-enabled", "yes")
            .arg("cluster-config-file", "nodes.conf")
            .arg("cluster-node-timeout", "60000");
        // (A port whose bus port, +10000, is taken or out of range fails to
        // start; the harness then retries on another port.)
        let nodes: Vec<Server> = (0..6).map(|_| Server::with(config.clone())).collect();
        let mut create = std::process::Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for n in &nodes {
            create.arg(format!("127.0.0.1:{}", n.port));
        }
        let out = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli");
        assert!(
            out.status.success(),
            "cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let mut cluster = Cluster {
            nodes,
            setslot_takes_timeout: false,
        };
        cluster.wait_healthy();
        cluster.setslot_takes_timeout = cluster.try_setslot_timeout();
        for n in &cluster.nodes {
            clock_set(&mut n.conn(), T0);
        }
        cluster
    }

    /// Waits (bounded) until every node sees every slot served.
    fn wait_healthy(&self) {
        for n in &self.nodes {
            let mut c = n.conn();
            wait_until("cluster_state:ok", 30, || {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).unwrap();
                info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
            });
        }
    }

    /// Tries `CLUSTER SETSLOT <slot> STABLE TIMEOUT 0` on a slot a primary
    /// serves with no migration under way: a no-op where the server takes
    /// the option, an error (and a no-op) where it does not.
    fn try_setslot_timeout(&self) -> bool {
        let primary = (0..6).find(|&i| self.is_primary(i)).expect("a primary");
        let slot = self.ranges(primary)[0].0;
        let mut c = self.nodes[primary].conn();
        c.set_read_timeout(Some(HUNG)).expect("read timeout");
        redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("STABLE")
            .arg("TIMEOUT")
            .arg(0)
            .query::<()>(&mut c)
            .is_ok()
    }

    /// `CLUSTER SETSLOT <slot> <how> <id>` on node `i`, waiting for its
    /// replicas however long they take where the server may wait for them.
    fn setslot(&self, i: usize, slot: u16, how: &str, id: &str) {
        let mut c = self.nodes[i].conn();
        c.set_read_timeout(Some(HUNG)).expect("read timeout");
        let mut setslot = redis::cmd("CLUSTER");
        setslot.arg("SETSLOT").arg(slot).arg(how).arg(id);
        if self.setslot_takes_timeout {
            setslot.arg("TIMEOUT").arg(0);
        }
        setslot
            .query::<()>(&mut c)
            .unwrap_or_else(|e| panic!("SETSLOT {slot} {how} on node {i}: {e}"));
    }

    /// Starts moving `slot` from `source` to `target`: IMPORTING on the
    /// target, then MIGRATING on the source.
    fn begin_move(&self, slot: u16, source: usize, target: usize) {
        self.setslot(target, slot, "IMPORTING", &self.id(source));
        self.setslot(source, slot, "MIGRATING", &self.id(target));
    }

    /// Moves every key of `slot` from `source` to `target` with MIGRATE, a
    /// batch at a time, until the source holds none; returns the keys.
    fn migrate_keys(&self, slot: u16, source: usize, target: usize) -> Vec<Vec<u8>> {
        let mut src = self.nodes[source].conn();
        let mut moved = Vec::new();
        loop {
            let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(1000)
                .query(&mut src)
                .unwrap();
            if keys.is_empty() {
                return moved;
            }
            // MIGRATE's timeout bounds each I/O wait (0 means 1 s there).
            let _: String = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(self.nodes[target].port)
                .arg("")
                .arg(0)
                .arg(HUNG.as_millis() as u64)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut src)
                .unwrap_or_else(|e| panic!("MIGRATE slot {slot}: {e}"));
            moved.extend(keys);
        }
    }

    /// Ends a move: every primary learns that `target` serves `slot`, the
    /// target first (as `redis-cli --cluster reshard` does it).
    fn end_move(&self, slot: u16, target: usize) {
        let target_id = self.id(target);
        let others = (0..6).filter(|&i| i != target && self.is_primary(i));
        for i in std::iter::once(target).chain(others) {
            self.setslot(i, slot, "NODE", &target_id);
        }
    }

    fn client(&self) -> ClusterConnection {
        self.try_client().expect("cluster client")
    }

    fn try_client(&self) -> redis::RedisResult<ClusterConnection> {
        let urls: Vec<String> = self.nodes.iter().map(Server::url).collect();
        ClusterClient::builder(urls)
            .retries(2)
            .build()?
            .get_connection()
    }

    fn id(&self, i: usize) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut self.nodes[i].conn())
            .unwrap()
    }

    fn is_primary(&self, i: usize) -> bool {
        info_field(&mut self.nodes[i].conn(), "replication", "role").as_deref() == Some("master")
    }

    /// The index of the primary serving `slot`, and of its replica.
    fn shard_of(&self, slot: u16) -> (usize, usize) {
        let primary = (0..6)
            .find(|&i| self.is_primary(i) && self.owns(i, slot))
            .expect("an owner");
        let link = format!("master_port:{}", self.nodes[primary].port);
        let replica = (0..6)
            .find(|&i| {
                i != primary && info(&mut self.nodes[i].conn(), "replication").contains(&link)
            })
            .expect("a replica");
        (primary, replica)
    }

    /// The slot ranges node `i` serves itself, from its own CLUSTER NODES
    /// line.
    fn ranges(&self, i: usize) -> Vec<(u16, u16)> {
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut self.nodes[i].conn())
            .unwrap();
        let me = nodes.lines().find(|l| l.contains("myself")).unwrap();
        me.split(' ')
            .skip(8)
            .filter_map(|range| {
                let mut ends = range.split('-').map(|x| x.parse::<u16>());
                match (ends.next(), ends.next()) {
                    (Some(Ok(a)), Some(Ok(b))) => Some((a, b)),
                    (Some(Ok(a)), None) => Some((a, a)),
                    _ => None, // a migration note such as [5-<-id]
                }
            })
            .collect()
    }

    fn owns(&self, i: usize, slot: u16) -> bool {
        self.ranges(i).iter().any(|&(a, b)| (a..=b).contains(&slot))
    }

    /// Waits until the replica `r` has applied everything primary `p` wrote.
    fn wait_caught_up(&self, p: usize, r: usize) {
        let (mut pc, mut rc) = (self.nodes[p].conn(), self.nodes[r].conn());
        wait_until("the replica to catch up", 10, || {
            repl_offset(&mut rc) >= repl_offset(&mut pc)
        });
    }
}

fn slot(c: &mut redis::Connection, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(c)
        .unwrap()
}

#[test]
fn limiters_work_on_redis_cluster() {
    let mut cluster = Cluster::start();
    let mut client = cluster.client();
    every_shard_decides_and_replicates(&cluster, &mut client);
    cross_slot_calls_are_refused(&mut client);
    migrated_slot_keeps_limiter_state(&cluster, &mut client);
    a_waiter_whose_slot_moves_away_is_denied(&cluster);
    resharding_keeps_limiter_state(&cluster);
    killed_primary_fails_over_with_limits_kept(&mut cluster);
}

/// Redis Cluster's key hash (CRC16/XMODEM), for keys without hash tags.
fn key_slot(key: &str) -> u16 {
    let mut crc = 0u16;
    for &b in key.as_bytes() {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc & 16383
}

/// One limiter key in every one of the 16384 slots, each charged once on
/// the node that serves it (a pipeline per primary: a wrong slot would be
/// answered MOVED).
fn every_slot_holds_a_limiter(cluster: &Cluster) {
    let mut any = cluster.nodes[0].conn();
    for key in ["a", "b", "slot:123", "user:42"] {
        assert_eq!(key_slot(key), slot(&mut any, key), "{key}");
    }
    let mut key_of = vec![None; 16384];
    let mut left = 16384;
    for n in 0.. {
        let key = format!("slot:{n}");
        let s = usize::from(key_slot(&key));
        if key_of[s].is_none() {
            key_of[s] = Some(key);
            left -= 1;
            if left == 0 {
                break;
            }
        }
    }
    let mut total = 0;
    for i in (0..6).filter(|&i| cluster.is_primary(i)) {
        let mut pipe = redis::pipe();
        let mut families = Vec::new();
        for (a, b) in cluster.ranges(i) {
            for s in a..=b {
                let family = &FAMILIES[usize::from(s) % FAMILIES.len()];
                let key = key_of[usize::from(s)].as_ref().unwrap();
                let call = (family.fixed)(key, 3);
                pipe.cmd(&call[0]).arg(&call[1..]);
                families.push(family);
            }
        }
        let replies: Vec<redis::Value> = pipe.query(&mut cluster.nodes[i].conn()).unwrap();
        for (reply, family) in replies.iter().zip(families) {
            assert!((family.admitted)(reply), "{reply:?}");
        }
        total += replies.len();
    }
    assert_eq!(total, 16384, "every slot is served");
}

fn every_shard_decides_and_replicates(cluster: &Cluster, client: &mut ClusterConnection) {
    every_slot_holds_a_limiter(cluster);
    // Periods of days: no key expires on the wall clock while the test
    // runs, so shards and replicas compare whole.
    let mut workload = Workload::new(101, Windows::Days);
    workload.keys = 500;
    let tally = workload.run_singly(client, 2000);
    assert!(tally.allowed > 300 && tally.denied > 300, "{tally:?}");
    workload.assert_both_outcomes();
    for i in (0..6).filter(|&i| cluster.is_primary(i)) {
        let mut c = cluster.nodes[i].conn();
        let keys: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert!(keys > 100, "node {i} holds {keys} keys");
        let slot0 = cluster.ranges(i)[0].0;
        let (p, r) = cluster.shard_of(slot0);
        assert_eq!(p, i);
        cluster.wait_caught_up(p, r);
        let mut rc = cluster.nodes[r].conn();
        assert_eq!(digest(&mut c), digest(&mut rc), "shard of node {i}");
    }
}

fn cross_slot_calls_are_refused(client: &mut ClusterConnection) {
    // "a" and "b" hash to different slots; RL.ALL, RL.SHARE and its look
    // declare their keys.
    let path = ["10", "1s", "CEIL", "50", "100", "1s"];
    let cross: [Vec<&str>; 3] = [
        vec![
            "RL.ALL", "2", "a", "b", "GCRA", "10", "1s", "GCRA", "10", "1s",
        ],
        [&["RL.SHARE", "2", "a", "b"][..], &path].concat(),
        [&["RL.SHARE.PEEK", "2", "a", "b"][..], &path].concat(),
    ];
    for args in &cross {
        let err = common::cmd(args).query::<redis::Value>(client).unwrap_err();
        assert_eq!(err.code(), Some("CROSSSLOT"), "{args:?}: {err}");
    }
    // With a hash tag both keys share a slot, wherever it lives.
    for org in 0..20 {
        let user = format!("{{org:{org}}}:user:42");
        let org = format!("{{org:{org}}}");
        let reply = call_ok(
            client,
            &[
                "RL.ALL", "2", &user, &org, "GCRA", "10", "1s", "GCRA", "15", "1s",
            ],
        );
        assert!(rl_admits(&reply), "{reply:?}");
        // A path in the same slot (keys of its own: RL.ALL's hold GCRA
        // state), then a look at it.
        let (leaf, root) = (format!("{user}:share"), format!("{org}:share"));
        for command in ["RL.SHARE", "RL.SHARE.PEEK"] {
            let call = [&[command, "2", &leaf, &root][..], &path].concat();
            let reply = call_ok(client, &call);
            assert!(rl_admits(&reply), "{call:?}: {reply:?}");
        }
    }
}

fn rl_admits(reply: &redis::Value) -> bool {
    matches!(reply, redis::Value::Array(v) if v.first() == Some(&redis::Value::Int(1)))
}

fn migrated_slot_keeps_limiter_state(cluster: &Cluster, client: &mut ClusterConnection) {
    let mut workload = Workload::new(102, Windows::Days);
    workload.keys = 30;
    workload.hash_tag = Some("migrating".into());
    workload.run_singly(client, 300);
    let mut any = cluster.nodes[0].conn();
    let slot = slot(&mut any, "{migrating}");
    let (source, _) = cluster.shard_of(slot);
    let target = (0..6)
        .find(|&i| i != source && cluster.is_primary(i))
        .unwrap();
    let (mut src, mut dst) = (cluster.nodes[source].conn(), cluster.nodes[target].conn());
    // Every key in the slot (other keys may share it).
    let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(1000)
        .query(&mut src)
        .unwrap();
    let in_slot = |state: Vec<(Vec<u8>, Vec<u8>, i64)>| -> Vec<_> {
        state
            .into_iter()
            .filter(|(k, _, _)| keys.contains(k))
            .collect()
    };
    let before = in_slot(snapshot(&mut src));
    assert!(before.len() > 20, "{} keys to move", before.len());
    // What each key decides now (peeks), to compare after the move.
    let peeks: Vec<(Vec<String>, redis::Value)> = FAMILIES
        .iter()
        .map(|f| {
            let call = peeking(
                &(f.fixed)(&format!("{{migrating}}:{}:h1", f.prefix), 5),
                f.peek,
            );
            let reply = call_ok(client, &call);
            (call, reply)
        })
        .collect();

    cluster.begin_move(slot, source, target);
    let started = server_ms(&mut src);
    cluster.migrate_keys(slot, source, target);
    let took = server_ms(&mut dst) - started;
    cluster.end_move(slot, target);
    // Same bytes; the same expiry up to MIGRATE's relative TTL, which moves
    // it later by the time between the source reading it and the target
    // restoring it: at most as long as MIGRATE took.
    let after = in_slot(snapshot(&mut dst));
    assert_eq!(after.len(), before.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!((&b.0, &b.1), (&a.0, &a.1));
        assert!(
            (0..=took).contains(&(a.2 - b.2)),
            "expiry moved from {} to {} (MIGRATE took {took} ms)",
            b.2,
            a.2
        );
    }
    // The cluster client follows the move; decisions continue unchanged.
    wait_until("every node to know the slot's new owner", 10, || {
        cluster.owns(target, slot)
    });
    for (call, reply) in &peeks {
        let args: Vec<&str> = call.iter().map(String::as_str).collect();
        let now = call_retrying(cluster, client, &args);
        assert_eq!(&now, reply, "{call:?}");
    }
}

/// WAIT: a client waiting on a key whose slot is moved to another node
/// (SETSLOT/MIGRATE) is denied when its time comes, never admitted on the
/// node that no longer holds the key.
fn a_waiter_whose_slot_moves_away_is_denied(cluster: &Cluster) {
    let key = "{waiting}:k";
    let mut any = cluster.nodes[0].conn();
    let slot = slot(&mut any, key);
    let (source, _) = cluster.shard_of(slot);
    let target = (0..6)
        .find(|&i| i != source && cluster.is_primary(i))
        .unwrap();
    let (mut src, mut dst) = (cluster.nodes[source].conn(), cluster.nodes[target].conn());
    let limit = ["RL.GCRA", key, "1", "1h"];
    assert_eq!(call_ok_plain(&mut src, &limit)[0], 1);
    let mut waiter = cluster.nodes[source].conn();
    let mut args = limit.to_vec();
    args.extend(["WAIT", "2h"]);
    waiter
        .send_packed_command(&cmd(&args).get_packed_command())
        .unwrap();
    wait_until("the waiter to block", 10, || {
        info_field(&mut src, "ratelimit", "ratelimit_waiting").as_deref() == Some("1")
    });
    cluster.begin_move(slot, source, target);
    // Every key in the slot (earlier steps put a limiter in every slot).
    let keys = cluster.migrate_keys(slot, source, target);
    // Mid-migration, the key gone: its time comes, it is denied.
    let before = clock(&mut src);
    advance(&mut src, 3_600_000_000);
    let reply: Vec<i64> = redis::from_redis_value(waiter.recv_response().unwrap()).unwrap();
    assert_eq!(reply[0], 0, "{reply:?}");
    // The later steps expect every node's clock where it was.
    clock_set(&mut src, before);
    cluster.end_move(slot, target);
    let left: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut src)
        .unwrap();
    assert_eq!(left, 0, "nothing written on the source");
    let moved: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut dst)
        .unwrap();
    assert_eq!(moved, keys.len() as i64);
}

fn call_ok_plain(c: &mut redis::Connection, args: &[&str]) -> Vec<i64> {
    cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// 50 slots full of limiter keys move from one primary to another, one
/// slot after the other as `redis-cli --cluster reshard` moves them; every
/// key arrives with its bytes and its TTL.
fn resharding_keeps_limiter_state(cluster: &Cluster) {
    let primaries: Vec<usize> = (0..6).filter(|&i| cluster.is_primary(i)).collect();
    let (source, target) = (primaries[0], primaries[1]);
    let slots: Vec<u16> = cluster
        .ranges(source)
        .into_iter()
        .flat_map(|(a, b)| a..=b)
        .take(50)
        .collect();
    assert_eq!(slots.len(), 50);
    let before = snapshot(&mut cluster.nodes[source].conn());
    let started = server_ms(&mut cluster.nodes[source].conn());
    for &slot in &slots {
        cluster.begin_move(slot, source, target);
        cluster.migrate_keys(slot, source, target);
        cluster.end_move(slot, target);
    }
    let took = server_ms(&mut cluster.nodes[target].conn()) - started;
    let moved = snapshot(&mut cluster.nodes[target].conn());
    let mut arrived = 0;
    for (key, value, expiry) in &before {
        if let Some((_, v, t)) = moved.iter().find(|(k, _, _)| k == key) {
            arrived += 1;
            assert_eq!(v, value, "{}", String::from_utf8_lossy(key));
            // MIGRATE sends the TTL, relative: it may grow by the transfer
            // time, at most the time the whole reshard took.
            assert!(
                (0..=took).contains(&(t - expiry)),
                "expiry {expiry} -> {t} (the reshard took {took} ms)"
            );
        }
    }
    assert!(arrived >= 50, "{arrived} keys moved with their slots");
    let ranges = cluster.ranges(target);
    for slot in slots {
        assert!(
            ranges.iter().any(|&(a, b)| (a..=b).contains(&slot)),
            "{slot}"
        );
    }
    cluster.wait_healthy();
}

/// Sends a call through the cluster client, retrying (bounded) while the
/// cluster reconfigures; after a failure the client is rebuilt, so that it
/// learns the new slot owners. A refused call never ran.
fn call_retrying(cluster: &Cluster, client: &mut ClusterConnection, args: &[&str]) -> redis::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match common::cmd(args).query::<redis::Value>(client) {
            Ok(v) => return v,
            Err(e) => {
                assert!(Instant::now() < deadline, "{args:?} still failing: {e}");
                std::thread::sleep(Duration::from_millis(100));
                if let Ok(fresh) = cluster.try_client() {
                    *client = fresh;
                }
            }
        }
    }
}

fn killed_primary_fails_over_with_limits_kept(cluster: &mut Cluster) {
    const LIMIT: u64 = 6;
    let mut client = cluster.client();
    let mut any = cluster.nodes[0].conn();
    let slot = slot(&mut any, "{failover}");
    drop(any);
    let (primary, replica) = cluster.shard_of(slot);
    let calls: Vec<(Vec<String>, &Family)> = FAMILIES
        .iter()
        .flat_map(|f| {
            (0..3).map(move |i| {
                (
                    (f.fixed)(&format!("{{failover}}:{}:{i}", f.prefix), LIMIT),
                    f,
                )
            })
        })
        .collect();
    let mut admitted = vec![0u64; calls.len()];
    let round = |cluster: &Cluster, client: &mut ClusterConnection, admitted: &mut Vec<u64>| {
        for (i, (call, family)) in calls.iter().enumerate() {
            let args: Vec<&str> = call.iter().map(String::as_str).collect();
            let reply = call_retrying(cluster, client, &args);
            if (family.admitted)(&reply) {
                admitted[i] += 1;
            }
        }
    };
    for _ in 0..3 {
        round(cluster, &mut client, &mut admitted);
    }
    // The replica has everything: the failover must lose nothing.
    cluster.wait_caught_up(primary, replica);
    kill9(&mut cluster.nodes[primary]);
    // The replica takes over at once, as an operator (or the failure
    // detector, a node timeout later) would have it do.
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .arg("TAKEOVER")
        .query(&mut cluster.nodes[replica].conn())
        .unwrap();
    // The client keeps calling; its calls fail until it learns the new
    // owner, then go there.
    for _ in 0..=LIMIT {
        round(cluster, &mut client, &mut admitted);
    }
    let mut r = cluster.nodes[replica].conn();
    assert_eq!(info_field(&mut r, "replication", "role").unwrap(), "master");
    for (i, (call, _)) in calls.iter().enumerate() {
        assert_eq!(admitted[i], LIMIT, "{call:?}");
    }
}
