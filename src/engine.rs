//! The one decision path of every RL.* decision command, single-key or
//! RL.ALL: every limit decides against the same clock reading; only if all
//! admit is any state written (unless DRYRUN), each key with a TTL of its
//! own decision's reset, all or nothing.

pub mod deny;
pub mod error;
pub mod gate;
pub mod hot;
pub mod jitter;
pub mod leases;
pub mod penalty;
pub mod queue;
pub mod registry;
mod reserve;
mod share;
pub mod store;
pub mod topk;
use crate::algorithm::concurrency::LeaseId;
use crate::algorithm::{Decision, Micros, RetryAfter};
use crate::bounds::work::{self, Work};
use crate::codec::StateError;
use crate::engine::error::Error;
use crate::engine::leases::LeaseChange;
use crate::engine::store::Store;
use crate::policy::{ForceError, Policy, StateWrite, Transition};
pub use penalty::Penalty;
use smallvec::SmallVec;

/// Up to this many limits a call decides without allocating.
const INLINE: usize = 1;

/// One item per limit of a call.
pub type PerLimit<T> = SmallVec<[T; INLINE]>;

/// What kind of charge a call makes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Charge {
    /// Charge the cost if every limit admits it.
    #[default]
    Normal,
    /// Charge the cost whether or not it fits, and write either way.
    Force,
    /// Charge the most, up to the cost, that every limit admits now.
    Partial,
    /// Give the cost back, never beyond full.
    Refund,
    /// Look: a request of cost 1, with `remaining` the most admittable
    /// now; never writes.
    Peek,
}

impl Charge {
    /// The option that asks for this charge, if one does.
    pub fn token(self) -> Option<&'static str> {
        match self {
            Charge::Force => Some("FORCE"),
            Charge::Partial => Some("PARTIAL"),
            Charge::Refund => Some("REFUND"),
            Charge::Normal | Charge::Peek => None,
        }
    }
}

/// What a call asks for besides its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Units to charge (or give back); 0 looks without charging.
    pub cost: u64,
    /// One cost per key in place of `cost` (RL.ALL's COSTS).
    pub costs: Option<Vec<u64>>,
    pub charge: Charge,
    /// Decide, write nothing.
    pub dryrun: bool,
    /// `WAIT timeout`: if denied, wait up to this long to be admitted
    /// (first come, first served in its flow; see `queue`). `decide`
    /// itself never waits.
    pub wait: Option<Micros>,
    /// `FLOW name [WEIGHT w]` (with `WAIT`): the flow whose share of the
    /// key's admissions its wait is taken from.
    pub flow: Option<Flow>,
    /// `RESERVE maxdelay`: if denied now but admitted within `maxdelay`,
    /// admitted now for a start then (see `reserve`).
    pub reserve: Option<Micros>,
    /// `JITTER`: a denial's wait is spread (see `jitter`).
    pub jitter: bool,
    /// `BLOCK duration` or `COUNTDENIALS maxdebt`: what a denial costs
    /// its key (see `penalty`).
    pub penalty: Option<Penalty>,
}

/// A flow of waiters on a key: its name and the weight of its share.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Flow {
    pub name: Vec<u8>,
    /// 1..=`MAX_WEIGHT`.
    pub weight: u64,
}

/// The largest `WEIGHT`.
pub const MAX_WEIGHT: u64 = 1_000;

impl Default for Request {
    fn default() -> Request {
        Request {
            cost: 1,
            costs: None,
            charge: Charge::Normal,
            dryrun: false,
            wait: None,
            flow: None,
            reserve: None,
            jitter: false,
            penalty: None,
        }
    }
}

