//! A limit of any algorithm, as one value: what RL.ALL combines and what the
//! window commands decide through. Pure: bytes in, decision and bytes out.

use crate::algorithm::concurrency::{Concurrency, LeaseId};
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::schedule::Tat;
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_subwindows::SlidingSubwindows;
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::{Decision, Micros};
use crate::codec::lease::{self, StoredLeases};
use crate::codec::window::{self, StoredSlidingLog};
use crate::codec::{self, Kind, Patch, StateError, TAT_MAX_LEN};

/// One parsed limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    Gcra(Gcra),
    Bucket(TokenBucket),
    /// RL.SLIDING EXACT: the sliding log.
    SlidingLog(SlidingLog),
    /// RL.SLIDING APPROX: the two-window estimate.
    SlidingApprox(SlidingApprox),
    /// RL.SLIDING BUCKETS n.
    SlidingSubwindows(SlidingSubwindows),
    /// RL.FIXED [ALIGNED].
    Fixed(FixedWindow),
    /// RL.ACQUIRE; RL.ALL's CONCURRENCY.
    Concurrency(Concurrency),
}

/// How a decision changes the stored value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateWrite {
    /// Replace the whole value (replicated as `SET key value PXAT t`).
    Value(Vec<u8>),
    /// Change the value in place ([`Patch`]), replicated as `SETRANGE`s and
    /// one `PEXPIREAT`: what one request sends to replicas then does not
    /// grow with the size of the state. Only for a key that already holds
    /// this policy's state.
    Patch(Patch),
}

impl StateWrite {
    /// Applies the write to a value as Redis does (`SET`, or `SETRANGE`
    /// growing the value with zeros): for tests and benches of the core.
    pub fn apply_to(&self, state: &mut Option<Vec<u8>>) {
        match self {
            StateWrite::Value(v) => *state = Some(v.clone()),
            StateWrite::Patch(patch) => patch.apply_to(state.get_or_insert_with(Vec::new)),
        }
    }
}

/// A decision and, when the state changes, the write to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    pub write: Option<StateWrite>,
    /// The lease an admitted concurrency request holds once written.
    pub lease: Option<LeaseId>,
}

impl Policy {
    /// The state kind this policy reads and writes.
    pub fn kind(&self) -> Kind {
        match self {
            Policy::Gcra(_) => Kind::Gcra,
            Policy::Bucket(_) => Kind::Bucket,
            Policy::SlidingLog(_) => Kind::SlidingLog,
            Policy::SlidingApprox(_) => Kind::SlidingApprox,
            Policy::SlidingSubwindows(_) => Kind::SlidingSubwindows,
            Policy::Fixed(_) => Kind::Fixed,
            Policy::Concurrency(_) => Kind::Concurrency,
        }
    }

    /// The command whose state this policy shares, for error messages.
    pub fn command(&self) -> &'static str {
        match self {
            Policy::Gcra(_) => "RL.GCRA",
            Policy::Bucket(_) => "RL.BUCKET",
            // The sliding modes keep different state: name the mode.
            Policy::SlidingLog(_) => Kind::SlidingLog.name(),
            Policy::SlidingApprox(_) => Kind::SlidingApprox.name(),
            Policy::SlidingSubwindows(_) => Kind::SlidingSubwindows.name(),
            Policy::Fixed(_) => "RL.FIXED",
            Policy::Concurrency(_) => "RL.ACQUIRE",
        }
    }

    /// Decides `cost` at `now` against the stored value (`None`: no key).
    /// The write is `Some` only when an admitted request changes the state.
    pub fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Outcome, StateError> {
        match self {
            Policy::Gcra(g) => {
                let tat = stored
                    .map(|v| codec::decode_tat(v, Kind::Gcra))
                    .transpose()?;
                let (decision, new) = g.decide(tat, now, cost);
                Ok(tat_outcome(Kind::Gcra, decision, new))
            }
            Policy::Bucket(b) => {
                let tat = stored
                    .map(|v| codec::decode_tat(v, Kind::Bucket))
                    .transpose()?;
                let (decision, new) = b.decide(tat, now, cost);
                Ok(tat_outcome(Kind::Bucket, decision, new))
            }
            Policy::SlidingLog(l) => decide_sliding_log(l, stored, now, cost),
            Policy::SlidingApprox(a) => {
                let state = stored.map(window::decode_approx).transpose()?;
                let (decision, new) = a.decide(state, now, cost);
                let write = new.map(|s| StateWrite::Value(window::encode_approx(&s)));
                Ok(Outcome::of(decision, write))
            }
            Policy::SlidingSubwindows(w) => decide_subwindows(w, stored, now, cost),
            Policy::Fixed(f) => {
                let state = stored.map(window::decode_fixed).transpose()?;
                let (decision, new) = f.decide(state, now, cost);
                let write = new.map(|s| StateWrite::Value(window::encode_fixed(&s)));
                Ok(Outcome::of(decision, write))
            }
            Policy::Concurrency(c) => decide_concurrency(c, stored, now, cost),
        }
    }

    /// Whether an admitted request holds a lease (its reply carries it).
    pub fn holds_leases(&self) -> bool {
        matches!(self, Policy::Concurrency(_))
    }

    /// The policy as it applies to the key named `name` (a concurrency
    /// limit's leases carry a check of the name).
    pub fn for_key(self, name: &[u8]) -> Policy {
        match self {
            Policy::Concurrency(c) => Policy::Concurrency(c.for_key(lease::key_check(name))),
            other => other,
        }
    }
}

