//! The module's own heap per waiter, counted by the module's allocator on
//! the test's thread: the queue as the server holds it (its key names and
//! blocked-client tokens), filled as the gate fills it.

use super::{KeyName, Token};
use crate::algorithm::concurrency::Concurrency;
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
    /// Each on its own key, `RL.ACQUIRE c 1 1h WAIT 100000h`.
    KeysLeases,
    /// All on one key, `RL.ACQUIRE c 1 1h WAIT 100000h`.
    OneKeyLeases,
}

fn token(i: usize) -> Token {
    Token {
        bc: (0x1000 + 64 * i) as *mut redis_module::raw::RedisModuleBlockedClient,
        command: 0,
        shape: Shape::One,
    }
}

/// `n` clients standing as `shape` in `RL.GCRA k 1 1h WAIT 100000h`.
struct Filled {
    queues: Queues<KeyName, Token>,
    keyspace: MemoryKeyspace<KeyName>,
    /// The thread's bytes before they joined.
    before: usize,
    /// The module's own bytes per waiter, once all wait.
    per_waiter: usize,
}

fn fill(n: usize, shape: Shape_) -> Filled {
    let one_key = matches!(
        shape,
        Shape_::OneKey | Shape_::OneKeyFlows | Shape_::OneKeyHundredFlows | Shape_::OneKeyLeases
    );
    let key = |i: usize| -> KeyName {
        let i = if one_key { 0 } else { i };
        (0, format!("k:{i}").into_bytes().into())
    };
    let policy = match shape {
        Shape_::KeysLeases | Shape_::OneKeyLeases => {
            Policy::Concurrency(Concurrency::new(1, Micros::new(HOUR)))
        }
        _ => Policy::Gcra(Gcra::new(1, Micros::new(HOUR), 1).expect("a limit")),
    };
    let timeout = Micros::new(100_000 * HOUR);
    let mut keyspace = MemoryKeyspace::<KeyName>::default();
    let mut queues = Queues::<KeyName, Token>::new();
    // The keys exhausted first, as the benchmark does.
    for i in 0..if one_key { 1 } else { n } {
        let request = Request {
            cost: 1,
            ..Request::default()
        };
        let _ = queues.arrive(
            &mut keyspace,
            &[key(i)],
            std::slice::from_ref(&policy),
            NOW,
            request,
        );
    }
    // 10,000 on one key: past the default bound on a line (as another
    // test of the queue sets it; none relies on the default).
    crate::bounds::MAX_WAITERS_PER_KEY
        .set(10_000)
        .expect("in range");
    let before = heap::thread_bytes();
    for i in 0..n {
        let flow = match shape {
            Shape_::Keys | Shape_::OneKey | Shape_::KeysLeases | Shape_::OneKeyLeases => None,
            Shape_::KeysFlows | Shape_::OneKeyFlows => Some(format!("tenant:{i}")),
            Shape_::OneKeyHundredFlows => Some(format!("tenant:{}", i % 100)),
        };
        let flow = flow.map(|name| Flow {
            name: name.into_bytes(),
            weight: 1,
        });
        let request = Request {
            cost: 1,
            wait: Some(timeout),
            flow,
            ..Request::default()
        };
        // What the gate holds: the names, the policies, the request.
        let names = vec![key(i)];
        let policies = vec![policy.clone()];
        let arrival = queues.arrive(&mut keyspace, &names, &policies, NOW, request.clone());
        let Ok(Arrival::Wait(place)) = arrival else {
            panic!("waiter {i} did not wait: {arrival:?}");
        };
        let waiter = Waiter {
            keys: names,
            policies,
            cost: request.cost,
            costs: request.costs,
            since: NOW,
            deadline: NOW.saturating_add(timeout),
            flow: request.flow,
            token: token(i),
        };
        queues.enqueue(&mut keyspace, waiter, place);
    }
    assert_eq!(queues.len(), n);
    let per_waiter = heap::thread_bytes().wrapping_sub(before) / n;
    Filled {
        queues,
        keyspace,
        before,
        per_waiter,
    }
}

const NOW: Micros = Micros::new(1_000 * S);

const SHAPES: [Shape_; 7] = [
    Shape_::Keys,
    Shape_::OneKey,
    Shape_::KeysFlows,
    Shape_::OneKeyFlows,
    Shape_::OneKeyHundredFlows,
    Shape_::KeysLeases,
    Shape_::OneKeyLeases,
];

/// 10,000 waiters (1,000 times a happy path's ten), each shape: at most
/// 1 KB each of the module's own memory, and all of it given back once
/// they went away.
#[test]
fn a_waiter_costs_the_module_at_most_a_kilobyte_and_leaves_nothing() {
    for shape in SHAPES {
        let mut filled = fill(10_000, shape);
        assert!(
            filled.per_waiter <= 1_024,
            "{shape:?}: {} bytes",
            filled.per_waiter
        );
        for i in 0..10_000 {
            filled.queues.abandon(&token(i), NOW);
        }
        assert!(filled.queues.is_empty());
        let left = heap::thread_bytes().wrapping_sub(filled.before);
        assert_eq!(left, 0, "{shape:?}");
    }
}

/// Once admitted, a line whose flows are remembered (a client re-sending
/// at once takes up where its flow was) keeps its turns, within the bound
/// on remembered flows: a few hundred bytes each.
#[test]
fn admitted_waiters_leave_their_remembered_flows_only() {
    for shape in SHAPES {
        let mut filled = fill(10_000, shape);
        let end = NOW.saturating_add(Micros::new(20_000 * HOUR));
        while !filled.queues.is_empty() {
            drop(filled.queues.process(&mut filled.keyspace, NOW, end, 1_000));
        }
        let remembered = filled.queues.remembered_flows();
        let left = heap::thread_bytes().wrapping_sub(filled.before);
        assert!(remembered <= 10_000, "{shape:?}: {remembered}");
        // The table of resting lines aside, 400 bytes each at most.
        assert!(
            left <= 1_024 + remembered * 400,
            "{shape:?}: {left} bytes for {remembered}"
        );
        println!("{shape:?}: {remembered} remembered, {left} bytes");
    }
}

#[test]
#[ignore = "prints the figures: cargo test --lib memory_tests -- --ignored --nocapture"]
fn print_bytes_per_waiter() {
    for shape in SHAPES {
        for n in [10, 1_000, 10_000] {
            let per_waiter = fill(n, shape).per_waiter;
            println!("{shape:?} {n}: {per_waiter} bytes per waiter");
        }
    }
}
