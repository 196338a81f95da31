//! The server's keys as the wait queue reaches them (`engine::queue::Keyspace`):
//! from any context, in any database, and in Redis Cluster only where this
//! node still holds them.

use super::{selected_db, KeyName};
use crate::algorithm::Micros;
use crate::engine::error::Error;
use crate::engine::queue::{Charged, Keyspace};
use crate::engine::store::Store;
use crate::engine::{self, KeyError, Outcome, Request};
use crate::policy::Policy;
use crate::server::cluster_nodes::{serving, Serving};
use crate::server::ffi::{api, Arg, CallReply, Ctx, OwnedStrings};
use crate::server::key::RedisStore;
use redis_module::raw;
use std::ffi::c_int;

/// The server's keys as the queue reaches them: in any database, from the
/// context at hand (a command's, the timer's); the context's database is
/// restored on drop.
pub(super) struct ServerKeyspace {
    ctx: Ctx,
    original: c_int,
    current: c_int,
}

impl ServerKeyspace {
    pub(super) fn new(ctx: Ctx) -> ServerKeyspace {
        let db = selected_db(ctx);
        ServerKeyspace {
            ctx,
            original: db,
            current: db,
        }
    }

    fn select(&mut self, db: c_int) {
        if db != self.current {
            // SAFETY: ctx is live; `db` is a database a client selected.
            unsafe { api!(RedisModule_SelectDb)(self.ctx.0, db) };
            self.current = db;
        }
    }
}

impl Drop for ServerKeyspace {
    fn drop(&mut self) {
        self.select(self.original);
    }
}

impl ServerKeyspace {
    /// `CLUSTER KEYSLOT key`.
    fn keyslot(&self, name: Arg) -> Option<u16> {
        // SAFETY: ctx is live; the format's arguments are a C string and a
        // Redis string.
        let reply = unsafe {
            CallReply::new(api!(RedisModule_Call)(
                self.ctx.0,
                c"CLUSTER".as_ptr(),
                c"cs".as_ptr(),
                c"KEYSLOT".as_ptr(),
                name.0,
            ))
        }?;
        reply.integer().and_then(|s| u16::try_from(s).ok())
    }

    /// `CLUSTER NODES`, the text.
    fn cluster_nodes(&self) -> Option<String> {
        // SAFETY: ctx is live; the format's argument is a C string.
        let reply = unsafe {
            CallReply::new(api!(RedisModule_Call)(
                self.ctx.0,
                c"CLUSTER".as_ptr(),
                c"c".as_ptr(),
                c"NODES".as_ptr(),
            ))
        }?;
        reply
            .bytes()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }
}

impl ServerKeyspace {
    /// Takes back what an admission charged (`engine::undo`).
    pub(super) fn undo(
        &mut self,
        charged: &Charged<KeyName>,
        now: Micros,
        decided: &Outcome,
    ) -> Result<(), KeyError> {
        if let Some((db, _)) = charged.keys.first() {
            self.select(*db);
        }
        let names = OwnedStrings::new(charged.keys.iter().map(|k| &*k.1));
        let mut store = RedisStore::open(self.ctx, &names.0);
        let undone = engine::undo(
            &mut store,
            &charged.policies,
            now,
            &charged.request,
            &decided.leases,
            decided.lender,
        );
        drop(store);
        undone
    }
}

impl Keyspace<KeyName> for ServerKeyspace {
    /// In Redis Cluster, only where the keys' slot is this node's (and,
    /// while it migrates away, only if the keys are still here): a
    /// waiter whose slot moved away is denied, never admitted here.
    fn serves(&mut self, keys: &[KeyName]) -> bool {
        // SAFETY: ctx is a live context.
        let flags = unsafe { api!(RedisModule_GetContextFlags)(self.ctx.0) } as u32;
        if flags & raw::REDISMODULE_CTX_FLAGS_CLUSTER == 0 {
            return true;
        }
        let Some((db, _)) = keys.first() else {
            return true;
        };
        self.select(*db);
        let names = OwnedStrings::new(keys.iter().map(|k| &*k.1));
        let (Some(slot), Some(nodes)) = (self.keyslot(names.0[0]), self.cluster_nodes()) else {
            return false;
        };
        match serving(&nodes, slot) {
            Serving::Owned => true,
            Serving::NotOwned => false,
            Serving::Migrating => {
                let store = RedisStore::open(self.ctx, &names.0);
                let here = (0..keys.len()).all(|i| matches!(store.value(i), Ok(Some(_))));
                drop(store);
                here
            }
        }
    }

    fn value(&mut self, key: &KeyName) -> Result<Option<Vec<u8>>, Error> {
        self.small_value(key, usize::MAX)
            .map(|v| v.unwrap_or_default())
    }

    fn small_value(&mut self, key: &KeyName, max: usize) -> Result<Option<Option<Vec<u8>>>, Error> {
        self.select(key.0);
        let names = OwnedStrings::new(std::iter::once(&*key.1));
        let store = RedisStore::open(self.ctx, &names.0);
        // Read in place; copied only if small enough.
        let value = store
            .value(0)
            .map(|v| (v.map_or(0, <[u8]>::len) <= max).then(|| v.map(<[u8]>::to_vec)));
        drop(store);
        value
    }

    fn decide(
        &mut self,
        keys: &[KeyName],
        policies: &[Policy],
        at: Micros,
        request: Request,
    ) -> Result<Outcome, KeyError> {
        if let Some((db, _)) = keys.first() {
            self.select(*db);
        }
        let names = OwnedStrings::new(keys.iter().map(|k| &*k.1));
        let mut store = RedisStore::open(self.ctx, &names.0);
        let decided = engine::decide(&mut store, policies, at, &request);
        drop(store);
        decided
    }
}
