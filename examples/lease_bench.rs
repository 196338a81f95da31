//! Acquire-then-release pairs and memory per held lease: RL.ACQUIRE and
//! RL.RELEASE against the sorted-set script (scripts/lua/lease_acquire.lua)
//! and ZREM, on a running server with the module loaded. Run by
//! scripts/bench.sh; alone:
//! `cargo run --release --example lease_bench -- PORT [ROUNDS] [PAIRS_PER_CLIENT]`.
//!
//! Each client thread sends a pipeline of 16 acquires, then a pipeline of
//! the 16 releases of what it got (the lease ids come back with the
//! acquires, so a pair needs two round trips either way). Module and script
//! alternate within each round; the ratio is taken per round, then the
//! median.

use redis::{Connection, Value};
use std::time::Instant;

const PIPELINE: usize = 16;

/// Client threads: CLIENTS in the environment, else 8.
fn clients() -> usize {
    std::env::var("CLIENTS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(8)
}
const LIMIT: u64 = 1_000;
const TTL_MS: u64 = 3_600_000;

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Module,
    Script,
}

fn connect(port: u16) -> Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/?protocol=2"))
        .and_then(|c| c.get_connection())
        .expect("connect")
}

/// A lease id as clients usually make one: a UUID-shaped string.
fn uuid(thread: usize, n: u64) -> String {
    let x = format!("{thread:08x}{n:024x}");
    format!(
        "{}-{}-{}-{}-{}",
        &x[0..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..32]
    )
}

fn key(thread: usize, n: u64, keyspace: u64) -> String {
    if keyspace == 1 {
        "bench:lease:hot".into()
    } else {
        // A cheap scramble, so consecutive pairs hit scattered keys.
        let k = (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ thread as u64) % keyspace;
        format!("bench:lease:{k}")
    }
}

/// Pairs per second over all clients; panics if a release fails.
fn pairs(port: u16, side: Side, sha: &str, keyspace: u64, per_client: u64) -> f64 {
    let start = Instant::now();
    let threads: Vec<_> = (0..clients())
        .map(|t| {
            let sha = sha.to_string();
            std::thread::spawn(move || {
                let mut c = connect(port);
                let mut done = 0u64;
                let mut n = 0u64;
                while done < per_client {
                    let mut acq = redis::pipe();
                    let mut batch = Vec::with_capacity(PIPELINE);
                    for _ in 0..PIPELINE {
                        n += 1;
                        let k = key(t, n, keyspace);
                        let id = uuid(t, n);
                        match side {
                            Side::Module => acq.cmd("RL.ACQUIRE").arg(&k).arg(LIMIT).arg("1h"),
                            Side::Script => acq
                                .cmd("EVALSHA")
                                .arg(&sha)
                                .arg(1)
                                .arg(&k)
                                .arg(LIMIT)
                                .arg(TTL_MS)
                                .arg(&id),
                        };
                        batch.push((k, id));
                    }
                    let replies: Vec<Value> = acq.query(&mut c).expect("acquires");
                    let mut rel = redis::pipe();
                    for ((k, id), r) in batch.iter().zip(replies) {
                        match (side, r) {
                            (Side::Module, Value::Array(v)) => {
                                if let Some(Value::BulkString(lease)) = v.get(5) {
                                    rel.cmd("RL.RELEASE").arg(k).arg(lease.as_slice());
                                }
                            }
                            (Side::Script, Value::Int(1)) => {
                                rel.cmd("ZREM").arg(k).arg(id);
                            }
                            _ => {}
                        }
                    }
                    let released: Vec<i64> = rel.query(&mut c).expect("releases");
                    assert!(released.iter().all(|&x| x == 1), "a release failed");
                    done += released.len() as u64;
                }
                done
            })
        })
        .collect();
    let total: u64 = threads.into_iter().map(|t| t.join().expect("client")).sum();
    total as f64 / start.elapsed().as_secs_f64()
}

