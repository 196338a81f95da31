//! Where a request that arrives while others wait stands: the part of the
//! queue it meets, a simulation of that part on a copy of the keys' state,
//! and the denial that points after the queue.

use super::{Arrival, Keyspace, MemoryKeyspace, Queues, Resolution, Waiter};
use crate::algorithm::{Micros, RetryAfter, MAX_HORIZON};
use crate::engine::{Decided, KeyError, Request};
use crate::policy::Policy;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;

impl<K: Eq + Hash + Clone, T: Eq + Hash + Clone> Queues<K, T> {
    /// Every waiter reachable from `keys` through shared keys, in arrival
    /// order: the part of the queue a request on `keys` interacts with.
    fn component(&self, keys: &[K]) -> BTreeSet<u64> {
        let mut ids = BTreeSet::new();
        let mut todo: Vec<&K> = keys.iter().collect();
        let mut seen: HashSet<&K> = HashSet::new();
        while let Some(key) = todo.pop() {
            if !seen.insert(key) {
                continue;
            }
            for id in self.lines.get(key).into_iter().flatten() {
                if ids.insert(*id) {
                    todo.extend(self.entries[id].waiter.keys.iter());
                }
            }
        }
        ids
    }

    /// Runs the waiters of `component` (and `extra`, last) to the end on a
    /// copy of their keys, from `now`: when each is admitted (absent if it
    /// would time out or fail). `extra` is keyed `None`.
    fn simulate(
        &self,
        state: &mut MemoryKeyspace<K>,
        component: &BTreeSet<u64>,
        extra: Option<Waiter<K, ()>>,
        now: Micros,
    ) -> HashMap<Option<u64>, Micros> {
        let mut sim: Queues<K, Option<u64>> = Queues::new();
        for id in component {
            let entry = &self.entries[id];
            let w = &entry.waiter;
            let copy = Waiter {
                keys: w.keys.clone(),
                policies: w.policies.clone(),
                cost: w.cost,
                costs: w.costs.clone(),
                since: w.since,
                deadline: w.deadline,
                token: Some(*id),
            };
            sim.enqueue(copy, entry.due.unwrap_or(now));
        }
        if let Some(w) = extra {
            let copy = Waiter {
                keys: w.keys,
                policies: w.policies,
                cost: w.cost,
                costs: w.costs.clone(),
                since: w.since,
                deadline: w.deadline,
                token: None,
            };
            sim.enqueue(copy, now);
        }
        sim.process(state, now, Micros::MAX)
            .into_iter()
            .filter(|e| matches!(e.resolution, Resolution::Admitted(_)))
            .map(|e| (e.token, e.at))
            .collect()
    }

    /// A copy of the keys of `component` and `keys`.
    fn snapshot<S: Keyspace<K>>(
        &self,
        keyspace: &mut S,
        component: &BTreeSet<u64>,
        keys: &[K],
    ) -> Result<MemoryKeyspace<K>, KeyError> {
        let mut copy = MemoryKeyspace {
            values: HashMap::new(),
        };
        let theirs = component
            .iter()
            .flat_map(|id| self.entries[id].waiter.keys.iter());
        for key in keys.iter().chain(theirs) {
            if copy.values.contains_key(key) {
                continue;
            }
            let at = |error| KeyError {
                key: keys.iter().position(|k| k == key).unwrap_or(0),
                error,
            };
            if let Some(v) = keyspace.value(key).map_err(at)? {
                copy.values.insert(key.clone(), v);
            }
        }
        Ok(copy)
    }