impl Request {
    /// The options given that a policy may refuse: the kind of charge,
    /// `RESERVE` and the penalty.
    pub fn refusable(&self) -> impl Iterator<Item = &'static str> {
        let reserve = self.reserve.map(|_| "RESERVE");
        let penalty = self.penalty.map(Penalty::option);
        self.charge
            .token()
            .into_iter()
            .chain(reserve)
            .chain(penalty)
    }

    /// Takes a named policy's penalty where the call gives none, for a
    /// plain charge decided at once (what a penalty applies to).
    pub fn penalize_by_default(&mut self, penalty: Option<Penalty>) {
        let plain = self.charge == Charge::Normal && self.wait.is_none();
        if plain && self.reserve.is_none() && self.penalty.is_none() {
            self.penalty = penalty;
        }
    }

    /// The cost for key `key`.
    pub fn cost_of(&self, key: usize) -> u64 {
        self.costs
            .as_ref()
            .and_then(|c| c.get(key).copied())
            .unwrap_or(self.cost)
    }
}

/// What a call came to, as the statistics count it (INFO's per command,
/// a named policy's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Denied,
    /// Admitted by a shadow policy that enforcing would have denied.
    ShadowDenied,
    /// The client waits: allowed or denied is counted when it ends.
    Waiting,
    /// Not a decision (RL.CLOCK, RL.RELEASE, RL.POLICY …).
    Other,
}

impl Verdict {
    pub fn of(allowed: bool) -> Verdict {
        if allowed {
            Verdict::Allowed
        } else {
            Verdict::Denied
        }
    }
}

/// An error about one key (its 0-based position).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    pub key: usize,
    pub error: Error,
}

/// The combined answer of several decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub allowed: bool,
    /// 0-based index of the limit that decides `retry_after`: the first
    /// that can never admit, else the first with the longest wait.
    pub blocked_by: Option<usize>,
    /// The wait until every limit would admit: `NotNeeded` if allowed,
    /// `Never` if one limit never will.
    pub retry_after: RetryAfter,
    /// One decision per limit, in key order.
    pub decisions: PerLimit<Decision>,
    /// PARTIAL: the units charged to every limit (0 when denied).
    pub granted: Option<u64>,
    /// Per limit, in key order: the units its decision is about, the cost
    /// its `retry_after` waits for (see [`Outcome::reported`]): the cost
    /// asked; PARTIAL's grant, or when nothing is granted what that limit
    /// alone would grant (at least 1); 1 for a debt FORCE left or a peek;
    /// 0 for a look that charges nothing.
    pub units: PerLimit<u64>,
    /// Per limit, in key order: `None` for a limit without leases; for a
    /// concurrency limit, the lease it now holds (`Some(None)` when denied
    /// or a dry run).
    pub leases: PerLimit<Option<Option<LeaseId>>>,
    /// `RESERVE`'s answer; `None` for a request without it.
    pub reservation: Option<Reservation>,
    /// RL.SHARE, admitted: the node whose assured rate the request used
    /// (what taking the admission back gives back; see [`undo`]).
    /// Kept for the first 65,536 nodes of a path, so that an outcome stays
    /// as small as without it; beyond them, `None` (an undo then gives back
    /// the ceilings only, the stricter side).
    pub lender: Option<u16>,
}

/// What a request with `RESERVE` was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// Admitted and charged now; its admission starts after this delay
    /// (zero: admitted at once).
    Starts(Micros),
    /// Not admitted within its `maxdelay`: denied, nothing charged.
    Denied,
}

/// Decides `request` under `policies` (policy `i` over key `i` of `store`)
/// at `now`, and writes the new states: an ordinary or partial charge only
/// if every limit admits it, a forced charge or a refund always; never for
/// DRYRUN or a peek. With `RESERVE`, see `reserve`; with a penalty, or on
/// a key in a block, see `penalty`.
pub fn decide<S: Store>(
    store: &mut S,
    policies: &[Policy],
    now: Micros,
    request: &Request,
) -> Result<Outcome, KeyError> {
    if request.penalty.is_some() {
        return penalty::decide(store, policies, now, request);
    }
    // A key in a block is no limit's state: found only by the error it
    // gives (`boxed_or`), so that other keys pay nothing for the check.
    match request.reserve {
        None => decide_now(store, policies, now, request, true),
        Some(most) => {
            let decided = reserve::decide(store, policies, now, request, most);
            if matches!(&decided, Err(e) if penalty::holds_block(store, e.key)) {
                return penalty::decide(store, policies, now, request);
            }
            decided
        }
    }
}

