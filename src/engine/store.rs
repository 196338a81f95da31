//! Where limiter state lives, as the decision path sees it: read a key's
//! value; write a new value with its expiry and replicate the effect. The
//! server's store is `server::key::RedisStore`; [`MemoryStore`] holds the
//! same in memory for tests without a server.

use crate::algorithm::Micros;
use crate::engine::error::Error;
use crate::engine::leases::LeaseChange;
use crate::engine::penalty::Event;
use crate::policy::StateWrite;

/// The keys of one command, by position (0 for a single-key command).
///
/// A write is two steps so that several keys are written all or nothing:
/// [`Store::prepare`] does everything that can fail and changes nothing a
/// reader could see for good ([`Store::abandon`] undoes it); after it,
/// [`Store::commit`] cannot fail.
pub trait Store {
    /// The key's string value; `None` if the key does not exist. A key that
    /// holds another type is `WRONGTYPE`.
    fn value(&self, key: usize) -> Result<Option<&[u8]>, Error>;

    /// Makes the key ready to take `write`; on error nothing is changed.
    fn prepare(&mut self, key: usize, write: &StateWrite) -> Result<(), Error>;

    /// Undoes a [`Store::prepare`] that will not be committed.
    fn abandon(&mut self, key: usize);

    /// Stores the prepared `write`, sets the key to expire `ttl` from now
    /// (a deletion has none), replicates the effect (never the command) and
    /// signals the change.
    fn commit(&mut self, key: usize, write: &StateWrite, ttl: Micros);

    /// A committed write granted, renewed or ended a lease of the key (the
    /// server counts the leases held: [`crate::engine::leases`]).
    fn lease(&mut self, _key: usize, _change: LeaseChange) {}

    /// Told what a penalty did on key `key` (`engine::penalty`): the
    /// server counts it and lists the blocks; by default, nothing.
    fn penalized(&mut self, key: usize, event: Event) {
        let _ = (key, event);
    }
}

/// Prepares and commits one write.
pub fn write_one<S: Store>(
    store: &mut S,
    key: usize,
    write: &StateWrite,
    ttl: Micros,
) -> Result<(), Error> {
    store.prepare(key, write)?;
    store.commit(key, write, ttl);
    Ok(())
}

/// An in-memory store: values, expiries (as TTLs from the write), the
/// effects a replica would receive, and faults to inject.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MemoryStore {
    pub values: Vec<Option<Vec<u8>>>,
    pub ttls: Vec<Option<Micros>>,
    /// One line per replicated effect, in order.
    pub effects: Vec<String>,
    /// `prepare` of this key fails, as a NULL DMA pointer would.
    pub fail_prepare: Option<usize>,
    /// Keys prepared and not yet committed or abandoned.
    pub prepared: Vec<usize>,
}

impl MemoryStore {
    /// `keys` keys, none of which exists yet.
    pub fn new(keys: usize) -> MemoryStore {
        MemoryStore {
            values: vec![None; keys],
            ttls: vec![None; keys],
            ..MemoryStore::default()
        }
    }
}

impl Store for MemoryStore {
    fn value(&self, key: usize) -> Result<Option<&[u8]>, Error> {
        Ok(self.values[key].as_deref())
    }

    fn prepare(&mut self, key: usize, _write: &StateWrite) -> Result<(), Error> {
        if self.fail_prepare == Some(key) {
            return Err(Error::WriteFailed("no string to write to"));
        }
        self.prepared.push(key);
        Ok(())
    }

    fn abandon(&mut self, key: usize) {
        self.prepared.retain(|&k| k != key);
    }

    fn commit(&mut self, key: usize, write: &StateWrite, ttl: Micros) {
        assert!(self.prepared.contains(&key), "commit without prepare");
        self.prepared.retain(|&k| k != key);
        write.apply_to(&mut self.values[key]);
        self.ttls[key] = Some(ttl);
        let effect = match write {
            StateWrite::Value(v) => format!("SET {key} {v:?} TTL {}us", ttl.as_u64()),
            StateWrite::Patch(ranges) => {
                format!("SETRANGE {key} {ranges:?} TTL {}us", ttl.as_u64())
            }
            StateWrite::Delete => {
                self.ttls[key] = None;
                format!("DEL {key}")
            }
        };
        self.effects.push(effect);
    }
}
