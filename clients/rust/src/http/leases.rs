//! The layer's leased limits: one [`BlockLease`] per key, bounded in
//! number, with its line of requests waiting for units (see
//! [`crate::line`]), and the refunds of what they hold (when idle, at
//! shutdown, when a key gives way to another, and when the layer is
//! dropped). A key gives way only while no call for its block is out,
//! and takes its line with it: the store decides the requests in it.

use crate::blocks::{granted, BlockLease, Flight, Step, Unlanded, MOST_WAITS};
use crate::command::{Charge, Decide, HotKey, HotKeys};
use crate::line::{Call, Heard, Line, Owner, Waiting};
use crate::reply::Decision;
use crate::{Client, Error, Policy};
use lru::LruCache;
use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::oneshot::Receiver;

/// A leased limit (its index among the layer's limits) and a store key.
pub(crate) type Slot = (usize, String);

struct Held {
    /// The key's lease, the call out for it and the requests in line.
    line: Line,
    used: Instant,
    /// Requests on it since the last poll of the hot keys.
    asked: u64,
    /// The store's last answer on the key, for the response's fields.
    last: Option<Decision>,
}

struct Inner {
    /// The slots, the least recently used first (for idle refunds and to
    /// give way). Keys come from requests: hashed with std's keyed
    /// SipHash, as a `HashMap` would.
    by_slot: LruCache<Slot, Held, RandomState>,
    /// Units of slots that gave way, still to be refunded (at most
    /// `capacity` of them; past that they stay charged).
    evicted: Vec<(Slot, u64)>,
    /// The keys the server last named hot (by their first 64 bytes, as
    /// `RL.HOTKEYS` lists them; at most a poll's count).
    hot: HashSet<Box<[u8]>>,
}

/// How the limits leased only while hot follow the server's hot keys.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Follow {
    /// The hottest keys that may turn hot: the first `count` listed.
    pub(crate) count: usize,
    /// A listed key turns hot once it surely takes this many decisions a
    /// second (its rate less its error); it stays hot while it may still
    /// take them counting a block per decision (see [`Leases::set_hot`]).
    pub(crate) min_per_second: u64,
}

/// How `RL.HOTKEYS` shows a key: its first 64 bytes.
fn listed_as(key: &str) -> &[u8] {
    let bytes = key.as_bytes();
    &bytes[..bytes.len().min(64)]
}

type Policies = Arc<Vec<Option<(Policy, BlockLease)>>>;
type Refunder = Box<dyn Fn(Vec<(Slot, u64)>) + Send + Sync>;

impl Inner {
    /// Takes back every held unit: the refunds to send.
    fn take_all(&mut self) -> Vec<(Slot, u64)> {
        let mut refunds = std::mem::take(&mut self.evicted);
        for (slot, held) in self.by_slot.iter_mut() {
            if let Some(units) = held.line.lease.take_all() {
                refunds.push((slot.clone(), units));
            }
        }
        refunds
    }
}

/// The block leases of a layer's leased limits.
pub(crate) struct Leases<C> {
    client: Client<C>,
    /// Each limit's policy, `None` for limits that are not leased.
    policies: Policies,
    capacity: usize,
    /// Each limit: leased only while its key is hot.
    when_hot: Vec<bool>,
    follow: Follow,
    inner: Mutex<Inner>,
    /// Sends the last refunds in the background when dropped.
    on_drop: Refunder,
}

/// Units taken for a request from the leased limits' blocks: put back
/// when dropped unless kept (a request denied by another limit, failed,
/// or dropped before it was served loses no unit).
pub(crate) struct Taken<C> {
    leases: Arc<Leases<C>>,
    /// Each slot, the decision reported for it and the units taken.
    units: Vec<(Slot, Decision, u64)>,
}

impl<C> Taken<C> {
    /// The units are used: the request is served.
    pub(crate) fn keep(mut self) {
        self.units.clear();
    }

    /// Each leased limit's decision (by the limit's index).
    pub(crate) fn decisions(&self) -> impl Iterator<Item = (usize, &Decision)> {
        self.units.iter().map(|((i, _), d, _)| (*i, d))
    }
}

