//! When a request without `WAIT`, denied behind the lines of its keys,
//! would really be admitted: the waiters ahead of it played out on copies
//! of their keys, each admitted at the earliest instant its own decision
//! allows once it is at the front of all its lines (or leaving at its
//! deadline), and the request at the first instant the queue's own rule
//! lets it go ahead of those still waiting, or once they are all gone.
//! At most [`FORESEE_WAITERS`] waiters are played out; the answer is kept
//! for the line until the line or a key's value changes, so requests
//! hammering a key cost no decision after the first.

use super::place::{alone_at, gone_by, AHEAD_CHECK_BYTES, ATTEMPTS};
use super::{Keyspace, Queues};
use crate::algorithm::{Micros, RetryAfter};
use crate::bounds::work::{self, Work};
use crate::engine::store::MemoryStore;
use crate::engine::{self, Charge, Request};
use crate::policy::Policy;
use std::collections::BTreeSet;
use std::hash::Hash;

/// How many waiters ahead of a request are played out at most; behind
/// longer lines the figure is the plan's (see `Queues::told`).
pub(super) const FORESEE_WAITERS: usize = 48;

/// The bytes of the keys' values copied to play a line out, at most.
const FORESEE_BYTES: usize = 4 * AHEAD_CHECK_BYTES;

/// A figure found, kept on the line of the request's first key with
/// waiters while nothing it was found from changes.
#[derive(Debug, Clone)]
pub(super) struct Foreseen<K> {
    keys: Vec<K>,
    policies: Vec<Policy>,
    cost: u64,
    costs: Option<Vec<u64>>,
    charge: Charge,
    /// Every key played out: its line's last change and its value's
    /// [`fingerprint`] (not the value: a line keeps a few bytes, however
    /// large its keys' values).
    seen: Vec<(K, u64, Option<u64>)>,
    /// The instant found (`None`: not within the waiters played out).
    at: Option<Micros>,
}

/// A waiter played out.
struct Actor {
    /// Its keys, as indexes into the keys played out.
    slots: Vec<usize>,
    policies: Vec<Policy>,
    request: Request,
    deadline: Micros,
    /// Its admission as planned when it joined.
    planned: Micros,
    /// Its cost on each of its keys.
    costs: Vec<u64>,
    /// Its next event while it is at the front of all its lines: when,
    /// and whether it is admitted then (else it leaves at its deadline).
    next: Option<(Micros, bool)>,
    done: bool,
}

/// The keys played out, their values and lines.
struct Stage<K> {
    keys: Vec<K>,
    values: Vec<Option<Vec<u8>>>,
    /// The actors waiting on each key, in line order, and where the
    /// first still waiting stands.
    lines: Vec<Vec<usize>>,
    fronts: Vec<usize>,
    /// The decisions taken to play it out.
    decisions: u64,
    actors: Vec<Actor>,
}

impl<K> Stage<K> {
    /// Whether actor `a` is at the front of all its lines.
    fn is_head(&self, a: usize) -> bool {
        let actor = &self.actors[a];
        !actor.done && (actor.slots.iter()).all(|&s| self.front(s) == Some(a))
    }

    /// The first actor still waiting on key `slot`.
    fn front(&self, slot: usize) -> Option<usize> {
        let line = self.lines.get(slot)?;
        line.get(*self.fronts.get(slot)?).copied()
    }

    /// Head `a` is admitted or leaves: it is at the front of each of its
    /// lines, and the next there moves up.
    fn done(&mut self, a: usize) {
        if let Some(actor) = self.actors.get_mut(a) {
            actor.done = true;
            for &s in &actor.slots {
                if let Some(front) = self.fronts.get_mut(s) {
                    *front += 1;
                }
            }
        }
    }

    /// Decides `request` over `slots` at `at` on copies of their values
    /// (written back if admitted and not a dry run).
    fn decide(
        &mut self,
        slots: &[usize],
        policies: &[Policy],
        at: Micros,
        request: Request,
    ) -> Option<engine::Outcome> {
        let mut store = MemoryStore::new(slots.len());
        for (value, &s) in store.values.iter_mut().zip(slots) {
            value.clone_from(self.values.get(s)?);
        }
        let dry = request.dryrun;
        self.decisions += 1;
        let decided = engine::decide(&mut store, policies, at, &request).ok()?;
        if decided.allowed && !dry {
            for (value, &s) in store.values.into_iter().zip(slots) {
                if let Some(slot) = self.values.get_mut(s) {
                    *slot = value;
                }
            }
        }
        Some(decided)
    }

