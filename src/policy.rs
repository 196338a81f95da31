//! A limit of any algorithm, as one value: what RL.ALL combines and what the
//! window commands decide through. Pure: bytes in, decision and bytes out.

use crate::algorithm::concurrency::{Concurrency, Header, LeaseId, SlotChange};
use crate::algorithm::fixed_window::{FixedState, FixedWindow};
use crate::algorithm::gcra::Gcra;
use crate::algorithm::schedule::Tat;
use crate::algorithm::sketch::Sketch;
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_subwindows::{SlidingSubwindows, SubwindowState};
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::{Decision, Micros};
use crate::codec::lease::{self, StoredLeases};
use crate::codec::sketch::StoredSketch;
use crate::codec::window;
use crate::codec::{self, Kind, Mismatch, Patch, StateError, TAT_MAX_LEN};

mod charge;
mod sliding_log;
pub use charge::ForceError;

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
    /// RL.SKETCH: the count-min sketch, deciding for one item.
    Sketch {
        sketch: Sketch,
        item: Vec<u8>,
    },
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
    /// grow with the size of the state. For a key that already holds this
    /// policy's state, or for a missing key (created zero-filled).
    Patch(Patch),
    /// Delete the key: a refund brought the limiter back to its full,
    /// untouched state, which is what no key means (replicated as `DEL`).
    Delete,
}

impl StateWrite {
    /// Applies the write to a value as Redis does (`SET`, or `SETRANGE`
    /// growing the value with zeros): for tests and benches of the core.
    pub fn apply_to(&self, state: &mut Option<Vec<u8>>) {
        match self {
            StateWrite::Value(v) => *state = Some(v.clone()),
            StateWrite::Patch(patch) => patch.apply_to(state.get_or_insert_with(Vec::new)),
            StateWrite::Delete => *state = None,
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
            Policy::Fixed(f) if f.aligned() => Kind::FixedAligned,
            Policy::Fixed(_) => Kind::Fixed,
            Policy::Sketch { .. } => Kind::Sketch,
            Policy::Concurrency(_) => Kind::Concurrency,
        }
    }

