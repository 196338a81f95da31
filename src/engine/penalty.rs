//! The penalty box: what a denial costs its key, in one of two forms.
//!
//! - `BLOCK duration`: a request denied with a wait begins a block: its
//!   keys that denied answer denied until `duration` after that denial,
//!   whatever is asked (requests during it do not extend it), each reply's
//!   wait the block's end (or the limit's own, if later). It is written in
//!   the key, before the limit's state (`codec::block`), with the key's TTL
//!   at least the block's end, and replicated as the write it is.
//! - `COUNTDENIALS maxdebt`: a denied request is charged too, as `FORCE`
//!   charges it, so that a client hammering digs deeper; but only while
//!   the wait it then leaves is at most `maxdebt` (one already waiting that
//!   long is left as it is): a client that stops is
//!   admitted again within `maxdebt` (or the limit's own wait, if longer).
//!
//! A running block is honoured by every request on its key, with the
//! option or without (a look, RL.PEEK, sees it), but for `REFUND`, which
//! gives back to the limit and leaves the block. A denial that can never
//! be admitted (a cost above the limit), a DRYRUN, and FORCE, PARTIAL or
//! REFUND begin no block and charge nothing more.
//!
//! Cost: a request without a penalty on a key never boxed pays one test of
//! its option; a boxed key is found by the error its header gives a limit
//! (`holds_block`), off the path of every other key.

use super::store::Store;
use super::{decide_plain, write_all, Charge, KeyError, Outcome, PerLimit, Request, Reservation};
use crate::algorithm::{Decision, Micros, RetryAfter};
use crate::codec::{block, StateError};
use crate::engine::error::Error;
use crate::policy::{ForceError, Policy, StateWrite};

/// The options, as the grammar names them.
pub const BLOCK: &str = "BLOCK";
pub const COUNT_DENIALS: &str = "COUNTDENIALS";

/// What a denial costs its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Penalty {
    /// `BLOCK duration`: denied for `duration` from the denial.
    Block(Micros),
    /// `COUNTDENIALS maxdebt`: denials charged while the wait they leave
    /// is at most `maxdebt`.
    Count(Micros),
}

impl Penalty {
    /// The option that asks for it.
    pub fn option(self) -> &'static str {
        match self {
            Penalty::Block(_) => BLOCK,
            Penalty::Count(_) => COUNT_DENIALS,
        }
    }

    /// As RL.PENALIZED names the form.
    pub fn form(self) -> &'static str {
        match self {
            Penalty::Block(_) => "block",
            Penalty::Count(_) => "count",
        }
    }
}

/// What a penalty did on a key, as the store is told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A block began; it ends at `end` (limiter clock).
    Began { end: Micros },
    /// A request was denied by a running block (told for its first key).
    Held,
    /// A denied request was charged; its debt is waited off at `end`.
    Charged { end: Micros },
}

/// Whether key `key` of `store` holds a block's header (running or not).
pub fn holds_block<S: Store + ?Sized>(store: &S, key: usize) -> bool {
    matches!(store.value(key), Ok(Some(v)) if block::is_boxed(v))
}

/// Decides `request` on keys that may be boxed, or with a penalty. The
/// store is a trait object: the decision path it runs again through the
/// view may come back here, and one instance serves every depth.
#[inline(never)]
pub(super) fn decide(
    store: &mut dyn Store,
    policies: &[Policy],
    now: Micros,
    request: &Request,
) -> Result<Outcome, KeyError> {
    if let Some(Penalty::Count(_)) = request.penalty {
        // Refused before anything is read or written.
        if let Some(key) = policies.iter().position(|p| !p.holds_debt()) {
            return Err(KeyError {
                key,
                error: Error::Combination {
                    option: COUNT_DENIALS,
                    with: policies[key].command(),
                },
            });
        }
    }
    let mut ends: PerLimit<Option<Micros>> = PerLimit::with_capacity(policies.len());
    for (key, policy) in policies.iter().enumerate() {
        let value = store.value(key).map_err(|error| KeyError { key, error })?;
        // A header cut short, or a header behind a header, is no state.
        let end = match value {
            Some(v) if block::is_boxed(v) => Some(
                block::decode(v)
                    .filter(|(_, inner)| !inner.is_some_and(block::is_boxed))
                    .ok_or_else(|| KeyError {
                        key,
                        error: Error::state(policy.command(), StateError::Corrupt(policy.kind())),
                    })?,
            ),
            _ => None,
        };
        ends.push(end.map(|(end, _)| end));
    }
    let mut view = Boxed { store, ends, now };
    if request.charge != Charge::Refund && view.any_running() {
        return held(&mut view, policies, now, request);
    }
    let mut decided = decide_plain(&mut view, policies, now, request)?;
    let Some(penalty) = request.penalty else {
        return Ok(decided);
    };
    if decided.allowed || request.dryrun || request.charge != Charge::Normal {
        return Ok(decided);
    }
    match penalty {
        Penalty::Block(duration) => begin(&mut view, now, duration, &mut decided)?,
        Penalty::Count(most) => charge(&mut view, policies, now, request, most, &mut decided)?,
    }
    Ok(decided)
}