fn used_memory(c: &mut Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

/// Bytes of used_memory per held lease: `keys` keys holding `per_key`
/// leases each.
fn memory(port: u16, side: Side, sha: &str, keys: u64, per_key: u64) -> f64 {
    let mut c = connect(port);
    let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
    let before = used_memory(&mut c);
    for k in 0..keys {
        let name = format!("mem:lease:{k}");
        for chunk in (0..per_key).collect::<Vec<_>>().chunks(500) {
            let mut p = redis::pipe();
            for &i in chunk {
                match side {
                    Side::Module => p.cmd("RL.ACQUIRE").arg(&name).arg(100_000).arg("1h"),
                    Side::Script => p
                        .cmd("EVALSHA")
                        .arg(sha)
                        .arg(1)
                        .arg(&name)
                        .arg(100_000)
                        .arg(TTL_MS)
                        .arg(uuid(k as usize, i)),
                }
                .ignore();
            }
            let _: () = p.query(&mut c).expect("acquires");
        }
    }
    let after = used_memory(&mut c);
    (after - before) as f64 / (keys * per_key) as f64
}

/// Server time per call of each command since the last CONFIG RESETSTAT.
fn usec_per_call(c: &mut Connection) -> Vec<(String, f64)> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(c)
        .expect("INFO");
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let usec = rest
                .split(',')
                .find_map(|f| f.strip_prefix("usec_per_call="))?;
            Some((name.to_string(), usec.parse().ok()?))
        })
        .collect()
}

fn usec_of(stats: &[(String, f64)], names: &[&str]) -> f64 {
    names
        .iter()
        .map(|n| stats.iter().find(|(s, _)| s == n).map_or(0.0, |s| s.1))
        .sum()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).expect("PORT");
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(3);
    let per_client: u64 = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(20_000);
    let mut c = connect(port);
    let script = std::fs::read_to_string("scripts/lua/lease_acquire.lua").expect("script");
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .query(&mut c)
        .expect("SCRIPT LOAD");
    println!(
        "\n#### Leases: acquire-then-release pairs ({} clients, pipelines of {PIPELINE}, medians of {rounds} rounds)\n",
        clients()
    );
    println!("| keys | RL.ACQUIRE + RL.RELEASE pairs/s | script + ZREM pairs/s | × script | server µs per pair: module | script | × script |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (label, keyspace) in [("one hot key", 1u64), ("100,000 keys", 100_000)] {
        let (mut m, mut s, mut x) = (Vec::new(), Vec::new(), Vec::new());
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut c)
            .expect("RESETSTAT");
        for _ in 0..rounds {
            let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
            let a = pairs(port, Side::Module, &sha, keyspace, per_client);
            let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
            let b = pairs(port, Side::Script, &sha, keyspace, per_client);
            m.push(a);
            s.push(b);
            x.push(a / b);
        }
        let ratio = median(x);
        let stats = usec_per_call(&mut c);
        let module_us = usec_of(&stats, &["rl.acquire", "rl.release"]);
        let script_us = usec_of(&stats, &["evalsha", "zrem"]);
        println!(
            "| {label} | {:.0} | {:.0} | {ratio:.2} (target ≥ 3: {}) | {module_us:.2} | {script_us:.2} | {:.2} |",
            median(m),
            median(s),
            if ratio >= 3.0 { "met" } else { "MISSED" },
            script_us / module_us
        );
    }
    println!("\n#### Leases: used_memory per held lease\n");
    println!("| leases held | RL.ACQUIRE bytes | sorted-set member bytes | × sorted set |");
    println!("|---|---:|---:|---:|");
    for (label, keys, per_key) in [
        ("10 keys × 10,000", 10u64, 10_000u64),
        ("20,000 keys × 5", 20_000, 5),
    ] {
        let a = memory(port, Side::Module, &sha, keys, per_key);
        let b = memory(port, Side::Script, &sha, keys, per_key);
        println!(
            "| {label} | {a:.1} | {b:.1} | {:.2} (target ≤ 0.5: {}) |",
            a / b,
            if a / b <= 0.5 { "met" } else { "MISSED" }
        );
    }
    let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
}