/// A state error `e` of [`decide_now`]; with `on_boxed`, a key in the
/// penalty box is decided as [`penalty`] decides it instead. Off the path
/// of every decision that reads its limits' own states.
#[cold]
#[inline(never)]
fn boxed_or<S: Store>(
    store: &mut S,
    policies: &[Policy],
    now: Micros,
    request: &Request,
    on_boxed: bool,
    e: KeyError,
) -> Result<Outcome, KeyError> {
    if on_boxed && penalty::holds_block(store, e.key) {
        return penalty::decide(store, policies, now, request);
    }
    Err(e)
}

/// [`decide`] without a penalty.
#[inline(always)]
fn decide_plain<S: Store>(
    store: &mut S,
    policies: &[Policy],
    now: Micros,
    request: &Request,
) -> Result<Outcome, KeyError> {
    match request.reserve {
        None => decide_now(store, policies, now, request, false),
        Some(most) => reserve::decide(store, policies, now, request, most),
    }
}

/// [`decide`] without `RESERVE`; `on_boxed`: a key in the penalty box is
/// decided as `penalty` decides it (see [`boxed_or`]).
#[inline(always)]
fn decide_now<S: Store>(
    store: &mut S,
    policies: &[Policy],
    now: Micros,
    request: &Request,
    on_boxed: bool,
) -> Result<Outcome, KeyError> {
    if let Some(path) = share::path(policies) {
        return share::decide(store, &path, now, request, None);
    }
    let state = |key: usize, policy: &Policy| {
        let command = policy.command();
        move |e| KeyError {
            key,
            error: Error::state(command, e),
        }
    };
    let mut granted = None;
    // PARTIAL: the most each limit alone admits now, up to the cost; the
    // call is granted the least of them.
    let mut alone: PerLimit<u64> = PerLimit::new();
    if request.charge == Charge::Partial {
        for (key, policy) in policies.iter().enumerate() {
            let stored = store.value(key).map_err(|error| KeyError { key, error })?;
            let most = match policy.admittable(stored, now, request.cost) {
                Ok(most) => most,
                Err(e) => {
                    let e = state(key, policy)(e);
                    return boxed_or(store, policies, now, request, on_boxed, e);
                }
            };
            alone.push(most);
        }
        granted = Some(alone.iter().copied().min().unwrap_or(0));
    }
    let mut decided = Outcome {
        allowed: true,
        blocked_by: None,
        retry_after: RetryAfter::NotNeeded,
        decisions: PerLimit::with_capacity(policies.len()),
        granted,
        units: PerLimit::with_capacity(policies.len()),
        leases: PerLimit::with_capacity(policies.len()),
        reservation: None,
        lender: None,
    };
    work::add(Work::Decisions, policies.len() as u64);
    let mut writes: PerLimit<Option<StateWrite>> = PerLimit::with_capacity(policies.len());
    // Whether a limit granted a lease (the store is told once written).
    let mut leased = false;
    for (key, policy) in policies.iter().enumerate() {
        let stored = store.value(key).map_err(|error| KeyError { key, error })?;
        let mut cost = request.cost_of(key);
        if request.charge == Charge::Partial {
            // Denied (nothing fits every limit): each limit's reply is what
            // it would answer alone, a request of what it alone grants.
            cost = match granted {
                Some(0) | None => alone.get(key).copied().unwrap_or(0).max(1),
                Some(m) => m,
            };
        }
        let transition = match request.charge {
            Charge::Normal | Charge::Partial => policy.decide(stored, now, cost),
            Charge::Refund => policy.refund(stored, now, cost),
            Charge::Force => match policy.force(stored, now, cost) {
                Ok(outcome) => Ok(outcome),
                Err(ForceError::State(e)) => Err(e),
                Err(ForceError::TooLarge) => {
                    return Err(KeyError {
                        key,
                        error: Error::ForceTooLarge(policy.command()),
                    })
                }
            },
            Charge::Peek => peek(policy, stored, now),
        };
        let Transition {
            decision,
            write,
            lease,
        } = match transition {
            Ok(t) => t,
            Err(e) => {
                let e = state(key, policy)(e);
                return boxed_or(store, policies, now, request, on_boxed, e);
            }
        };
        let units = match request.charge {
            Charge::Force if !decision.allowed => 1,
            Charge::Peek => 1,
            _ => cost,
        };
        decided.add(key, decision);
        decided.units.push(units);
        writes.push(write);
        let held = policy.holds_leases().then(|| {
            leased |= lease.is_some();
            lease
        });
        decided.leases.push(held);
    }
    let writes_state = match request.charge {
        Charge::Normal | Charge::Partial => decided.allowed,
        Charge::Force | Charge::Refund => true,
        Charge::Peek => false,
    };
    let written = writes_state && !request.dryrun;
    if written {
        write_all(store, &decided.decisions, &writes)?;
        if leased {
            record_grants(store, policies, now, &decided.leases);
        }
    } else {
        // Nothing written: no lease is held.
        for lease in decided.leases.iter_mut().flatten() {
            *lease = None;
        }
    }
    Ok(decided)
}