    /// The command whose state this policy shares, for error messages.
    pub fn command(&self) -> &'static str {
        match self {
            Policy::Gcra(_) => "RL.GCRA",
            Policy::Bucket(_) => "RL.BUCKET",
            // The sliding and fixed modes keep different state: name the mode.
            Policy::SlidingLog(_)
            | Policy::SlidingApprox(_)
            | Policy::SlidingSubwindows(_)
            | Policy::Fixed(_) => self.kind().name(),
            Policy::Sketch { .. } => "RL.SKETCH",
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
            Policy::SlidingLog(l) => sliding_log::decide(l, stored, now, cost),
            Policy::SlidingApprox(a) => {
                let state = stored.map(window::decode_approx).transpose()?;
                let (decision, new) = a.decide(state, now, cost);
                let write = new.map(|s| StateWrite::Value(window::encode_approx(&s)));
                Ok(Outcome::of(decision, write))
            }
            Policy::SlidingSubwindows(w) => decide_subwindows(w, stored, now, cost),
            Policy::Fixed(f) => {
                let kind = self.kind();
                let state = stored.map(|v| decode_fixed(f, v)).transpose()?;
                let (decision, new) = f.decide(state, now, cost);
                let write = new.map(|s| StateWrite::Value(window::encode_fixed(kind, &s)));
                Ok(Outcome::of(decision, write))
            }
            Policy::Sketch { sketch, item } => decide_sketch(sketch, item, stored, now, cost),
            Policy::Concurrency(c) => decide_concurrency(c, stored, now, cost),
        }
    }

    /// The decision alone, for looks that write nothing: no write is
    /// prepared (a sliding log's would be as long as `cost`).
    pub fn decision(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Decision, StateError> {
        match self {
            Policy::SlidingLog(l) => sliding_log::decision(l, stored, now, cost),
            _ => Ok(self.decide(stored, now, cost)?.decision),
        }
    }

    /// Whether an admitted request holds a lease (its reply carries it).
    pub fn holds_leases(&self) -> bool {
        matches!(self, Policy::Concurrency(_))
    }

    /// The policy as it applies to the key named `name` (a concurrency
    /// limit's leases carry a check of the name). The name is read only
    /// for such a limit: reading an argument is a call into the server.
    pub fn for_key<'a>(self, name: impl FnOnce() -> &'a [u8]) -> Policy {
        match self {
            Policy::Concurrency(c) => Policy::Concurrency(c.for_key(lease::key_check(name()))),
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

/// An acquire writes the counters and the slots it changed in place (a
/// new key, or one read in an earlier layout, whole).
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
    let patch = lease::grant_patch(&grant);
    let write = match stored.as_ref().and_then(|s| s.converted_value(&patch)) {
        Some(whole) => StateWrite::Value(whole),
        None if grant.created => StateWrite::Value(lease::encode_new(&grant)),
        None => StateWrite::Patch(patch),
    };
    Ok(Outcome {
        decision,
        write: Some(write),
        lease: Some(grant.lease),
    })
}

/// Applies `f`, a change of one lease, to a stored concurrency state: the
/// write (the changed slots in place, or the whole value once if it was
/// stored in an earlier layout) and the key's TTL after it; `None` when
/// nothing changes.
pub fn change_leases(
    value: &[u8],
    now: Micros,
    f: impl FnOnce(Header, &StoredLeases, Micros) -> Option<SlotChange>,
) -> Result<Option<(StateWrite, Micros)>, StateError> {
    let stored = StoredLeases::decode(value)?;
    Ok(f(stored.header, &stored, now).map(|change| {
        let patch = lease::change_patch(&change);
        let write = match stored.converted_value(&patch) {
            Some(whole) => StateWrite::Value(whole),
            None => StateWrite::Patch(patch),
        };
        (write, change.reset_after)
    }))
}

/// Gives lease `lease` back (see [`change_leases`]).
pub fn release_lease(
    value: &[u8],
    lease: LeaseId,
    now: Micros,
) -> Result<Option<(StateWrite, Micros)>, StateError> {
    change_leases(value, now, |header, leases, now| {
        crate::algorithm::concurrency::release(header, leases, lease, now)
    })
}

/// A fixed window's stored state. 0.1.0 kept both modes under one tag
/// ([`Kind::FixedLegacy`]), which is now only read: plain RL.FIXED takes
/// such a window as before; an aligned call takes it if it starts on one of
/// its boundaries (any other began at a first request, which is not aligned
/// state). Either rewrites it under its own tag at its next write.
pub(crate) fn decode_fixed(f: &FixedWindow, value: &[u8]) -> Result<FixedState, StateError> {
    let kind = if f.aligned() {
        Kind::FixedAligned
    } else {
        Kind::Fixed
    };
    match window::decode_fixed(value, kind) {
        Err(StateError::OtherKind(Kind::FixedLegacy)) => {
            let legacy = window::decode_fixed(value, Kind::FixedLegacy)?;
            if !f.aligned() || f.is_boundary(legacy.start) {
                Ok(legacy)
            } else {
                Err(StateError::OtherKind(Kind::FixedLegacy))
            }
        }
        read => read,
    }
}

/// A sketch is read in place and patched; one stored with another WIDTH,
/// DEPTH or window is an error, never reinterpreted.
fn decide_sketch(
    sketch: &Sketch,
    item: &[u8],
    stored: Option<&[u8]>,
    now: Micros,
    cost: u64,
) -> Result<Outcome, StateError> {
    let found = stored.map(StoredSketch::decode).transpose()?;
    if let Some(s) = &found {
        let mismatch = |param, stored: usize, given: usize| Mismatch {
            kind: Kind::Sketch,
            param,
            stored: stored as u64,
            given: given as u64,
            duration: false,
        };
        let differs = if s.width != sketch.width() {
            Some(mismatch("WIDTH", s.width, sketch.width()))
        } else if s.depth != sketch.depth() {
            Some(mismatch("DEPTH", s.depth, sketch.depth()))
        } else if s.window != sketch.window() {
            Some(Mismatch {
                param: "window",
                stored: s.window.as_u64(),
                given: sketch.window().as_u64(),
                duration: true,
                ..mismatch("", 0, 0)
            })
        } else {
            None
        };
        if let Some(m) = differs {
            return Err(StateError::Mismatch(m));
        }
    }
    let (decision, change) = sketch.decide(found.as_ref(), item, now, cost);
    let write =
        change.map(|c| StateWrite::Patch(codec::sketch::patch(sketch, &c, found.is_none())));
    Ok(Outcome::of(decision, write))
}

/// A sub-window state read for a decision, and the layout it was stored in.
pub(crate) struct LoadedSubwindows<'a> {
    state: SubwindowState,
    /// The stored value and its count width, if any.
    stored: Option<(&'a [u8], usize)>,
    /// Stored with this limiter's `n`: can be patched in place.
    same_n: bool,
}

/// Reads a sub-window state; one stored with another `n` is folded into
/// the current sub-window (never over-admits).
pub(crate) fn load_subwindows<'a>(
    limiter: &SlidingSubwindows,
    stored: Option<&'a [u8]>,
    now: Micros,
) -> Result<LoadedSubwindows<'a>, StateError> {
    let Some(value) = stored else {
        return Ok(LoadedSubwindows {
            state: limiter.empty(now),
            stored: None,
            same_n: false,
        });
    };
    let found = window::decode_subwindows(value)?;
    let same_n = found.n == limiter.subwindows();
    let state = if same_n {
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
    Ok(LoadedSubwindows {
        state,
        stored: Some((value, found.width)),
        same_n,
    })
}

