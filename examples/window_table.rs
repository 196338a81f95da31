//! The cost and accuracy table of the window limiters, from the pure core.
//!
//! `cargo run --release --example window_table` prints a markdown table:
//!
//! - **state bytes**: the largest value a key holds while the limiter runs
//!   under Poisson arrivals at 1.5× the limit;
//! - **replicated bytes per admitted request**: computed from the
//!   `StateWrite` each admitted request produces, as the RESP bytes of the
//!   commands Redis propagates for it (`SET key value PXAT t` for a whole
//!   value; `MULTI`, one `SETRANGE` per range, `PEXPIREAT`, `EXEC` for a
//!   patch), for a 16-byte key, averaged over the run at 1× the limit;
//! - **over-admission**: under Poisson arrivals of cost-1 requests at 0.5×,
//!   1× and 1.5× the limit per window, the share of admitted requests that
//!   a true sliding count would have rejected (more than `limit` admitted in
//!   the window-long interval ending at that request).
//!
//! The RNG is seeded, so the table is reproducible.

use rand::{Rng, SeedableRng};
use redis_ratelimit::api::{self, Micros, Policy, StateWrite};
use std::collections::VecDeque;

const WINDOW_US: u64 = 60_000_000;
/// Windows simulated per run.
const WINDOWS: u64 = 40;
/// 2026-01-01T00:00:00Z.
const START_US: u64 = 1_767_225_600_000_000;
const KEY: &str = "rl:user:12345678";

fn bulk(len: usize) -> usize {
    // $<len>\r\n<bytes>\r\n
    1 + len.to_string().len() + 2 + len + 2
}

fn command(args: &[usize]) -> usize {
    1 + args.len().to_string().len() + 2 + args.iter().map(|&a| bulk(a)).sum::<usize>()
}

/// RESP bytes Redis propagates for one write (expiry time with 13 digits).
fn replicated_bytes(write: &StateWrite) -> usize {
    let ms = 13;
    match write {
        StateWrite::Value(v) => command(&[3, KEY.len(), v.len(), 4, ms]),
        StateWrite::Patch(patch) => {
            let setranges: usize = patch
                .ranges()
                .iter()
                .map(|(off, b)| command(&[8, KEY.len(), off.to_string().len(), b.len()]))
                .sum();
            command(&[5]) + setranges + command(&[9, KEY.len(), ms]) + command(&[4])
        }
        StateWrite::Delete => command(&[3, KEY.len()]),
    }
}

fn apply(state: &mut Option<Vec<u8>>, write: &StateWrite) {
    write.apply_to(state);
}

struct Run {
    over_share: f64,
    max_state: usize,
    bytes_per_admit: f64,
}

/// Poisson arrivals at `load × limit` per window against `policy`.
fn simulate(policy: &Policy, limit: u64, load: f64, seed: u64) -> Run {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let rate_per_us = load * limit as f64 / WINDOW_US as f64;
    let mut t = START_US as f64 + rng.gen_range(0.0..WINDOW_US as f64);
    let end = t + (WINDOWS * WINDOW_US) as f64;
    let mut state: Option<Vec<u8>> = None;
    let mut expires_at = 0u64;
    let mut admitted_times: VecDeque<u64> = VecDeque::new();
    let (mut admitted, mut over, mut bytes, mut max_state) = (0u64, 0u64, 0usize, 0usize);
    loop {
        let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
        t += -u.ln() / rate_per_us;
        if t >= end {
            break;
        }
        let now = t as u64;
        // The key expires at its TTL (reset_after, in whole ms), as in Redis.
        if now >= expires_at {
            state = None;
        }
        let out = policy
            .decide(state.as_deref(), Micros::new(now), 1)
            .expect("own state");
        if !out.decision.allowed {
            continue;
        }
        admitted += 1;
        while admitted_times
            .front()
            .is_some_and(|&a| now - a >= WINDOW_US)
        {
            admitted_times.pop_front();
        }
        admitted_times.push_back(now);
        if admitted_times.len() as u64 > limit {
            over += 1;
        }
        if let Some(w) = &out.write {
            bytes += replicated_bytes(w);
            apply(&mut state, w);
            expires_at = now + out.decision.reset_after.ceil_millis() * 1_000;
        }
        max_state = max_state.max(state.as_ref().map_or(0, Vec::len));
    }
    Run {
        over_share: over as f64 / admitted.max(1) as f64,
        max_state,
        bytes_per_admit: bytes as f64 / admitted.max(1) as f64,
    }
}

fn modes(limit: u64) -> Vec<(&'static str, Policy)> {
    let window = format!("{}ms", WINDOW_US / 1_000);
    let sliding = |mode: &[&str]| parse("SLIDING", limit, &window, mode);
    vec![
        ("SLIDING EXACT", sliding(&["EXACT"])),
        ("SLIDING APPROX", sliding(&["APPROX"])),
        ("SLIDING BUCKETS 10", sliding(&["BUCKETS", "10"])),
        ("SLIDING BUCKETS 100", sliding(&["BUCKETS", "100"])),
        ("FIXED", parse("FIXED", limit, &window, &[])),
        (
            "FIXED ALIGNED",
            parse("FIXED", limit, &window, &["ALIGNED"]),
        ),
    ]
}

/// An RL.ALL policy: `keyword limit window` and the mode's words.
fn parse(keyword: &str, limit: u64, window: &str, mode: &[&str]) -> Policy {
    let mut words = vec![limit.to_string(), window.to_string()];
    words.extend(mode.iter().map(|w| w.to_string()));
    let (policy, used) = api::parse_policy(keyword, &words).expect("a window policy");
    assert_eq!(used, words.len());
    policy
}

fn main() {
    println!(
        "| mode | limit | state bytes | replicated bytes / admitted | over-admitted at 0.5× | at 1× | at 1.5× |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (m, limit) in [10u64, 1_000, 10_000].into_iter().enumerate() {
        for (i, (name, policy)) in modes(limit).into_iter().enumerate() {
            let seed = (m * 100 + i) as u64;
            let half = simulate(&policy, limit, 0.5, seed);
            let one = simulate(&policy, limit, 1.0, seed + 1);
            let more = simulate(&policy, limit, 1.5, seed + 2);
            let state = half.max_state.max(one.max_state).max(more.max_state);
            println!(
                "| {name} | {limit} | {state} | {:.0} | {:.2}% | {:.2}% | {:.2}% |",
                one.bytes_per_admit,
                100.0 * half.over_share,
                100.0 * one.over_share,
                100.0 * more.over_share,
            );
        }
    }
}
