//! The one decision path of every RL.* decision command, single-key or
//! RL.ALL: every limit decides against the same clock reading; only if all
//! admit is any state written (unless DRYRUN), each key with a TTL of its
//! own decision's reset, all or nothing.

use crate::algorithm::concurrency::LeaseId;
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
    /// `WAIT timeout`: if denied, wait up to this long to be admitted
    /// (first come, first served; see `waitqueue`). `decide` itself never
    /// waits.
    pub wait: Option<Micros>,
}

impl Default for Request {
    fn default() -> Request {
        Request {
            cost: 1,
            dryrun: false,
            wait: None,
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
    /// Per limit, in key order: `None` for a limit without leases; for a
    /// concurrency limit, the lease it now holds (`Some(None)` when denied
    /// or a dry run).
    pub leases: Vec<Option<Option<LeaseId>>>,
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
            .decide(stored, now, request.cost)
            .map_err(|e| at(Error::state(policy.command(), e)))?;
        outcomes.push(outcome);
    }
    let mut decided = combine(&outcomes);
    let written = decided.allowed && !request.dryrun;
    if written {
        write_all(store, &outcomes)?;
    }
    decided.leases = policies
        .iter()
        .zip(&outcomes)
        .map(|(p, o)| p.holds_leases().then(|| o.lease.filter(|_| written)))
        .collect();
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
        store.commit(key, write, outcome.decision.reset_after);
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
            .unwrap_or(Micros::ZERO);
        RetryAfter::After(longest)
    };
    Decided {
        allowed: blocked_by.is_none(),
        blocked_by,
        retry_after,
        leases: Vec::new(),
        decisions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::fixed_window::FixedWindow;
    use crate::algorithm::gcra::Gcra;
    use crate::algorithm::sliding_log::SlidingLog;
    use crate::store::MemoryStore;

    const S: u64 = 1_000_000;

    fn gcra(limit: u64) -> Policy {
        Policy::Gcra(Gcra::new(limit, Micros::new(10 * S), limit).unwrap())
    }

    fn fixed(limit: u64) -> Policy {
        Policy::Fixed(FixedWindow::new(limit, Micros::new(60 * S), false))
    }

    fn run(store: &mut MemoryStore, policies: &[Policy], cost: u64, dryrun: bool) -> Decided {
        decide(
            store,
            policies,
            Micros::new(100 * S),
            Request {
                cost,
                dryrun,
                wait: None,
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
        let err = decide(&mut store, &policies, Micros::new(S), Request::default()).unwrap_err();
        assert_eq!(err.key, 2);
        assert!(matches!(err.error, Error::WriteFailed(_)));
        assert_eq!(store.values, [None, None, None]);
        assert!(store.effects.is_empty());
        assert!(
            store.prepared.is_empty(),
            "every prepared key was abandoned"
        );
    }

    #[test]
    fn state_errors_name_their_key() {
        let mut store = MemoryStore::new(2);
        store.values[1] = Some(b"not ours".to_vec());
        let err = decide(
            &mut store,
            &[gcra(1), gcra(1)],
            Micros::ZERO,
            Request::default(),
        )
        .unwrap_err();
        assert_eq!(err.key, 1);
        assert_eq!(
            err.error.to_string(),
            "WRONGTYPE key holds a string that is not RL.GCRA state"
        );
    }
}