/// Takes back an admission of `request` (its client went away before the
/// reply could reach it, or it was only planned), given what its outcome
/// held (`Outcome::leases`, `Outcome::lender`): the cost refunded to every
/// rate limit, each of `leases` given back to its concurrency limit, and on
/// an RL.SHARE path the assured rates of `lender` and its ancestors as well
/// as the ceilings (without a lender, the ceilings only: the stricter side).
pub fn undo<S: Store>(
    store: &mut S,
    policies: &[Policy],
    now: Micros,
    request: &Request,
    leases: &[Option<Option<LeaseId>>],
    lender: Option<u16>,
) -> Result<(), KeyError> {
    let refund = Request {
        charge: Charge::Refund,
        dryrun: false,
        wait: None,
        reserve: None,
        ..request.clone()
    };
    match share::path(policies) {
        Some(path) => share::decide(store, &path, now, &refund, lender.map(usize::from))?,
        None => decide(store, policies, now, &refund)?,
    };
    for (key, lease) in leases.iter().enumerate() {
        let Some(Some(lease)) = lease else {
            continue;
        };
        let stored = store.value(key).map_err(|error| KeyError { key, error })?;
        let Some(value) = stored else {
            continue;
        };
        let released = crate::policy::release_lease(value, *lease, now).map_err(|e| KeyError {
            key,
            error: Error::state(policies[key].command(), e),
        })?;
        if let Some((write, ttl)) = released {
            crate::engine::store::write_one(store, key, &write, ttl)
                .map_err(|error| KeyError { key, error })?;
            store.lease(key, LeaseChange::Released(*lease));
        }
    }
    Ok(())
}

impl Outcome {
    /// Limit `key`'s decision as the reply states it. Every path that
    /// builds a denial (a limit, a debt, a waiting line) goes through this,
    /// so the reply keeps two promises whatever the path: a denial's wait
    /// is at least 1 µs (so at least 1 ms once rounded up), and a denial
    /// leaves fewer than its own units remaining: a denied request of one
    /// unit says 0, since another such request would be denied as well.
    pub fn reported(&self, key: usize) -> Option<Decision> {
        let d = *self.decisions.get(key)?;
        if d.allowed {
            return Some(d);
        }
        let units = self.units.get(key).copied().unwrap_or(0);
        Some(Decision {
            remaining: d.remaining.min(units.saturating_sub(1)),
            retry_after: at_least_a_microsecond(d.retry_after),
            ..d
        })
    }

    /// The call's wait as the reply states it (see [`Outcome::reported`]).
    pub fn reported_retry_after(&self) -> RetryAfter {
        if self.allowed {
            return self.retry_after;
        }
        at_least_a_microsecond(self.retry_after)
    }