/// Sub-window counts are patched where they change; a state stored with
/// another `n`, or with counts too narrow for the new ones, is rewritten
/// whole.
pub(crate) fn write_subwindows(
    limiter: &SlidingSubwindows,
    loaded: &LoadedSubwindows,
    new: &SubwindowState,
) -> StateWrite {
    let largest = new.counts.iter().copied().max().unwrap_or(0);
    let width = window::count_width(limiter.limit().max(largest));
    match loaded.stored {
        Some((value, found)) if loaded.same_n && found >= width => {
            let encoded = window::encode_subwindows(found, new);
            StateWrite::Patch(window::diff(value, &encoded, 16))
        }
        Some((_, found)) => StateWrite::Value(window::encode_subwindows(width.max(found), new)),
        None => StateWrite::Value(window::encode_subwindows(width, new)),
    }
}

fn decide_subwindows(
    limiter: &SlidingSubwindows,
    stored: Option<&[u8]>,
    now: Micros,
    cost: u64,
) -> Result<Outcome, StateError> {
    let loaded = load_subwindows(limiter, stored, now)?;
    let (decision, new) = limiter.decide(Some(&loaded.state), now, cost);
    let write = new.map(|s| write_subwindows(limiter, &loaded, &s));
    Ok(Outcome::of(decision, write))
}

