//! Waiting (`WAIT timeout`): per-key lines of waiters, first come first
//! served inside each flow and the flows taking turns by weight (`fair`);
//! which of them to admit or time out as time passes; and where a request
//! that arrives while others wait stands. Pure: the keys are reached
//! through a [`Keyspace`], each waiter's client is an opaque token. The
//! server shell (`server::wait`) blocks clients and replies.
//!
//! A waiter is at the head when it is at the front of the line of every one
//! of its keys (RL.ALL and RL.SHARE wait in the line of each of their
//! keys). Every line orders its waiters by the same turns, one per waiter
//! (`fair`), so the waiter with the smallest turn is at the front of all
//! its lines: while anyone waits, someone is a head, whatever the flows and
//! the keys. Without flows, the front is the first to arrive. Only heads are
//! decided: a head has a due time, the earliest moment its limits may admit
//! it; at that moment it is decided for real, and admitted, or given the
//! new due time its denial names. Every waiter has a deadline; at the
//! deadline it leaves with a denial. A waiter that leaves (admitted, timed
//! out, abandoned) makes the next in its lines heads, due at once.
//!
//! Where a newcomer stands is found without looking at the waiters: each
//! line keeps its key's state as the admissions of everyone in it will
//! leave it (its *plan*: each waiter charged at its planned admission when
//! it joined), and the time of its latest planned admission. A newcomer is
//! planned on the plan, at or after that time, in a bounded number of
//! decisions. Where the real admissions run behind the plan (the state was
//! replaced or charged behind the queue's back), the line's *lag* (how late
//! its last head was against its plan) is added to what the plan says. A
//! waiter that leaves without admission gives its leases back to the
//! plan; on rate limits (RL.SHARE's too) its charge stays (the plan's
//! state is as of its latest time) and its units are *freed*: those behind
//! it stand that many units further ahead. The line keeps how the plan
//! spends its time per unit (its *trajectory*: the units planned through
//! each waiter, and when), so what a newcomer is told is when the plan
//! reached as many units as now stand ahead of it and its own: in whole
//! windows where room comes in windows, in between where it comes back
//! continuously. A request without `WAIT` beside a line of a limit other
//! than GCRA and BUCKET is told instead when the line, played out on
//! copies of its keys, admits it (`foresee`: at most a fixed number of
//! waiters played out, the answer kept until the line changes). So every
//! arrival, admission, timeout and departure costs O(log n) in the
//! waiters, whatever their number (a request played out: a fixed bound
//! more), and copies no value but when a line begins or is played out.
//!
//! The rules this gives, all conservative (never admit ahead of the line):
//! - a request without `WAIT` on a key with waiters is admitted only if it
//!   delays none of them: on a rate limit its charge no longer counts by the
//!   earliest moment the line may admit someone (a fixed window that resets
//!   first, a log entry that expires first); on a concurrency limit the
//!   units it leaves free cover every waiter's (no order of releases can
//!   then make it delay one); otherwise it is denied with the wait after
//!   the line;
//! - a `WAIT` whose planned admission lies past its deadline is denied at
//!   once with that wait (a concurrency limit waits anyway: a lease may be
//!   released before it expires), and so is one past the operator's bounds
//!   on waiters;
//! - `FORCE` and `REFUND` are written whether or not the key has waiters
//!   (the plan takes them too); a refund wakes the line;
//! - a request on a key whose value admits the line's first waiter before
//!   its due time (the key was deleted, replaced or given another expiry
//!   by a command outside the module, which the queue does not see) wakes
//!   that waiter first ([`Queues::arrive_or_wake`]): the request is decided
//!   after it, by the rules above.

use crate::algorithm::concurrency::LeaseId;
use crate::algorithm::{Micros, RetryAfter};
use crate::bounds;
use crate::bounds::work::{self, Work};
use crate::engine::error::Error;
use crate::engine::store::MemoryStore;
use crate::engine::{self, Charge, Flow, KeyError, Outcome, Request};
use crate::policy::Policy;
use fair::{FlowName, Share, Turn, Turns};
use lean::{LeanMap, LeanSet};
use lines::Lines;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;

