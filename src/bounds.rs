//! The sizes an operator bounds: module configuration parameters
//! (`CONFIG GET ratelimit.*`), settable at load (`loadmodule … ` then
//! `ratelimit.NAME value` lines in redis.conf, or `MODULE LOADEX … CONFIG`)
//! and with `CONFIG SET`. Each bounds something a caller can grow, so that
//! no command's work or memory depends on what other clients accumulated
//! beyond what the operator allows. Pure: the server shell registers them
//! (`server::config`) and writes the values; the core reads them. `work`
//! counts the work those bounds keep small, for INFO.

pub mod work;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One bound: its name after `ratelimit.`, default and allowed range.
pub struct Bound {
    pub name: &'static str,
    pub default: u64,
    pub min: u64,
    pub max: u64,
    value: AtomicU64,
}

/// A bound is itself: what a grammar names is compared by identity.
impl PartialEq for Bound {
    fn eq(&self, other: &Bound) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Bound {}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ratelimit.{}", self.name)
    }
}

impl Bound {
    const fn new(name: &'static str, default: u64, min: u64, max: u64) -> Bound {
        Bound {
            name,
            default,
            min,
            max,
            value: AtomicU64::new(default),
        }
    }

    /// The value in force.
    pub fn get(&self) -> u64 {
        self.value.load(Relaxed)
    }

    /// Sets the value; outside the range it is refused (the server checks
    /// the range too, before calling this).
    pub fn set(&self, value: u64) -> Result<(), String> {
        if value < self.min || value > self.max {
            return Err(format!(
                "ratelimit.{} must be between {} and {}",
                self.name, self.min, self.max
            ));
        }
        self.value.store(value, Relaxed);
        Ok(())
    }

    /// Back to the default (tests of the core).
    pub fn reset(&self) {
        self.value.store(self.default, Relaxed);
    }
}

/// Clients that may wait (`WAIT`) on one key at once; past it a `WAIT` is
/// denied at once, as if its place in the line were beyond its timeout.
pub static MAX_WAITERS_PER_KEY: Bound = Bound::new("max-waiters-per-key", 1_000, 1, 1_000_000);

/// Clients that may wait in one flow (`WAIT timeout FLOW name`) on one
/// key at once; past it a request of that flow is denied at once. Below
/// `max-waiters-per-key`, it keeps one flow from filling the key's line.
pub static MAX_WAITERS_PER_FLOW: Bound = Bound::new("max-waiters-per-flow", 100, 1, 1_000_000);

/// Clients that may wait in total (each holds about 35–55 KB of the server's
/// memory while it waits).
pub static MAX_WAITERS: Bound = Bound::new("max-waiters", 10_000, 1, 1_000_000);

/// Flows remembered without waiters (`WAIT … FLOW`), over all keys: a
/// flow whose last waiter was admitted is remembered with where its
/// admission finished, so that re-sending at once gains it nothing, until
/// the key's virtual time passes it. Past the bound the one that finished
/// first is forgotten.
pub static MAX_REMEMBERED_FLOWS: Bound = Bound::new("max-remembered-flows", 10_000, 0, 1_000_000);

/// Waiters admitted or timed out per event-loop iteration; the rest go on
/// in the next one, so that other clients are served in between.
pub static WAIT_EVENTS_PER_TICK: Bound = Bound::new("wait-events-per-tick", 100, 1, 1_000_000);

/// The largest RL.SKETCH state in bytes (WIDTH × DEPTH cells).
pub static MAX_SKETCH_BYTES: Bound = Bound::new("max-sketch-bytes", 1 << 20, 1 << 10, 1 << 30);

/// The largest RL.SLIDING EXACT limit: one log entry per admitted unit.
pub static MAX_LOG_ENTRIES: Bound = Bound::new("max-log-entries", 100_000, 1, 10_000_000);