impl Outcome {
    fn of(decision: Decision, write: Option<StateWrite>) -> Outcome {
        Outcome {
            decision,
            write,
            lease: None,
        }
    }
}

/// An acquire writes one slot and the counter in place (a new key whole).
fn decide_concurrency(
    c: &Concurrency,
    stored: Option<&[u8]>,
    now: Micros,
    cost: u64,
) -> Result<Outcome, StateError> {
    let stored = stored.map(StoredLeases::decode).transpose()?;
    let (decision, grant) = match &stored {
        Some(s) => c.acquire(Some(s.header), s, now, cost),
        None => c.acquire(None, &[][..], now, cost),
    };
    let Some(grant) = grant else {
        return Ok(Outcome::of(decision, None));
    };
    let write = if grant.created {
        StateWrite::Value(lease::encode_new(&grant))
    } else {
        StateWrite::Patch(lease::grant_patch(&grant))
    };
    Ok(Outcome {
        decision,
        write: Some(write),
        lease: Some(grant.lease),
    })
}

/// The sliding log decides on the stored bytes in place and writes a patch;
/// a log stored for another limit or stamp width is rewritten whole
/// (keeping its newest live entries).
fn decide_sliding_log(
    l: &SlidingLog,
    stored: Option<&[u8]>,
    now: Micros,
    cost: u64,
) -> Result<Outcome, StateError> {
    let cap = l.limit() as usize;
    let width = window::stamp_width(l.window());
    let rewrite = |entries: &[Micros], expired: usize, added: u64, at: Micros| {
        let mut kept = entries[expired.min(entries.len())..].to_vec();
        kept.extend(std::iter::repeat_n(at, added as usize));
        StateWrite::Value(window::encode_sliding_log(cap, width, &kept))
    };
    let Some(value) = stored else {
        let (decision, change) = l.decide(&[][..], now, cost);
        let write = change.map(|c| rewrite(&[], 0, c.added, c.at));
        return Ok(Outcome::of(decision, write));
    };
    let log = StoredSlidingLog::decode(value)?;
    if log.cap() == cap && log.width() == width {
        let (decision, change) = l.decide(&log, now, cost);
        let write = change.map(|c| StateWrite::Patch(log.patch(&c)));
        return Ok(Outcome::of(decision, write));
    }
    let mut entries = log.to_vec();
    let keep_from = entries.len().saturating_sub(cap);
    entries.drain(..keep_from);
    let (decision, change) = l.decide(&entries, now, cost);
    let write = change.map(|c| rewrite(&entries, c.expired, c.added, c.at));
    Ok(Outcome::of(decision, write))
}

