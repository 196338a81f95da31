//! Concurrency limits with leases (`RL.ACQUIRE`, `RL.RELEASE`, `RL.RENEW`,
//! RL.ALL's `CONCURRENCY`): at most `limit` units held at once; an admitted
//! request holds its cost as one lease until it is released or its
//! deadline passes. A lease is held while `now < expiry`: exactly at its
//! deadline it is gone, with no client action.
//!
//! The state is a header (the key's epoch, next lease number, the root of
//! the tree and the head of the free list) and a row of slots, read through
//! [`Leases`] so a decision runs on the stored bytes. Leases in the row
//! form a tree ordered by deadline that keeps the units of each subtree
//! ([`tree`]): a decision counts the units held at `now` as all units less
//! those whose deadline has passed, one walk from the root, so expired
//! leases need no scan and no write. An acquire takes a free slot (one
//! released), else the slot of the earliest lease if it has expired, else a
//! new one: a new slot is added only when every slot holds a live lease,
//! so the row is never longer than the most leases held at once (at most
//! `limit`). A release or renewal goes straight to the slot its identifier
//! names. Every call reads and writes O(log n) slots (the tree's height
//! and the slots beside its path).
//!
//! Lease identifiers are `(epoch, seq)`: the epoch is the limiter clock when
//! the key was created, the sequence number counts acquires over the key's
//! life. A key only disappears after its TTL (at least 1 ms past its last
//! write), so a key created again has a later epoch and a stale identifier
//! never names a new lease.

pub mod tree;

use super::{settled_without_state, Decision, Micros, RetryAfter};
use crate::bounds::work::{self, Work};
use tree::{link, Link, Tree};

/// The largest `limit` the state can hold, whatever the operator bound
/// `ratelimit.max-leases-per-key` (at most this): slot links are 24 bits.
pub const MAX_LEASES: u64 = 1_000_000;

/// Lease numbers are stored in 48 bits: 2^48 acquires per key life (nine
/// years at a million a second). Past that the key admits nothing new.
pub const MAX_SEQ: u64 = (1 << 48) - 1;

/// Expiries are stored in 56 bits (year 4253); later ones are clamped.
pub const MAX_EXPIRY: Micros = Micros::new((1 << 56) - 1);

/// One slot: a lease of `cost` units until `expiry` in the tree, or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slot {
    pub expiry: Micros,
    /// Units held; 0 when free (released, reclaimed or never used).
    pub cost: u64,
    pub seq: u64,
    /// Tree links ([`Link`]); a free slot's `left` is the next free one.
    pub left: Link,
    pub right: Link,
    pub parent: Link,
    /// Units of the subtree rooted here (48 bits).
    pub sum: u64,
    /// Height of the subtree rooted here (1 for a leaf).
    pub height: u8,
}

impl Slot {
    /// Whether the slot holds units at `now`.
    pub fn held_at(&self, now: Micros) -> bool {
        self.cost > 0 && now < self.expiry
    }
}

/// The key's identity, counter, tree root and free list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    pub epoch: Micros,
    /// The number the next lease gets (the first is 1).
    pub next_seq: u64,
    /// The latest deadline of any lease handed out: the key's TTL after a
    /// release or renewal, so the key (and its counter) outlives every
    /// identifier it may still be shown.
    pub last: Micros,
    pub root: Link,
    /// The first free slot.
    pub free: Link,
}

/// A lease identifier: the key's epoch, the lease's number, and a check
/// of the key's name (so a lease presented for another key is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId {
    /// The key's epoch, its low 56 bits.
    pub epoch: u64,
    pub seq: u64,
    /// Where the lease is stored: a release or renewal goes straight to it.
    pub slot: u32,
    /// 48 bits of a hash of the key's name.
    pub check: u64,
}

/// The bits of the epoch a lease identifier carries.
pub const EPOCH_MASK: u64 = (1 << 56) - 1;

/// The slots of a key, in place.
pub trait Leases {
    fn slots(&self) -> usize;
    fn slot(&self, i: usize) -> Slot;
}

