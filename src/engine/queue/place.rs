//! Where a request that arrives while others wait stands: its planned
//! admission on the plans of its keys' lines, and the denial that points
//! after the line. Each costs a bounded number of decisions, whatever the
//! number of waiters.

use super::{Arrival, Keyspace, Place, Queues, Waiter};
use crate::algorithm::{Micros, RetryAfter, MAX_HORIZON};
use crate::bounds;
use crate::engine::store::MemoryStore;
use crate::engine::{self, Charge, KeyError, Outcome, Request};
use crate::policy::Policy;
use std::collections::BTreeMap;
use std::hash::Hash;

/// The most decisions a plan takes to find a request's admission: a denial
/// names the exact wait, so two are enough; the rest is margin.
pub(super) const ATTEMPTS: usize = 8;

/// How many waiters at the front of a line are taken into its first
/// window to see whether a request fits into the room they leave.
const FIRST_WINDOW_LOOK: usize = 32;

/// Values up to this size are copied to see whether a request without
/// `WAIT` can go ahead of a line; larger ones are not (it is denied).
pub(super) const AHEAD_CHECK_BYTES: usize = 4096;

impl<K: Eq + Hash + Clone, T: Eq + Hash + Clone> Queues<K, T> {
    /// Where a request that arrives at `now` stands. Without waiters on its
    /// keys, the plain decision (charged if admitted), or a wait if it has
    /// `WAIT` and its wait fits in it. With waiters: see the module doc.
    pub fn arrive<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        keys: &[K],
        policies: &[Policy],
        now: Micros,
        request: Request,
    ) -> Result<Arrival, KeyError> {
        self.stand(keyspace, keys, policies, now, request, false, true)
    }

    /// As [`Queues::arrive`], but first: where the keys alone would admit
    /// the request now while the first waiter of one of their lines is due
    /// later, and its keys admit it now (a command outside the module
    /// deleted or replaced the key, or changed its expiry), that waiter is
    /// made due now and [`Arrival::Woken`] answered: the caller processes
    /// the queue at `now` (so that the waiters go first, in order), then
    /// calls [`Queues::arrive`]. Costs at most one decision per key, and
    /// only when the keys alone admit the request.
    pub fn arrive_or_wake<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        keys: &[K],
        policies: &[Policy],
        now: Micros,
        request: Request,
    ) -> Result<Arrival, KeyError> {
        self.stand(keyspace, keys, policies, now, request, true, true)
    }

    /// [`Queues::arrive`]; with `wake`, as [`Queues::arrive_or_wake`]; with
    /// `played_out`, a request without `WAIT` denied behind a line is told
    /// when the line played out admits it (see `foresee`), else the plan's
    /// figure.
    #[allow(clippy::too_many_arguments)]
    fn stand<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        keys: &[K],
        policies: &[Policy],
        now: Micros,
        request: Request,
        wake: bool,
        played_out: bool,
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
        let room = self.len() < bounds::MAX_WAITERS.get() as usize;
        if !keys.iter().any(|k| self.has_waiters(k)) {
            let decided = keyspace.decide(keys, policies, now, plain)?;
            if decided.allowed && timeout.is_some() {
                for key in keys {
                    self.idle(key);
                }
            }
            return Ok(match (timeout, decided.retry_after) {
                (Some(t), RetryAfter::After(wait))
                    if !decided.allowed && room && (wait <= t || releasable) =>
                {
                    let due = now.saturating_add(wait);
                    Arrival::Wait(Place { due, planned: due })
                }
                _ => Arrival::Now(decided),
            });
        }
        if matches!(request.charge, Charge::Force | Charge::Refund) {
            return self.charge_beside(keyspace, keys, policies, now, plain);
        }
        // Behind a line no reservation is made: its start would be a
        // waiter's, whose charge the plan holds and the state does not yet
        // (answered as without `RESERVE`; see `engine::reserve`).
        let plain = Request {
            reserve: None,
            ..plain
        };
        let dry = Request {
            dryrun: true,
            ..plain.clone()
        };
        let alone = keyspace.decide(keys, policies, now, dry)?;
        if alone.retry_after == RetryAfter::Never {
            return Ok(Arrival::Now(self.granting(alone, &request)));
        }
        if wake && alone.allowed && !request.dryrun && self.wake_admissible(keyspace, keys, now) {
            return Ok(Arrival::Woken);
        }
        if timeout.is_none()
            && alone.allowed
            && self.goes_ahead(keyspace, keys, policies, now, &plain)?
        {
            return keyspace
                .decide(keys, policies, now, plain)
                .map(Arrival::Now);
        }
        let planned = self.plan(keyspace, keys, policies, now, &plain)?;
        // A request without `WAIT` is told when it would really be
        // admitted, the line ahead of it played out where it can be.
        let foreseen = match (timeout, releasable) {
            (None, false) if played_out => self.foresee(keyspace, keys, policies, &plain, now),
            _ => None,
        };
        // Where the line runs late against its plan, that much later.
        let lag = self.lag(keys);
        // The plan's own times stay as they are (its state is as of them);
        // what callers are told moves up where waiters left. (Not on a
        // concurrency limit: there the figure is the instant by which
        // capacity is certain.)
        let first_windows: Vec<Option<Micros>> = match releasable || foreseen.is_some() {
            true => Vec::new(),
            false => (keys.iter().enumerate())
                .map(|(i, k)| {
                    self.in_first_window(keyspace, k, &policies[i], plain.cost_of(i), now)
                })
                .collect(),
        };
        let expected = |at: Micros| {
            let at = match releasable {
                true => at,
                false => self.told(keys, policies, &plain, now, &alone, &first_windows, at),
            };
            at.saturating_add(lag).max(now)
        };
        let flow = request.flow.as_ref().map(|f| f.name.clone());
        let full = keys.iter().any(|k| {
            self.line_len(k) >= bounds::MAX_WAITERS_PER_KEY.get() as usize
                || (flow.is_some()
                    && self.flow_len(k, &flow) >= bounds::MAX_WAITERS_PER_FLOW.get() as usize)
        });
        // A flow's turn may come before the plan's end when other flows
        // wait: it waits out its timeout, as its share decides.
        let shared = flow.is_some() && keys.iter().any(|k| self.others_wait(k, &flow));
        if let (Some(t), Some(at)) = (timeout, planned) {
            let deadline = now.saturating_add(t);
            if room && !full && (expected(at) <= deadline || releasable || shared) {
                return Ok(Arrival::Wait(Place {
                    due: now,
                    planned: at,
                }));
            }
        }
        let after = match foreseen {
            Some(at) => Some(at.max(now)),
            None => planned.map(expected),
        };
        self.queued_denial(keyspace, keys, policies, now, after, &request)
            .map(Arrival::Now)
    }

    /// Makes due at `now` each first waiter of the lines of `keys` that is
    /// a head due later and that its keys admit now (a look, not charged);
    /// whether any was.
    fn wake_admissible<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        keys: &[K],
        now: Micros,
    ) -> bool {
        let mut woken = false;
        for key in keys {
            let Some(front) = self.lines.get(key).and_then(|l| l.turns.front()) else {
                continue;
            };
            let Some(entry) = self.entries.get(&front) else {
                continue;
            };
            if entry.due.is_none_or(|due| due <= now) {
                continue;
            }
            let w = &entry.waiter;
            let look = Request {
                dryrun: true,
                ..w.request(Charge::Normal)
            };
            let admits = keyspace
                .decide(&w.keys, &w.policies, now, look)
                .is_ok_and(|d| d.allowed);
            if admits {
                self.set_due(front, now);
                woken = true;
            }
        }
        woken
    }

    /// FORCE and REFUND beside a line: written as without one, and taken
    /// into the plans too, so that those who join later are planned after
    /// it; a refund may admit the line sooner, so it wakes it.
    fn charge_beside<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        keys: &[K],
        policies: &[Policy],
        now: Micros,
        request: Request,
    ) -> Result<Arrival, KeyError> {
        let decided = keyspace.decide(keys, policies, now, request.clone())?;
        if !request.dryrun {
            let lined: Vec<usize> = (0..keys.len())
                .filter(|&i| self.has_waiters(&keys[i]))
                .collect();
            let lined_keys: Vec<K> = lined.iter().map(|&i| keys[i].clone()).collect();
            let lined_policies: Vec<Policy> = lined.iter().map(|&i| policies[i].clone()).collect();
            let charge = Request {
                costs: Some(lined.iter().map(|&i| request.cost_of(i)).collect()),
                ..request.clone()
            };
            let until = self.planned_until(&lined_keys).max(now);
            let _ = self.on_plans(&lined_keys, |store| {
                engine::decide(store, &lined_policies, until, &charge)
            });
            if request.charge == Charge::Refund {
                for key in keys {
                    self.wake(key, now);
                }
            }
        }
        Ok(Arrival::Now(decided))
    }

    /// Whether a request without `WAIT`, admitted alone, may go ahead of
    /// the lines of its keys, delaying nobody. On a rate limit its charge
    /// must no longer count by the earliest moment the line may admit
    /// someone (its front's next decision, or its first waiter's planned
    /// admission if sooner; now if the front waits on another key), nor by
    /// the moment the key alone could admit its cheapest waiter (were
    /// those ahead of it to leave): the state then is the same with or
    /// without it. On a concurrency limit,
    /// whose releases cannot be foreseen, the units left free after it must
    /// cover every waiter of the line: then no order of releases lets it
    /// delay one. Checked on copies of small values only.
    fn goes_ahead<S: Keyspace<K>>(
        &self,
        keyspace: &mut S,
        keys: &[K],
        policies: &[Policy],
        now: Micros,
        request: &Request,
    ) -> Result<bool, KeyError> {
        if request.charge != Charge::Normal {
            // A partial charge answers behind the line.
            return Ok(false);
        }
        if request.cost == 0 && request.costs.is_none() {
            // Charges nothing, delays nobody.
            return Ok(true);
        }
        let mut before = MemoryStore::new(keys.len());
        let mut room = AHEAD_CHECK_BYTES;
        for (i, key) in keys.iter().enumerate() {
            let value = keyspace
                .small_value(key, room)
                .map_err(|error| KeyError { key: i, error })?;
            let Some(value) = value else {
                return Ok(false);
            };
            room -= value.as_ref().map_or(0, Vec::len);
            before.values[i] = value;
        }
        let mut after = before.clone();
        let charged = Request {
            dryrun: false,
            ..request.clone()
        };
        engine::decide(&mut after, policies, now, &charged)?;
        for (i, key) in keys.iter().enumerate() {
            let Some(line) = self.lines.get(key) else {
                continue;
            };
            if policies[i].holds_leases() {
                let free = look(&policies[i], after.values[i].as_deref(), now).map(|l| l.0);
                if free.is_none_or(|free| u128::from(free) < line.asked) {
                    return Ok(false);
                }
                continue;
            }
            // Were those ahead to leave, the cheapest waiter could take
            // room as soon as the key alone has it.
            let cheapest = line.costs.first_key_value().map_or(0, |c| *c.0);
            let (before, after) = (before.values[i].as_deref(), after.values[i].as_deref());
            let alone = alone_at(&policies[i], before, now, cheapest);
            let first = self.next_admission(key, now).min(alone);
            if !gone_by(&policies[i], before, after, first) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The earliest moment the line of `key` may admit someone, at or
    /// after `now`: its front's next decision, or its first waiter's
    /// planned admission if sooner; now if the front is not a head (it
    /// waits on another key, and may be decided at any moment).
    fn next_admission(&self, key: &K, now: Micros) -> Micros {
        let front = self.lines.get(key).and_then(|l| l.turns.front());
        let due = front.and_then(|id| self.entries.get(&id)?.due);
        let Some(due) = due else {
            return now;
        };
        let planned = self.first_planned(key).unwrap_or(due);
        due.min(planned).max(now)
    }

    /// The planned admission of the first waiter on `key`.
    pub(super) fn first_planned(&self, key: &K) -> Option<Micros> {
        let first = self.lines.get(key)?.ids.first()?;
        self.entries.get(first).map(|e| e.planned)
    }

    /// The latest planned admission over the lines of `keys`.
    fn planned_until(&self, keys: &[K]) -> Micros {
        keys.iter()
            .filter_map(|k| self.lines.get(k).map(|l| l.planned_until))
            .max()
            .unwrap_or(Micros::ZERO)
    }

    /// When `request`, planned at `at` behind the lines of `keys`, stands
    /// to be admitted given the waiters who left: the latest over its keys
    /// of when each allows it. A key without a line: when it alone admits
    /// it (`alone`, decided now). A line nobody left: `at`. Otherwise the
    /// instant the line's plan reached as many units as now stand ahead of
    /// the request, and its own (see [`Queues::on_trajectory`]); or the
    /// line's first window, where the request fits into the room it leaves
    /// there (`first_windows`, see [`Queues::in_first_window`]).
    #[allow(clippy::too_many_arguments)]
    fn told(
        &self,
        keys: &[K],
        policies: &[Policy],
        request: &Request,
        now: Micros,
        alone: &Outcome,
        first_windows: &[Option<Micros>],
        at: Micros,
    ) -> Micros {
        let mut told = now;
        for (i, key) in keys.iter().enumerate() {
            let by = match self.lines.get(key) {
                Some(_) => {
                    let by = self.on_trajectory(key, &policies[i], request.cost_of(i), at);
                    match first_windows.get(i).copied().flatten() {
                        Some(first) => by.min(first),
                        None => by,
                    }
                }
                None => match alone.decisions.get(i) {
                    Some(d) if d.allowed => now,
                    Some(d) => match d.retry_after {
                        RetryAfter::After(wait) => now.saturating_add(wait),
                        _ => at,
                    },
                    None => at,
                },
            };
            told = told.max(by.min(at));
        }
        told
    }

    /// When the line of `key` lets a request of `cost` units behind it be
    /// admitted: `at`, its planned admission, unless waiters left; then
    /// the instant its plan reached the units that now stand ahead of it
    /// and its own: at the planned admission of the waiter that held the
    /// last of them, or in between that and the one before where the
    /// policy's room comes back continuously (GCRA, BUCKET, RL.SHARE).
    fn on_trajectory(&self, key: &K, policy: &Policy, cost: u64, at: Micros) -> Micros {
        let Some(line) = self.lines.get(key) else {
            return at;
        };
        if cost == 0 {
            return Micros::ZERO;
        }
        if line.freed == 0 {
            return at;
        }
        let continuous = policy.refills_continuously();
        // Its last unit, counted from the line's first planned one.
        let last = (line.units.saturating_sub(line.freed)).saturating_add(cost - 1);
        let Some((&through, &then)) = line.trajectory.range(last.saturating_add(1)..).next() else {
            return at;
        };
        let before = line.trajectory.range(..=last).next_back();
        match before {
            Some((&units, &since)) if continuous && then > since => {
                // `since` had `units` planned, `then` had `through`.
                let part = u128::from(last.saturating_add(1) - units)
                    * u128::from(then.saturating_sub(since).as_u64())
                    / u128::from(through - units);
                since.saturating_add(Micros::new(u64::try_from(part).unwrap_or(u64::MAX)))
            }
            _ => then,
        }
    }

    /// On a limit that starts afresh each window (FIXED): the line's first
    /// window, if a request of `cost` fits into the room the line leaves
    /// there. Its first waiters are taken in order while they fit the room
    /// the key has then (at most [`FIRST_WINDOW_LOOK`] of them, on values
    /// up to [`AHEAD_CHECK_BYTES`]); it fits if what is left is at least
    /// its cost and every waiter not taken costs more than that (then none
    /// of them can use it, and a request without `WAIT` takes it).
    fn in_first_window<S: Keyspace<K>>(
        &self,
        keyspace: &mut S,
        key: &K,
        policy: &Policy,
        cost: u64,
        now: Micros,
    ) -> Option<Micros> {
        let line = self.lines.get(key)?;
        if !policy.starts_afresh_each_window() || cost == 0 || line.turns.flows() > 1 {
            return None;
        }
        let first = self.next_admission(key, now);
        let value = keyspace.small_value(key, AHEAD_CHECK_BYTES).ok()??;
        let mut room = policy.admittable(value.as_deref(), first, u64::MAX).ok()?;
        let mut taken: BTreeMap<u64, usize> = BTreeMap::new();
        let mut blocked = false;
        for (looked, id) in line.ids.iter().enumerate() {
            if looked == FIRST_WINDOW_LOOK {
                return None;
            }
            let theirs = self.entries.get(id)?.waiter.share_on(key).cost;
            if theirs > room {
                blocked = true;
                break;
            }
            room -= theirs;
            *taken.entry(theirs).or_default() += 1;
        }
        if room < cost {
            return None;
        }
        // The cheapest waiter not taken.
        let cheapest = (line.costs.iter())
            .find(|(c, n)| **n > taken.get(c).copied().unwrap_or(0))
            .map(|(c, _)| *c);
        match (blocked, cheapest) {
            (true, Some(c)) if c <= room => None,
            _ => Some(first),
        }
    }

    /// How late the lines of `keys` run against their plans (the latest).
    fn lag(&self, keys: &[K]) -> Micros {
        keys.iter()
            .filter_map(|k| self.lines.get(k).map(|l| l.lag))
            .max()
            .unwrap_or(Micros::ZERO)
    }

    /// The earliest instant, at or after `now` and after every planned
    /// admission on its keys, at which `request` would be admitted on the
    /// plans (a key without a line: on its value); `None` if never within
    /// the horizon. Changes nothing.
    fn plan<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        keys: &[K],
        policies: &[Policy],
        now: Micros,
        request: &Request,
    ) -> Result<Option<Micros>, KeyError> {
        let mut store = MemoryStore::new(keys.len());
        for (i, key) in keys.iter().enumerate() {
            store.values[i] = match self.lines.get_mut(key) {
                Some(line) => line.plan.take(),
                None => keyspace
                    .value(key)
                    .map_err(|error| KeyError { key: i, error })?,
            };
        }
        let from = self.planned_until(keys).max(now);
        let dry = Request {
            dryrun: true,
            wait: None,
            charge: Charge::Normal,
            ..request.clone()
        };
        let mut at = from;
        let mut found = Ok(None);
        for _ in 0..ATTEMPTS {
            match engine::decide(&mut store, policies, at, &dry) {
                Ok(d) if d.allowed => {
                    found = Ok(Some(at));
                    break;
                }
                Ok(d) => match d.retry_after {
                    RetryAfter::After(wait) if at.saturating_sub(now) <= MAX_HORIZON => {
                        at = at.saturating_add(wait.max(Micros::new(1)));
                    }
                    _ => break,
                },
                Err(e) => {
                    found = Err(e);
                    break;
                }
            }
        }
        for (value, key) in store.values.into_iter().zip(keys) {
            if let Some(line) = self.lines.get_mut(key) {
                line.plan = value;
            }
        }
        found
    }

    /// PARTIAL always says what it was granted: nothing, when denied.
    fn granting(&self, mut decided: Outcome, request: &Request) -> Outcome {
        if request.charge == Charge::Partial && !decided.allowed {
            decided.granted = Some(0);
        }
        decided
    }

    /// The denial of a request that would be admitted at `admitted` (after
    /// the line; `None`: not within the horizon): the limits' state as it
    /// is now, `allowed` 0, the wait until then.
    fn queued_denial<S: Keyspace<K>>(
        &self,
        keyspace: &mut S,
        keys: &[K],
        policies: &[Policy],
        now: Micros,
        admitted: Option<Micros>,
        request: &Request,
    ) -> Result<Outcome, KeyError> {
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
            d.remaining = 0;
            d.retry_after = retry_after;
        }
        Ok(self.granting(decided, request))
    }

    /// The denial for a waiter leaving at `at` without admission: its wait
    /// after the line (it has left it) or its plain denial.
    pub(super) fn denial<S: Keyspace<K>>(
        &mut self,
        keyspace: &mut S,
        waiter: &Waiter<K, T>,
        at: Micros,
    ) -> Result<Outcome, KeyError> {
        let (keys, policies) = (&waiter.keys[..], &waiter.policies[..]);
        let request = Request {
            dryrun: true,
            ..waiter.request(Charge::Normal)
        };
        // Many may leave in one tick (a role change ends them all): each
        // is told the plan's figure, nothing is played out.
        match self.stand(keyspace, keys, policies, at, request.clone(), false, false)? {
            Arrival::Now(d) if !d.allowed => Ok(d),
            // Admissible now (the state changed, or it was behind others):
            // it may retry at once.
            _ => self.queued_denial(keyspace, keys, policies, at, Some(at), &request),
        }
    }
}

/// What `policy` says of `value` at `at` without charging: the room left
/// and when it resets.
fn look(policy: &Policy, value: Option<&[u8]>, at: Micros) -> Option<(u64, Micros)> {
    policy
        .decide(value, at, 0)
        .map(|o| (o.decision.remaining, o.decision.reset_after))
        .ok()
}

/// Whether a charge that took `policy`'s state from `before` to `after`
/// no longer counts at `at` (the state then looks the same).
pub(super) fn gone_by(
    policy: &Policy,
    before: Option<&[u8]>,
    after: Option<&[u8]>,
    at: Micros,
) -> bool {
    let then = look(policy, before, at);
    then.is_some() && then == look(policy, after, at)
}

/// When `policy` alone admits `cost` on `value`, at or after `now`.
pub(super) fn alone_at(policy: &Policy, value: Option<&[u8]>, now: Micros, cost: u64) -> Micros {
    policy
        .decide(value, now, cost)
        .map(|o| match o.decision.retry_after {
            _ if o.decision.allowed => now,
            RetryAfter::After(wait) => now.saturating_add(wait),
            _ => Micros::MAX,
        })
        .unwrap_or(now)
        .max(now)
}