impl<C> Drop for Taken<C> {
    fn drop(&mut self) {
        if !self.units.is_empty() {
            self.leases.put_back(&self.units);
        }
    }
}

/// What the leased limits decided for a request.
pub(crate) enum Outcome<C> {
    /// Each leased limit's decision took a unit.
    Admitted(Taken<C>),
    /// Denied by the leased limit at this index.
    Denied(usize, Decision),
    /// The store did not answer.
    Failed(Error),
}

impl<C> Leases<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    pub(crate) fn new(
        client: Client<C>,
        policies: Vec<Option<(Policy, BlockLease)>>,
        when_hot: Vec<bool>,
        follow: Follow,
        capacity: usize,
    ) -> Leases<C> {
        let policies = Arc::new(policies);
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        let on_drop: Refunder = {
            let (client, policies) = (client.clone(), policies.clone());
            Box::new(move |refunds| {
                // Without a runtime the units stay charged until they refill.
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let (client, policies) = (client.clone(), policies.clone());
                    runtime.spawn(async move {
                        let _ = send_refunds(&client, &policies, refunds).await;
                    });
                }
            })
        };
        Leases {
            client,
            policies,
            capacity: capacity.get(),
            when_hot,
            follow,
            inner: Mutex::new(Inner {
                by_slot: LruCache::with_hasher(capacity, RandomState::new()),
                evicted: Vec::new(),
                hot: HashSet::new(),
            }),
            on_drop,
        }
    }

    /// Whether `key` of the limit at `index` is leased (if leased only
    /// while hot: the key is hot).
    pub(crate) fn is_leased(&self, index: usize, key: &str) -> bool {
        self.policies.get(index).is_some_and(Option::is_some)
            && (!self.when_hot[index] || self.lock().hot.contains(listed_as(key)))
    }

    /// Whether a request of `cost` units on `key` of the limit at `index`
    /// is decided from its blocks: the limit is leased (and, if leased only
    /// while hot, the key is hot) and the cost fits in a block (a larger
    /// one goes to the store).
    pub(crate) fn takes(&self, index: usize, key: &str, cost: u64) -> bool {
        match self.policies.get(index) {
            Some(Some((_, lease))) => cost <= lease.max_block() && self.is_leased(index, key),
            _ => false,
        }
    }

    /// Whether a limit is leased only while its key is hot.
    pub(crate) fn follows_hot_keys(&self) -> bool {
        self.when_hot.iter().any(|&h| h)
    }

    /// The keys named hot now (as `RL.HOTKEYS` shows them).
    pub(crate) fn hot_keys(&self) -> Vec<String> {
        let inner = self.lock();
        inner
            .hot
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect()
    }

    /// The largest block of the limits leased while hot: what one of
    /// their decisions on the server may stand for.
    fn block(&self) -> u64 {
        self.policies
            .iter()
            .zip(&self.when_hot)
            .filter_map(|(p, &hot)| Some(p.as_ref().filter(|_| hot)?.1.max_block()))
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// `RL.HOTKEYS COUNT` of each poll: `count` times a block (at most
    /// 1000), so that a leased key, whose decisions on the server are one
    /// a block, is still listed while hot.
    fn poll_count(&self) -> usize {
        let block = usize::try_from(self.block()).unwrap_or(usize::MAX);
        self.follow
            .count
            .saturating_mul(block)
            .clamp(self.follow.count, 1000)
    }

    /// Takes the server's list: the keys hot from now on, and the units
    /// of the keys that cooled (leased only while hot, and no longer hot),
    /// to refund. A key turns hot among the first `count` listed once its
    /// rate less its error is at least `min_per_second`. Leased, a key
    /// asks once a block, which drops it down the list and, on a busy
    /// server, out of the summaries that count it: a hot key stays hot
    /// while listed at a rate that, with its error and a block a decision,
    /// may reach `min_per_second`, or while this process alone asked it
    /// for a block's worth of requests since the last poll.
    fn set_hot(&self, listed: &[HotKey]) -> Vec<(Slot, u64)> {
        let mut inner = self.lock();
        let (min, block) = (self.follow.min_per_second, self.block());
        let mut hot: HashSet<Box<[u8]>> = listed
            .iter()
            .enumerate()
            .filter(|(rank, h)| {
                let most = h.per_second.saturating_add(h.error_per_second);
                if inner.hot.contains(h.key.as_bytes()) {
                    most.saturating_mul(block) >= min
                } else {
                    *rank < self.follow.count
                        && h.per_second.saturating_sub(h.error_per_second) >= min
                }
            })
            .map(|(_, h)| Box::from(h.key.as_bytes()))
            .collect();
        for (slot, held) in inner.by_slot.iter() {
            let key = listed_as(&slot.1);
            if self.when_hot[slot.0] && held.asked >= block && inner.hot.contains(key) {
                hot.insert(Box::from(key));
            }
        }
        for (_, held) in inner.by_slot.iter_mut() {
            held.asked = 0;
        }
        inner.hot = hot;
        let cooled: Vec<Slot> = inner
            .by_slot
            .iter()
            .filter(|(slot, _)| self.when_hot[slot.0] && !inner.hot.contains(listed_as(&slot.1)))
            .map(|(slot, _)| slot.clone())
            .collect();
        let mut refunds = Vec::new();
        for slot in cooled {
            if let Some(mut held) = inner.by_slot.pop(&slot) {
                if let Some(units) = held.line.lease.take_all() {
                    refunds.push((slot, units));
                }
            }
        }
        refunds
    }

    /// One poll of the server's hot keys (`RL.HOTKEYS COUNT n`, within
    /// the client's timeout): the keys that turned hot are leased from
    /// their next request, those that cooled give their units back.
    pub(crate) async fn refresh_hot(&self) -> Result<(), Error> {
        let listed = self.client.send(&HotKeys::new(self.poll_count())).await?;
        let refunds = self.set_hot(&listed);
        self.refund(refunds).await
    }

    /// A task that polls the server's hot keys every `every` (backing off
    /// up to 16 times that while the polls fail); it holds the leases
    /// weakly and ends with the layer.
    pub(crate) fn follow_hot(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let leases = Arc::downgrade(self);
        let every = every.max(Duration::from_millis(1));
        tokio::spawn(async move {
            let mut wait = every;
            loop {
                tokio::time::sleep(wait).await;
                let Some(leases) = leases.upgrade() else {
                    return;
                };
                wait = match leases.refresh_hot().await {
                    Ok(()) => every,
                    Err(_) => (wait * 2).min(every * 16),
                };
            }
        })
    }

    /// A request of `cost` units on the leased limits' keys (`keys[i]` for
    /// limit `i`) whose blocks can hold it ([`Leases::takes`]), one limit
    /// after another: each takes its units from its block, or waits in the
    /// key's line for them, first come first served (the first in line
    /// sends the call for a block). A denial or failure puts back the
    /// units already taken. A cost of 0 takes nothing and asks nothing (the
    /// store admits it in any state).
    pub(crate) async fn admit(self: &Arc<Self>, keys: &[String], cost: u64) -> Outcome<C> {
        let mut taken = Taken {
            leases: Arc::clone(self),
            units: Vec::new(),
        };
        for (i, key) in keys.iter().enumerate() {
            let Some((policy, _)) = &self.policies[i] else {
                continue;
            };
            if !self.takes(i, key, cost) {
                continue;
            }
            let slot: Slot = (i, key.clone());
            if cost == 0 {
                let d = self.held_decision(&slot);
                taken.units.push((slot, d, 0));
                continue;
            }
            let verdict = match self.admit_one(&slot, *policy, cost).await {
                Ok(verdict) => verdict,
                Err(e) => return Outcome::Failed(e),
            };
            match verdict {
                Ok(d) => taken.units.push((slot, d, cost)),
                Err(d) => return Outcome::Denied(i, d),
            }
        }
        Outcome::Admitted(taken)
    }

    /// One leased limit's verdict on a request of `cost` units on `slot`
    /// (the store's answer, or the local one): its units taken from the
    /// block, at once or once the requests before it in line are served.
    /// A request whose slot gave way while it waited, or still in line
    /// after [`MOST_WAITS`] calls, is decided by the store itself, so that
    /// only the store denies a key with room (what it charges is taken as
    /// from the block, put back there if the request is not served).
    async fn admit_one(
        self: &Arc<Self>,
        slot: &Slot,
        policy: Policy,
        cost: u64,
    ) -> Result<Result<Decision, Decision>, Error> {
        let owner = SlotLine { leases: self, slot };
        let bound = self.client.bound(Duration::ZERO);
        let mut waits = MOST_WAITS;
        match self.arrive(slot, cost)? {
            Arrival::Admit => return Ok(Ok(self.held_decision(slot))),
            Arrival::Deny(wait) => return Ok(Err(self.local_denial(slot, wait))),
            Arrival::Alone => {}
            Arrival::Wait(told, call) => {
                let mut waiting = Waiting::new(&owner, cost, told);
                self.launch(slot, call);
                let heard = waiting.answer(bound, &mut waits).await;
                drop(waiting);
                match heard {
                    Ok(Heard::Told(true)) => return Ok(Ok(self.held_decision(slot))),
                    Ok(Heard::Told(false)) => {
                        let wait = self.next_call_in(slot);
                        return Ok(Err(self.local_denial(slot, wait)));
                    }
                    // The slot gave way (more hot keys than leases), or
                    // the request waited for MOST_WAITS calls: the store
                    // decides, rather than a new lease's block that may
                    // give way in turn, each charging a block.
                    Ok(Heard::Gone | Heard::Long) => {}
                    Err(e) => {
                        self.client.record::<()>(&Err(e.clone()));
                        return Err(e);
                    }
                }
            }
        }
        let alone = Decide::new(slot.1.clone(), policy).charge(Charge::Cost(cost));
        let d = self.client.send(&alone).await?;
        Ok(if d.allowed { Ok(d) } else { Err(d) })
    }

    /// A request of `cost` units arrives on `slot` (counted for the hot
    /// keys): admitted or denied from the block, in line (with the call to
    /// send for it if it is the first), or left to the store.
    /// While the store is known down, a request the block cannot serve
    /// fails at once: no line entry, no call.
    fn arrive(&self, slot: &Slot, cost: u64) -> Result<Arrival, Error> {
        let mut inner = self.lock();
        // Read under the lock: an instant read before it may precede the
        // landing of a call another thread just made, and be told to wait
        // for a call due at that landing.
        let now = Instant::now();
        if !inner.by_slot.contains(slot) {
            // Every lease in use and the least recently used one waiting
            // for its block: giving it way would strand that block and
            // send its line to the store; the store decides this request.
            let busy = |h: &Held| h.line.flight.is_some();
            if inner.by_slot.len() >= self.capacity
                && inner.by_slot.peek_lru().is_some_and(|(_, h)| busy(h))
            {
                return Ok(Arrival::Alone);
            }
            self.make_room(&mut inner);
            let lease = self.policies[slot.0]
                .as_ref()
                .map(|(_, l)| l.clone())
                .unwrap_or_else(|| BlockLease::fixed(1));
            let held = Held {
                line: Line::new(lease),
                used: now,
                asked: 0,
                last: None,
            };
            inner.by_slot.put(slot.clone(), held);
        }
        // Used now: the most recently used.
        let Some(held) = inner.by_slot.get_mut(slot) else {
            return Ok(Arrival::Deny(Duration::ZERO));
        };
        held.used = now;
        held.asked += 1;
        let step = held.line.arrive(now, cost);
        match step {
            Step::Admit => return Ok(Arrival::Admit),
            Step::Deny { until } => {
                return Ok(Arrival::Deny(until.saturating_duration_since(now)));
            }
            // The store known down: the call out may not land until it is
            // back, and nothing is sent; the fallback at once.
            Step::Join => self.client.up()?,
            Step::Ask(_) | Step::Queue { .. } => {
                if let Err(e) = self.client.up() {
                    // Not made: the next request may call.
                    held.line.lease.on_failure();
                    return Err(e);
                }
            }
        }
        let told = held.line.wait_in_line(cost);
        Ok(Arrival::Wait(told, held.line.call(step)))
    }

    /// How long until `slot`'s lease calls again (zero if it may now).
    fn next_call_in(&self, slot: &Slot) -> Duration {
        let inner = self.lock();
        let next = inner
            .by_slot
            .peek(slot)
            .and_then(|h| h.line.lease.next_call_at());
        next.map_or(Duration::ZERO, |t| {
            t.saturating_duration_since(Instant::now())
        })
    }

    /// Sends `call`, the call out for `slot`'s line, unless the store is
    /// known down (or there is no runtime to send it from): then those
    /// waiting get the error, and the next request may call.
    fn launch(self: &Arc<Self>, slot: &Slot, call: Option<Call>) {
        let Some(call) = call else {
            return;
        };
        let unsent = match self.client.up() {
            Err(e) => e,
            Ok(()) if tokio::runtime::Handle::try_current().is_ok() => {
                self.start(slot, call);
                return;
            }
            Ok(()) => Error::Reply("no tokio runtime to send the call from".into()),
        };
        self.failed(slot, &call.flight, &unsent);
        call.flight.finish(Some(unsent));
    }

    /// Sends `call` for a block on `slot` from a task of its own: what the
    /// server grants lands in the slot's lease (and goes to those in line),
    /// or is refunded when the slot or the layer is gone, whether or not
    /// anyone still waits for it. The layer's leases never queue (see
    /// `HttpLimit::leased`).
    fn start(self: &Arc<Self>, slot: &Slot, call: Call) {
        let Some(Some((policy, _))) = self.policies.get(slot.0) else {
            let e = Error::Reply("a leased limit without its policy".into());
            self.failed(slot, &call.flight, &e);
            call.flight.finish(Some(e));
            return;
        };
        let Call { flight, units, .. } = call;
        let command = Decide::new(slot.1.clone(), *policy).charge(call.charge);
        let (client, owner) = (self.client.clone(), Arc::downgrade(self));
        let slot = slot.clone();
        let unlanded = Unlanded {
            flight: Arc::clone(&flight),
            reset: {
                let (owner, slot, flight) = (owner.clone(), slot.clone(), Arc::clone(&flight));
                move || {
                    if let Some(leases) = owner.upgrade() {
                        let e = Error::Reply("the store's reply could not be landed".into());
                        leases.failed(&slot, &flight, &e);
                    }
                }
            },
        };
        tokio::spawn(async move {
            let _unlanded = unlanded;
            let reply = client.send_untimed(&command).await;
            let leases = owner.upgrade();
            let failure = match &reply {
                Ok(reply) => {
                    let landed = match &leases {
                        Some(leases) => leases.land(&slot, &flight, reply),
                        None => false,
                    };
                    let units = granted(reply, units, false);
                    if !landed && units > 0 {
                        let refund = command.clone().charge(Charge::Refund(units));
                        let _ = client.send_untimed(&refund).await;
                    }
                    None
                }
                Err(e) => {
                    if let Some(leases) = &leases {
                        leases.failed(&slot, &flight, e);
                    }
                    Some(e.clone())
                }
            };
            flight.finish(failure);
        });
    }

    /// Lands the reply of `flight` in its slot, its units going to those in
    /// line (the next call, if they need one, sent at once): `false` if
    /// the slot is gone (or leases anew), the units then to be refunded.
    fn land(self: &Arc<Self>, slot: &Slot, flight: &Arc<Flight>, reply: &Decision) -> bool {
        let next = {
            let mut inner = self.lock();
            let Some(held) = inner.by_slot.peek_mut(slot) else {
                return false;
            };
            if !held
                .line
                .flight
                .as_ref()
                .is_some_and(|f| Arc::ptr_eq(f, flight))
            {
                return false;
            }
            let now = Instant::now();
            held.line.flight = None;
            held.last = Some(reply.clone());
            held.line.lease.land(now, reply);
            held.line.serve(now)
        };
        self.launch(slot, next);
        true
    }

    /// The call `flight` on `slot` failed with `e` (or was not made): those
    /// in line get the error, and the next request may call.
    fn failed(&self, slot: &Slot, flight: &Arc<Flight>, e: &Error) {
        let mut inner = self.lock();
        if let Some(held) = inner.by_slot.peek_mut(slot) {
            held.line.fail_if(flight, e);
        }
    }

    /// When full, the least recently used slot gives way; its units are
    /// refunded at the next sweep.
    fn make_room(&self, inner: &mut Inner) {
        if inner.by_slot.len() < self.capacity {
            return;
        }
        let Some((slot, mut held)) = inner.by_slot.pop_lru() else {
            return;
        };
        if let Some(units) = held.line.lease.take_all() {
            if inner.evicted.len() < self.capacity {
                inner.evicted.push((slot, units));
            }
        }
    }

    /// The response's view of a unit admitted from the block: the store's
    /// last answer, counting the units this process holds as remaining.
    fn held_decision(&self, slot: &Slot) -> Decision {
        let inner = self.lock();
        let held = inner.by_slot.peek(slot);
        let units = held.map_or(0, |h| h.line.lease.held());
        match held.and_then(|h| h.last.as_ref()) {
            Some(last) => with_held(last, units),
            None => Decision {
                allowed: true,
                limit: 0,
                remaining: units,
                retry_after: None,
                reset_after: Duration::ZERO,
                granted: None,
                lease: None,
            },
        }
    }

    fn local_denial(&self, slot: &Slot, wait: Duration) -> Decision {
        let inner = self.lock();
        let last = inner.by_slot.peek(slot).and_then(|h| h.last.as_ref());
        Decision {
            allowed: false,
            limit: last.map_or(0, |d| d.limit),
            remaining: 0,
            retry_after: Some(wait),
            reset_after: last.map_or(wait, |d| d.reset_after),
            granted: None,
            lease: None,
        }
    }

    /// Takes back the units of slots unused for `idle` (and of slots that
    /// gave way): the refunds to send.
    fn take_idle(&self, now: Instant, idle: Duration) -> Vec<(Slot, u64)> {
        let mut inner = self.lock();
        let mut refunds = std::mem::take(&mut inner.evicted);
        while let Some((_, held)) = inner.by_slot.peek_lru() {
            if now.saturating_duration_since(held.used) < idle {
                break;
            }
            let Some((slot, mut held)) = inner.by_slot.pop_lru() else {
                break;
            };
            if let Some(units) = held.line.lease.take_all() {
                refunds.push((slot, units));
            }
        }
        refunds
    }

    /// Sends `refunds` from a task of their own, waiting for them at most
    /// the client's timeout: dropped or timed out, the refunds taken from
    /// the leases still reach the server.
    async fn refund(&self, refunds: Vec<(Slot, u64)>) -> Result<(), Error> {
        if refunds.is_empty() {
            return Ok(());
        }
        let (client, policies) = (self.client.clone(), self.policies.clone());
        let sending = tokio::spawn(async move { send_refunds(&client, &policies, refunds).await });
        let bound = self.client.bound(Duration::ZERO);
        let finished = match bound {
            Some(bound) => tokio::time::timeout(bound, sending)
                .await
                .map_err(|_| Error::Timeout(bound))?,
            None => sending.await,
        };
        finished.unwrap_or_else(|_| Err(Error::Reply("a refund's task ended early".into())))
    }

    /// Refunds what keys unused for `idle` hold.
    pub(crate) async fn refund_idle(&self, idle: Duration) -> Result<(), Error> {
        let refunds = self.take_idle(Instant::now(), idle);
        self.refund(refunds).await
    }

    /// Refunds every held unit.
    pub(crate) async fn refund_all(&self) -> Result<(), Error> {
        let refunds = self.lock().take_all();
        self.refund(refunds).await
    }

    /// Units held now, over every key.
    pub(crate) fn held(&self) -> u64 {
        let inner = self.lock();
        inner.by_slot.iter().map(|(_, h)| h.line.lease.held()).sum()
    }

    /// A task that refunds idle keys' units, checking twice per `idle`;
    /// it holds the leases weakly and ends with the layer.
    pub(crate) fn refund_when_idle(
        self: &Arc<Self>,
        idle: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let leases = Arc::downgrade(self);
        let every = (idle / 2).max(Duration::from_millis(1));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(leases) = leases.upgrade() else {
                    return;
                };
                let refunds = leases.take_idle(Instant::now(), idle);
                let _ = send_refunds(&leases.client, &leases.policies, refunds).await;
            }
        })
    }
}