/// The keys the waiters wait on.
pub trait Keyspace<K> {
    /// The key's value; `None` if it does not exist.
    fn value(&mut self, key: &K) -> Result<Option<Vec<u8>>, Error>;
    /// The key's value if it is at most `max` bytes long (`Ok(None)`: it is
    /// longer, and nothing was copied).
    fn small_value(&mut self, key: &K, max: usize) -> Result<Option<Option<Vec<u8>>>, Error>;
    /// `engine::decide` over `keys` at `at` (writing if admitted and not a
    /// dry run).
    fn decide(
        &mut self,
        keys: &[K],
        policies: &[Policy],
        at: Micros,
        request: Request,
    ) -> Result<Outcome, KeyError>;
    /// Whether this server still holds `keys` (Redis Cluster: their slot
    /// may have moved away while a client waited on them).
    fn serves(&mut self, _keys: &[K]) -> bool {
        true
    }
}

/// Keys in memory: the tests' keyspace.
#[cfg(test)]
#[derive(Debug, Clone, Default)]
pub struct MemoryKeyspace<K> {
    pub values: HashMap<K, Vec<u8>>,
}

#[cfg(test)]
impl<K: Eq + Hash + Clone> Keyspace<K> for MemoryKeyspace<K> {
    fn value(&mut self, key: &K) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.values.get(key).cloned())
    }

    fn small_value(&mut self, key: &K, max: usize) -> Result<Option<Option<Vec<u8>>>, Error> {
        let value = self.values.get(key);
        Ok((value.map_or(0, Vec::len) <= max).then(|| value.cloned()))
    }

    fn decide(
        &mut self,
        keys: &[K],
        policies: &[Policy],
        at: Micros,
        request: Request,
    ) -> Result<Outcome, KeyError> {
        let mut store = MemoryStore::new(keys.len());
        for (slot, key) in store.values.iter_mut().zip(keys) {
            *slot = self.values.get(key).cloned();
        }
        let decided = engine::decide(&mut store, policies, at, &request)?;
        for (value, key) in store.values.into_iter().zip(keys) {
            match value {
                Some(v) => self.values.insert(key.clone(), v),
                None => self.values.remove(key),
            };
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
    /// The flow it waits in (`None`: with the requests without `FLOW`).
    pub flow: Option<Flow>,
    pub token: T,
}

impl<K: Eq, T> Waiter<K, T> {
    fn flow_name(&self) -> FlowName {
        self.flow.as_ref().map(|f| f.name.clone())
    }

    /// What its turn on `key` takes: its cost there, over its weight.
    fn share_on(&self, key: &K) -> Share {
        let index = self.keys.iter().position(|k| k == key);
        let cost = match (&self.costs, index) {
            (Some(costs), Some(i)) => costs.get(i).copied().unwrap_or(self.cost),
            _ => self.cost,
        };
        let weight = self.flow.as_ref().map_or(1, |f| f.weight);
        Share { cost, weight }
    }

    /// The charge its admission makes (or, with `charge`, gives back).
    fn request(&self, charge: Charge) -> Request {
        Request {
            cost: self.cost,
            costs: self.costs.clone(),
            charge,
            ..Request::default()
        }
    }
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Admitted and charged.
    Admitted(Outcome),
    /// The deadline passed first: the denial as of then.
    TimedOut(Outcome),
    /// The state could not be read or written (another command changed the
    /// key's type, say).
    Failed(KeyError),
}

/// A wait that ended: whose, when it began and ended, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended<K, T> {
    pub token: T,
    /// When it ended, on the limiter clock.
    pub at: Micros,
    pub since: Micros,
    pub ending: Ending,
    /// For an admission: what was charged, to take it back if its reply
    /// cannot be delivered.
    pub charged: Option<Charged<K>>,
}

/// What an admission charged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charged<K> {
    pub keys: Vec<K>,
    pub policies: Vec<Policy>,
    pub request: Request,
}