impl Leases for [Slot] {
    fn slots(&self) -> usize {
        self.len()
    }
    fn slot(&self, i: usize) -> Slot {
        self.get(i).copied().unwrap_or_default()
    }
}

/// What an admitted acquire writes: the header (all of it for a new key)
/// and the slots it changed (O(log n); one of them maybe appended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub lease: LeaseId,
    pub header: Header,
    pub slots: Vec<(usize, Slot)>,
    /// The key did not exist: write it whole.
    pub created: bool,
}

/// What a release or renew writes: the header and the slots it changed,
/// and the key's new TTL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotChange {
    pub header: Header,
    pub slots: Vec<(usize, Slot)>,
    /// The key's TTL after the change: until the last lease it handed out
    /// (held or released) would have expired.
    pub reset_after: Micros,
}

/// A concurrency limit: `limit` units, each lease held `ttl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    limit: u64,
    ttl: Micros,
    check: u64,
}

impl Concurrency {
    /// The time in which it admits one unit on average, were every lease
    /// held for its ttl.
    pub fn interval(&self) -> Micros {
        super::per_unit(self.ttl, self.limit)
    }

    /// `limit` in `1..=MAX_LEASES` and `ttl` at least 1 µs (both clamped;
    /// the grammar holds `limit` to the operator bound).
    pub fn new(limit: u64, ttl: Micros) -> Concurrency {
        Concurrency {
            limit: limit.clamp(1, MAX_LEASES),
            ttl: ttl.max(Micros::new(1)),
            check: 0,
        }
    }