/// A limit's decision on a key in a block with `left` to run: denied,
/// nothing remaining, waiting until the block's end (or the limit's own
/// wait, if later).
fn blocked(d: Decision, left: Micros) -> Decision {
    Decision {
        allowed: false,
        remaining: 0,
        retry_after: match d.retry_after {
            RetryAfter::Never => RetryAfter::Never,
            RetryAfter::After(w) => RetryAfter::After(w.max(left)),
            RetryAfter::NotNeeded => RetryAfter::After(left),
        },
        reset_after: d.reset_after.max(left),
        limit: d.limit,
    }
}

/// A request on keys of which one at least is in a running block: denied,
/// nothing written; each other key's decision as a dry run would say it.
fn held(
    view: &mut Boxed<'_>,
    policies: &[Policy],
    now: Micros,
    request: &Request,
) -> Result<Outcome, KeyError> {
    let n = policies.len();
    let mut out = Outcome {
        allowed: true,
        blocked_by: None,
        retry_after: RetryAfter::NotNeeded,
        decisions: PerLimit::with_capacity(n),
        granted: (request.charge == Charge::Partial).then_some(0),
        units: PerLimit::with_capacity(n),
        leases: PerLimit::with_capacity(n),
        reservation: request.reserve.map(|_| Reservation::Denied),
        lender: None,
    };
    let mut first = None;
    for (key, policy) in policies.iter().enumerate() {
        let stored = view.value(key).map_err(|error| KeyError { key, error })?;
        let state = |e| KeyError {
            key,
            error: Error::state(policy.command(), e),
        };
        let (mut decision, units) = match request.charge {
            Charge::Peek => (super::peek(policy, stored, now).map_err(state)?.decision, 1),
            _ => {
                let cost = request.cost_of(key);
                (policy.decision(stored, now, cost).map_err(state)?, cost)
            }
        };
        if let Some(end) = view.ends[key].filter(|&end| end > now) {
            decision = blocked(decision, end.saturating_sub(now));
            first.get_or_insert(key);
        }
        out.add(key, decision);
        out.units.push(units);
        out.leases.push(policy.holds_leases().then_some(None));
    }
    if let (Some(key), false) = (first, request.charge == Charge::Peek) {
        view.store.penalized(key, Event::Held);
    }
    Ok(out)
}

/// Begins a block of `duration` on every key whose limit denied `decided`
/// with a wait: its header written before its state, all or nothing.
fn begin(
    view: &mut Boxed<'_>,
    now: Micros,
    duration: Micros,
    decided: &mut Outcome,
) -> Result<(), KeyError> {
    let end = now.saturating_add(duration);
    let mut writes: PerLimit<Option<StateWrite>> = PerLimit::with_capacity(decided.decisions.len());
    let mut ttls: PerLimit<Decision> = PerLimit::with_capacity(decided.decisions.len());
    for (key, d) in decided.decisions.iter().enumerate() {
        let write = begins(d).then(|| -> Result<StateWrite, KeyError> {
            let inner = view.value(key).map_err(|error| KeyError { key, error })?;
            Ok(StateWrite::Value(block::encode(end, inner)))
        });
        writes.push(write.transpose()?);
        ttls.push(blocked(*d, duration));
    }
    // Written as they are: the header is in the value.
    write_all(view.store, &ttls, &writes)?;
    for (key, write) in writes.iter().enumerate() {
        if write.is_some() {
            decided.decisions[key] = ttls[key];
            view.store.penalized(key, Event::Began { end });
        }
    }
    recombine(decided);
    Ok(())
}

/// Whether a limit's denial costs its key: denied with a wait (never an
/// admission, never a request that no wait admits).
fn begins(d: &Decision) -> bool {
    !d.allowed && matches!(d.retry_after, RetryAfter::After(_))
}

