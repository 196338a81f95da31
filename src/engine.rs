//! The one decision path of every RL.* decision command, single-key or
//! RL.ALL: every limit decides against the same clock reading; only if all
//! admit is any state written (unless DRYRUN), each key with a TTL of its
//! own decision's reset, all or nothing.

use crate::algorithm::{Decision, Micros, RetryAfter};
use crate::error::Error;
use crate::policy::{Outcome, Policy};
use crate::store::Store;

/// What a call asks for besides its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Units to charge; 0 looks without charging.
    pub cost: u64,
    /// Decide, write nothing.
    pub dryrun: bool,
}

impl Default for Request {
    fn default() -> Request {
        Request {
            cost: 1,
            dryrun: false,
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
pub struct Decided {
    pub allowed: bool,
    /// 0-based index of the first limit that denied.
    pub blocked_by: Option<usize>,
    /// The wait until every limit would admit: `NotNeeded` if allowed,
    /// `Never` if one limit never will.
    pub retry_after: RetryAfter,
    /// One decision per limit, in key order.
    pub decisions: Vec<Decision>,
}

/// Decides `request` under `policies` (policy `i` over key `i` of `store`)
/// at `now`, and writes the new states if every limit admits.
pub fn decide<S: Store>(
    store: &mut S,
    policies: &[Policy],
    now: Micros,
    request: Request,
) -> Result<Decided, KeyError> {
    let mut outcomes = Vec::with_capacity(policies.len());
    for (key, policy) in policies.iter().enumerate() {
        let at = |error| KeyError { key, error };
        let stored = store.value(key).map_err(at)?;
        let outcome = policy
            .decide(stored, now.get(), request.cost)
            .map_err(|e| at(Error::state(policy.command(), e)))?;
        outcomes.push(outcome);
    }
    let decided = combine(&outcomes);
    if decided.allowed && !request.dryrun {
        write_all(store, &outcomes)?;
    }
    Ok(decided)
}

/// Prepares every write, then commits them: a key that cannot be written
/// leaves every key as it was.
fn write_all<S: Store>(store: &mut S, outcomes: &[Outcome]) -> Result<(), KeyError> {
    let writes = || {
        outcomes
            .iter()
            .enumerate()
            .filter_map(|(key, o)| o.write.as_ref().map(|w| (key, w, o)))
    };
    for (key, write, _) in writes() {
        if let Err(error) = store.prepare(key, write) {
            for (done, _, _) in writes().take_while(|(k, _, _)| *k < key) {
                store.abandon(done);
            }
            return Err(KeyError { key, error });
        }
    }
    for (key, write, outcome) in writes() {
        store.commit(key, write, Micros::new(outcome.decision.reset_after_us));
    }
    Ok(())
}

fn combine(outcomes: &[Outcome]) -> Decided {
    let decisions: Vec<Decision> = outcomes.iter().map(|o| o.decision).collect();
    let denied = || decisions.iter().filter(|d| !d.allowed);
    let blocked_by = decisions.iter().position(|d| !d.allowed);
    let retry_after = if blocked_by.is_none() {
        RetryAfter::NotNeeded
    } else if denied().any(|d| d.retry_after == RetryAfter::Never) {
        RetryAfter::Never
    } else {
        let longest = denied()
            .filter_map(|d| match d.retry_after {
                RetryAfter::After(us) => Some(us),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        RetryAfter::After(longest)
    };
    Decided {
        allowed: blocked_by.is_none(),
        blocked_by,
        retry_after,
        decisions,
    }
}
