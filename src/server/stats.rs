//! Per-command counters for `INFO ratelimit`: calls, allowed, denied and
//! errors, by the command's place in the command table. Commands run on
//! Redis's main thread; the atomics only make the statics safe to declare.

use crate::algorithm::Micros;
use crate::commands::Verdict;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The most commands a table may hold: one counter slot each.
pub const MAX_COMMANDS: usize = 32;

const N: usize = MAX_COMMANDS;

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
        // A shadow policy's reply admits.
        Verdict::Allowed | Verdict::ShadowDenied => bump(&COUNTERS.allowed[i]),
        Verdict::Denied => bump(&COUNTERS.denied[i]),
        Verdict::Other | Verdict::Waiting => {}
    }
}

/// Counts a call of command `i` that replied with an error.
pub fn record_error(i: usize) {
    bump(&COUNTERS.calls[i]);
    bump(&COUNTERS.errors[i]);
}

/// A call of command `i` that waited ended (it was counted as a call when
/// it began).
pub fn resolved(i: usize, allowed: bool) {
    bump(if allowed {
        &COUNTERS.allowed[i]
    } else {
        &COUNTERS.denied[i]
    });
}

/// A call of command `i` that waited ended in an error.
pub fn record_error_only(i: usize) {
    bump(&COUNTERS.errors[i]);
}

/// `WAIT` totals: clients that began waiting, and how their waits ended.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waits {
    pub started: u64,
    pub admitted: u64,
    pub timed_out: u64,
    pub abandoned: u64,
    /// Total time waited by the waits that ended, in µs of the limiter clock.
    pub waited_us: u64,
}

struct WaitCounters {
    started: AtomicU64,
    admitted: AtomicU64,
    timed_out: AtomicU64,
    abandoned: AtomicU64,
    waited_us: AtomicU64,
}

static WAITS: WaitCounters = WaitCounters {
    started: ZERO,
    admitted: ZERO,
    timed_out: ZERO,
    abandoned: ZERO,
    waited_us: ZERO,
};

fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).saturating_add(n), Relaxed);
}

pub fn wait_started() {
    bump(&WAITS.started);
}

pub fn wait_admitted(waited: Micros) {
    bump(&WAITS.admitted);
    add(&WAITS.waited_us, waited.as_u64());
}

pub fn wait_timed_out(waited: Micros) {
    bump(&WAITS.timed_out);
    add(&WAITS.waited_us, waited.as_u64());
}

pub fn wait_abandoned(waited: Micros) {
    bump(&WAITS.abandoned);
    add(&WAITS.waited_us, waited.as_u64());
}

pub fn waits() -> Waits {
    Waits {
        started: WAITS.started.load(Relaxed),
        admitted: WAITS.admitted.load(Relaxed),
        timed_out: WAITS.timed_out.load(Relaxed),
        abandoned: WAITS.abandoned.load(Relaxed),
        waited_us: WAITS.waited_us.load(Relaxed),
    }
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
    for a in [
        &WAITS.started,
        &WAITS.admitted,
        &WAITS.timed_out,
        &WAITS.abandoned,
        &WAITS.waited_us,
    ] {
        a.store(0, Relaxed);
    }
}
