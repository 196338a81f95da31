//! Nanoseconds per decision in the pure core, for every algorithm and mode:
//! the allow path and the deny path, each with the state decoded from and
//! encoded back to its stored bytes (what every request pays), plus the
//! argument parsing of each command.
//!
//! `cargo bench --bench core` (short measurements: the machine is shared).
//! Adding an algorithm or mode is one line in `policies()`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use redis_ratelimit::api::{self, Micros, Policy, StateWrite};
use std::time::Duration;

/// A fixed "now" (2025-01-01), so every run decides the same things.
const NOW: Micros = Micros::from_secs(1_735_689_600);

/// An RL.ALL policy from its words (keyword first), as the command parses it.
fn policy(words: &str) -> Policy {
    let words: Vec<&str> = words.split(' ').collect();
    let (policy, used) = api::parse_policy(words[0], &words[1..]).expect(words[0]);
    assert_eq!(used, words.len() - 1, "every word of {words:?}");
    policy
}

/// Every policy the core has: name and value. 10 per second, burst 10.
fn policies() -> Vec<(&'static str, Policy)> {
    // The default sketch (96 KiB), deciding for one item.
    let sketch_args = ["203.0.113.7", "10", "1s", "WIDTH", "2048", "DEPTH", "4"];
    let (sketch, _) = api::parse("RL.SKETCH", &sketch_args).expect("RL.SKETCH");
    vec![
        ("GCRA", policy("GCRA 10 1s BURST 10")),
        ("BUCKET", policy("BUCKET 10 10 1s")),
        // 1 s / 3 is not a whole number of microseconds: the state carries
        // a fraction (the longer encoding, exact arithmetic in ticks).
        ("GCRA 3/s", policy("GCRA 3 1s BURST 3")),
        ("SLIDING EXACT", policy("SLIDING 10 1s EXACT")),
        ("SLIDING EXACT 100", policy("SLIDING 100 1s EXACT")),
        ("SLIDING APPROX", policy("SLIDING 10 1s APPROX")),
        ("SLIDING BUCKETS 10", policy("SLIDING 10 1s BUCKETS 10")),
        ("FIXED", policy("FIXED 10 1s")),
        ("FIXED ALIGNED", policy("FIXED 10 1s ALIGNED")),
        ("SKETCH 2048x4", sketch),
    ]
}

/// Applies a write to stored bytes as Redis would.
fn apply(stored: &mut Option<Vec<u8>>, write: &StateWrite) {
    write.apply_to(stored);
}

/// The state after one admitted request (the next is admitted too), and the
/// state once requests at `NOW` are denied.
fn states(policy: &Policy) -> (Vec<u8>, Vec<u8>) {
    let mut stored = None;
    let mut allow_state = None;
    for _ in 0..10_000 {
        let out = policy.decide(stored.as_deref(), NOW, 1).unwrap();
        if !out.decision.allowed {
            return (allow_state.unwrap(), stored.unwrap());
        }
        if let Some(w) = &out.write {
            apply(&mut stored, w);
        }
        allow_state.get_or_insert_with(|| stored.clone().unwrap());
    }
    panic!("never denied");
}

fn decisions(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    for (name, policy) in policies() {
        let (allow, deny) = states(&policy);
        assert!(
            policy
                .decide(Some(&allow), NOW, 1)
                .unwrap()
                .decision
                .allowed
        );
        assert!(!policy.decide(Some(&deny), NOW, 1).unwrap().decision.allowed);
        group.bench_function(format!("{name} new key"), |b| {
            b.iter(|| policy.decide(black_box(None), black_box(NOW), 1))
        });
        group.bench_function(format!("{name} allow"), |b| {
            b.iter(|| policy.decide(black_box(Some(&allow)), black_box(NOW), 1))
        });
        group.bench_function(format!("{name} deny"), |b| {
            b.iter(|| policy.decide(black_box(Some(&deny)), black_box(NOW), 1))
        });
    }

    // CL.THROTTLE: redis-cell's nanosecond GCRA; its state is a decimal
    // string, parsed and formatted on every request.
    let args: [&[u8]; 3] = [b"9", b"10", b"1"];
    let cell = api::parse_throttle(&args).unwrap();
    let cell_round = |stored: &[u8]| cell.decide(Some(stored), NOW).unwrap();
    let now_ns = NOW.as_u64() * 1_000;
    let allow = (now_ns + 100_000_000).to_string().into_bytes();
    let deny = (now_ns + 1_000_000_000).to_string().into_bytes();
    assert!(!cell_round(&allow).0.limited);
    assert!(cell_round(&deny).0.limited);
    group.bench_function("CL.THROTTLE cell allow", |b| {
        b.iter(|| cell_round(black_box(&allow)))
    });
    group.bench_function("CL.THROTTLE cell deny", |b| {
        b.iter(|| cell_round(black_box(&deny)))
    });
    group.finish();
}

/// Argument parsing, which every request also pays (after the key).
fn parsing(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");
    let args: [&[u8]; 2] = [b"10", b"1s"];
    group.bench_function("RL.GCRA 10 1s", |b| {
        b.iter(|| api::parse("RL.GCRA", black_box(&args)))
    });
    let args: [&[u8]; 4] = [b"100", b"1m", b"BURST", b"20"];
    group.bench_function("RL.GCRA 100 1m BURST 20", |b| {
        b.iter(|| api::parse("RL.GCRA", black_box(&args)))
    });
    let args: [&[u8]; 3] = [b"10", b"10", b"1s"];
    group.bench_function("RL.BUCKET 10 10 1s", |b| {
        b.iter(|| api::parse("RL.BUCKET", black_box(&args)))
    });
    let args: [&[u8]; 3] = [b"10", b"1s", b"APPROX"];
    group.bench_function("RL.SLIDING 10 1s APPROX", |b| {
        b.iter(|| api::parse("RL.SLIDING", black_box(&args)))
    });
    let args: [&[u8]; 2] = [b"10", b"1s"];
    group.bench_function("RL.FIXED 10 1s", |b| {
        b.iter(|| api::parse("RL.FIXED", black_box(&args)))
    });
    let args: [&[u8]; 3] = [b"9", b"10", b"1"];
    group.bench_function("CL.THROTTLE 9 10 1", |b| {
        b.iter(|| api::parse_throttle(black_box(&args)))
    });
    group.finish();
}

fn short() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(600))
        .sample_size(20)
}

criterion_group! {
    name = core;
    config = short();
    targets = decisions, parsing
}
criterion_main!(core);
