//! Work counters: how much each command, timer tick and event did, in units
//! that do not depend on the machine or its load, for `INFO ratelimit`
//! (`work` field) and the tests that bound work per command. Counting is a
//! load and a store on Redis's main thread, as the other statistics.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Limits decided (one per limit of each decision, real or dry).
    Decisions = 0,
    /// Waiters the queue touched: placed, admitted, timed out, removed,
    /// moved up to the head of a line.
    Waiters = 1,
    /// Lease slots read or written.
    Slots = 2,
    /// Sliding-log entries read or written.
    Entries = 3,
}

/// Every counter with its `INFO` name, in order.
pub const ALL: [(Work, &str); 4] = [
    (Work::Decisions, "decisions"),
    (Work::Waiters, "waiters"),
    (Work::Slots, "slots"),
    (Work::Entries, "entries"),
];

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static COUNTERS: [AtomicU64; 4] = [ZERO; 4];

/// Counts `n` units of `work`.
pub fn add(work: Work, n: u64) {
    let c = &COUNTERS[work as usize];
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Counts one unit of `work`.
#[allow(dead_code)]
pub fn one(work: Work) {
    add(work, 1);
}

pub fn get(work: Work) -> u64 {
    COUNTERS[work as usize].load(Relaxed)
}

pub fn reset() {
    for c in &COUNTERS {
        c.store(0, Relaxed);
    }
}