    /// Takes limit `key`'s decision into the combined answer: denied if
    /// any limit denies, and the limit that blocks is the one that decides
    /// the wait: the first that can never admit, else the first with the
    /// longest wait.
    fn add(&mut self, key: usize, decision: Decision) {
        if !decision.allowed {
            let decides = match (self.retry_after, decision.retry_after) {
                // The first denial, or the first that never admits.
                (RetryAfter::NotNeeded, _) => true,
                (RetryAfter::Never, _) => false,
                (_, RetryAfter::Never) => true,
                (RetryAfter::After(a), RetryAfter::After(b)) => b > a,
                (RetryAfter::After(_), RetryAfter::NotNeeded) => false,
            };
            if decides {
                self.blocked_by = Some(key);
                self.retry_after = match decision.retry_after {
                    // A denial always says how long; never zero.
                    RetryAfter::NotNeeded => RetryAfter::After(Micros::ZERO),
                    wait => wait,
                };
            }
            self.allowed = false;
        }
        self.decisions.push(decision);
    }
}

/// A denial's wait: "now" (a waiter that may retry at once) is 1 µs, so
/// that no denial tells its client to come back after no time at all.
fn at_least_a_microsecond(retry: RetryAfter) -> RetryAfter {
    match retry {
        RetryAfter::After(wait) => RetryAfter::After(wait.max(Micros::new(1))),
        other => other,
    }
}

/// A look that writes nothing: whether a request of one unit would be
/// admitted (and when, if not), with `remaining` the most one request
/// could take now and `reset_after` that of the state as it is.
fn peek(policy: &Policy, stored: Option<&[u8]>, now: Micros) -> Result<Transition, StateError> {
    let one = policy.decision(stored, now, 1)?;
    let look = policy.decision(stored, now, 0)?;
    let decision = Decision {
        allowed: one.allowed,
        retry_after: one.retry_after,
        remaining: policy.admittable(stored, now, u64::MAX)?,
        ..look
    };
    Ok(Transition {
        decision,
        write: None,
        lease: None,
    })
}

/// Tells the store of the leases a written decision granted.
#[cold]
#[inline(never)]
fn record_grants<S: Store>(
    store: &mut S,
    policies: &[Policy],
    now: Micros,
    leases: &[Option<Option<LeaseId>>],
) {
    for (key, lease) in leases.iter().enumerate() {
        let (Some(Some(lease)), Some(deadline)) = (lease, policies[key].lease_deadline(now)) else {
            continue;
        };
        let lease = *lease;
        store.lease(key, LeaseChange::Granted { lease, deadline });
    }
}

