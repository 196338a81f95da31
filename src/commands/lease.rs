//! `RL.RELEASE key lease` and `RL.RENEW key lease ttl`: a holder gives its
//! lease back, or keeps it longer. (`RL.ACQUIRE` is a decision command:
//! `policy_command` with the CONCURRENCY policy.) Each writes the slots it
//! changes in place, O(log n) of them for n leases; a release (or a
//! renewal, which may end a lease sooner) hands the freed units to the
//! key's waiters at once.

use super::definition::CommandDef;
use super::grammar::Param;
use super::{Host, Reply};
use crate::algorithm::concurrency::{self, Header, LeaseId, SlotChange};
use crate::algorithm::Micros;
use crate::codec::lease::{key_check, parse_lease, StoredLeases};
use crate::codec::Kind;
use crate::engine::error::Error;
use crate::engine::leases::LeaseChange;
use crate::engine::store::{self, Store};
use crate::policy::change_leases;
use std::slice;

pub const RELEASE_PARAMS: [Param; 1] = [Param::lease("lease")];
pub const RENEW_PARAMS: [Param; 2] = [Param::lease("lease"), Param::duration("ttl")];

/// The lease named by `text` for key `key`: malformed or of another key
/// is an error; well-formed and unknown is for the state to say.
pub fn lease_for(key: &[u8], text: &[u8]) -> Result<LeaseId, Error> {
    let id = parse_lease(text).ok_or(Error::MalformedLease)?;
    if id.check != key_check(key) {
        return Err(Error::LeaseOfAnotherKey);
    }
    Ok(id)
}

pub fn release<H: Host>(
    command: &CommandDef,
    host: &mut H,
    args: &[H::Arg],
) -> Result<Reply, Error> {
    let [_, key, lease] = args else {
        return Err(Error::Arity(command.name));
    };
    let id = lease_for(key.as_ref(), lease.as_ref())?;
    let released = change(
        host,
        key,
        |header, leases, now| concurrency::release(header, leases, id, now),
        |_| LeaseChange::Released(id),
    )?;
    if released {
        host.key_freed(key);
    }
    Ok(Reply::Int(i64::from(released)))
}

pub fn renew<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let [_, key, lease, ttl] = args else {
        return Err(Error::Arity(command.name));
    };
    let id = lease_for(key.as_ref(), lease.as_ref())?;
    let ttl = Micros::new(RENEW_PARAMS[1].parse(ttl.as_ref())?);
    let renewed = change(
        host,
        key,
        |header, leases, now| concurrency::renew(header, leases, id, ttl, now),
        |now| LeaseChange::Renewed {
            lease: id,
            deadline: concurrency::renewed_expiry(now, ttl),
        },
    )?;
    if renewed {
        // A shorter lease may free its units sooner than the line expects.
        host.key_freed(key);
    }
    Ok(Reply::Int(i64::from(renewed)))
}

/// Reads the key's leases, applies `f` at the limiter clock and writes the
/// changed slots (the whole value, once, if it was stored in an earlier
/// layout) and tells the store what became of the lease (`event`); false
/// when there was nothing to change.
fn change<H: Host>(
    host: &mut H,
    key: &H::Arg,
    f: impl FnOnce(Header, &StoredLeases, Micros) -> Option<SlotChange>,
    event: impl FnOnce(Micros) -> LeaseChange,
) -> Result<bool, Error> {
    let now = host.now();
    let mut store = host.open(slice::from_ref(key), false);
    let found = match store.value(0)? {
        None => None,
        Some(value) => {
            change_leases(value, now, f).map_err(|e| Error::state(Kind::Concurrency.name(), e))?
        }
    };
    let Some((write, reset_after)) = found else {
        return Ok(false);
    };
    store::write_one(&mut store, 0, &write, reset_after)?;
    store.lease(0, event(now));
    Ok(true)
}