/// Sub-window counts are patched where they change; a state stored with
/// another `n` is folded into the current sub-window (never over-admits),
/// and one stored with narrower counts is widened; both are rewritten whole.
fn decide_subwindows(
    limiter: &SlidingSubwindows,
    stored: Option<&[u8]>,
    now: Micros,
    cost: u64,
) -> Result<Outcome, StateError> {
    let width = window::count_width(limiter.limit());
    let Some(value) = stored else {
        let (decision, new) = limiter.decide(None, now, cost);
        let write = new.map(|s| StateWrite::Value(window::encode_subwindows(width, &s)));
        return Ok(Outcome::of(decision, write));
    };
    let found = window::decode_subwindows(value)?;
    let same_layout = found.n == limiter.subwindows() && found.width >= width;
    let state = if found.n == limiter.subwindows() {
        found.state
    } else {
        let mut s = limiter.empty(now);
        let total: u64 = found
            .state
            .counts
            .iter()
            .fold(0, |a, &c| a.saturating_add(c));
        if let Some(first) = s.counts.first_mut() {
            *first = total;
        }
        // Put the folded total in the current sub-window's slot.
        let slot = (s.newest % s.counts.len() as u64) as usize;
        s.counts.swap(0, slot);
        s
    };
    let (decision, new) = limiter.decide(Some(&state), now, cost);
    let write = new.map(|s| {
        if same_layout {
            let encoded = window::encode_subwindows(found.width, &s);
            StateWrite::Patch(window::diff(value, &encoded, 16))
        } else {
            StateWrite::Value(window::encode_subwindows(width.max(found.width), &s))
        }
    });
    Ok(Outcome::of(decision, write))
}

fn tat_outcome(kind: Kind, decision: Decision, new: Option<Tat>) -> Outcome {
    let write = new.map(|tat| {
        let mut buf = [0u8; TAT_MAX_LEN];
        let len = codec::encode_tat(kind, tat, &mut buf);
        StateWrite::Value(buf[..len].to_vec())
    });
    Outcome::of(decision, write)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn policies_read_their_own_state_only() {
        let second = Micros::from_secs(1);
        let g = Policy::Gcra(Gcra::new(2, second, 2).unwrap());
        let b = Policy::Bucket(TokenBucket::new(2, 2, second).unwrap());
        let out = g.decide(None, Micros::ZERO, 1).unwrap();
        let Some(StateWrite::Value(v)) = out.write else {
            panic!("no write")
        };
        assert_eq!(
            b.decide(Some(&v), Micros::ZERO, 1),
            Err(StateError::OtherKind(Kind::Gcra))
        );
        let again = g.decide(Some(&v), Micros::ZERO, 1).unwrap();
        assert!(again.decision.allowed);
        assert_eq!(again.decision.remaining, 0);
    }

    // The window limiters' own properties are in algorithm/window_props.rs;
    // these are the policy's: reading states written with other parameters
    // (or by no one) and converting them.
    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn changing_parameters_of_a_key_never_fails(
            evs in proptest::collection::vec((0u64..4, 1u64..8, 0u64..400, 0u64..6, 2u64..5), 1..60),
        ) {
            let mut log = None;
            let mut subwindows = None;
            let mut now = 1u64 << 33;
            for (window_pick, limit, dt, cost, n) in evs {
                now += dt;
                let window = Micros::new([50, 100, 1 << 33, 300][window_pick as usize]);
                let now = Micros::new(now);
                for (state, p) in [
                    (&mut log, Policy::SlidingLog(SlidingLog::new(limit, window))),
                    (&mut subwindows, Policy::SlidingSubwindows(SlidingSubwindows::new(limit, window, n))),
                ] {
                    let out = p.decide(state.as_deref(), now, cost).unwrap();
                    prop_assert!(!out.decision.allowed || cost <= limit);
                    if let Some(w) = &out.write {
                        w.apply_to(state);
                    }
                    // What was written reads back under the same parameters.
                    let again = p.decide(state.as_deref(), now, 0).unwrap().decision;
                    prop_assert!(again.remaining <= limit);
                }
            }
        }

        #[test]
        fn deciding_on_arbitrary_stored_bytes_never_panics(
            tag in 0xA3u8..=0xA6,
            bytes in proptest::collection::vec(any::<u8>(), 0..60),
            now in any::<u64>(),
            cost in 0u64..5,
            limit in 1u64..5,
        ) {
            let mut v = vec![tag];
            v.extend(bytes);
            let us = Micros::new;
            for p in [
                Policy::SlidingLog(SlidingLog::new(limit, us(1 << 20))),
                Policy::SlidingLog(SlidingLog::new(limit, us(1 << 40))),
                Policy::SlidingApprox(SlidingApprox::new(limit, us(7))),
                Policy::SlidingSubwindows(SlidingSubwindows::new(limit, us(100), 2)),
                Policy::SlidingSubwindows(SlidingSubwindows::new(limit, Micros::MAX, 3)),
                Policy::Fixed(FixedWindow::new(limit, Micros::MAX, true)),
            ] {
                let _ = p.decide(Some(&v), us(now), cost);
            }
        }
    }
}
