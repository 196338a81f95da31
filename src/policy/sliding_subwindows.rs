//! RL.SLIDING BUCKETS n as a policy: the sub-window counts, patched where
//! they change ([`window::encode_subwindows`]).

use super::{Limiter, StateWrite, Transition};
use crate::algorithm::sliding_subwindows::{SlidingSubwindows, SubwindowState};
use crate::algorithm::Micros;
use crate::codec::{window, Kind, StateError};

impl Limiter for SlidingSubwindows {
    fn interval(&self) -> Option<Micros> {
        Some(SlidingSubwindows::interval(self))
    }

    /// Charged in the window where its admission starts, which admits
    /// nothing before that start (see `engine::reserve`).
    fn reserves(&self) -> bool {
        true
    }

    fn kind(&self) -> Kind {
        Kind::SlidingSubwindows
    }

    fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError> {
        let loaded = load(self, stored, now)?;
        let (decision, new) = SlidingSubwindows::decide(self, Some(&loaded.state), now, cost);
        Ok(Transition::of(
            decision,
            new.map(|s| write(self, &loaded, &s)),
        ))
    }

    fn refund_write(
        &self,
        value: &[u8],
        now: Micros,
        n: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        let loaded = load(self, Some(value), now)?;
        Ok(SlidingSubwindows::refund(self, Some(&loaded.state), now, n)
            .map(|s| write(self, &loaded, &s)))
    }

    fn holds_debt(&self) -> bool {
        true
    }

    fn force_write(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        let loaded = load(self, stored, now)?;
        Ok(
            SlidingSubwindows::force(self, Some(&loaded.state), now, cost)
                .map(|s| write(self, &loaded, &s)),
        )
    }
}

/// A sub-window state read for a decision, and the layout it was stored in.
struct Loaded<'a> {
    state: SubwindowState,
    /// The stored value and its count width, if any.
    stored: Option<(&'a [u8], usize)>,
    /// Stored with this limiter's `n`: can be patched in place.
    same_n: bool,
}

/// Reads a sub-window state; one stored with another `n` is folded into
/// the current sub-window (never over-admits).
fn load<'a>(
    limiter: &SlidingSubwindows,
    stored: Option<&'a [u8]>,
    now: Micros,
) -> Result<Loaded<'a>, StateError> {
    let Some(value) = stored else {
        return Ok(Loaded {
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
    Ok(Loaded {
        state,
        stored: Some((value, found.width)),
        same_n,
    })
}

/// Sub-window counts are patched where they change; a state stored with
/// another `n`, or with counts too narrow for the new ones, is rewritten
/// whole.
fn write(limiter: &SlidingSubwindows, loaded: &Loaded, new: &SubwindowState) -> StateWrite {
    let largest = new.counts.iter().copied().max().unwrap_or(0);
    let width = window::count_width(limiter.limit().max(largest));
    match loaded.stored {
        Some((value, found)) if loaded.same_n && found >= width => {
            let encoded = window::encode_subwindows(found, new);
            StateWrite::Patch(window::diff(value, &encoded, 16))
        }
        Some((_, found)) => {
            StateWrite::Value(window::encode_subwindows(width.max(found), new).into())
        }
        None => StateWrite::Value(window::encode_subwindows(width, new).into()),
    }
}
