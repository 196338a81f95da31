//! The gate: the one decision path of every decision command, waiting or
//! not. A request that cannot wait, on keys nobody waits on, is decided at
//! once on its own keys ([`engine::decide`](super::decide)); otherwise the
//! queue places it ([`Queues::arrive`]): answered now, or blocked as a
//! waiter until its admission or deadline.
//!
//! A request on keys with a line whose first waiter the keys admit before
//! its due time (a command outside the module changed the key) lets that
//! waiter go first: the queue is processed at once (at most
//! `wait-events-per-tick` events), then the request is placed.
//!
//! Pure: the server it runs in is a [`Shell`] that opens keys, names them
//! for the queue, blocks the caller and replies to the waiters whose wait
//! ended.

use super::jitter;
use super::queue::{Arrival, Ended, Keyspace, Queues, Waiter};
use super::store::Store;
use super::{KeyError, Outcome, Request, Reservation};
use crate::algorithm::Micros;
use crate::bounds;
use crate::engine::error::Error;
use crate::policy::Policy;
use std::hash::Hash;

/// What the gate did with a request.
// Almost every call is answered now: boxing the outcome would allocate on
// every decision to save bytes on the rare blocked one.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Gated {
    /// Outcome now.
    Now(Outcome),
    /// The caller is blocked; its outcome comes at admission or deadline.
    Blocked,
}

/// What the gate needs from the server of one call.
pub trait Shell {
    /// A key as the queue knows it.
    type Key: Eq + Hash + Clone;
    /// A blocked caller, as the server knows it.
    type Token: Eq + Hash + Clone;
    /// The call's keys, opened for a decision at once.
    type Store<'s>: Store
    where
        Self: 's;
    /// Every key of the server, as the queue reaches them.
    type Keyspace<'s>: Keyspace<Self::Key>
    where
        Self: 's;

    /// Whether the caller may block (not in a transaction or a script).
    fn may_block(&self) -> bool;
    /// The call's keys, opened for reading and writing.
    fn open(&mut self) -> Self::Store<'_>;
    /// The call's keys as the queue names them.
    fn names(&self) -> Vec<Self::Key>;
    fn keyspace(&mut self) -> Self::Keyspace<'_>;
    /// Blocks the caller; `None` if the server refused.
    fn block(&mut self) -> Option<Self::Token>;
    /// Whether waiters may be admitted here (not on a replica).
    fn may_admit(&self) -> bool;
    /// Replies to the waiters whose wait ended (admitted ahead of the call).
    fn ended(&mut self, events: Vec<Ended<Self::Key, Self::Token>>);
}

/// Decides `request` under `policies` at `now`. `queues` is `None` when
/// nobody waits anywhere (then nothing waits, and no queue is read).
pub fn decide<S: Shell>(
    shell: &mut S,
    queues: Option<&mut Queues<S::Key, S::Token>>,
    policies: &[Policy],
    now: Micros,
    request: &Request,
) -> Result<Gated, KeyError> {
    // Without RESERVE or JITTER, the outcome goes back as it is decided;
    // with them, it is answered where it was decided (not moved).
    if request.reserve.is_none() && !jitter::wanted(request.jitter) {
        return decide_waiting(shell, queues, policies, now, request);
    }
    let mut gated = decide_waiting(shell, queues, policies, now, request);
    if let Ok(Gated::Now(outcome)) = &mut gated {
        answer(shell, outcome, policies, now, request);
    }
    gated
}

/// [`decide`] with `RESERVE` or `JITTER`, once decided now: the
/// reservation said, the denial's wait spread. An admission already said
/// (a reservation's start, or no `RESERVE`) is answered as it was decided,
/// checked here so that it costs no call.
#[inline(always)]
fn answer<S: Shell>(
    shell: &mut S,
    outcome: &mut Outcome,
    policies: &[Policy],
    now: Micros,
    request: &Request,
) {
    let said = outcome.reservation.is_some() || request.reserve.is_none();
    if !(outcome.allowed && said) {
        say(shell, outcome, policies, now, request);
    }
}

