//! First come, first served waiting (`WAIT timeout`): per-key FIFO lines of
//! waiters; which of them to admit or time out as time passes; and where a
//! request that arrives while others wait stands. Pure: the keys are reached
//! through a [`Keyspace`], each waiter's client is an opaque token. The
//! server shell (`server::wait`) blocks clients and replies.
//!
//! A waiter is at the head when it is first in the line of every one of its
//! keys (RL.ALL waits in the line of each of its keys). Only heads are
//! decided: a head has a due time, the earliest moment its limits may admit
//! it; at that moment it is decided for real, and admitted, or given the
//! new due time its denial names. Every waiter has a deadline; at the
//! deadline it leaves with a denial. A waiter that leaves (admitted, timed
//! out, abandoned) makes the next in its lines heads, due at once.
//!
//! A request that arrives while its keys have waiters is placed by
//! simulating the lines on a copy of the keys' state: without `WAIT` it is
//! admitted only if no waiter would be admitted later because of it, else
//! denied with a wait that ends after the queue; with `WAIT` it joins the
//! lines, or is denied at once if its simulated admission is past its
//! deadline.

use crate::algorithm::{Micros, RetryAfter};
use crate::engine::{self, Decided, KeyError, Request};
use crate::error::Error;
use crate::policy::Policy;
use crate::store::MemoryStore;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::Hash;

/// The keys the waiters wait on.
pub trait Keyspace<K> {
    /// The key's value; `None` if it does not exist.
    fn value(&mut self, key: &K) -> Result<Option<Vec<u8>>, Error>;
    /// `engine::decide` over `keys` at `at` (writing if admitted and not a
    /// dry run).
    fn decide(
        &mut self,
        keys: &[K],
        policies: &[Policy],
        at: Micros,
        request: Request,
    ) -> Result<Decided, KeyError>;
    /// Whether this server still holds `keys` (Redis Cluster: their slot
    /// may have moved away while a client waited on them).
    fn serves(&mut self, _keys: &[K]) -> bool {
        true
    }
}

/// Keys in memory: the copy a simulation runs on, and the tests' keyspace.
#[derive(Debug, Clone, Default)]
pub struct MemoryKeyspace<K> {
    pub values: HashMap<K, Vec<u8>>,
}

impl<K: Eq + Hash + Clone> Keyspace<K> for MemoryKeyspace<K> {
    fn value(&mut self, key: &K) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.values.get(key).cloned())
    }

    fn decide(
        &mut self,
        keys: &[K],
        policies: &[Policy],
        at: Micros,
        request: Request,
    ) -> Result<Decided, KeyError> {
        let mut store = MemoryStore::new(keys.len());
        for (slot, key) in store.values.iter_mut().zip(keys) {
            *slot = self.values.get(key).cloned();
        }
        let decided = engine::decide(&mut store, policies, at, request)?;
        for (value, key) in store.values.into_iter().zip(keys) {
            if let Some(v) = value {
                self.values.insert(key.clone(), v);
            }
        }
        Ok(decided)
    }
}

/// One waiting request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter<K, T> {
    pub keys: Vec<K>,
    pub policies: Vec<Policy>,
    pub cost: u64,
    /// RL.ALL's per-key costs, in place of `cost`.
    pub costs: Option<Vec<u64>>,
    /// When it arrived.
    pub since: Micros,
    /// When it stops waiting.
    pub deadline: Micros,
    pub token: T,
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Admitted and charged.
    Admitted(Decided),
    /// The deadline passed first: the denial as of then.
    TimedOut(Decided),
    /// The state could not be read or written (another command changed the
    /// key's type, say).
    Failed(KeyError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event<T> {
    pub token: T,
    /// When it ended, on the limiter clock.
    pub at: Micros,
    pub since: Micros,
    pub resolution: Resolution,
}

/// What to do with a request that has just arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// Reply now (admitted and charged, or denied).
    Reply(Decided),
    /// Block the client and [`Queues::enqueue`] it; `due` is the earliest
    /// admission if it will be a head.
    Wait { due: Micros },
}

struct Entry<K, T> {
    waiter: Waiter<K, T>,
    /// Set while it is the head of all its lines.
    due: Option<Micros>,
}