    /// The earliest instant at or after `from` that `request` over `slots`
    /// is admitted on the values as they are, in a bounded number of
    /// decisions; `None` if not found.
    fn earliest(
        &mut self,
        slots: &[usize],
        policies: &[Policy],
        from: Micros,
        request: &Request,
    ) -> Option<Micros> {
        let dry = Request {
            dryrun: true,
            ..request.clone()
        };
        let mut at = from;
        for _ in 0..ATTEMPTS {
            let decided = self.decide(slots, policies, at, dry.clone())?;
            if decided.allowed {
                return Some(at);
            }
            match decided.retry_after {
                RetryAfter::After(wait) => at = at.saturating_add(wait.max(Micros::new(1))),
                _ => return None,
            }
        }
        None
    }

    /// The next event of head `a`, from `now`.
    fn next_of(&mut self, a: usize, now: Micros) -> (Micros, bool) {
        work::one(Work::Waiters);
        let actor = &self.actors[a];
        let (slots, policies) = (actor.slots.clone(), actor.policies.clone());
        let (request, deadline) = (actor.request.clone(), actor.deadline);
        match self.earliest(&slots, &policies, now, &request) {
            Some(at) if at <= deadline => (at, true),
            _ => (deadline.max(now), false),
        }
    }
}

impl<K: Eq + Hash + Clone, T: Eq + Hash + Clone> Queues<K, T> {
    /// When `request` (without `WAIT`, denied at `now`) would really be
    /// admitted behind the lines of `keys`, played out (see the module
    /// doc); `None` where it cannot be (more waiters ahead than are played
    /// out, flows taking turns, values too large to copy): the plan's
    /// figure is told then.
    pub(super) fn foresee<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        keys: &[K],
        policies: &[Policy],
        request: &Request,
        now: Micros,
    ) -> Option<Micros> {
        // On GCRA and BUCKET alone, whose room comes back at a steady rate,
        // the plan's figure is exact already: nothing is played out.
        if policies.iter().all(|p| p.schedule().is_some()) {
            return None;
        }
        // Kept on the line of its first key with waiters.
        let home = keys.iter().find(|k| self.lines.contains_key(k))?;
        if let Some(kept) = self.foreseen.get(home) {
            if kept.keys == keys
                && kept.policies == policies
                && kept.cost == request.cost
                && kept.costs == request.costs
                && kept.charge == request.charge
                && kept.at.is_none_or(|at| at >= now)
                && self.unchanged(keyspace, &kept.seen)
            {
                return kept.at;
            }
        }
        let stage = self.stage(keyspace, keys)?;
        let seen = (stage.keys.iter().zip(&stage.values))
            .map(|(k, v)| {
                let changed = self.lines.get(k).map_or(0, |l| l.changed);
                (k.clone(), changed, v.as_deref().map(fingerprint))
            })
            .collect();
        let truncated: Vec<bool> = (keys.iter().zip(&stage.lines))
            .map(|(k, played)| {
                self.lines
                    .get(k)
                    .is_some_and(|l| l.ids.len() > played.len())
            })
            .collect();
        let mut stage = stage;
        let at = play(
            &mut stage,
            keys.len(),
            policies,
            request,
            now,
            &truncated,
            |k| {
                self.lines
                    .get(&keys[k])
                    .and_then(|l| l.costs.first_key_value().map(|c| *c.0))
            },
        );
        self.played = self.played.saturating_add(stage.decisions);
        if self.lines.contains_key(home) {
            let kept = Box::new(Foreseen {
                keys: keys.to_vec(),
                policies: policies.to_vec(),
                cost: request.cost,
                costs: request.costs.clone(),
                charge: request.charge,
                seen,
                at,
            });
            self.foreseen.insert(home.clone(), kept);
        }
        at
    }

    /// Whether the lines and values a figure was found from are as they
    /// were.
    fn unchanged<S: Keyspace<K>>(&self, keyspace: &mut S, seen: &[(K, u64, Option<u64>)]) -> bool {
        seen.iter().all(|(key, changed, value)| {
            self.lines.get(key).map_or(0, |l| l.changed) == *changed
                && keyspace
                    .small_value(key, AHEAD_CHECK_BYTES)
                    .is_ok_and(|v| v.map(|v| v.as_deref().map(fingerprint)) == Some(*value))
        })
    }

    /// The keys, values and waiters a request over `keys` would be played
    /// out against: the first [`FORESEE_WAITERS`] waiters of their lines,
    /// and the keys those wait on; `None` if flows take turns on one of
    /// them, a waiter not played out stands ahead of one that is, or the
    /// values are too large.
    fn stage<S: Keyspace<K>>(&self, keyspace: &mut S, keys: &[K]) -> Option<Stage<K>> {
        let mut ids = BTreeSet::new();
        for key in keys {
            if let Some(line) = self.lines.get(key) {
                ids.extend(line.ids.iter().take(FORESEE_WAITERS));
            }
        }
        let ids: Vec<u64> = ids.into_iter().take(FORESEE_WAITERS).collect();
        let mut stage = Stage {
            keys: keys.to_vec(),
            values: Vec::new(),
            lines: vec![Vec::new(); keys.len()],
            fronts: Vec::new(),
            decisions: 0,
            actors: Vec::with_capacity(ids.len()),
        };
        for &id in &ids {
            let waiter = &self.entries.get(&id)?.waiter;
            let mut slots = Vec::with_capacity(waiter.keys.len());
            let mut costs = Vec::with_capacity(waiter.keys.len());
            for key in &waiter.keys {
                let slot = match stage.keys.iter().position(|k| k == key) {
                    Some(slot) => slot,
                    None => {
                        stage.keys.push(key.clone());
                        stage.lines.push(Vec::new());
                        stage.keys.len() - 1
                    }
                };
                stage.lines.get_mut(slot)?.push(stage.actors.len());
                slots.push(slot);
                costs.push(waiter.share_on(key).cost);
            }
            stage.actors.push(Actor {
                slots,
                policies: waiter.policies.clone(),
                request: waiter.request(Charge::Normal),
                deadline: waiter.deadline,
                planned: self.entries.get(&id)?.planned,
                costs,
                next: None,
                done: false,
            });
        }
        // Every line played out: one flow, and nobody not played out ahead
        // of the last played out there.
        let last = ids.last().copied().unwrap_or(0);
        for key in &stage.keys {
            let Some(line) = self.lines.get(key) else {
                continue;
            };
            if line.turns.flows() > 1 {
                return None;
            }
            let ahead = line.ids.range(..=last).take(FORESEE_WAITERS + 1);
            if ahead.filter(|id| ids.binary_search(id).is_err()).count() > 0 {
                return None;
            }
        }
        stage.fronts = vec![0; stage.keys.len()];
        let mut room = FORESEE_BYTES;
        for key in &stage.keys {
            let value = keyspace
                .small_value(key, room.min(AHEAD_CHECK_BYTES))
                .ok()??;
            room -= value.as_ref().map_or(0, Vec::len);
            stage.values.push(value);
        }
        Some(stage)
    }
}

