//! Client CPU of a typed call against a raw `redis::cmd` call: the same
//! `RL.GCRA` sent `N` times on one blocking connection each way, in
//! alternating rounds, this thread's user CPU time read from
//! `/proc/thread-self/stat` (clock ticks, taken as 100 a second) around
//! each round.
//!
//! ```sh
//! redis-server --port 16400 --save "" --loadmodule target/release/libredis_ratelimit.so &
//! REDIS_URL=redis://127.0.0.1:16400/ cargo run --release -p redis-ratelimit-client --example typed_overhead -- 20000 5
//! ```
//!
//! Arguments: calls per round (default 20,000) and rounds (default 5).
//!
//! Over the network, the noise of a shared machine is larger than the
//! difference, so the client-side work alone is also measured: building
//! and encoding each command, and reading a reply already received (the
//! typed `Decision` against the raw `redis::Value`), 20 × `calls` times.

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
    let raw_round = |conn: &mut redis::Connection| {
        let t0 = user_ticks();
        for _ in 0..calls {
            let reply: redis::Value = redis::cmd("RL.GCRA")
                .arg("bench:typed")
                .arg(1_000_000_000u64)
                .arg("1000ms")
                .query(conn)
                .expect("raw call");
            std::hint::black_box(reply);
        }
        user_ticks() - t0
    };
    let typed_round = |conn: &mut redis::Connection| {
        let t0 = user_ticks();
        for _ in 0..calls {
            let decision = typed.query(conn).expect("typed call");
            std::hint::black_box(decision);
        }
        user_ticks() - t0
    };
    // Alternating which goes first, so that neither gains from the order.
    for round in 0..rounds {
        if round % 2 == 0 {
            raw_ticks += raw_round(&mut conn);
            typed_ticks += typed_round(&mut conn);
        } else {
            typed_ticks += typed_round(&mut conn);
            raw_ticks += raw_round(&mut conn);
        }
    }
    println!(
        "{} calls each: user CPU raw {raw_ticks} ticks, typed {typed_ticks} ticks, typed/raw {:.3}",
        calls * rounds,
        typed_ticks as f64 / raw_ticks.max(1) as f64
    );
    // The reply of one call, as received.
    let reply: redis::Value = redis::cmd("RL.GCRA")
        .arg("bench:typed")
        .arg(1_000_000_000u64)
        .arg("1000ms")
        .query(&mut conn)
        .expect("raw call");
    let n = 20 * calls;
    let t0 = user_ticks();
    for _ in 0..n {
        let packed = redis::cmd("RL.GCRA")
            .arg("bench:typed")
            .arg(1_000_000_000u64)
            .arg("1000ms")
            .get_packed_command();
        std::hint::black_box((packed, std::hint::black_box(&reply).clone()));
    }
    let t1 = user_ticks();
    for _ in 0..n {
        let packed = typed.to_cmd().get_packed_command();
        let decision = Decide::parse(std::hint::black_box(&reply)).expect("reply");
        std::hint::black_box((packed, decision));
    }
    let t2 = user_ticks();
    let per_call = |ticks: u64, calls: u64| ticks as f64 * 1e7 / calls as f64;
    println!(
        "client-side work, {n} each: raw {} ticks, typed {} ticks: {:.0} ns more per call; \
         a raw call over the network costs {:.0} ns of user CPU, so typed/raw = {:.3}",
        t1 - t0,
        t2 - t1,
        per_call((t2 - t1).saturating_sub(t1 - t0), n),
        per_call(raw_ticks, calls * rounds),
        1.0 + per_call((t2 - t1).saturating_sub(t1 - t0), n)
            / per_call(raw_ticks.max(1), calls * rounds),
    );
}
