//! Leasing blocks of units: `P` workers (threads, each with its own
//! connection and its own lease manager, as separate processes would be)
//! admit requests as fast as they can against one GCRA limit, taking
//! blocks of `k` with `PARTIAL` and returning what is left with `REFUND`.
//! For every `P` and `k` it reports store commands per admitted request,
//! admitted per second against the limit, and the worst over-admission in
//! any one-second window against the bound `k × P`.
//!
//! ```sh
//! make run                                         # redis-server with the module, port 6379
//! cargo run --release --example lease              # P in 1,10,50; k in 1,5,20; 3 s each
//! cargo run --release --example lease -- 2000 3    # limit per second, seconds per run
//! ```
//!
//! `REDIS_URL` (default `redis://127.0.0.1:6379/`) overrides the server.

mod lease;

use lease::{Lease, Limit};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// What one run measured.
struct Run {
    admitted: usize,
    commands: u64,
    seconds: f64,
    /// The most admitted in any one-second window.
    worst_window: usize,
}

fn run(url: &str, limit: u64, burst: u64, workers: usize, k: u64, secs: u64) -> Run {
    let key = format!("lease:{limit}:{workers}:{k}:{}", std::process::id());
    let policy = [
        "RL.GCRA",
        &limit.to_string(),
        "1s",
        "BURST",
        &burst.to_string(),
    ];
    let limit_def = Limit {
        key,
        policy: policy.iter().map(|s| s.to_string()).collect(),
    };
    let barrier = Arc::new(Barrier::new(workers));
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let (url, limit_def, barrier) = (url.to_string(), limit_def.clone(), barrier.clone());
            thread::spawn(move || {
                let conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut lease = Lease::new(conn, limit_def, k);
                let mut admitted = Vec::new();
                barrier.wait();
                let end = Instant::now() + Duration::from_secs(secs);
                loop {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    if lease.acquire().unwrap() {
                        admitted.push(now);
                    } else if let Some(t) = lease.blocked_until() {
                        // A client told to retry later waits, not spins.
                        thread::sleep(t.min(end).saturating_duration_since(now));
                    }
                    lease.release_if_idle(Duration::from_millis(50)).unwrap();
                }
                lease.release().unwrap();
                (admitted, lease.commands)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut commands = 0;
    for h in handles {
        let (a, c) = h.join().unwrap();
        all.extend(a);
        commands += c;
    }
    all.sort_unstable();
    let seconds = match (all.first(), all.last()) {
        (Some(a), Some(b)) => b.duration_since(*a).as_secs_f64().max(1e-9),
        _ => secs as f64,
    };
    Run {
        admitted: all.len(),
        commands,
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
        "{:>3} {:>3} | {:>12} {:>10} | {:>11} {:>8} | {:>12} {:>11} {:>6}",
        "P", "k", "cmds/admit", "1.1/k", "admitted/s", "/limit", "worst 1s win", "over", "k×P"
    );
    for workers in [1usize, 10, 50] {
        for k in [1u64, 5, 20] {
            let r = run(&url, limit, burst, workers, k, secs);
            let per_admit = r.commands as f64 / r.admitted.max(1) as f64;
            let rate = r.admitted as f64 / r.seconds;
            let over = r.worst_window as i64 - allowed as i64;
            println!(
                "{workers:>3} {k:>3} | {per_admit:>12.4} {:>10.4} | {rate:>11.0} {:>8.3} | {:>12} {over:>11} {:>6}",
                1.1 / k as f64,
                rate / limit as f64,
                r.worst_window,
                k as usize * workers,
            );
        }
    }
}