/// What to do with a request that has just arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// Reply now (admitted and charged, or denied).
    Now(Outcome),
    /// Block the client and [`Queues::enqueue`] it with this place.
    Wait(Place),
    /// First waiters of its keys' lines are due now
    /// ([`Queues::arrive_or_wake`]): process the queue, then arrive again.
    Woken,
}

/// Where a waiter joins: when it is due if it is a head at once, and its
/// planned admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub due: Micros,
    pub planned: Micros,
}

struct Entry<K, T> {
    waiter: Waiter<K, T>,
    /// Set while it is the head of all its lines.
    due: Option<Micros>,
    /// Its admission as planned when it joined.
    planned: Micros,
    /// The leases its planned admission holds in the plans (empty where
    /// no limit of its holds leases).
    planned_leases: Box<[Option<Option<LeaseId>>]>,
    /// Its place in the order of all its lines, once it is the first of
    /// its flow in each (see `fair`).
    turn: Option<Turn>,
}

/// The waiters of one key, in arrival order and by flow, and its plan.
struct Line {
    ids: LeanSet<u64>,
    /// By flow and by turn: the waiter at its front (the smallest turn) is
    /// the only one that may become a head.
    turns: Turns,
    /// The key's state once everyone in the line is admitted as planned.
    plan: Option<Vec<u8>>,
    /// The latest planned admission.
    planned_until: Micros,
    /// How late the last decided head was against its plan.
    lag: Micros,
    /// How the plan spends time per unit: the units planned in the line
    /// since it began, and for the running sum through each waiter (in
    /// arrival order), its planned admission. Only what lies past the
    /// units `served` is kept (and the entry before: see [`Line::trim`]).
    units: u64,
    trajectory: LeanMap<u64, Micros>,
    /// The units of the waiters who left without admission, their charges
    /// kept in the plan: those behind them stand that many units further
    /// ahead than planned.
    freed: u64,
    /// The units of the waiters admitted.
    served: u64,
    /// When a waiter last joined or left (the queue's count of such
    /// changes then): a figure played out on the line is kept until then.
    changed: u64,
    /// The units its waiters ask of the key, summed (a request without
    /// `WAIT` on a concurrency limit leaves them free).
    asked: u128,
    /// How many waiters ask each cost of the key (the smallest bounds who
    /// could take room left now, were those ahead of it to leave).
    costs: LeanMap<u64, usize>,
}

impl Line {
    /// Forgets the trajectory's oldest entries that no newcomer can stand
    /// at any more (those through units already served, but the last),
    /// a few at each step: a line that never empties keeps about as many
    /// entries as waiters.
    fn trim(&mut self) {
        for _ in 0..TRIM_PER_STEP {
            let mut through = self.trajectory.iter().map(|(units, _)| units);
            match (through.next(), through.next()) {
                (Some(_), Some(&second)) if second <= self.served => {
                    self.trajectory.pop_first();
                }
                _ => break,
            }
        }
    }
}

/// How many trajectory entries a step forgets at most (a step adds at most
/// one per line).
const TRIM_PER_STEP: usize = 2;

/// The turns of a key nobody waits on, and when it came to rest.
struct Resting {
    since: u64,
    turns: Box<Turns>,
}

/// Every waiter, in arrival order, and the line of each key.
pub struct Queues<K, T> {
    next_id: u64,
    /// The order turns are given in.
    next_turn: u64,
    /// Boxed: a map's nodes hold room for more entries than they hold.
    entries: BTreeMap<u64, Box<Entry<K, T>>>,
    lines: Lines<K>,
    /// Heads by due time, then arrival.
    dues: BTreeSet<(Micros, u64)>,
    deadlines: BTreeSet<(Micros, u64)>,
    by_token: HashMap<T, u64>,
    /// Flows remembered without waiters, over all lines (see `fair`).
    remembered: usize,
    /// The turns of keys nobody waits on any more that still remember
    /// flows: a client re-sending once the line emptied (several admitted
    /// in one tick) takes up where its flow was. Past the bound on
    /// remembered flows, those of the key that has rested longest are
    /// forgotten first.
    resting: HashMap<K, Resting>,
    /// The resting keys by when they came to rest, oldest first.
    resting_order: BTreeMap<u64, K>,
    /// Keys come to rest so far.
    rested: u64,
    /// Joins and departures so far, over all lines.
    changes: u64,
    /// The figure last played out for a request over each line's key
    /// (see `foresee`).
    foreseen: HashMap<K, Box<foresee::Foreseen<K>>>,
    /// The decisions taken to play lines out, so far.
    played: u64,
}