/// Prepares every write, then commits them, each with a TTL of its own
/// decision's reset: a key that cannot be written leaves every key as it
/// was.
fn write_all<S: Store + ?Sized>(
    store: &mut S,
    decisions: &[Decision],
    writes: &[Option<StateWrite>],
) -> Result<(), KeyError> {
    let each = || {
        writes
            .iter()
            .enumerate()
            .filter_map(|(key, w)| w.as_ref().map(|w| (key, w)))
    };
    for (key, write) in each() {
        if let Err(error) = store.prepare(key, write) {
            for (done, _) in each().take_while(|(k, _)| *k < key) {
                store.abandon(done);
            }
            return Err(KeyError { key, error });
        }
    }
    for (key, write) in each() {
        store.commit(key, write, decisions[key].reset_after);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::fixed_window::FixedWindow;
    use crate::algorithm::gcra::Gcra;
    use crate::algorithm::sliding_log::SlidingLog;
    use crate::engine::store::MemoryStore;

    const S: u64 = 1_000_000;

    fn gcra(limit: u64) -> Policy {
        Policy::Gcra(Gcra::new(limit, Micros::new(10 * S), limit).unwrap())
    }

    fn fixed(limit: u64) -> Policy {
        Policy::Fixed(FixedWindow::new(limit, Micros::new(60 * S), false))
    }

    fn run(store: &mut MemoryStore, policies: &[Policy], cost: u64, dryrun: bool) -> Outcome {
        decide(
            store,
            policies,
            Micros::new(100 * S),
            &Request {
                cost,
                dryrun,
                ..Request::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn a_single_key_writes_with_the_ttl_of_its_reset() {
        let mut store = MemoryStore::new(1);
        let d = run(&mut store, &[gcra(10)], 1, false);
        assert!(d.allowed);
        assert_eq!(d.blocked_by, None);
        assert_eq!(d.retry_after, RetryAfter::NotNeeded);
        // 10 per 10 s: one request takes 1 s to drain.
        assert_eq!(store.ttls[0], Some(Micros::new(S)));
        assert_eq!(store.effects.len(), 1);
        assert!(store.values[0].is_some());
    }

    #[test]
    fn all_or_nothing_and_a_denial_writes_nothing() {
        let mut store = MemoryStore::new(2);
        let policies = [gcra(10), fixed(1)];
        assert!(run(&mut store, &policies, 1, false).allowed);
        let before = store.clone();
        let d = run(&mut store, &policies, 1, false);
        assert!(!d.allowed);
        assert_eq!(d.blocked_by, Some(1));
        // 60 s window begun at the first request.
        assert_eq!(d.retry_after, RetryAfter::After(Micros::new(60 * S)));
        // The GCRA limit admitted, but nothing was charged.
        assert!(d.decisions[0].allowed);
        assert_eq!(store, before);
    }

    #[test]
    fn never_is_the_combined_wait_when_one_limit_can_never_admit() {
        let mut store = MemoryStore::new(2);
        let d = run(&mut store, &[gcra(1), gcra(10)], 5, false);
        assert_eq!(d.retry_after, RetryAfter::Never);
        assert_eq!(d.blocked_by, Some(0));
        assert!(store.effects.is_empty());
    }

    #[test]
    fn the_blocking_limit_is_the_one_that_decides_the_wait() {
        // Limit 0 denies with a wait, limit 1 can never admit 3: limit 1
        // decides the wait, so it blocks.
        let mut store = MemoryStore::new(2);
        assert!(run(&mut store, &[fixed(5), gcra(10)], 3, false).allowed);
        let d = run(&mut store, &[fixed(5), gcra(2)], 3, false);
        assert!(matches!(d.decisions[0].retry_after, RetryAfter::After(_)));
        assert_eq!((d.blocked_by, d.retry_after), (Some(1), RetryAfter::Never));
        // Otherwise the longest wait blocks; on a tie, the first.
        for (policies, blocked_by) in [
            ([fixed(1), gcra(1), fixed(1)], 0),
            ([gcra(1), fixed(1), gcra(1)], 1),
        ] {
            let mut store = MemoryStore::new(3);
            assert!(run(&mut store, &policies, 1, false).allowed);
            let d = run(&mut store, &policies, 1, false);
            // The fixed windows wait 60 s, the GCRA limits 10 s.
            assert_eq!(d.blocked_by, Some(blocked_by));
            assert_eq!(d.retry_after, RetryAfter::After(Micros::new(60 * S)));
        }
    }

    #[test]
    fn dryrun_and_cost_zero_write_nothing() {
        let mut store = MemoryStore::new(2);
        let policies = [
            gcra(10),
            Policy::SlidingLog(SlidingLog::new(3, Micros::new(60 * S))),
        ];
        let d = run(&mut store, &policies, 1, true);
        assert!(d.allowed);
        assert_eq!(d.decisions[1].remaining, 2);
        let d = run(&mut store, &policies, 0, false);
        assert!(d.allowed);
        assert_eq!(d.decisions[1].remaining, 3);
        assert_eq!(store, MemoryStore::new(2));
    }

    #[test]
    fn each_write_expires_with_its_own_reset() {
        let mut store = MemoryStore::new(2);
        run(&mut store, &[gcra(10), fixed(5)], 2, false);
        assert_eq!(
            store.ttls,
            [Some(Micros::new(2 * S)), Some(Micros::new(60 * S))]
        );
    }

    #[test]
    fn a_key_that_cannot_be_written_leaves_every_key_as_it_was() {
        let mut store = MemoryStore::new(3);
        store.fail_prepare = Some(2);
        let policies = [gcra(10), fixed(5), gcra(3)];
        let err = decide(&mut store, &policies, Micros::new(S), &Request::default()).unwrap_err();
        assert_eq!(err.key, 2);
        assert!(matches!(err.error, Error::WriteFailed(_)));
        assert_eq!(store.values, [None, None, None]);
        assert!(store.effects.is_empty());
        assert!(
            store.prepared.is_empty(),
            "every prepared key was abandoned"
        );
    }

    fn charge(charge: Charge, cost: u64, costs: Option<Vec<u64>>) -> Request {
        Request {
            cost,
            costs,
            charge,
            dryrun: false,
            wait: None,
            flow: None,
            reserve: None,
            jitter: false,
            penalty: None,
        }
    }

    #[test]
    fn partial_grants_the_most_every_limit_admits() {
        let mut store = MemoryStore::new(2);
        let policies = [gcra(10), fixed(4)];
        let now = Micros::new(100 * S);
        let d = decide(
            &mut store,
            &policies,
            now,
            &charge(Charge::Partial, 7, None),
        )
        .unwrap();
        assert_eq!((d.allowed, d.granted), (true, Some(4)));
        assert_eq!([d.decisions[0].remaining, d.decisions[1].remaining], [6, 0]);
        let before = store.clone();
        let d = decide(
            &mut store,
            &policies,
            now,
            &charge(Charge::Partial, 7, None),
        )
        .unwrap();
        assert_eq!(
            (d.allowed, d.granted, d.blocked_by),
            (false, Some(0), Some(1))
        );
        assert_eq!(store, before, "a denied PARTIAL writes nothing");
    }

    #[test]
    fn a_denied_partial_replies_for_each_limit_what_it_alone_would() {
        let mut store = MemoryStore::new(2);
        let policies = [gcra(10), fixed(1)];
        let now = Micros::new(100 * S);
        assert!(run(&mut store, &policies, 1, false).allowed);
        let d = decide(
            &mut store,
            &policies,
            now,
            &charge(Charge::Partial, 5, None),
        )
        .unwrap();
        assert_eq!((d.allowed, d.granted), (false, Some(0)));
        // Alone, the GCRA limit would grant 5 of its 9: its reply is that.
        let alone = decide(
            &mut store,
            &policies[..1],
            now,
            &Request {
                dryrun: true,
                ..charge(Charge::Partial, 5, None)
            },
        )
        .unwrap();
        assert_eq!(alone.granted, Some(5));
        assert_eq!(d.reported(0), alone.reported(0));
        assert_eq!(d.reported(0).unwrap().remaining, 4);
        assert_eq!(d.units.as_slice(), [5, 1]);
    }

    #[test]
    fn a_reported_denial_waits_at_least_1_us_and_leaves_fewer_than_its_units() {
        let mut store = MemoryStore::new(1);
        let policies = [gcra(10)];
        let mut d = run(&mut store, &policies, 0, false);
        // As the waiting line builds it: a look (0 units) turned into a
        // denial that may retry at once.
        d.allowed = false;
        d.retry_after = RetryAfter::After(Micros::ZERO);
        d.decisions[0].allowed = false;
        d.decisions[0].retry_after = RetryAfter::After(Micros::ZERO);
        let r = d.reported(0).unwrap();
        assert_eq!(
            (r.remaining, r.retry_after),
            (0, RetryAfter::After(Micros::new(1)))
        );
        assert_eq!(d.reported_retry_after(), RetryAfter::After(Micros::new(1)));
        // A denial of 3 units may leave 2 (but the limit's 10 do not).
        d.units[0] = 3;
        assert_eq!(d.reported(0).unwrap().remaining, 2);
        // An admission is reported as decided.
        let ok = run(&mut store, &policies, 1, false);
        assert_eq!(ok.reported(0), Some(ok.decisions[0]));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// Whatever the history (clock steps back included) and however
        /// short the wait, a reported denial says at least 1 ms once
        /// rounded up (or never), and leaves fewer than its cost remaining.
        #[test]
        fn every_reported_denial_waits_at_least_1_ms_and_leaves_less_than_its_cost(
            limit in 1u64..20, period_us in 1u64..5_000, burst in 1u64..5,
            steps in proptest::collection::vec((0u64..3_000, proptest::bool::ANY, 0u64..6), 1..40),
        ) {
            let policies = [
                Policy::Gcra(Gcra::new(limit, Micros::new(period_us), burst).unwrap()),
                fixed(burst),
            ];
            let mut store = MemoryStore::new(2);
            let mut now = 1u64 << 40;
            for (dt, back, cost) in steps {
                now = if back { now - dt } else { now + dt };
                let request = Request { cost, ..Request::default() };
                let d = decide(&mut store, &policies, Micros::new(now), &request).unwrap();
                for key in 0..2 {
                    let r = d.reported(key).unwrap();
                    if r.allowed {
                        continue;
                    }
                    proptest::prop_assert!(r.remaining < cost || r.retry_after == RetryAfter::Never);
                    if let RetryAfter::After(wait) = r.retry_after {
                        proptest::prop_assert!(wait.ceil_millis() >= 1);
                    }
                }
                if let RetryAfter::After(wait) = d.reported_retry_after() {
                    proptest::prop_assert!(wait.ceil_millis() >= 1);
                }
            }
        }
    }

    #[test]
    fn force_writes_every_key_and_refund_writes_only_what_changes() {
        let mut store = MemoryStore::new(2);
        let policies = [gcra(10), fixed(4)];
        let now = Micros::new(100 * S);
        let forced = charge(Charge::Force, 0, Some(vec![2, 6]));
        let d = decide(&mut store, &policies, now, &forced).unwrap();
        assert_eq!((d.allowed, d.blocked_by), (false, Some(1)));
        assert_eq!(store.effects.len(), 2, "both keys written, fitted or not");
        let d = decide(&mut store, &policies, now, &Request::default()).unwrap();
        assert!(!d.allowed);
        // Give back 2 to each: the fixed window still holds 4 of 4.
        let refund = charge(Charge::Refund, 2, None);
        let d = decide(&mut store, &policies, now, &refund).unwrap();
        assert!(d.allowed);
        assert_eq!(
            [d.decisions[0].remaining, d.decisions[1].remaining],
            [10, 0]
        );
        // Nothing to give back to a missing key: nothing written.
        let mut empty = MemoryStore::new(2);
        let refund = charge(Charge::Refund, 3, None);
        decide(&mut empty, &policies, now, &refund).unwrap();
        assert_eq!(empty, MemoryStore::new(2));
    }

    #[test]
    fn a_peek_never_writes() {
        let mut store = MemoryStore::new(1);
        let now = Micros::new(100 * S);
        run(&mut store, &[fixed(4)], 3, false);
        let before = store.clone();
        let d = decide(&mut store, &[fixed(4)], now, &charge(Charge::Peek, 1, None)).unwrap();
        assert_eq!((d.allowed, d.decisions[0].remaining), (true, 1));
        assert_eq!(store, before);
    }

    #[test]
    fn state_errors_name_their_key() {
        let mut store = MemoryStore::new(2);
        store.values[1] = Some(b"not ours".to_vec());
        let err = decide(
            &mut store,
            &[gcra(1), gcra(1)],
            Micros::ZERO,
            &Request::default(),
        )
        .unwrap_err();
        assert_eq!(err.key, 1);
        assert_eq!(
            err.error.to_string(),
            "WRONGTYPE key holds a string that is not RL.GCRA state"
        );
    }
}
