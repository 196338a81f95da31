//! RL.SKETCH's accuracy against the truth, from the pure core.
//!
//! `cargo run --release --example sketch_accuracy [requests_per_window]`
//! replays one seeded workload against sketches of several shapes and
//! against one `RL.SLIDING APPROX` limiter per item (the truth the sketch
//! approximates), and prints a markdown table:
//!
//! - the workload: Zipf-distributed items (exponent 1.1 over 1,000,000
//!   distinct items, so a few heavy hitters send far more than `limit`),
//!   arrivals spread uniformly over 6 windows of 60 s, cost 1, limit 100
//!   per item per window;
//! - **over-admitted**: requests of an item admitted by the sketch beyond
//!   the number its own APPROX limiter admitted, summed over items; and
//!   **replay violations**: admitted requests that the item's own APPROX
//!   limiter, fed only what the sketch admitted for it, would deny (0 by
//!   construction; the core's property tests check it too);
//! - **false denials**: requests the item's own limiter admitted and the
//!   sketch denied, as a share of the requests the own limiters admitted;
//! - **analytic**: the count-min bound for one window: an item's count is
//!   over-estimated by more than ε·N (ε = e / WIDTH, N = the requests the
//!   sketch admitted in that window) with probability at most δ = e^−DEPTH.
//!
//! Shapes compare several WIDTH × DEPTH at the same number of cells (the
//! same memory), each with conservative and with plain update.

use rand::{Rng, SeedableRng};
use redis_ratelimit::api::{self, Micros, Policy};
use std::collections::HashMap;

const ITEMS: usize = 1_000_000;
const EXPONENT: f64 = 1.1;
const LIMIT: u64 = 100;
const WINDOW_US: u64 = 60_000_000;
const WINDOWS: u64 = 6;
/// 2026-01-01T00:00:00Z.
const START_US: u64 = 1_767_225_600_000_000;

/// An item's own `SLIDING limit window APPROX` limiter, as RL.ALL parses it.
fn approx() -> Policy {
    let words = [
        LIMIT.to_string(),
        format!("{}ms", WINDOW_US / 1_000),
        "APPROX".into(),
    ];
    api::parse_policy("SLIDING", &words).expect("APPROX").0
}

/// `RL.SKETCH` with `width × depth` counters, as the command parses it;
/// plain update (each counter raised by the cost) instead of conservative
/// update when `conservative` is false.
fn sketch(width: u64, depth: u64, conservative: bool) -> Policy {
    let args = [
        String::new(),
        LIMIT.to_string(),
        format!("{}ms", WINDOW_US / 1_000),
        "WIDTH".into(),
        width.to_string(),
        "DEPTH".into(),
        depth.to_string(),
    ];
    match api::parse("RL.SKETCH", &args).expect("RL.SKETCH").0 {
        Policy::Sketch { sketch, item } if !conservative => Policy::Sketch {
            sketch: sketch.plain(),
            item,
        },
        policy => policy,
    }
}

/// `sketch`'s policy for one item.
fn for_item(sketch: &Policy, item: u32) -> Policy {
    match sketch {
        Policy::Sketch { sketch, .. } => Policy::Sketch {
            sketch: *sketch,
            item: item.to_le_bytes().to_vec(),
        },
        _ => unreachable!("a sketch"),
    }
}

/// Decides one request of cost 1 on `state` and applies its write;
/// whether it was admitted.
fn admit(policy: &Policy, state: &mut Option<Vec<u8>>, now: Micros) -> bool {
    let out = policy.decide(state.as_deref(), now, 1).expect("own state");
    if let Some(w) = &out.write {
        w.apply_to(state);
    }
    out.decision.allowed
}

/// The Zipf CDF over `ITEMS` ranks.
fn zipf_cdf() -> Vec<f64> {
    let mut acc = 0.0;
    let mut cdf: Vec<f64> = (1..=ITEMS)
        .map(|k| {
            acc += (k as f64).powf(-EXPONENT);
            acc
        })
        .collect();
    let total = acc;
    cdf.iter_mut().for_each(|c| *c /= total);
    cdf
}