pub(crate) fn tat_outcome(kind: Kind, decision: Decision, new: Option<Tat>) -> Outcome {
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

    #[test]
    fn aligned_and_first_request_windows_are_distinct_kinds() {
        let minute = Micros::from_secs(60);
        let plain = Policy::Fixed(FixedWindow::new(3, minute, false));
        let aligned = Policy::Fixed(FixedWindow::new(3, minute, true));
        let write = |p: &Policy, stored: Option<&[u8]>, at: u64| -> Vec<u8> {
            match p.decide(stored, Micros::from_secs(at), 1).unwrap().write {
                Some(StateWrite::Value(v)) => v,
                other => panic!("{other:?}"),
            }
        };
        let a = write(&aligned, None, 70);
        assert_eq!(a[0], 0xA7);
        assert_eq!(
            plain.decide(Some(&a), Micros::from_secs(70), 1),
            Err(StateError::OtherKind(Kind::FixedAligned))
        );
        // A window begun at a first request (70 s) is not aligned state.
        let p = write(&plain, None, 70);
        assert_eq!(
            aligned.decide(Some(&p), Micros::from_secs(70), 1),
            Err(StateError::OtherKind(Kind::Fixed))
        );
        // A plain window that happens to start on a boundary is still not
        // aligned state: its tag says so.
        let on_boundary = write(&plain, None, 120);
        assert_eq!(on_boundary[0], 0xAC);
        assert_eq!(
            aligned.decide(Some(&on_boundary), Micros::from_secs(130), 1),
            Err(StateError::OtherKind(Kind::Fixed))
        );
        // One on a boundary, as 0.1.0 stored aligned windows under 0xA6,
        // keeps counting and is rewritten under 0xA7.
        let legacy = window::encode_fixed(
            Kind::FixedLegacy,
            &FixedState {
                start: Micros::from_secs(60),
                count: 1,
            },
        );
        let out = aligned
            .decide(Some(&legacy), Micros::from_secs(80), 1)
            .unwrap();
        assert_eq!(out.decision.remaining, 1);
        let Some(StateWrite::Value(v)) = out.write else {
            panic!("no write")
        };
        assert_eq!(
            window::decode_fixed(&v, Kind::FixedAligned),
            Ok(FixedState {
                start: Micros::from_secs(60),
                count: 2
            })
        );
        // Plain RL.FIXED reads 0xA6 as before, whoever wrote it, and
        // rewrites it under its own tag.
        let out = plain
            .decide(Some(&legacy), Micros::from_secs(80), 1)
            .unwrap();
        assert_eq!(out.decision.remaining, 1);
        let Some(StateWrite::Value(v)) = out.write else {
            panic!("no write")
        };
        assert_eq!(v[0], 0xAC);
        // A legacy window begun at a first request is not aligned state.
        let first_request = window::encode_fixed(
            Kind::FixedLegacy,
            &FixedState {
                start: Micros::from_secs(70),
                count: 1,
            },
        );
        assert_eq!(
            aligned.decide(Some(&first_request), Micros::from_secs(80), 1),
            Err(StateError::OtherKind(Kind::FixedLegacy))
        );
        // A corrupt legacy value is reported as what it is.
        assert_eq!(
            aligned.decide(Some(&[0xA6, 0x80]), Micros::ZERO, 1),
            Err(StateError::Corrupt(Kind::FixedLegacy))
        );
    }

    #[test]
    fn a_sketch_with_other_parameters_is_an_error_naming_the_mismatch() {
        let minute = Micros::from_secs(60);
        let sketch = |w, d, window| Policy::Sketch {
            sketch: Sketch::new(5, window, w, d),
            item: b"ip".to_vec(),
        };
        let mut value = None;
        let out = sketch(16, 2, minute).decide(None, minute, 1).unwrap();
        out.write.unwrap().apply_to(&mut value);
        let value = value.unwrap();
        assert_eq!(value.len(), 26 + 12 * 32);
        let err = |p: Policy| {
            let e = p.decide(Some(&value), minute, 1).unwrap_err();
            crate::engine::error::Error::state("RL.SKETCH", e).to_string()
        };
        assert_eq!(
            err(sketch(8, 2, minute)),
            "WRONGTYPE key holds RL.SKETCH state with WIDTH 16, not 8"
        );
        assert_eq!(
            err(sketch(16, 3, minute)),
            "WRONGTYPE key holds RL.SKETCH state with DEPTH 2, not 3"
        );
        assert_eq!(
            err(sketch(16, 2, Micros::from_millis(1500))),
            "WRONGTYPE key holds RL.SKETCH state with window 60000ms, not 1500ms"
        );
        // Another limit on the same sketch is fine.
        let other_limit = Policy::Sketch {
            sketch: Sketch::new(9, minute, 16, 2),
            item: b"ip".to_vec(),
        };
        let d = other_limit
            .decide(Some(&value), minute, 1)
            .unwrap()
            .decision;
        assert_eq!(d.remaining, 7);
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
            tag in prop_oneof![0xA3u8..=0xA8, Just(0xABu8)],
            bytes in proptest::collection::vec(any::<u8>(), 0..60),
            now in any::<u64>(),
            cost in 0u64..5,
            limit in 1u64..5,
            bytes_item in proptest::collection::vec(any::<u8>(), 0..4),
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
                Policy::Sketch { sketch: Sketch::new(limit, us(7), 1, 1), item: bytes_item.clone() },
            ] {
                let _ = p.decide(Some(&v), us(now), cost);
            }
        }
    }
}