/// [`answer`] for a denial or an admission `RESERVE` has not said yet.
#[inline(never)]
fn say<S: Shell>(
    shell: &mut S,
    outcome: &mut Outcome,
    policies: &[Policy],
    now: Micros,
    request: &Request,
) {
    let reserving = request.reserve.is_some();
    // `RESERVE` never waits; behind a line it is answered as without it,
    // and still says so.
    if reserving && outcome.reservation.is_none() {
        outcome.reservation = Some(match outcome.allowed {
            true => Reservation::Starts(Micros::ZERO),
            false => Reservation::Denied,
        });
    }
    if !outcome.allowed && jitter::wanted(request.jitter) {
        let names = shell.names();
        if let Some(key) = outcome.blocked_by.and_then(|i| names.get(i)) {
            jitter::spread(outcome, key, policies, now, request.cost);
        }
    }
}

/// [`decide`], whatever `RESERVE` said.
#[inline(always)]
fn decide_waiting<S: Shell>(
    shell: &mut S,
    queues: Option<&mut Queues<S::Key, S::Token>>,
    policies: &[Policy],
    now: Micros,
    request: &Request,
) -> Result<Gated, KeyError> {
    // A caller that may not block decides as without `WAIT` (which the
    // decision itself never reads).
    let wait = request.wait.filter(|_| shell.may_block());
    let Some(queues) = queues.filter(|q| wait.is_some() || !q.is_empty()) else {
        return super::decide(&mut shell.open(), policies, now, request).map(Gated::Now);
    };
    let names = shell.names();
    // A request that cannot wait, on keys nobody waits on, is decided as if
    // nobody waited.
    if wait.is_none() && !names.iter().any(|k| queues.has_waiters(k)) {
        return super::decide(&mut shell.open(), policies, now, request).map(Gated::Now);
    }
    queued(shell, queues, names, policies, now, request, wait)
}

/// [`decide_waiting`] through the queue: `wait` is the request's `WAIT`,
/// if its caller may block.
#[inline(never)]
fn queued<S: Shell>(
    shell: &mut S,
    queues: &mut Queues<S::Key, S::Token>,
    names: Vec<S::Key>,
    policies: &[Policy],
    now: Micros,
    request: &Request,
    wait: Option<Micros>,
) -> Result<Gated, KeyError> {
    let request = Request {
        wait,
        ..request.clone()
    };
    let mut arrival = if shell.may_admit() {
        queues.arrive_or_wake(
            &mut shell.keyspace(),
            &names,
            policies,
            now,
            request.clone(),
        )?
    } else {
        queues.arrive(
            &mut shell.keyspace(),
            &names,
            policies,
            now,
            request.clone(),
        )?
    };
    if let Arrival::Woken = arrival {
        let budget = bounds::WAIT_EVENTS_PER_TICK.get() as usize;
        let events = queues.process(&mut shell.keyspace(), now, now, budget);
        shell.ended(events);
        arrival = queues.arrive(
            &mut shell.keyspace(),
            &names,
            policies,
            now,
            request.clone(),
        )?;
    }
    match (arrival, request.wait) {
        (Arrival::Now(decided), _) => Ok(Gated::Now(decided)),
        (Arrival::Wait(place), Some(timeout)) => {
            let token = shell.block().ok_or_else(internal)?;
            let waiter = Waiter {
                keys: names,
                policies: policies.to_vec(),
                cost: request.cost,
                costs: request.costs,
                since: now,
                deadline: now.saturating_add(timeout),
                flow: request.flow,
                token,
            };
            queues.enqueue(&mut shell.keyspace(), waiter, place);
            Ok(Gated::Blocked)
        }
        (Arrival::Wait(_), None) | (Arrival::Woken, _) => Err(internal()),
    }
}

/// What a request on `keys` answers behind their lines (`None`: nobody
/// waits on them): a look (RL.PEEK, RL.SHARE.PEEK) as a new request would
/// see it.
pub fn behind_line<K: Eq + Hash + Clone, T: Eq + Hash + Clone>(
    queues: &mut Queues<K, T>,
    keyspace: &mut impl Keyspace<K>,
    keys: &[K],
    policies: &[Policy],
    now: Micros,
    request: Request,
) -> Option<Result<Outcome, KeyError>> {
    if !keys.iter().any(|k| queues.has_waiters(k)) {
        return None;
    }
    let arrival = queues.arrive(keyspace, keys, policies, now, request);
    Some(arrival.and_then(|a| match a {
        Arrival::Now(d) => Ok(d),
        Arrival::Wait(_) | Arrival::Woken => Err(internal()),
    }))
}

fn internal() -> KeyError {
    KeyError {
        key: 0,
        error: Error::Internal("WAIT"),
    }
}
