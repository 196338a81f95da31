//! Concurrency limits with leases (`RL.ACQUIRE`, `RL.RELEASE`, `RL.RENEW`,
//! RL.ALL's `CONCURRENCY`): at most `limit` units held at once; an admitted
//! request holds its cost as one lease until it is released or its
//! deadline passes. A lease is held while `now < expiry`: exactly at its
//! deadline it is gone, with no client action.
//!
//! The state is a header (the key's epoch and next lease number) and a row
//! of slots, read through [`Leases`] so a decision runs on the stored bytes.
//! A slot is free when released (cost 0) or expired; an acquire takes the
//! first free slot or appends one, so the row is never longer than the most
//! leases ever held at once (at most `limit`). Expired slots are reclaimed
//! by reuse and never counted.
//!
//! Lease identifiers are `(epoch, seq)`: the epoch is the limiter clock when
//! the key was created, the sequence number counts acquires over the key's
//! life. A key only disappears after its TTL (at least 1 ms past its last
//! write), so a key created again has a later epoch and a stale identifier
//! never names a new lease.

use super::{settled_without_state, Decision, Micros, RetryAfter};

/// The largest `limit`: a held lease is one 16-byte slot, so this bounds a
/// key's state to 1.6 MB, and an acquire's scan of the slots.
pub const MAX_CONCURRENCY_LIMIT: u64 = 100_000;

/// Lease numbers are stored in 48 bits: 2^48 acquires per key life (nine
/// years at a million a second). Past that the key admits nothing new.
pub const MAX_SEQ: u64 = (1 << 48) - 1;

/// Expiries are stored in 56 bits (year 4253); later ones are clamped.
pub const MAX_EXPIRY: Micros = Micros::new((1 << 56) - 1);

/// One slot: a lease of `cost` units until `expiry`, or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slot {
    pub expiry: Micros,
    /// Units held; 0 when released (or never used).
    pub cost: u64,
    pub seq: u64,
}

impl Slot {
    /// Whether the slot holds units at `now`.
    pub fn held_at(&self, now: Micros) -> bool {
        self.cost > 0 && now < self.expiry
    }
}

/// The key's identity and counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub epoch: Micros,
    /// The number the next lease gets (the first is 1).
    pub next_seq: u64,
    /// The latest deadline of any lease handed out: the key's TTL after a
    /// release or renewal, so the key (and its counter) outlives every
    /// identifier it may still be shown.
    pub last: Micros,
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
    pub check: u16,
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

impl Leases for Vec<Slot> {
    fn slots(&self) -> usize {
        self.len()
    }
    fn slot(&self, i: usize) -> Slot {
        self.get(i).copied().unwrap_or_default()
    }
}

/// What an admitted acquire writes: the header (its counter moved on; all
/// of it for a new key) and one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub lease: LeaseId,
    pub header: Header,
    pub index: usize,
    pub slot: Slot,
    /// The key did not exist: write it whole.
    pub created: bool,
}

/// What a release or renew writes: one slot (and the header's last
/// deadline), and the key's new TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotChange {
    pub index: usize,
    pub slot: Slot,
    pub last: Micros,
    /// The key's TTL after the change: until the last lease it handed out
    /// (held or released) would have expired.
    pub reset_after: Micros,
}

/// A concurrency limit: `limit` units, each lease held `ttl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    limit: u64,
    ttl: Micros,
    check: u16,
}

/// Units held at `now` and the latest expiry among them.
fn held<L: Leases + ?Sized>(leases: &L, now: Micros) -> (u64, Micros) {
    let mut units = 0u64;
    let mut last = now;
    for i in 0..leases.slots() {
        let s = leases.slot(i);
        if s.held_at(now) {
            units = units.saturating_add(s.cost);
            last = last.max(s.expiry);
        }
    }
    (units, last)
}

/// The slot holding lease `id` at `now`: O(1), the identifier says where.
fn find<L: Leases + ?Sized>(
    header: Header,
    leases: &L,
    id: LeaseId,
    now: Micros,
) -> Option<(usize, Slot)> {
    let index = id.slot as usize;
    if id.epoch != header.epoch.as_u64() & EPOCH_MASK || index >= leases.slots() {
        return None;
    }
    let slot = leases.slot(index);
    (slot.seq == id.seq && slot.held_at(now)).then_some((index, slot))
}

