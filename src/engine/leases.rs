//! The concurrency leases held on this server, counted exactly without
//! reading any key: every command that grants, renews or ends a lease says
//! so ([`crate::engine::store::Store::lease`]), and a lease that reaches
//! its deadline (no event marks it) is dropped when the count is next read
//! or changed, each once, earliest first: O(log n) per change, O(expired ·
//! log n) amortised per read, for n leases held. Memory: one entry per
//! lease held (about 190 bytes with its key's name twice), O(what the
//! keys themselves hold).
//!
//! A lease whose key is deleted or overwritten outside the module (DEL,
//! FLUSHALL, the key's own expiry, a cluster slot moved away) is counted
//! until its deadline: nothing in the module sees those.

use crate::algorithm::concurrency::LeaseId;
use crate::algorithm::Micros;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// What a command did to one lease of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseChange {
    /// Granted, held until `deadline`.
    Granted { lease: LeaseId, deadline: Micros },
    /// Renewed: held until `deadline` now.
    Renewed { lease: LeaseId, deadline: Micros },
    /// Released (RL.RELEASE, or an admission taken back).
    Released(LeaseId),
}

/// The counts `INFO ratelimit` reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseCounts {
    /// Leases granted and neither released nor past their deadline.
    pub held: u64,
    /// Leases granted (since the module was loaded).
    pub granted: u64,
    /// Leases released before their deadline.
    pub released: u64,
    /// Leases that reached their deadline while held.
    pub expired: u64,
}

/// A lease: its key and, within the key, its identifier's epoch and number.
type Id<K> = (K, u64, u64);

/// The leases held, by key and by deadline. Ordered maps, not hashed:
/// key names are the clients', and no choice of them makes a look-up
/// cost more than O(log n) comparisons.
#[derive(Debug)]
pub struct HeldLeases<K> {
    deadlines: BTreeMap<Id<K>, Micros>,
    by_deadline: BTreeSet<(Micros, Id<K>)>,
    counts: LeaseCounts,
}

impl<K> Default for HeldLeases<K> {
    fn default() -> Self {
        HeldLeases {
            deadlines: BTreeMap::new(),
            by_deadline: BTreeSet::new(),
            counts: LeaseCounts::default(),
        }
    }
}

impl<K: Clone + Ord> HeldLeases<K> {
    /// Records `change` to a lease of key `key` at `now`.
    pub fn apply(&mut self, key: &K, change: LeaseChange, now: Micros) {
        self.expire(now);
        match change {
            LeaseChange::Granted { lease, deadline } => {
                self.counts.granted += 1;
                self.hold(key, lease, deadline, now);
            }
            // A renewal of a lease not counted (granted before a reload)
            // counts it from now: it is held.
            LeaseChange::Renewed { lease, deadline } => self.hold(key, lease, deadline, now),
            LeaseChange::Released(lease) => {
                if self.remove(&(key.clone(), lease.epoch, lease.seq)) {
                    self.counts.released += 1;
                }
            }
        }
    }

    fn hold(&mut self, key: &K, lease: LeaseId, deadline: Micros, now: Micros) {
        let id = (key.clone(), lease.epoch, lease.seq);
        if now >= deadline {
            self.remove(&id);
            return;
        }
        // A renewal, or the same identifier again (a key created anew in
        // the same microsecond): the new deadline replaces the old.
        match self.deadlines.entry(id) {
            Entry::Occupied(mut held) => {
                let old = std::mem::replace(held.get_mut(), deadline);
                let id = held.key().clone();
                self.by_deadline.remove(&(old, id.clone()));
                self.by_deadline.insert((deadline, id));
            }
            Entry::Vacant(free) => {
                self.by_deadline.insert((deadline, free.key().clone()));
                free.insert(deadline);
            }
        }
    }

    fn remove(&mut self, id: &Id<K>) -> bool {
        let Some(deadline) = self.deadlines.remove(id) else {
            return false;
        };
        self.by_deadline.remove(&(deadline, id.clone()));
        true
    }

    /// Drops the leases whose deadline is at or before `now` (a lease is
    /// held while `now < deadline`), earliest first.
    pub fn expire(&mut self, now: Micros) {
        while let Some((deadline, _)) = self.by_deadline.first() {
            if *deadline > now {
                break;
            }
            if let Some((_, id)) = self.by_deadline.pop_first() {
                self.deadlines.remove(&id);
                self.counts.expired += 1;
            }
        }
    }

    /// The counts at `now`.
    pub fn counts(&mut self, now: Micros) -> LeaseCounts {
        self.expire(now);
        LeaseCounts {
            held: self.deadlines.len() as u64,
            ..self.counts
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(seq: u64) -> LeaseId {
        LeaseId {
            epoch: 7,
            seq,
            slot: 0,
            check: 0,
        }
    }

    fn at(us: u64) -> Micros {
        Micros::new(us)
    }

    fn granted(seq: u64, deadline: u64) -> LeaseChange {
        LeaseChange::Granted {
            lease: lease(seq),
            deadline: at(deadline),
        }
    }

    #[test]
    fn grants_releases_renewals_and_deadlines() {
        let mut held = HeldLeases::default();
        held.apply(&"a", granted(1, 100), at(0));
        held.apply(&"a", granted(2, 200), at(0));
        held.apply(&"b", granted(1, 100), at(0));
        assert_eq!(held.counts(at(0)).held, 3);
        held.apply(&"a", LeaseChange::Released(lease(1)), at(10));
        // Released twice or unknown: counted once.
        held.apply(&"a", LeaseChange::Released(lease(1)), at(10));
        held.apply(
            &"b",
            LeaseChange::Renewed {
                lease: lease(1),
                deadline: at(300),
            },
            at(20),
        );
        assert_eq!(held.counts(at(199)).held, 2);
        let counts = held.counts(at(200));
        assert_eq!(
            counts,
            LeaseCounts {
                held: 1,
                granted: 3,
                released: 1,
                expired: 1
            }
        );
        assert_eq!(held.counts(at(300)).held, 0);
        assert!(held.by_deadline.is_empty() && held.deadlines.is_empty());
    }

    #[test]
    fn the_same_identifier_again_replaces_the_stale_one() {
        let mut held = HeldLeases::default();
        held.apply(&"a", granted(1, 100), at(0));
        held.apply(&"a", granted(1, 150), at(0));
        assert_eq!(held.counts(at(120)).held, 1);
        assert_eq!(held.by_deadline.len(), 1);
    }

    #[test]
    fn a_released_lease_is_not_expired_later() {
        let mut held = HeldLeases::default();
        held.apply(&"a", granted(1, 100), at(0));
        held.apply(&"a", LeaseChange::Released(lease(1)), at(50));
        let counts = held.counts(at(1_000));
        assert_eq!((counts.held, counts.released, counts.expired), (0, 1, 0));
    }
}