/// The largest concurrency limit (RL.ACQUIRE, CONCURRENCY): leases held
/// on one key at once.
pub static MAX_LEASES_PER_KEY: Bound = Bound::new("max-leases-per-key", 100_000, 1, 1_000_000);

/// Named policies the server holds (`RL.POLICY SET`).
pub static MAX_POLICIES: Bound = Bound::new("max-policies", 10_000, 1, 10_000_000);

/// The longest policy name in bytes.
pub static MAX_POLICY_NAME: Bound = Bound::new("max-policy-name", 256, 1, 65_536);

/// The most nodes a named path (`RL.POLICY SET name SHARE node ...`)
/// has: what one call by its name decides and writes. A literal RL.SHARE
/// path is bounded by the call's own arguments.
pub static MAX_PATH_NODES: Bound = Bound::new("max-path-nodes", 32, 1, 65_536);

/// Named policies `INFO ratelimit` lists, one line each, the most called
/// first: INFO stays bounded whatever `max-policies` is.
pub static INFO_POLICIES: Bound = Bound::new("info-policies", 100, 0, 10_000);

/// 1: every denial's wait is spread as with `JITTER`; 0 (the default):
/// only those of requests with `JITTER`.
pub static JITTER: Bound = Bound::new("jitter", 0, 0, 1);
/// The most emission intervals a jittered wait is spread over: the most
/// denied clients of one key it spreads (see `engine::jitter`).
pub static JITTER_MAX_HERD: Bound = Bound::new("jitter-max-herd", 10_000, 1, 1_000_000);

/// Keys the deny list holds (`RL.DENY`); past it a new key is refused.
pub static MAX_DENIED_KEYS: Bound = Bound::new("max-denied-keys", 100_000, 0, 10_000_000);

/// Counters that find the hot keys (`RL.HOTKEYS`), rounded up to whole
/// shards of 80 (about 17.7 KB each); 0: decisions are not counted.
pub static HOT_KEY_COUNTERS: Bound = Bound::new("hot-key-counters", 320, 0, 5_120);

/// Keys RL.PENALIZED lists (blocks and counted debts still running), the
/// most recent; past it the least recent is let go; 0: none listed.
pub static PENALIZED_KEYS: Bound = Bound::new("penalized-keys", 1_000, 0, 1_000_000);

/// Every bound, in the order `CONFIG GET ratelimit.*` lists them.
pub static ALL: [&Bound; 17] = [
    &MAX_WAITERS_PER_KEY,
    &MAX_WAITERS_PER_FLOW,
    &MAX_WAITERS,
    &MAX_REMEMBERED_FLOWS,
    &WAIT_EVENTS_PER_TICK,
    &MAX_SKETCH_BYTES,
    &MAX_LOG_ENTRIES,
    &MAX_LEASES_PER_KEY,
    &MAX_POLICIES,
    &MAX_POLICY_NAME,
    &MAX_PATH_NODES,
    &INFO_POLICIES,
    &JITTER,
    &JITTER_MAX_HERD,
    &MAX_DENIED_KEYS,
    &HOT_KEY_COUNTERS,
    &PENALIZED_KEYS,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_lie_in_their_ranges_and_names_are_unique() {
        for (i, b) in ALL.iter().enumerate() {
            assert!(b.min <= b.default && b.default <= b.max, "{}", b.name);
            assert!(b.max <= i64::MAX as u64, "{}", b.name);
            assert!(ALL[..i].iter().all(|o| o.name != b.name), "{}", b.name);
        }
    }

    #[test]
    fn a_value_outside_the_range_is_refused_and_changes_nothing() {
        let b = Bound::new("x", 5, 1, 10);
        assert_eq!(
            b.set(11),
            Err("ratelimit.x must be between 1 and 10".into())
        );
        assert_eq!(b.get(), 5);
        b.set(10).unwrap();
        assert_eq!(b.get(), 10);
        b.reset();
        assert_eq!(b.get(), 5);
    }
}