/// Plays `stage` out from `now`: the first instant `request` over its
/// first `mine` keys is admitted (see the module doc). `truncated[k]`:
/// more wait on the request's `k`-th key than are played out (once those
/// played out there are gone, nothing is known); `cheapest_of(k)`: the
/// cheapest waiter of that key's whole line.
fn play<K>(
    stage: &mut Stage<K>,
    mine: usize,
    policies: &[Policy],
    request: &Request,
    now: Micros,
    truncated: &[bool],
    cheapest_of: impl Fn(usize) -> Option<u64>,
) -> Option<Micros> {
    let slots: Vec<usize> = (0..mine).collect();
    let plain = Request {
        dryrun: false,
        wait: None,
        charge: Charge::Normal,
        ..request.clone()
    };
    let mut at = now;
    // Each round ends one actor's wait.
    for _ in 0..=stage.actors.len() {
        // The heads' next events; the first of them.
        let mut next: Option<(Micros, usize)> = None;
        for a in 0..stage.actors.len() {
            if !stage.is_head(a) {
                continue;
            }
            let event = match stage.actors[a].next {
                Some(event) => event,
                None => {
                    let event = stage.next_of(a, at);
                    stage.actors[a].next = Some(event);
                    event
                }
            };
            if next.is_none_or(|(t, _)| event.0 < t) {
                next = Some((event.0, a));
            }
        }
        // The request, before the next event.
        let unseen = |s: usize| truncated.get(s).copied().unwrap_or(false);
        if (0..mine).any(|s| unseen(s) && stage.front(s).is_none()) {
            // Others, not played out, still wait ahead of it.
            return None;
        }
        let waiting = (0..mine).any(|s| stage.front(s).is_some());
        // The caller is told whole milliseconds, rounded up: it comes back
        // then, not at the microsecond the key would first admit it.
        let alone = stage.earliest(&slots, policies, at, &plain).map(|t| {
            let ms = t.saturating_sub(now).ceil_millis();
            now.saturating_add(Micros::from_millis(ms))
        });
        if let Some(t) = alone.filter(|&t| next.is_none_or(|(e, _)| t < e)) {
            // A partial charge goes only once nobody waits.
            let normal = request.charge == Charge::Normal;
            let ahead = (mine, t, truncated);
            if !waiting || (normal && goes_ahead(stage, ahead, policies, &plain, &cheapest_of)) {
                return Some(t);
            }
        }
        let (t, a) = next?;
        at = t;
        let actor = &stage.actors[a];
        if actor.next.is_some_and(|(_, admitted)| admitted) {
            let (slots, policies, request) = (
                actor.slots.clone(),
                actor.policies.clone(),
                actor.request.clone(),
            );
            stage.decide(&slots, &policies, t, request);
        }
        // No other head shares a key with it (each is the front of all
        // its lines): their next events stand.
        stage.done(a);
    }
    None
}