/// Charges the denied `request` to every key whose limit denied it with a
/// wait, as `FORCE` would, where the wait the charge leaves is at most
/// `most`; all or nothing.
fn charge(
    view: &mut Boxed<'_>,
    policies: &[Policy],
    now: Micros,
    request: &Request,
    most: Micros,
    decided: &mut Outcome,
) -> Result<(), KeyError> {
    let n = policies.len();
    let mut writes: PerLimit<Option<StateWrite>> = PerLimit::with_capacity(n);
    let mut after: PerLimit<Decision> = PerLimit::with_capacity(n);
    for (key, policy) in policies.iter().enumerate() {
        let d = decided.decisions[key];
        // A charge never shortens a wait: one already at the bound is left
        // as it is, without working out the charge.
        let at_bound = matches!(d.retry_after, RetryAfter::After(w) if w >= most);
        if !begins(&d) || at_bound {
            writes.push(None);
            after.push(d);
            continue;
        }
        let stored = view.value(key).map_err(|error| KeyError { key, error })?;
        let forced = match policy.force(stored, now, request.cost_of(key)) {
            Ok(t) => Some(t),
            // More than the limit can represent: a debt it cannot hold.
            Err(ForceError::TooLarge) => None,
            Err(ForceError::State(e)) => {
                return Err(KeyError {
                    key,
                    error: Error::state(policy.command(), e),
                })
            }
        };
        let within = |t: &crate::policy::Transition| matches!(t.decision.retry_after, RetryAfter::After(w) if w <= most);
        match forced.filter(within) {
            Some(t) if t.write.is_some() => {
                writes.push(t.write);
                after.push(t.decision);
            }
            _ => {
                writes.push(None);
                after.push(d);
            }
        }
    }
    write_all(view, &after, &writes)?;
    for (key, write) in writes.iter().enumerate() {
        if write.is_some() {
            let RetryAfter::After(wait) = after[key].retry_after else {
                continue;
            };
            decided.decisions[key] = after[key];
            view.store.penalized(
                key,
                Event::Charged {
                    end: now.saturating_add(wait),
                },
            );
        }
    }
    recombine(decided);
    Ok(())
}

/// The combined answer again, after some limits' decisions changed.
fn recombine(out: &mut Outcome) {
    let decisions = std::mem::take(&mut out.decisions);
    out.allowed = true;
    out.blocked_by = None;
    out.retry_after = RetryAfter::NotNeeded;
    for (key, d) in decisions.into_iter().enumerate() {
        out.add(key, d);
    }
}

/// The keys of a call seen past their blocks' headers: each limit reads
/// its own state, and what it writes keeps a running block's header (a
/// whole value behind it, a patch shifted past it, a deletion as the
/// header alone) and a TTL to its end at least. An ended block's header
/// goes with the next whole value written.
struct Boxed<'s> {
    store: &'s mut dyn Store,
    /// Per key, the end of the block its header holds.
    ends: PerLimit<Option<Micros>>,
    now: Micros,
}

impl Boxed<'_> {
    /// Whether a key is in a running block.
    fn any_running(&self) -> bool {
        self.ends
            .iter()
            .any(|e| e.is_some_and(|end| end > self.now))
    }

    /// `write` as the boxed key `key` takes it; `None`: as it is.
    fn through(&self, key: usize, write: &StateWrite) -> Option<StateWrite> {
        let end = self.ends.get(key).copied().flatten()?;
        let running = end > self.now;
        Some(match write {
            StateWrite::Patch(p) => StateWrite::Patch(p.shifted(block::HEADER)),
            StateWrite::Value(v) if running => StateWrite::Value(block::encode(end, Some(v))),
            StateWrite::Delete if running => StateWrite::Value(block::encode(end, None)),
            StateWrite::Value(_) | StateWrite::Delete => return None,
        })
    }
}

impl Store for Boxed<'_> {
    fn value(&self, key: usize) -> Result<Option<&[u8]>, Error> {
        let value = self.store.value(key)?;
        if self.ends.get(key).copied().flatten().is_none() {
            return Ok(value);
        }
        Ok(value.and_then(block::decode).and_then(|(_, inner)| inner))
    }

    fn prepare(&mut self, key: usize, write: &StateWrite) -> Result<(), Error> {
        match self.through(key, write) {
            Some(w) => self.store.prepare(key, &w),
            None => self.store.prepare(key, write),
        }
    }

    fn abandon(&mut self, key: usize) {
        self.store.abandon(key);
    }

    fn commit(&mut self, key: usize, write: &StateWrite, ttl: Micros) {
        let ttl = match self.ends.get(key).copied().flatten() {
            Some(end) if end > self.now => ttl.max(end.saturating_sub(self.now)),
            _ => ttl,
        };
        match self.through(key, write) {
            Some(w) => self.store.commit(key, &w, ttl),
            None => self.store.commit(key, write, ttl),
        }
    }

    fn penalized(&mut self, key: usize, event: Event) {
        self.store.penalized(key, event);
    }
}

pub mod listing;
#[cfg(test)]
mod tests;
