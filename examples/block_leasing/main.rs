//! Leasing blocks of units with the client library: `P` workers (threads,
//! each with its own connection and its own leased limit, as separate
//! processes would be) offer requests at fixed intervals, together 1.2× the
//! limit of one GCRA limit, and admit them from blocks of `k` taken with
//! `PARTIAL` (`20q`: blocks of 20 queued for on the server while the key
//! is contended, `COST 20 WAIT 1s`; the worker's requests wait meanwhile);
//! a denied request is dropped. Every 400 ms of work each worker
//! goes idle for 100 ms, and gives its unused units back with `REFUND` once
//! idle for 50 ms (and at the end). For every `P` and `k` it reports store
//! commands per admitted request (counted by the client, and by the
//! server's `INFO commandstats`), the refunds, admitted per second against
//! the limit, and the worst over-admission in any one-second window against
//! the bound `k × P`.
//!
//! ```sh
//! make run                                         # redis-server with the module, port 6379
//! cargo run --release --example block_leasing       # P in 1,10,50; k in 1,5,20,≤20,20q; 3 s each
//! cargo run --release --example block_leasing -- 2000 3  # limit per second, seconds per run
//! ```
//!
//! `REDIS_URL` (default `redis://127.0.0.1:6379/`) overrides the server.

use redis_ratelimit_client::{BlockingLeasedLimit, Gcra, LeasePlan};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const BUSY: Duration = Duration::from_millis(400);
const IDLE: Duration = Duration::from_millis(100);
const REFUND_WHEN_IDLE: Duration = Duration::from_millis(50);
/// How long a queued block may wait in the server's line.
const QUEUE_TIMEOUT: Duration = Duration::from_secs(1);
/// What all workers together offer, as a multiple of the limit.
const OFFERED: f64 = 1.2;

/// What one run measured.
struct Run {
    admitted: usize,
    commands: u64,
    server_commands: u64,
    refunds: u64,
    seconds: f64,
    /// The most admitted in any one-second window.
    worst_window: usize,
}

/// How many `RL.GCRA` the server has run.
fn server_calls(url: &str) -> u64 {
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_rl.gcra:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A block size: fixed, or adaptive up to a maximum; or fixed and queued
/// on the server while the key is contended.
#[derive(Clone, Copy)]
enum Block {
    Fixed(u64),
    Adaptive(u64),
    Queued(u64),
}

impl Block {
    fn lease(self) -> LeasePlan {
        match self {
            Block::Fixed(k) => LeasePlan::fixed(k),
            Block::Adaptive(max) => LeasePlan::adaptive(max),
            Block::Queued(k) => LeasePlan::fixed(k).queued(QUEUE_TIMEOUT),
        }
    }

    fn max(self) -> u64 {
        match self {
            Block::Fixed(k) | Block::Adaptive(k) | Block::Queued(k) => k,
        }
    }

    fn label(self) -> String {
        match self {
            Block::Fixed(k) => k.to_string(),
            Block::Adaptive(max) => format!("≤{max}"),
            Block::Queued(k) => format!("{k}q"),
        }
    }
}

fn run(url: &str, limit: u64, burst: u64, workers: usize, block: Block, secs: u64) -> Run {
    let k = block.label();
    let key = format!("lease:{limit}:{workers}:{k}:{}", std::process::id());
    let policy = Gcra::new(limit, Duration::from_secs(1)).burst(burst);
    let barrier = Arc::new(Barrier::new(workers));
    let before = server_calls(url);
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let (url, key, barrier) = (url.to_string(), key.clone(), barrier.clone());
            thread::spawn(move || {
                let conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut lease = BlockingLeasedLimit::new(conn, key, policy, block.lease());
                let mut admitted = Vec::new();
                let mut refunds = 0;
                barrier.wait();
                let start = Instant::now();
                let end = start + Duration::from_secs(secs);
                let interval = Duration::from_secs_f64(workers as f64 / (limit as f64 * OFFERED));
                let mut next = start;
                loop {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    let phase = now.duration_since(start).as_nanos() % (BUSY + IDLE).as_nanos();
                    if phase >= BUSY.as_nanos() {
                        // Idle: give the block back, then wait for work.
                        thread::sleep(REFUND_WHEN_IDLE);
                        let held = lease.lease().held();
                        lease.refund_if_idle(REFUND_WHEN_IDLE).unwrap();
                        refunds += u64::from(held > 0);
                        thread::sleep(IDLE.saturating_sub(REFUND_WHEN_IDLE));
                        next = Instant::now();
                        continue;
                    }
                    if now < next {
                        thread::sleep(next - now);
                        continue;
                    }
                    next += interval;
                    if lease.acquire().unwrap().allowed {
                        admitted.push(now);
                    }
                }
                refunds += u64::from(lease.lease().held() > 0);
                lease.refund_all().unwrap();
                (admitted, lease.commands(), refunds)
            })
        })
        .collect();
    let mut all = Vec::new();
    let (mut commands, mut refunds) = (0, 0);
    for h in handles {
        let (a, c, r) = h.join().unwrap();
        all.extend(a);
        commands += c;
        refunds += r;
    }
    all.sort_unstable();
    let seconds = match (all.first(), all.last()) {
        (Some(a), Some(b)) => b.duration_since(*a).as_secs_f64().max(1e-9),
        _ => secs as f64,
    };
    Run {
        admitted: all.len(),
        commands,
        server_commands: server_calls(url) - before,
        refunds,
        seconds,
        worst_window: worst_window(&all, Duration::from_secs(1)),
    }
}

/// The most instants in any half-open window of length `w`.
fn worst_window(sorted: &[Instant], w: Duration) -> usize {
    let mut worst = 0;
    let mut start = 0;
    for (end, t) in sorted.iter().enumerate() {
        while t.duration_since(sorted[start]) >= w {
            start += 1;
        }
        worst = worst.max(end + 1 - start);
    }
    worst
}

fn main() {
    let url = std::env::var("REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let limit = args.first().copied().unwrap_or(2_000);
    let secs = args.get(1).copied().unwrap_or(3);
    let burst = (limit / 20).max(1);
    // Any one-second window of GCRA admits at most burst + limit.
    let allowed = (burst + limit) as usize;
    println!("GCRA {limit} per second, BURST {burst}: at most {allowed} in any 1 s window; {secs} s per run");
    println!(
        "{:>3} {:>3} | {:>10} {:>10} {:>7} | {:>11} {:>8} | {:>12} {:>6} {:>6}",
        "P",
        "k",
        "cmds/admit",
        "server",
        "refunds",
        "admitted/s",
        "/limit",
        "worst 1s win",
        "over",
        "k×P"
    );
    for workers in [1usize, 10, 50] {
        for block in [
            Block::Fixed(1),
            Block::Fixed(5),
            Block::Fixed(20),
            Block::Adaptive(20),
            Block::Queued(20),
        ] {
            let (k, kp) = (block.label(), block.max() as usize * workers);
            let r = run(&url, limit, burst, workers, block, secs);
            let admitted = r.admitted.max(1) as f64;
            let rate = r.admitted as f64 / r.seconds;
            let over = r.worst_window as i64 - allowed as i64;
            println!(
                "{workers:>3} {k:>3} | {:>10.4} {:>10.4} {:>7} | {rate:>11.0} {:>8.3} | {:>12} {over:>6} {:>6}",
                r.commands as f64 / admitted,
                r.server_commands as f64 / admitted,
                r.refunds,
                rate / limit as f64,
                r.worst_window,
                kp,
            );
        }
    }
}