impl Concurrency {
    /// `limit` in `1..=MAX_CONCURRENCY_LIMIT` and `ttl` at least 1 µs
    /// (both clamped).
    pub fn new(limit: u64, ttl: Micros) -> Concurrency {
        Concurrency {
            limit: limit.clamp(1, MAX_CONCURRENCY_LIMIT),
            ttl: ttl.max(Micros::new(1)),
            check: 0,
        }
    }

    /// The same limit, its leases checked against key name check `check`.
    pub fn for_key(self, check: u16) -> Concurrency {
        Concurrency { check, ..self }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn ttl(&self) -> Micros {
        self.ttl
    }

    pub fn check(&self) -> u16 {
        self.check
    }

    /// Decides an acquire of `cost` units at `now` (`header` `None`: no
    /// key). Denied: `retry_after` is the wait until enough held units
    /// have expired (for cost 1, until the earliest lease expires).
    pub fn acquire<L: Leases + ?Sized>(
        &self,
        header: Option<Header>,
        leases: &L,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<Grant>) {
        let (units, last) = held(leases, now);
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
        let created = header.is_none();
        let header = header.unwrap_or(Header {
            epoch: now,
            next_seq: 1,
            last: now,
        });
        if units.saturating_add(cost) > self.limit {
            decision.retry_after = self.retry_after(leases, units, now, cost);
            return (decision, None);
        }
        if header.next_seq > MAX_SEQ {
            return (decision, None);
        }
        let expiry = now.saturating_add(self.ttl).min(MAX_EXPIRY);
        let index = (0..leases.slots())
            .find(|&i| !leases.slot(i).held_at(now))
            .unwrap_or(leases.slots());
        let seq = header.next_seq;
        decision.allowed = true;
        decision.retry_after = RetryAfter::NotNeeded;
        decision.remaining = self.limit - units - cost;
        decision.reset_after = last.max(expiry).saturating_sub(now);
        let grant = Grant {
            lease: LeaseId {
                epoch: header.epoch.as_u64() & EPOCH_MASK,
                seq,
                slot: index as u32,
                check: self.check,
            },
            header: Header {
                epoch: header.epoch,
                next_seq: seq + 1,
                last: header.last.max(expiry),
            },
            index,
            slot: Slot { expiry, cost, seq },
            created,
        };
        (decision, Some(grant))
    }

    /// The wait until enough held units expire to fit `cost`.
    fn retry_after<L: Leases + ?Sized>(
        &self,
        leases: &L,
        units: u64,
        now: Micros,
        cost: u64,
    ) -> RetryAfter {
        let mut live: Vec<(Micros, u64)> = (0..leases.slots())
            .map(|i| leases.slot(i))
            .filter(|s| s.held_at(now))
            .map(|s| (s.expiry, s.cost))
            .collect();
        live.sort_unstable();
        let mut still = units;
        for (expiry, c) in live {
            still -= c.min(still);
            if still.saturating_add(cost) <= self.limit {
                return RetryAfter::After(expiry.saturating_sub(now).max(Micros::new(1)));
            }
        }
        RetryAfter::Never
    }
}

/// Releases lease `id` at `now`: `None` if it is not held (unknown,
/// expired, released, or of an earlier life of the key).
pub fn release<L: Leases + ?Sized>(
    header: Header,
    leases: &L,
    id: LeaseId,
    now: Micros,
) -> Option<SlotChange> {
    let (index, slot) = find(header, leases, id, now)?;
    // The expiry stays: a released slot still tells when its lease ended.
    Some(change(header, index, Slot { cost: 0, ..slot }, now))
}

/// Renews lease `id` at `now` to expire `ttl` from now; `None` if it is
/// not held (an expired lease is never brought back).
pub fn renew<L: Leases + ?Sized>(
    header: Header,
    leases: &L,
    id: LeaseId,
    ttl: Micros,
    now: Micros,
) -> Option<SlotChange> {
    let (index, slot) = find(header, leases, id, now)?;
    let expiry = now.saturating_add(ttl.max(Micros::new(1))).min(MAX_EXPIRY);
    Some(change(header, index, Slot { expiry, ..slot }, now))
}

/// One slot's change; the key lives until the latest deadline handed out.
fn change(header: Header, index: usize, slot: Slot, now: Micros) -> SlotChange {
    let last = header.last.max(slot.expiry);
    SlotChange {
        index,
        slot,
        last,
        reset_after: last.saturating_sub(now),
    }
}

#[cfg(test)]
mod tests;
