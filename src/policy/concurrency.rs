//! RL.ACQUIRE (RL.ALL's CONCURRENCY) as a policy: the leases of a key,
//! read in place and patched ([`lease`]); and the release and renewal of
//! one lease. A lease is released, not refunded, and held or not, never
//! forced (the grammar refuses both; the [`Limiter`] defaults change
//! nothing).

use super::{Limiter, StateWrite, Transition};
use crate::algorithm::concurrency::{Concurrency, Header, LeaseId, SlotChange};
use crate::algorithm::Micros;
use crate::codec::lease::{self, StoredLeases};
use crate::codec::{Kind, StateError};

impl Limiter for Concurrency {
    fn interval(&self) -> Option<Micros> {
        Some(Concurrency::interval(self))
    }

    fn kind(&self) -> Kind {
        Kind::Concurrency
    }

    fn holds_leases(&self) -> bool {
        true
    }

    fn lease_deadline(&self, now: Micros) -> Option<Micros> {
        Some(self.expiry_at(now))
    }

    /// An acquire writes the counters and the slots it changed in place (a
    /// new key, or one read in an earlier layout, whole).
    fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError> {
        let stored = stored.map(StoredLeases::decode).transpose()?;
        let (decision, grant) = match &stored {
            Some(s) => self.acquire(Some(s.header), s, now, cost),
            None => self.acquire(None, &[][..], now, cost),
        };
        let Some(grant) = grant else {
            return Ok(Transition::of(decision, None));
        };
        let patch = lease::grant_patch(&grant);
        let write = match stored.as_ref().and_then(|s| s.converted_value(&patch)) {
            Some(whole) => StateWrite::Value(whole.into()),
            None if grant.created => StateWrite::Value(lease::encode_new(&grant).into()),
            None => StateWrite::Patch(patch),
        };
        Ok(Transition {
            decision,
            write: Some(write),
            lease: Some(grant.lease),
        })
    }
}

/// Applies `f`, a change of one lease, to a stored concurrency state: the
/// write (the changed slots in place, or the whole value once if it was
/// stored in an earlier layout) and the key's TTL after it; `None` when
/// nothing changes.
pub fn change_leases(
    value: &[u8],
    now: Micros,
    f: impl FnOnce(Header, &StoredLeases, Micros) -> Option<SlotChange>,
) -> Result<Option<(StateWrite, Micros)>, StateError> {
    let stored = StoredLeases::decode(value)?;
    Ok(f(stored.header, &stored, now).map(|change| {
        let patch = lease::change_patch(&change);
        let write = match stored.converted_value(&patch) {
            Some(whole) => StateWrite::Value(whole.into()),
            None => StateWrite::Patch(patch),
        };
        (write, change.reset_after)
    }))
}

/// Gives lease `lease` back (see [`change_leases`]).
pub fn release_lease(
    value: &[u8],
    lease: LeaseId,
    now: Micros,
) -> Result<Option<(StateWrite, Micros)>, StateError> {
    change_leases(value, now, |header, leases, now| {
        crate::algorithm::concurrency::release(header, leases, lease, now)
    })
}
