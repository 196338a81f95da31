//! Client CPU of a typed call against a raw `redis::cmd` call: the same
//! `RL.GCRA` sent `N` times on one blocking connection each way, in
//! alternating rounds, this thread's user CPU time read from
//! `/proc/thread-self/stat` (clock ticks) around each round.
//!
//! ```sh
//! redis-server --port 16400 --save "" --loadmodule target/release/libredis_ratelimit.so &
//! REDIS_URL=redis://127.0.0.1:16400/ cargo run --release -p redis-ratelimit-client --example typed_overhead -- 20000 5
//! ```
//!
//! Arguments: calls per round (default 20,000) and rounds (default 5).

use redis_ratelimit_client::{Command, Decide, Gcra};
use std::time::Duration;

/// This thread's user CPU time so far, in clock ticks (Linux).
fn user_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("/proc");
    // Fields after the command name (which ends with the last ')'); utime
    // is the 14th field overall, the 12th after the name.
    let rest = &stat[stat.rfind(')').expect("stat") + 2..];
    rest.split(' ')
        .nth(11)
        .and_then(|t| t.parse().ok())
        .expect("utime")
}

fn main() {
    let url = std::env::var("REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().ok());
    let calls = args.next().flatten().unwrap_or(20_000);
    let rounds = args.next().flatten().unwrap_or(5);
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("connection");
    let policy = Gcra::new(1_000_000_000, Duration::from_secs(1));
    let typed = Decide::new("bench:typed", policy);
    let (mut raw_ticks, mut typed_ticks) = (0u64, 0u64);
    for _ in 0..rounds {
        let t0 = user_ticks();
        for _ in 0..calls {
            let reply: redis::Value = redis::cmd("RL.GCRA")
                .arg("bench:typed")
                .arg(1_000_000_000u64)
                .arg("1000ms")
                .query(&mut conn)
                .expect("raw call");
            std::hint::black_box(reply);
        }
        let t1 = user_ticks();
        for _ in 0..calls {
            let decision = typed.query(&mut conn).expect("typed call");
            std::hint::black_box(decision);
        }
        let t2 = user_ticks();
        raw_ticks += t1 - t0;
        typed_ticks += t2 - t1;
    }
    println!(
        "{} calls each: user CPU raw {raw_ticks} ticks, typed {typed_ticks} ticks, typed/raw {:.3}",
        calls * rounds,
        typed_ticks as f64 / raw_ticks.max(1) as f64
    );
}
