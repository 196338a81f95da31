//! The herd of `make bench-herd`, simulated on a manual clock: 1,000
//! closed-loop clients on one key of 100 a second, each asking with
//! `JITTER` and sleeping the whole milliseconds it is told, through the
//! engine's decision and the spread rule itself. No real time is read, so
//! the figures are the rule's own, whatever the machine's load.

use super::{spread_in, Herd, SLOTS};
use crate::algorithm::gcra::Gcra;
use crate::algorithm::{Micros, RetryAfter};
use crate::engine::store::MemoryStore;
use crate::engine::{decide, Request};
use crate::policy::Policy;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const S: u64 = 1_000_000;
const CLIENTS: u64 = 1_000;
const RUN: u64 = 20 * S;
const BUCKET: u64 = 10_000;

struct Figures {
    admissions_per_second: f64,
    commands_per_admission: f64,
    /// Commands per 10 ms after the first second: the mean and the most.
    mean: f64,
    busiest: u64,
}

/// Runs the herd; `rtt` is the round trip, paid once by every command.
fn simulate(rtt: u64) -> Figures {
    let policies = [Policy::Gcra(Gcra::new(100, Micros::new(S), 100).unwrap())];
    let mut store = MemoryStore::new(1);
    let mut herds = vec![Herd::default(); SLOTS];
    let t0 = 1_000 * 3_600 * S;
    // The burst used up before the clock starts, as the bench does.
    let used = Request {
        cost: 100,
        ..Request::default()
    };
    assert!(
        decide(&mut store, &policies, Micros::new(t0), &used)
            .unwrap()
            .allowed
    );
    // (send time, client, first command of its ask, commands of its ask)
    let mut sends: BinaryHeap<Reverse<(u64, u64, u64, u64)>> =
        (0..CLIENTS).map(|c| Reverse((t0, c, t0, 0))).collect();
    let mut buckets = vec![0u64; (RUN / BUCKET) as usize];
    let (mut admitted, mut asks, mut ask_commands) = (0u64, 0u64, 0u64);
    while let Some(Reverse((now, client, first, commands))) = sends.pop() {
        if now >= t0 + RUN {
            continue;
        }
        buckets[((now - t0) / BUCKET) as usize] += 1;
        let commands = commands + 1;
        let request = Request {
            jitter: true,
            ..Request::default()
        };
        let mut d = decide(&mut store, &policies, Micros::new(now), &request).unwrap();
        if d.allowed {
            admitted += 1;
            asks += 1;
            ask_commands += commands;
            let next = now + rtt;
            sends.push(Reverse((next, client, next, 0)));
            continue;
        }
        spread_in(
            &mut herds,
            10_000,
            &mut d,
            &"herd",
            &policies,
            Micros::new(now),
            1,
        );
        let RetryAfter::After(wait) = d.reported_retry_after() else {
            panic!("{d:?}")
        };
        let back = now + rtt + wait.ceil_millis() * 1_000;
        sends.push(Reverse((back, client, first, commands)));
    }
    let steady = &buckets[(S / BUCKET) as usize..];
    Figures {
        admissions_per_second: admitted as f64 / (RUN / S) as f64,
        commands_per_admission: ask_commands as f64 / asks as f64,
        mean: steady.iter().sum::<u64>() as f64 / steady.len() as f64,
        busiest: steady.iter().copied().max().unwrap_or(0),
    }
}

/// The targets of the herd, held by the rule itself: two commands per
/// admission (the ask right after an admission, denied, and its return,
/// admitted), the busiest 10 ms after the start-up within 3× the mean,
/// and the key's rate, whatever the round trip.
#[test]
fn a_jittered_herd_comes_back_at_the_rate_the_key_admits() {
    for rtt in [0, 200, 1_000, 3_000] {
        let f = simulate(rtt);
        let ratio = f.busiest as f64 / f.mean;
        eprintln!(
            "rtt {rtt} µs: {:.1} admissions/s, {:.3} commands/admission, \
             busiest 10 ms {} (mean {:.2}, {ratio:.2}×)",
            f.admissions_per_second, f.commands_per_admission, f.busiest, f.mean
        );
        assert!(f.commands_per_admission <= 2.0, "rtt {rtt}");
        assert!(ratio <= 3.0, "rtt {rtt}");
        assert!((f.admissions_per_second - 100.0).abs() <= 2.0, "rtt {rtt}");
    }
}
