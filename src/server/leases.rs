//! The leases held on this server ([`crate::engine::leases`]), by
//! database and key name: fed by the keys' writes (`key::RedisStore`),
//! read by `INFO ratelimit`.

use super::clock;
use super::ffi::{api, Ctx};
use crate::engine::leases::{HeldLeases, LeaseChange, LeaseCounts};
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

type KeyName = (c_int, Box<[u8]>);

static HELD: Mutex<Option<HeldLeases<KeyName>>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<HeldLeases<KeyName>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records `change` to a lease of key `name` in the context's database.
pub fn record(ctx: Ctx, name: &[u8], change: LeaseChange) {
    // SAFETY: ctx is a live context with a client.
    let db = unsafe { api!(RedisModule_GetSelectedDb)(ctx.0) };
    let key = (db, Box::from(name));
    lock()
        .get_or_insert_with(HeldLeases::default)
        .apply(&key, change, clock::now());
}

/// The counts now.
pub fn counts() -> LeaseCounts {
    lock()
        .as_mut()
        .map(|held| held.counts(clock::now()))
        .unwrap_or_default()
}

/// Forgets every lease (a reload starts from zero).
pub fn reset() {
    *lock() = None;
}
