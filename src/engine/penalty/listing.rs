//! What RL.PENALIZED lists and INFO counts: the keys whose block (or
//! counted debt) is still running, the most recent first, in fixed memory:
//! at most `ratelimit.penalized-keys` keys, the least recent let go past
//! it. Each key is listed once, with its latest block. Kept by the server
//! that decided (not saved or replicated: a key's block itself is in the
//! key, and holds on a replica and after a restart).
//!
//! Cost: O(log n) per block begun or debt charged; a listing O(COUNT log n)
//! plus the ended entries it lets go (each once).

use crate::algorithm::Micros;
use crate::bounds::PENALIZED_KEYS;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// Listed keys let go past the bound per record: more than one, so that a
/// lowered bound is reached soon.
const SHRINK_PER_RECORD: usize = 16;

/// One listed key: its block's end, its form, its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    end: Micros,
    form: &'static str,
    seq: u64,
}

/// The listed keys, by key, by place (recency) and by end.
#[derive(Debug, Default)]
pub struct Listing {
    by_key: HashMap<Vec<u8>, Entry>,
    by_seq: BTreeMap<u64, Vec<u8>>,
    by_end: BTreeSet<(Micros, u64)>,
    next_seq: u64,
}

/// One entry of RL.PENALIZED: the key, the time left, the form.
pub type Listed = (Vec<u8>, Micros, &'static str);

impl Listing {
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Records `key`'s block (`form`) ending at `end`, the most recent;
    /// past `max` keys the least recent go.
    pub fn record(&mut self, key: &[u8], end: Micros, form: &'static str, max: u64) {
        self.remove(key);
        if max == 0 {
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_key.insert(key.to_vec(), Entry { end, form, seq });
        self.by_seq.insert(seq, key.to_vec());
        self.by_end.insert((end, seq));
        for _ in 0..SHRINK_PER_RECORD {
            if self.by_key.len() as u64 <= max {
                break;
            }
            let Some((_, oldest)) = self.by_seq.pop_first() else {
                break;
            };
            self.remove(&oldest);
        }
    }

    fn remove(&mut self, key: &[u8]) {
        if let Some(e) = self.by_key.remove(key) {
            self.by_seq.remove(&e.seq);
            self.by_end.remove(&(e.end, e.seq));
        }
    }

    /// Up to `n` keys whose block still runs at `now`, the most recent
    /// first; those ended are let go.
    pub fn list(&mut self, now: Micros, n: usize) -> Vec<Listed> {
        while let Some(&(end, seq)) = self.by_end.first() {
            if end > now {
                break;
            }
            if let Some(key) = self.by_seq.get(&seq).cloned() {
                self.remove(&key);
            } else {
                self.by_end.pop_first();
            }
        }
        self.by_seq
            .iter()
            .rev()
            .take(n)
            .filter_map(|(_, key)| {
                let e = self.by_key.get(key)?;
                Some((key.clone(), e.end.saturating_sub(now), e.form))
            })
            .collect()
    }
}

static LISTING: Mutex<Option<Listing>> = Mutex::new(None);
static BLOCKS: AtomicU64 = AtomicU64::new(0);
static HELD: AtomicU64 = AtomicU64::new(0);
static CHARGED: AtomicU64 = AtomicU64::new(0);

fn lock() -> MutexGuard<'static, Option<Listing>> {
    // Each change to it is whole: a poisoned lock is usable.
    LISTING.lock().unwrap_or_else(|e| e.into_inner())
}

/// A block began on `key`, ending at `end`.
pub fn began(key: &[u8], end: Micros) {
    BLOCKS.fetch_add(1, Relaxed);
    record(key, end, "block");
}

/// A denied request on `key` was charged; its debt ends at `end`.
pub fn charged(key: &[u8], end: Micros) {
    CHARGED.fetch_add(1, Relaxed);
    record(key, end, "count");
}

/// A request was denied by a running block.
pub fn held() {
    HELD.fetch_add(1, Relaxed);
}

fn record(key: &[u8], end: Micros, form: &'static str) {
    let mut listing = lock();
    let listing = listing.get_or_insert_with(Listing::default);
    listing.record(key, end, form, PENALIZED_KEYS.get());
}

/// RL.PENALIZED: up to `n` keys whose block runs at `now`.
pub fn list(now: Micros, n: usize) -> Vec<Listed> {
    lock().as_mut().map(|l| l.list(now, n)).unwrap_or_default()
}

/// INFO's counts: blocks begun, requests a running block denied, denied
/// requests charged, keys listed.
pub fn counts() -> [u64; 4] {
    let listed = lock().as_ref().map_or(0, |l| l.len() as u64);
    [
        BLOCKS.load(Relaxed),
        HELD.load(Relaxed),
        CHARGED.load(Relaxed),
        listed,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Micros {
        Micros::from_millis(n)
    }

    #[test]
    fn the_most_recent_first_each_key_once_ended_ones_gone() {
        let mut l = Listing::default();
        l.record(b"a", ms(100), "block", 10);
        l.record(b"b", ms(50), "count", 10);
        l.record(b"c", ms(300), "block", 10);
        l.record(b"a", ms(200), "block", 10);
        assert_eq!(
            l.list(ms(10), 10),
            [
                (b"a".to_vec(), ms(190), "block"),
                (b"c".to_vec(), ms(290), "block"),
                (b"b".to_vec(), ms(40), "count"),
            ]
        );
        assert_eq!(l.list(ms(60), 2).len(), 2);
        assert_eq!(l.len(), 2, "b ended and was let go");
        assert!(l.list(ms(300), 10).is_empty());
        assert_eq!(l.len(), 0);
    }

    #[test]
    fn the_bound_keeps_the_most_recent_and_zero_lists_none() {
        let mut l = Listing::default();
        for i in 0..1_000u64 {
            l.record(&i.to_be_bytes(), ms(10_000), "block", 100);
        }
        assert_eq!(l.len(), 100);
        let listed = l.list(ms(0), 1_000);
        assert_eq!(listed.len(), 100);
        assert_eq!(listed[0].0, 999u64.to_be_bytes());
        // A lowered bound is reached 16 keys a record.
        l.record(b"x", ms(10_000), "block", 10);
        assert_eq!(l.len(), 101 - 16);
        let mut z = Listing::default();
        z.record(b"x", ms(1), "block", 0);
        assert_eq!(z.len(), 0);
    }
}