/// The requests: (time, item), in time order.
fn workload(per_window: u64) -> Vec<(u64, u32)> {
    let cdf = zipf_cdf();
    let mut rng = rand::rngs::StdRng::seed_from_u64(15);
    let n = per_window * WINDOWS;
    let span = WINDOWS * WINDOW_US;
    let mut reqs: Vec<(u64, u32)> = (0..n)
        .map(|_| {
            let u: f64 = rng.gen();
            let item = cdf.partition_point(|&c| c < u).min(ITEMS - 1) as u32;
            (START_US + rng.gen_range(0..span), item)
        })
        .collect();
    reqs.sort_unstable();
    reqs
}

struct Row {
    admitted: u64,
    over: u64,
    replay_violations: u64,
    false_denials: u64,
    /// Admitted per window by the sketch, the largest.
    n_max: u64,
}

fn run(reqs: &[(u64, u32)], sketch: &Policy, truth: &[bool], truth_admitted: &[u64]) -> Row {
    let mut state = None;
    let approx = approx();
    let mut shadow: HashMap<u32, Option<Vec<u8>>> = HashMap::new();
    let mut admitted_by_item: HashMap<u32, u64> = HashMap::new();
    let mut row = Row {
        admitted: 0,
        over: 0,
        replay_violations: 0,
        false_denials: 0,
        n_max: 0,
    };
    let (mut window, mut in_window) = (0, 0);
    for (i, &(t, item)) in reqs.iter().enumerate() {
        let now = Micros::new(t);
        let allowed = admit(&for_item(sketch, item), &mut state, now);
        if t / WINDOW_US != window {
            window = t / WINDOW_US;
            in_window = 0;
        }
        if allowed {
            row.admitted += 1;
            in_window += 1;
            row.n_max = row.n_max.max(in_window);
            *admitted_by_item.entry(item).or_default() += 1;
            let own = shadow.entry(item).or_default();
            if !admit(&approx, own, now) {
                row.replay_violations += 1;
            }
        } else if truth[i] {
            row.false_denials += 1;
        }
    }
    for (item, n) in admitted_by_item {
        row.over += n.saturating_sub(truth_admitted[item as usize]);
    }
    row
}

fn main() {
    let per_window: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let reqs = workload(per_window);
    // The truth: one APPROX limiter per item, on every request.
    let approx = approx();
    let mut own: HashMap<u32, Option<Vec<u8>>> = HashMap::new();
    let mut truth_admitted = vec![0u64; ITEMS];
    let truth: Vec<bool> = reqs
        .iter()
        .map(|&(t, item)| {
            let s = own.entry(item).or_default();
            let allowed = admit(&approx, s, Micros::new(t));
            if allowed {
                truth_admitted[item as usize] += 1;
            }
            allowed
        })
        .collect();
    let truth_total: u64 = truth_admitted.iter().sum();
    println!(
        "{} requests ({} per window) over {} distinct items; \
         per-item APPROX admitted {} (limit {} per {} s)\n",
        reqs.len(),
        per_window,
        own.len(),
        truth_total,
        LIMIT,
        WINDOW_US / 1_000_000
    );
    println!(
        "| WIDTH × DEPTH | update | state bytes | admitted | over-admitted | replay violations \
         | false denials | ε·N (analytic, p ≥ 1 − δ) | δ |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for cells in [8_192u64, 65_536] {
        for depth in [1u64, 2, 4, 8] {
            let width = cells / depth;
            for conservative in [true, false] {
                let sketch = sketch(width, depth, conservative);
                let row = run(&reqs, &sketch, &truth, &truth_admitted);
                let eps = std::f64::consts::E / width as f64;
                println!(
                    "| {width} × {depth} | {} | {} | {} | {} | {} | {:.3}% | {:.0} | {:.4} |",
                    if conservative {
                        "conservative"
                    } else {
                        "plain"
                    },
                    26 + 12 * cells,
                    row.admitted,
                    row.over,
                    row.replay_violations,
                    100.0 * row.false_denials as f64 / truth_total as f64,
                    eps * row.n_max as f64,
                    (-(depth as f64)).exp(),
                );
            }
        }
    }
}