/// What a request finds on arriving at a slot.
enum Arrival {
    /// Admitted from the block.
    Admit,
    /// Denied by the lease: its next call is due in this long.
    Deny(Duration),
    /// No lease for it (every one in use, the least recently used waiting
    /// for its block): the store decides it.
    Alone,
    /// In line: where its answer comes, and the call to send
    /// if it is the first.
    Wait(Receiver<Result<bool, Error>>, Option<Call>),
}

/// A slot's line, for the requests waiting in it. When the slot gives way
/// its line goes with it: the store decides those in it.
struct SlotLine<'a, C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    leases: &'a Arc<Leases<C>>,
    slot: &'a Slot,
}

impl<C> Owner for SlotLine<'_, C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    fn flight(&self) -> Option<Arc<Flight>> {
        let inner = self.leases.lock();
        inner.by_slot.peek(self.slot)?.line.flight.clone()
    }

    fn left(&self) {
        let call = {
            let mut inner = self.leases.lock();
            let Some(held) = inner.by_slot.peek_mut(self.slot) else {
                return;
            };
            held.line.serve(Instant::now())
        };
        self.leases.launch(self.slot, call);
    }

    fn give_back(&self, units: u64) {
        let call = {
            let mut inner = self.leases.lock();
            match inner.by_slot.peek_mut(self.slot) {
                Some(held) => {
                    held.line.lease.put_back(units);
                    held.line.serve(Instant::now())
                }
                None => {
                    // The slot gave way: refunded at the next sweep.
                    if inner.evicted.len() < self.leases.capacity {
                        inner.evicted.push((self.slot.clone(), units));
                    }
                    None
                }
            }
        };
        self.leases.launch(self.slot, call);
    }
}