impl<K, T> Default for Queues<K, T> {
    fn default() -> Self {
        Queues {
            next_id: 0,
            next_turn: 0,
            entries: BTreeMap::new(),
            lines: Lines::default(),
            dues: BTreeSet::new(),
            deadlines: BTreeSet::new(),
            by_token: HashMap::new(),
            remembered: 0,
            resting: HashMap::new(),
            resting_order: BTreeMap::new(),
            rested: 0,
            changes: 0,
            foreseen: HashMap::new(),
            played: 0,
        }
    }
}

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

    /// How many keys have waiters: the lines.
    pub fn lines(&self) -> usize {
        self.lines.len()
    }

    /// When the longest waiting of the waiters arrived: the first entry's,
    /// as entries are numbered in arrival order (O(log n)).
    pub fn first_since(&self) -> Option<Micros> {
        self.entries.first_key_value().map(|(_, e)| e.waiter.since)
    }

    /// Every waiter, in no particular order.
    pub fn waiters(&self) -> impl Iterator<Item = &Waiter<K, T>> {
        self.entries.values().map(|e| &e.waiter)
    }

    /// Whether anyone waits on `key`.
    pub fn has_waiters(&self, key: &K) -> bool {
        self.lines.contains_key(key)
    }

    /// How many wait on `key`.
    pub fn line_len(&self, key: &K) -> usize {
        self.lines.get(key).map_or(0, |l| l.ids.len())
    }

    /// `key` admitted a request at once that could have waited: it has
    /// room, nobody wants its turns; every flow starts afresh there.
    pub(super) fn idle(&mut self, key: &K) {
        if let Some(turns) = self.wake_resting(key) {
            self.remembered = self.remembered.saturating_sub(turns.remembered());
        }
    }

    /// The turns `key` kept while nobody waited on it, taken back.
    fn wake_resting(&mut self, key: &K) -> Option<Box<Turns>> {
        let resting = self.resting.remove(key)?;
        self.resting_order.remove(&resting.since);
        if self.resting.is_empty() {
            self.resting = HashMap::new();
        }
        Some(resting.turns)
    }

    /// `key`'s line emptied while its turns remember flows: they rest.
    fn rest(&mut self, key: K, turns: Turns) {
        let since = self.rested;
        self.rested += 1;
        self.resting_order.insert(since, key.clone());
        let turns = Box::new(turns);
        self.resting.insert(key, Resting { since, turns });
    }

    /// Forgets one remembered flow of the key that has rested longest;
    /// whether there was one.
    fn forget_resting(&mut self) -> bool {
        let Some(oldest) = self.resting_order.first_entry() else {
            return false;
        };
        let Some(resting) = self.resting.get_mut(oldest.get()) else {
            oldest.remove();
            return false;
        };
        let forgot = resting.turns.forget_first();
        if forgot {
            self.remembered = self.remembered.saturating_sub(1);
        }
        if resting.turns.remembered() == 0 {
            let key = oldest.remove();
            self.resting.remove(&key);
        }
        forgot
    }

    /// The decisions taken to play lines out (see `foresee`), so far.
    #[cfg(test)]
    pub fn played(&self) -> u64 {
        self.played
    }

    /// How many flows without waiters are remembered, over all lines.
    #[cfg(test)]
    pub fn remembered_flows(&self) -> usize {
        self.remembered
    }

    /// Runs `f` on the turns of `key`'s line, keeping the count of
    /// remembered flows; past the bound, forgetting those of the key that
    /// has rested longest, else the line's oldest.
    fn on_turns<R>(&mut self, key: &K, f: impl FnOnce(&mut Turns) -> R) -> Option<R> {
        let line = self.lines.get_mut(key)?;
        let others = self.remembered.saturating_sub(line.turns.remembered());
        let r = f(&mut line.turns);
        self.remembered = others + line.turns.remembered();
        // A step remembers at most one flow; a lowered bound drains a few
        // at each step.
        let bound = bounds::MAX_REMEMBERED_FLOWS.get() as usize;
        for _ in 0..fair::FORGET_PER_STEP {
            if self.remembered <= bound {
                break;
            }
            if self.forget_resting() {
                continue;
            }
            let forgot = self
                .lines
                .get_mut(key)
                .is_some_and(|l| l.turns.forget_first());
            if !forgot {
                break;
            }
            self.remembered = self.remembered.saturating_sub(1);
        }
        Some(r)
    }

    /// How many of `flow` wait on `key`.
    fn flow_len(&self, key: &K, flow: &FlowName) -> usize {
        self.lines.get(key).map_or(0, |l| l.turns.flow_len(flow))
    }

    /// Whether a waiter of another flow than `flow` waits on `key`.
    fn others_wait(&self, key: &K, flow: &FlowName) -> bool {
        self.lines
            .get(key)
            .is_some_and(|l| l.turns.flows() > usize::from(l.turns.flow_len(flow) > 0))
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

    /// Adds a waiter at the end of its keys' lines, charging its planned
    /// admission to their plans (a line that begins takes the key's value
    /// as its plan); if that makes it a head (nobody waits on its keys), it
    /// is due at `place.due`.
    pub fn enqueue<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        waiter: Waiter<K, T>,
        place: Place,
    ) {
        work::one(Work::Waiters);
        let id = self.next_id;
        self.next_id += 1;
        for key in &waiter.keys {
            if !self.lines.contains_key(key) {
                // An unreadable key decides nothing here: its plan is empty
                // and the waiter's own decision reports the error.
                let plan = keyspace.value(key).ok().flatten();
                let line = Line {
                    ids: LeanSet::default(),
                    turns: self.wake_resting(key).map(|t| *t).unwrap_or_default(),
                    plan,
                    planned_until: place.planned,
                    lag: Micros::ZERO,
                    units: 0,
                    trajectory: LeanMap::default(),
                    freed: 0,
                    served: 0,
                    changed: 0,
                    asked: 0,
                    costs: LeanMap::default(),
                };
                self.lines.insert(key.clone(), line);
            }
        }
        // The plan takes the charge; a failure leaves it as it was (the
        // real decision at admission is what counts).
        let planned = self.on_plans(&waiter.keys, |store| {
            engine::decide(
                store,
                &waiter.policies,
                place.planned,
                &waiter.request(Charge::Normal),
            )
        });
        let planned_leases = match planned {
            Some(Ok(decided)) if waiter.policies.iter().any(Policy::holds_leases) => {
                decided.leases.into_iter().collect()
            }
            _ => Box::default(),
        };
        let flow = waiter.flow_name();
        self.changes += 1;
        for key in &waiter.keys {
            if let Some(line) = self.lines.get_mut(key) {
                line.changed = self.changes;
                line.ids.insert(id);
                let cost = waiter.share_on(key).cost;
                line.asked += u128::from(cost);
                match line.costs.get_mut(&cost) {
                    Some(n) => *n += 1,
                    None => {
                        line.costs.insert(cost, 1);
                    }
                }
                line.turns.join(&flow, id);
                line.planned_until = line.planned_until.max(place.planned);
                if cost > 0 {
                    line.units = line.units.saturating_add(cost);
                    line.trajectory.insert(line.units, place.planned);
                }
                line.trim();
            }
        }
        self.deadlines.insert((waiter.deadline, id));
        self.by_token.insert(waiter.token.clone(), id);
        let entry = Entry {
            waiter,
            due: None,
            planned: place.planned,
            planned_leases,
            turn: None,
        };
        self.entries.insert(id, Box::new(entry));
        self.give_turn(id);
        self.promote(id, place.due);
    }

    /// Gives waiter `id` its turn if it is the first of its flow in every
    /// one of its lines: it starts no earlier than its flow and each of
    /// them allow (see `fair`). A front it goes before stops being a head
    /// until it is at the front again.
    fn give_turn(&mut self, id: u64) {
        let Some(entry) = self.entries.get(&id) else {
            return;
        };
        if entry.turn.is_some() {
            return;
        }
        let flow = entry.waiter.flow_name();
        let (mut start, mut now) = (fair::Virtual::ZERO, fair::Virtual::ZERO);
        for key in &entry.waiter.keys {
            let Some(line) = self.lines.get(key) else {
                return;
            };
            if !line.turns.is_first_of_flow(&flow, id) {
                return;
            }
            start = start.max(line.turns.earliest_start(&flow));
            now = now.max(line.turns.virtual_time());
        }
        let turn = (start, self.next_turn);
        self.next_turn += 1;
        let mut passed = Vec::new();
        for key in entry.waiter.keys.clone() {
            let passed_front = self.on_turns(&key, |turns| {
                let front = turns.front();
                turns.catch_up(now);
                turns.take_turn(turn, id);
                front.filter(|_| turns.front() == Some(id))
            });
            passed.extend(passed_front.flatten());
        }
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.turn = Some(turn);
        }
        for front in passed {
            self.demote(front);
        }
    }

    /// `id` is no longer at the front of all its lines: not a head.
    fn demote(&mut self, id: u64) {
        if let Some(due) = self.entries.get_mut(&id).and_then(|e| e.due.take()) {
            self.dues.remove(&(due, id));
        }
    }

    /// Runs `f` over a store holding the plans of `keys` (every key must
    /// have a line), then puts them back; no value is copied.
    fn on_plans<R>(&mut self, keys: &[K], f: impl FnOnce(&mut MemoryStore) -> R) -> Option<R> {
        let mut store = MemoryStore::new(keys.len());
        for (slot, key) in store.values.iter_mut().zip(keys) {
            *slot = self.lines.get_mut(key)?.plan.take();
        }
        let r = f(&mut store);
        for (value, key) in store.values.into_iter().zip(keys) {
            if let Some(line) = self.lines.get_mut(key) {
                line.plan = value;
            }
        }
        Some(r)
    }

    /// Units of `key` were freed (a lease released, a refund, the key
    /// deleted): the waiter at the front of its line, if it is a head, is due at
    /// `at` rather than later.
    pub fn wake(&mut self, key: &K, at: Micros) {
        let Some(front) = self.lines.get(key).and_then(|l| l.turns.front()) else {
            return;
        };
        let due = self.entries.get(&front).and_then(|e| e.due);
        if due.is_some_and(|due| due > at) {
            self.set_due(front, at);
        }
    }

    /// Every head is due at `at` (every key was deleted: FLUSHALL).
    pub fn wake_all(&mut self, at: Micros) {
        let late: Vec<u64> = self
            .dues
            .range((at.saturating_add(Micros::new(1)), 0)..)
            .map(|&(_, id)| id)
            .collect();
        for id in late {
            self.set_due(id, at);
        }
    }

    /// Makes `id` a head due at `due`, if it is at the front of all its lines.
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
            .all(|k| self.lines.get(k).and_then(|l| l.turns.front()) == Some(id));
        if first_everywhere {
            work::one(Work::Waiters);
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

    /// Takes waiter `id` out of every line, its planned charge given back
    /// to the plans unless it was admitted; those now at the front everywhere are
    /// due at `at`.
    fn remove(&mut self, id: u64, at: Micros, admitted: bool) -> Option<Waiter<K, T>> {
        work::one(Work::Waiters);
        let entry = self.entries.remove(&id)?;
        if let Some(due) = entry.due {
            self.dues.remove(&(due, id));
        }
        self.deadlines.remove(&(entry.waiter.deadline, id));
        self.by_token.remove(&entry.waiter.token);
        let waiter = entry.waiter;
        // On rate limits (RL.SHARE's too) the plan keeps a charge that will
        // not be made (its state stays as of its latest time) and its units
        // are freed; leases, which the plan holds by name, are given back.
        let gives_back = waiter.policies.iter().any(Policy::holds_leases);
        if !admitted && gives_back {
            let until = waiter
                .keys
                .iter()
                .filter_map(|k| self.lines.get(k).map(|l| l.planned_until))
                .max()
                .unwrap_or(at);
            // Its planned admission leaves the plans.
            let leases = &entry.planned_leases;
            let _ = self.on_plans(&waiter.keys, |store| {
                let request = waiter.request(Charge::Normal);
                engine::undo(store, &waiter.policies, until, &request, leases, None)
            });
        }
        // The next of its flow in each line may now have its turn; the
        // fronts of its lines, and those given their turn, may be heads.
        let mut next = Vec::new();
        let flow = waiter.flow_name();
        self.changes += 1;
        for key in &waiter.keys {
            let used = admitted.then(|| waiter.share_on(key));
            let first = self.on_turns(key, |turns| turns.leave(&flow, id, entry.turn, used));
            next.extend(first.flatten());
            if let Some(line) = self.lines.get_mut(key) {
                line.ids.remove(&id);
                line.changed = self.changes;
                let cost = waiter.share_on(key).cost;
                if admitted {
                    line.served = line.served.saturating_add(cost);
                } else if !gives_back {
                    line.freed = line.freed.saturating_add(cost);
                }
                line.trim();
                line.asked = line.asked.saturating_sub(u128::from(cost));
                if let Some(n) = line.costs.get_mut(&cost) {
                    *n -= 1;
                    if *n == 0 {
                        line.costs.remove(&cost);
                    }
                }
                if line.ids.is_empty() {
                    // Nobody waits: its turns rest while they remember
                    // flows, until the key admits a waiter at once.
                    self.foreseen.remove(key);
                    if let Some(line) = self.lines.remove(key) {
                        if line.turns.remembered() > 0 {
                            self.rest(key.clone(), line.turns);
                        }
                    }
                }
            }
        }
        for &first in &next {
            self.give_turn(first);
        }
        for key in &waiter.keys {
            next.extend(self.lines.get(key).and_then(|l| l.turns.front()));
        }
        for candidate in next {
            self.promote(candidate, at);
        }
        self.give_back();
        Some(waiter)
    }

    /// Once nobody waits, the waiters' maps give their memory back (sized
    /// for the most that waited; a map that empties keeps it).
    fn give_back(&mut self) {
        if self.entries.is_empty() {
            self.entries = BTreeMap::new();
            self.dues = BTreeSet::new();
            self.deadlines = BTreeSet::new();
            self.by_token = HashMap::new();
            self.foreseen = HashMap::new();
        }
    }

    /// The waiter holding `token` gives its place up (disconnected) at `at`.
    pub fn abandon(&mut self, token: &T, at: Micros) -> Option<Waiter<K, T>> {
        let id = *self.by_token.get(token)?;
        self.remove(id, at, false)
    }

    /// The waiter holding `token` stops waiting at `at` with the denial as
    /// of then (`CLIENT UNBLOCK`).
    pub fn time_out<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        token: &T,
        at: Micros,
    ) -> Option<Ended<K, T>> {
        let id = *self.by_token.get(token)?;
        let waiter = self.remove(id, at, false)?;
        Some(self.timed_out(keyspace, waiter, at))
    }

    fn timed_out<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        waiter: Waiter<K, T>,
        at: Micros,
    ) -> Ended<K, T> {
        let ending = match self.denial(keyspace, &waiter, at) {
            Ok(d) => Ending::TimedOut(d),
            Err(e) => Ending::Failed(e),
        };
        Ended {
            token: waiter.token,
            at,
            since: waiter.since,
            ending,
            charged: None,
        }
    }

    /// Ends up to `budget` waits at `at` with their denials, first come
    /// first (the server can no longer admit: it became a replica).
    pub fn release<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        at: Micros,
        budget: usize,
    ) -> Vec<Ended<K, T>> {
        let mut events = Vec::new();
        while events.len() < budget {
            let Some(id) = self.entries.keys().next().copied() else {
                break;
            };
            if let Some(waiter) = self.remove(id, at, false) {
                let event = self.timed_out(keyspace, waiter, at);
                events.push(event);
            }
        }
        events
    }

    /// Admits the heads whose time has come and times out the waiters whose
    /// deadline has passed, in time order, up to `to`, at most `budget` of
    /// them (the rest stay due: see [`Queues::next_event`]). Events at
    /// instants before `from` happen at `from` (the state may have been
    /// written then).
    pub fn process<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        from: Micros,
        to: Micros,
        budget: usize,
    ) -> Vec<Ended<K, T>> {
        let from = from.min(to);
        let mut events = Vec::new();
        // Each step ends a wait or moves a head's due time strictly later;
        // the steps that end nothing are bounded too.
        let mut steps = budget.saturating_mul(4);
        while events.len() < budget && steps > 0 {
            steps -= 1;
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
            } else if let Some(waiter) = self.remove(id, at, false) {
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
        events: &mut Vec<Ended<K, T>>,
    ) {
        work::one(Work::Waiters);
        let Some(entry) = self.entries.get(&id) else {
            return;
        };
        let w = &entry.waiter;
        if !keyspace.serves(&w.keys) {
            // Never admitted where the key no longer is: the denial.
            if let Some(waiter) = self.remove(id, at, false) {
                let event = self.timed_out(keyspace, waiter, at);
                events.push(event);
            }
            return;
        }
        let request = w.request(Charge::Normal);
        let keys = w.keys.clone();
        let ending = match keyspace.decide(&w.keys, &w.policies, at, request) {
            Ok(d) if d.allowed => Ending::Admitted(d),
            Ok(d) => {
                let again = match d.retry_after {
                    // Strictly later, so that every attempt moves on.
                    RetryAfter::After(wait) => at.saturating_add(wait).max(at.saturating_add(ONE)),
                    // Never (the limit changed under it): until its deadline.
                    _ => Micros::MAX,
                };
                self.set_due(id, again);
                self.set_lag(&keys, again.min(at.saturating_add(MAX_LAG)));
                return;
            }
            Err(e) => Ending::Failed(e),
        };
        let admitted = matches!(ending, Ending::Admitted(_));
        if admitted {
            self.set_lag(&keys, at);
        }
        if let Some(waiter) = self.remove(id, at, admitted) {
            let request = waiter.request(Charge::Normal);
            let charged = admitted.then_some(Charged {
                request,
                keys: waiter.keys,
                policies: waiter.policies,
            });
            events.push(Ended {
                token: waiter.token,
                at,
                since: waiter.since,
                ending,
                charged,
            });
        }
    }

    /// A head is admitted (or due again) at `actual`: how late its lines
    /// run against their plans. Whichever flow's turn it is, the line's
    /// next admission is its earliest planned one (the first to arrive).
    fn set_lag(&mut self, keys: &[K], actual: Micros) {
        for key in keys {
            let planned = self.first_planned(key);
            if let (Some(line), Some(planned)) = (self.lines.get_mut(key), planned) {
                line.lag = actual.saturating_sub(planned);
            }
        }
    }
}

const ONE: Micros = Micros::new(1);

/// A head denied "never" (its limit changed under it) makes its lines run
/// late by at most this in the plans of others.
const MAX_LAG: Micros = crate::algorithm::MAX_HORIZON;

mod fair;
#[cfg(test)]
mod fair_tests;
mod foresee;
mod lean;
#[cfg(test)]
mod line_tests;
mod lines;
#[cfg(test)]
mod multi_tests;
mod place;
#[cfg(test)]
mod tests;
