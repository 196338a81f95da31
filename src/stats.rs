//! Per-command counters for `INFO ratelimit`: calls, allowed, denied and
//! errors, by the command's place in the command table. Commands run on
//! Redis's main thread; the atomics only make the statics safe to declare.

use crate::commands::table::COMMAND_COUNT;
use crate::commands::Verdict;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const N: usize = COMMAND_COUNT;

#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub calls: u64,
    pub allowed: u64,
    pub denied: u64,
    pub errors: u64,
}

struct Counters {
    calls: [AtomicU64; N],
    allowed: [AtomicU64; N],
    denied: [AtomicU64; N],
    errors: [AtomicU64; N],
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);

static COUNTERS: Counters = Counters {
    calls: [ZERO; N],
    allowed: [ZERO; N],
    denied: [ZERO; N],
    errors: [ZERO; N],
};

/// Adds one. Only Redis's main thread writes the counters, so a load and a
/// store do (a locked read-modify-write costs more on every request).
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
}

/// Counts a call of command `i` that replied.
pub fn record(i: usize, verdict: Verdict) {
    bump(&COUNTERS.calls[i]);
    match verdict {
        Verdict::Allowed => bump(&COUNTERS.allowed[i]),
        Verdict::Denied => bump(&COUNTERS.denied[i]),
        Verdict::Other => {}
    }
}

/// Counts a call of command `i` that replied with an error.
pub fn record_error(i: usize) {
    bump(&COUNTERS.calls[i]);
    bump(&COUNTERS.errors[i]);
}

pub fn counts(i: usize) -> Counts {
    Counts {
        calls: COUNTERS.calls[i].load(Relaxed),
        allowed: COUNTERS.allowed[i].load(Relaxed),
        denied: COUNTERS.denied[i].load(Relaxed),
        errors: COUNTERS.errors[i].load(Relaxed),
    }
}

pub fn reset() {
    for c in [
        &COUNTERS.calls,
        &COUNTERS.allowed,
        &COUNTERS.denied,
        &COUNTERS.errors,
    ] {
        for a in c {
            a.store(0, Relaxed);
        }
    }
}