/// Sends `REFUND n` for each slot, waiting for each answer however long
/// it takes (in the background: a refund cut short by a timeout may never
/// be sent); the last error if any failed (a failed refund is not
/// retried: its units stay charged until they refill).
async fn send_refunds<C>(
    client: &Client<C>,
    policies: &Policies,
    refunds: Vec<(Slot, u64)>,
) -> Result<(), Error>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let mut result = Ok(());
    for ((index, key), units) in refunds {
        let Some(Some((policy, _))) = policies.get(index) else {
            continue;
        };
        let call = Decide::new(key, *policy).charge(Charge::Refund(units));
        if let Err(e) = client.send_untimed(&call).await {
            result = Err(e);
        }
    }
    result
}

fn with_held(d: &Decision, units: u64) -> Decision {
    Decision {
        allowed: true,
        remaining: d.remaining.saturating_add(units),
        retry_after: None,
        ..d.clone()
    }
}

impl<C> Leases<C> {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Each change is whole: a poisoned lock is usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns the units taken for a request that is not served.
    pub(crate) fn put_back(&self, taken: &[(Slot, Decision, u64)]) {
        let mut inner = self.lock();
        for (slot, _, units) in taken {
            if let Some(held) = inner.by_slot.peek_mut(slot) {
                held.line.lease.put_back(*units);
            }
        }
    }
}

impl<C> Drop for Leases<C> {
    /// The layer is gone: what it held goes back.
    fn drop(&mut self) {
        let refunds = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_all();
        if !refunds.is_empty() {
            (self.on_drop)(refunds);
        }
    }
}
