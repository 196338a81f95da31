//! The module's own heap per waiter, counted by the module's allocator on
//! the test's thread: the queue as the server holds it (its key names and
//! blocked-client tokens), filled as the gate fills it.

use super::{KeyName, Token};
use crate::algorithm::gcra::Gcra;
use crate::algorithm::Micros;
use crate::commands::Shape;
use crate::engine::queue::{Arrival, MemoryKeyspace, Queues, Waiter};
use crate::engine::{Flow, Request};
use crate::policy::Policy;
use crate::server::heap;

const S: u64 = 1_000_000;
const HOUR: u64 = 3_600 * S;

/// How the waiters stand.
#[derive(Debug, Clone, Copy)]
enum Shape_ {
    /// Each on its own key.
    Keys,
    /// All on one key.
    OneKey,
    /// Each on its own key, in a flow of its own.
    KeysFlows,
    /// All on one key, each in a flow of its own.
    OneKeyFlows,
    /// All on one key, in a hundred flows (the most a flow's line holds by default).
    OneKeyHundredFlows,
}

fn token(i: usize) -> Token {
    Token {
        bc: (0x1000 + 64 * i) as *mut redis_module::raw::RedisModuleBlockedClient,
        command: 0,
        shape: Shape::One,
    }
}

/// `RL.GCRA k 1 1h WAIT 100000h` by `n` clients standing as `shape`: the
/// module's bytes per waiter, once all wait.
fn bytes_per_waiter(n: usize, shape: Shape_) -> f64 {
    let one_key = matches!(
        shape,
        Shape_::OneKey | Shape_::OneKeyFlows | Shape_::OneKeyHundredFlows
    );
    let key =
        |i: usize| -> KeyName { (0, format!("k:{}", if one_key { 0 } else { i }).into_bytes()) };
    let policy = Policy::Gcra(Gcra::new(1, Micros::new(HOUR), 1).expect("a limit"));
    let now = Micros::new(1_000 * S);
    let mut keyspace = MemoryKeyspace::<KeyName>::default();
    let mut queues = Queues::<KeyName, Token>::new();
    // The keys exhausted first, as the benchmark does.
    for i in 0..if one_key { 1 } else { n } {
        let request = Request {
            cost: 1,
            ..Request::default()
        };
        let _ = queues.arrive(&mut keyspace, &[key(i)], &[policy.clone()], now, request);
    }
    keyspace.values.shrink_to_fit();
    // 10,000 on one key: past the default bound on a line (as another
    // test of the queue sets it; none relies on the default).
    crate::bounds::MAX_WAITERS_PER_KEY
        .set(10_000)
        .expect("in range");
    let before = heap::thread_bytes();
    for i in 0..n {
        let flow = match shape {
            Shape_::Keys | Shape_::OneKey => None,
            Shape_::KeysFlows | Shape_::OneKeyFlows => Some(format!("tenant:{i}")),
            Shape_::OneKeyHundredFlows => Some(format!("tenant:{}", i % 100)),
        };
        let flow = flow.map(|name| Flow {
            name: name.into_bytes(),
            weight: 1,
        });
        let request = Request {
            cost: 1,
            wait: Some(Micros::new(100_000 * HOUR)),
            flow,
            ..Request::default()
        };
        // What the gate holds: the names, the policies, the request.
        let names = vec![key(i)];
        let policies = vec![policy.clone()];
        let arrival = queues.arrive(&mut keyspace, &names, &policies, now, request.clone());
        let Ok(Arrival::Wait(place)) = arrival else {
            panic!("waiter {i} did not wait: {arrival:?}");
        };
        let waiter = Waiter {
            keys: names,
            policies,
            cost: request.cost,
            costs: request.costs,
            since: now,
            deadline: now.saturating_add(Micros::new(100_000 * HOUR)),
            flow: request.flow,
            token: token(i),
        };
        queues.enqueue(&mut keyspace, waiter, place);
    }
    let after = heap::thread_bytes();
    assert_eq!(queues.len(), n);
    after.wrapping_sub(before) as f64 / n as f64
}

#[test]
#[ignore = "prints the figures: cargo test --lib memory_tests -- --ignored --nocapture"]
fn print_bytes_per_waiter() {
    for shape in [
        Shape_::Keys,
        Shape_::OneKey,
        Shape_::KeysFlows,
        Shape_::OneKeyFlows,
        Shape_::OneKeyHundredFlows,
    ] {
        for n in [10, 1_000, 10_000] {
            println!(
                "{shape:?} {n}: {:.0} bytes per waiter",
                bytes_per_waiter(n, shape)
            );
        }
    }
}