/// The queue's rule for a request without `WAIT` (see
/// `Queues::goes_ahead`), on the stage at `at`: on each of its keys with
/// waiters left, its charge no longer counts by the moment the line may
/// admit someone, nor by the moment the key alone admits its cheapest
/// waiter.
fn goes_ahead<K>(
    stage: &mut Stage<K>,
    (mine, at, truncated): (usize, Micros, &[bool]),
    policies: &[Policy],
    request: &Request,
    cheapest_of: &impl Fn(usize) -> Option<u64>,
) -> bool {
    let slots: Vec<usize> = (0..mine).collect();
    let before = stage.values.clone();
    let decided = stage.decide(&slots, policies, at, request.clone());
    if !decided.is_some_and(|d| d.allowed) {
        stage.values = before;
        return false;
    }
    let after = std::mem::replace(&mut stage.values, before);
    for (s, policy) in policies.iter().enumerate().take(mine) {
        let Some(front) = stage.front(s) else {
            continue;
        };
        let waiting = (stage.lines[s].iter())
            .filter(|&&a| !stage.actors[a].done)
            .filter_map(|&a| {
                let actor = &stage.actors[a];
                let i = actor.slots.iter().position(|&x| x == s)?;
                actor.costs.get(i).copied()
            });
        let mut cheapest = waiting.min().unwrap_or(0);
        if truncated.get(s).copied().unwrap_or(false) {
            cheapest = cheapest.min(cheapest_of(s).unwrap_or(cheapest));
        }
        let value = stage.values[s].as_deref();
        let alone = alone_at(policy, value, at, cheapest);
        let actor = &stage.actors[front];
        let due = match (stage.is_head(front), actor.next) {
            (true, Some((t, _))) => t,
            _ => at,
        };
        let first = due.min(actor.planned).max(at).min(alone);
        // Three looks at the key: alone, before and after.
        stage.decisions += 3;
        work::add(Work::Decisions, 3);
        if !gone_by(policy, value, after[s].as_deref(), first) {
            return false;
        }
    }
    true
}

/// A value's fingerprint, to see whether it changed since a line was
/// played out (two values that differ share one by chance only, and then
/// the figure kept is told once more).
fn fingerprint(value: &[u8]) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut hasher = DefaultHasher::new();
    hasher.write(value);
    hasher.finish()
}