/// Every waiter, in arrival order, and the line of each key.
pub struct Queues<K, T> {
    next_id: u64,
    entries: BTreeMap<u64, Entry<K, T>>,
    lines: HashMap<K, VecDeque<u64>>,
    /// Heads by due time, then arrival.
    dues: BTreeSet<(Micros, u64)>,
    deadlines: BTreeSet<(Micros, u64)>,
    by_token: HashMap<T, u64>,
}

impl<K, T> Default for Queues<K, T> {
    fn default() -> Self {
        Queues {
            next_id: 0,
            entries: BTreeMap::new(),
            lines: HashMap::new(),
            dues: BTreeSet::new(),
            deadlines: BTreeSet::new(),
            by_token: HashMap::new(),
        }
    }
}

/// The most decisions one call of [`Queues::process`] makes per waiter (a
/// decision names the exact wait, so two are enough; the rest is margin).
const ATTEMPTS_PER_WAITER: usize = 8;

impl<K: Eq + Hash + Clone, T: Eq + Hash + Clone> Queues<K, T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// How many wait.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether anyone waits on `key`.
    pub fn has_waiters(&self, key: &K) -> bool {
        self.lines.contains_key(key)
    }

    /// The earliest moment something is due: a head's admission or a
    /// deadline.
    pub fn next_event(&self) -> Option<Micros> {
        let due = self.dues.first().map(|d| d.0);
        let deadline = self.deadlines.first().map(|d| d.0);
        match (due, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Adds a waiter at the end of its keys' lines; if that makes it a head
    /// (nobody waits on its keys), it is due at `due`.
    pub fn enqueue(&mut self, waiter: Waiter<K, T>, due: Micros) {
        let id = self.next_id;
        self.next_id += 1;
        for key in &waiter.keys {
            self.lines.entry(key.clone()).or_default().push_back(id);
        }
        self.deadlines.insert((waiter.deadline, id));
        self.by_token.insert(waiter.token.clone(), id);
        self.entries.insert(id, Entry { waiter, due: None });
        self.promote(id, due);
    }

    /// Units of `key` were freed (a lease released): the waiter first in
    /// its line, if it is a head, is due at `at` rather than later.
    pub fn wake(&mut self, key: &K, at: Micros) {
        let Some(&front) = self.lines.get(key).and_then(VecDeque::front) else {
            return;
        };
        let due = self.entries.get(&front).and_then(|e| e.due);
        if due.is_some_and(|due| due > at) {
            self.set_due(front, at);
        }
    }

    /// Makes `id` a head due at `due`, if it is first in all its lines.
    fn promote(&mut self, id: u64, due: Micros) {
        let Some(entry) = self.entries.get(&id) else {
            return;
        };
        if entry.due.is_some() {
            return;
        }
        let first_everywhere = entry
            .waiter
            .keys
            .iter()
            .all(|k| self.lines.get(k).and_then(|l| l.front()) == Some(&id));
        if first_everywhere {
            self.set_due(id, due);
        }
    }

    fn set_due(&mut self, id: u64, due: Micros) {
        if let Some(entry) = self.entries.get_mut(&id) {
            if let Some(old) = entry.due.replace(due) {
                self.dues.remove(&(old, id));
            }
            self.dues.insert((due, id));
        }
    }

    /// Takes waiter `id` out of every line; those now first everywhere are
    /// due at `at`.
    fn remove(&mut self, id: u64, at: Micros) -> Option<Waiter<K, T>> {
        let entry = self.entries.remove(&id)?;
        if let Some(due) = entry.due {
            self.dues.remove(&(due, id));
        }
        self.deadlines.remove(&(entry.waiter.deadline, id));
        self.by_token.remove(&entry.waiter.token);
        let mut next = Vec::new();
        for key in &entry.waiter.keys {
            if let Some(line) = self.lines.get_mut(key) {
                line.retain(|&w| w != id);
                match line.front() {
                    Some(&front) => next.push(front),
                    None => {
                        self.lines.remove(key);
                    }
                }
            }
        }
        for front in next {
            self.promote(front, at);
        }
        Some(entry.waiter)
    }

    /// The waiter holding `token` gives its place up (disconnected) at `at`.
    pub fn abandon(&mut self, token: &T, at: Micros) -> Option<Waiter<K, T>> {
        let id = *self.by_token.get(token)?;
        self.remove(id, at)
    }

    /// The waiter holding `token` stops waiting at `at` with the denial as
    /// of then (`CLIENT UNBLOCK`).
    pub fn time_out<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        token: &T,
        at: Micros,
    ) -> Option<Event<T>> {
        let id = *self.by_token.get(token)?;
        let waiter = self.remove(id, at)?;
        Some(self.timed_out(keyspace, waiter, at))
    }

    fn timed_out<S: Keyspace<K>>(
        &self,
        keyspace: &mut S,
        waiter: Waiter<K, T>,
        at: Micros,
    ) -> Event<T> {
        let resolution = match self.denial(keyspace, &waiter, at) {
            Ok(d) => Resolution::TimedOut(d),
            Err(e) => Resolution::Failed(e),
        };
        Event {
            token: waiter.token,
            at,
            since: waiter.since,
            resolution,
        }
    }

    /// Ends every wait at `at` with its denial (the server can no longer
    /// admit: it became a replica).
    pub fn release_all<S: Keyspace<K>>(&mut self, keyspace: &mut S, at: Micros) -> Vec<Event<T>> {
        let ids: Vec<u64> = self.entries.keys().copied().collect();
        let mut events = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(waiter) = self.remove(id, at) {
                let event = self.timed_out(keyspace, waiter, at);
                events.push(event);
            }
        }
        events
    }

    /// Admits every head whose time has come and times out every waiter
    /// whose deadline has passed, in time order, up to `to`. Events at
    /// instants before `from` happen at `from` (the state may have been
    /// written then).
    pub fn process<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        from: Micros,
        to: Micros,
    ) -> Vec<Event<T>> {
        let from = from.min(to);
        let mut events = Vec::new();
        let mut budget = ATTEMPTS_PER_WAITER * self.entries.len() + 16;
        while budget > 0 {
            budget -= 1;
            let due = self.dues.first().copied().filter(|d| d.0 <= to);
            let deadline = self.deadlines.first().copied().filter(|d| d.0 <= to);
            // At the same instant, an admission comes before a deadline: a
            // waiter due exactly at its deadline is admitted.
            let (admit, (time, id)) = match (due, deadline) {
                (Some(d), Some(l)) if d.0 <= l.0 => (true, d),
                (_, Some(l)) => (false, l),
                (Some(d), None) => (true, d),
                (None, None) => break,
            };
            let at = time.max(from);
            if admit {
                self.attempt(keyspace, id, at, &mut events);
            } else if let Some(waiter) = self.remove(id, at) {
                let event = self.timed_out(keyspace, waiter, at);
                events.push(event);
            }
        }
        events
    }

    /// Decides head `id` at `at`: admitted, or due again when its denial
    /// says.
    fn attempt<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        id: u64,
        at: Micros,
        events: &mut Vec<Event<T>>,
    ) {
        let Some(entry) = self.entries.get(&id) else {
            return;
        };
        let w = &entry.waiter;
        if !keyspace.serves(&w.keys) {
            // Never admitted where the key no longer is: the denial.
            if let Some(waiter) = self.remove(id, at) {
                let event = self.timed_out(keyspace, waiter, at);
                events.push(event);
            }
            return;
        }
        let request = Request {
            cost: w.cost,
            costs: w.costs.clone(),
            ..Request::default()
        };
        let resolution = match keyspace.decide(&w.keys, &w.policies, at, request) {
            Ok(d) if d.allowed => Resolution::Admitted(d),
            Ok(d) => {
                let again = match d.retry_after {
                    // Strictly later, so that every attempt moves on.
                    RetryAfter::After(wait) => at.saturating_add(wait).max(at.saturating_add(ONE)),
                    // Never (the limit changed under it): until its deadline.
                    _ => Micros::MAX,
                };
                self.set_due(id, again);
                return;
            }
            Err(e) => Resolution::Failed(e),
        };
        if let Some(waiter) = self.remove(id, at) {
            events.push(Event {
                token: waiter.token,
                at,
                since: waiter.since,
                resolution,
            });
        }
    }
}

const ONE: Micros = Micros::new(1);

mod place;
#[cfg(test)]
mod tests;