    /// Where a request that arrives at `now` stands. Without waiters on its
    /// keys, the plain decision (charged if admitted), or a wait if it has
    /// `WAIT` and its wait fits in it. With waiters: see the module doc.
    pub fn arrive<S: Keyspace<K>>(
        &self,
        keyspace: &mut S,
        keys: &[K],
        policies: &[Policy],
        now: Micros,
        request: Request,
    ) -> Result<Arrival, KeyError> {
        let timeout = request.wait.filter(|_| !request.dryrun);
        // A lease may be released before it expires: a request on a
        // concurrency limit waits out its timeout even when the expiries
        // it would wait for lie beyond it.
        let releasable = policies.iter().any(Policy::holds_leases);
        let plain = Request {
            wait: None,
            ..request.clone()
        };
        if !keys.iter().any(|k| self.has_waiters(k)) {
            let decided = keyspace.decide(keys, policies, now, plain)?;
            return Ok(match (timeout, decided.retry_after) {
                (Some(t), RetryAfter::After(wait))
                    if !decided.allowed && (wait <= t || releasable) =>
                {
                    Arrival::Wait {
                        due: now.saturating_add(wait),
                    }
                }
                _ => Arrival::Reply(decided),
            });
        }
        let dry = Request {
            dryrun: true,
            ..plain.clone()
        };
        let alone = keyspace.decide(keys, policies, now, dry)?;
        if alone.retry_after == RetryAfter::Never {
            return Ok(Arrival::Reply(alone));
        }
        let component = self.component(keys);
        let snapshot = self.snapshot(keyspace, &component, keys)?;
        if timeout.is_none() && alone.allowed {
            let before = self.simulate(&mut snapshot.clone(), &component, None, now);
            let mut after_state = snapshot.clone();
            // Charged in the copy even for a dry run: would it delay them?
            let charged = Request {
                dryrun: false,
                ..plain.clone()
            };
            after_state.decide(keys, policies, now, charged)?;
            let after = self.simulate(&mut after_state, &component, None, now);
            let delays_nobody = before
                .iter()
                .all(|(id, t)| after.get(id).is_some_and(|a| a <= t));
            if delays_nobody {
                return keyspace
                    .decide(keys, policies, now, plain)
                    .map(Arrival::Reply);
            }
        }
        let deadline = match timeout {
            Some(t) => now.saturating_add(t),
            None => now.saturating_add(MAX_HORIZON),
        };
        let me = |deadline| Waiter {
            keys: keys.to_vec(),
            policies: policies.to_vec(),
            cost: request.cost,
            costs: request.costs.clone(),
            since: now,
            deadline,
            token: (),
        };
        let placed = self.simulate(&mut snapshot.clone(), &component, Some(me(deadline)), now);
        if timeout.is_some() && (placed.contains_key(&None) || releasable) {
            return Ok(Arrival::Wait { due: now });
        }
        let after_queue = match (timeout, placed.get(&None)) {
            (None, Some(&t)) => Some(t),
            _ => self
                .simulate(
                    &mut snapshot.clone(),
                    &component,
                    Some(me(now.saturating_add(MAX_HORIZON))),
                    now,
                )
                .get(&None)
                .copied(),
        };
        self.queued_denial(keyspace, keys, policies, now, after_queue)
            .map(Arrival::Reply)
    }

    /// The denial of a request that would be admitted at `admitted` (after
    /// the queue; `None`: not within the horizon): the limits' state as it
    /// is now, `allowed` 0, the wait until then.
    fn queued_denial<S: Keyspace<K>>(
        &self,
        keyspace: &mut S,
        keys: &[K],
        policies: &[Policy],
        now: Micros,
        admitted: Option<Micros>,
    ) -> Result<Decided, KeyError> {
        let look = Request {
            cost: 0,
            dryrun: true,
            ..Request::default()
        };
        let mut decided = keyspace.decide(keys, policies, now, look)?;
        let retry_after = match admitted {
            Some(t) => RetryAfter::After(t.saturating_sub(now)),
            None => RetryAfter::Never,
        };
        decided.allowed = false;
        decided.retry_after = retry_after;
        let waited_on = keys.iter().position(|k| self.has_waiters(k));
        decided.blocked_by = Some(waited_on.unwrap_or(0));
        for d in &mut decided.decisions {
            d.allowed = false;
            d.retry_after = retry_after;
        }
        Ok(decided)
    }

    /// The denial for a waiter leaving at `at` without admission: its wait
    /// after the queue (it has left it) or its plain denial.
    pub(super) fn denial<S: Keyspace<K>>(
        &self,
        keyspace: &mut S,
        waiter: &Waiter<K, T>,
        at: Micros,
    ) -> Result<Decided, KeyError> {
        let (keys, policies) = (&waiter.keys[..], &waiter.policies[..]);
        let request = Request {
            cost: waiter.cost,
            costs: waiter.costs.clone(),
            dryrun: true,
            ..Request::default()
        };
        match self.arrive(keyspace, keys, policies, at, request)? {
            Arrival::Reply(d) if !d.allowed => Ok(d),
            // Admissible now (the state changed, or it was behind others):
            // it may retry at once.
            _ => self.queued_denial(keyspace, keys, policies, at, Some(at)),
        }
    }
}