    /// The same limit, its leases checked against key name check `check`.
    pub fn for_key(self, check: u64) -> Concurrency {
        Concurrency { check, ..self }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn ttl(&self) -> Micros {
        self.ttl
    }

    pub fn check(&self) -> u64 {
        self.check
    }

    /// The deadline of a lease granted at `now`.
    pub fn expiry_at(&self, now: Micros) -> Micros {
        now.saturating_add(self.ttl).min(MAX_EXPIRY)
    }

    /// Decides an acquire of `cost` units at `now` (`header` `None`: no
    /// key). Denied: `retry_after` is the wait until enough held units
    /// have expired, exact for any cost (for cost 1, until the earliest
    /// lease expires). Counts the slots it touched ([`Work::Slots`]).
    pub fn acquire<L: Leases + ?Sized>(
        &self,
        header: Option<Header>,
        leases: &L,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<Grant>) {
        let created = header.is_none();
        let header = header.unwrap_or(Header {
            epoch: now,
            next_seq: 1,
            last: now,
            ..Header::default()
        });
        let mut tree = Tree::new(header, leases);
        let decided = self.decide(&mut tree, leases.slots(), now, cost, created);
        work::add(Work::Slots, tree.touched());
        decided
    }

    fn decide<L: Leases + ?Sized>(
        &self,
        tree: &mut Tree<L>,
        len: usize,
        now: Micros,
        cost: u64,
        created: bool,
    ) -> (Decision, Option<Grant>) {
        let total = tree.total();
        let expired = tree.expired_units(now);
        let units = total.saturating_sub(expired);
        let latest = tree.edge(true);
        let latest = tree.get(latest);
        let last = if latest.held_at(now) {
            latest.expiry
        } else {
            now
        };
        let mut decision = Decision {
            allowed: false,
            limit: self.limit,
            remaining: self.limit.saturating_sub(units),
            retry_after: RetryAfter::Never,
            reset_after: last.saturating_sub(now),
        };
        if settled_without_state(&mut decision, cost, self.limit) {
            return (decision, None);
        }
        if units.saturating_add(cost) > self.limit {
            // Enough units must expire that the rest and `cost` fit: the
            // deadline of the lease that brings the expired units, counted
            // in deadline order, to `total + cost - limit`.
            let enough = total.saturating_add(cost) - self.limit;
            if let Some(at) = tree.expiry_of_unit(enough) {
                decision.retry_after =
                    RetryAfter::After(at.saturating_sub(now).max(Micros::new(1)));
            }
            return (decision, None);
        }
        if tree.header.next_seq > MAX_SEQ {
            return (decision, None);
        }
        let at = match tree.take_free() {
            Some(at) => at,
            // Some lease has expired: the earliest has.
            None if expired > 0 => {
                let first = tree.edge(false);
                tree.remove(first);
                first
            }
            None => link(len),
        };
        let expiry = self.expiry_at(now);
        let seq = tree.header.next_seq;
        tree.insert(
            at,
            Slot {
                expiry,
                cost,
                seq,
                ..Slot::default()
            },
        );
        tree.header.next_seq = seq + 1;
        tree.header.last = tree.header.last.max(expiry);
        decision.allowed = true;
        decision.retry_after = RetryAfter::NotNeeded;
        decision.remaining = self.limit - units - cost;
        decision.reset_after = last.max(expiry).saturating_sub(now);
        let grant = Grant {
            lease: LeaseId {
                epoch: tree.header.epoch.as_u64() & EPOCH_MASK,
                seq,
                slot: at - 1,
                check: self.check,
            },
            header: tree.header,
            slots: tree.changes(),
            created,
        };
        (decision, Some(grant))
    }
}

/// The slot holding lease `id` at `now`: O(1), the identifier says where.
fn find<L: Leases + ?Sized>(
    tree: &mut Tree<L>,
    len: usize,
    id: LeaseId,
    now: Micros,
) -> Option<Slot> {
    let index = id.slot as usize;
    if id.epoch != tree.header.epoch.as_u64() & EPOCH_MASK || index >= len {
        return None;
    }
    let slot = tree.get(link(index));
    (slot.seq == id.seq && slot.held_at(now)).then_some(slot)
}

/// Releases lease `id` at `now`: `None` if it is not held (unknown,
/// expired, released, or of an earlier life of the key). Its slot leaves
/// the tree for the free list.
pub fn release<L: Leases + ?Sized>(
    header: Header,
    leases: &L,
    id: LeaseId,
    now: Micros,
) -> Option<SlotChange> {
    change(header, leases, id, now, |tree, at, _| {
        tree.remove(at);
        tree.free(at);
    })
}

/// Renews lease `id` at `now` to expire `ttl` from now; `None` if it is
/// not held (an expired lease is never brought back). It moves in the
/// tree to its new deadline, in the same slot.
pub fn renew<L: Leases + ?Sized>(
    header: Header,
    leases: &L,
    id: LeaseId,
    ttl: Micros,
    now: Micros,
) -> Option<SlotChange> {
    let expiry = renewed_expiry(now, ttl);
    change(header, leases, id, now, |tree, at, slot| {
        tree.remove(at);
        tree.insert(at, Slot { expiry, ..slot });
        tree.header.last = tree.header.last.max(expiry);
    })
}

/// The deadline of a lease renewed at `now` for `ttl`.
pub fn renewed_expiry(now: Micros, ttl: Micros) -> Micros {
    now.saturating_add(ttl.max(Micros::new(1))).min(MAX_EXPIRY)
}

/// Applies `f` to the slot of a held lease `id`; the key lives until the
/// latest deadline handed out.
fn change<L: Leases + ?Sized>(
    header: Header,
    leases: &L,
    id: LeaseId,
    now: Micros,
    f: impl FnOnce(&mut Tree<L>, Link, Slot),
) -> Option<SlotChange> {
    let mut tree = Tree::new(header, leases);
    let found = find(&mut tree, leases.slots(), id, now);
    if let Some(slot) = found {
        f(&mut tree, link(id.slot as usize), slot);
    }
    work::add(Work::Slots, tree.touched());
    found?;
    Some(SlotChange {
        header: tree.header,
        slots: tree.changes(),
        reset_after: tree.header.last.saturating_sub(now),
    })
}

#[cfg(test)]
mod tests;
