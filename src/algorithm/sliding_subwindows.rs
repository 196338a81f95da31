//! Sub-window counts (`RL.SLIDING ... BUCKETS n`). The window is split
//! into `n` equal sub-windows aligned to the epoch (sub-window `k` starts at
//! `ceil(k × window / n)` µs, exact even when `n` does not divide the
//! window), each with a count.
//!
//! Boundary choice: the partially covered oldest sub-window COUNTS. At a
//! time in sub-window `j` the trailing count is the sum of sub-windows
//! `j − n ..= j` (n + 1 of them), which covers the whole trailing window.
//! So RL.SLIDING BUCKETS never admits more than `limit` in any interval of
//! length `window` (like EXACT), and may under-admit: an admission is
//! remembered for up to `window + window / n`.

use super::{
    clamp_micros, clamp_u64, not_before, settled_without_state, Decision, Micros, RetryAfter,
};

pub const MIN_SUBWINDOWS: u64 = 2;
pub const MAX_SUBWINDOWS: u64 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingSubwindows {
    limit: u64,
    window: Micros,
    n: u64,
}

/// Counts of sub-windows `newest − n ..= newest`; sub-window `k` is at
/// `counts[k % (n + 1)]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubwindowState {
    pub newest: u64,
    pub counts: Vec<u64>,
}

impl SlidingSubwindows {
    /// The time in which it admits one unit on average.
    pub fn interval(&self) -> Micros {
        super::per_unit(self.window, self.limit)
    }

    pub fn new(limit: u64, window: Micros, n: u64) -> SlidingSubwindows {
        SlidingSubwindows {
            limit: limit.max(1),
            window: window.max(Micros::new(1)),
            n: n.clamp(MIN_SUBWINDOWS, MAX_SUBWINDOWS),
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn subwindows(&self) -> u64 {
        self.n
    }

    /// How many counts the state holds: `n + 1`.
    pub fn slots(&self) -> usize {
        self.n as usize + 1
    }

    /// The sub-window that time `t` falls in.
    pub fn subwindow(&self, t: Micros) -> u64 {
        let window = u128::from(self.window.as_u64());
        clamp_u64(u128::from(t.as_u64()) * u128::from(self.n) / window)
    }

    /// When sub-window `k` starts, in µs.
    fn start(&self, k: u64) -> u128 {
        super::div_ceil_u128(
            u128::from(k) * u128::from(self.window.as_u64()),
            u128::from(self.n),
        )
    }

    /// A state with no counts, current at `now`.
    pub fn empty(&self, now: Micros) -> SubwindowState {
        SubwindowState {
            newest: self.subwindow(now),
            counts: vec![0; self.slots()],
        }
    }

    /// Decides `cost` at `now`; `stored` must hold `n + 1` counts (the
    /// caller converts a state written with another `n`). Returns the new
    /// state when an admitted request changes it. Counts up to a sub-window
    /// that starts after `now` (a reservation charged in the sub-window
    /// where it starts, or a clock that stepped back) admit nothing before
    /// its start ([`not_before`]).
    pub fn decide(
        &self,
        stored: Option<&SubwindowState>,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<SubwindowState>) {
        let st = self.rolled(stored, now);
        let start = self.start(st.newest);
        if start > u128::from(now.as_u64()) && st.counts.iter().any(|&c| c > 0) {
            let start = clamp_micros(start);
            let (d, _) = self.decide_rolled(st, start, cost);
            return (not_before(d, start.saturating_sub(now), cost), None);
        }
        self.decide_rolled(st, now, cost)
    }

    /// [`SlidingSubwindows::decide`] on a state already rolled forward to
    /// `now`.
    fn decide_rolled(
        &self,
        mut st: SubwindowState,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<SubwindowState>) {
        let m = self.slots() as u64;
        let j = st.newest;
        let count_of = |st: &SubwindowState, k: u64| st.counts[(k % m) as usize];
        let total = |st: &SubwindowState| st.counts.iter().map(|&c| u128::from(c)).sum::<u128>();
        let now = u128::from(now.as_u64());
        // Back to untouched when the newest non-empty sub-window leaves.
        let reset = |st: &SubwindowState| {
            (0..m)
                .map(|i| j.wrapping_sub(i))
                .take_while(|&k| k <= j)
                .find(|&k| count_of(st, k) > 0)
                .map_or(Micros::ZERO, |k| {
                    clamp_micros(self.start(k.saturating_add(m)).saturating_sub(now))
                })
        };
        let limit = u128::from(self.limit);
        let used = total(&st);
        let mut decision = Decision {
            allowed: false,
            limit: self.limit,
            remaining: clamp_u64(limit.saturating_sub(used)),
            retry_after: RetryAfter::Never,
            reset_after: reset(&st),
        };
        if settled_without_state(&mut decision, cost, self.limit) {
            return (decision, None);
        }
        let need = used + u128::from(cost);
        if need <= limit {
            let slot = (j % m) as usize;
            st.counts[slot] = st.counts[slot].saturating_add(cost);
            decision.allowed = true;
            decision.retry_after = RetryAfter::NotNeeded;
            decision.remaining = clamp_u64(limit - need);
            decision.reset_after = reset(&st);
            return (decision, Some(st));
        }
        // Sub-window j − n + i leaves the count when j + 1 + i starts.
        let excess = need - limit;
        let mut freed = 0u128;
        for i in 0..m {
            if let Some(k) = j.saturating_add(i).checked_sub(m - 1) {
                freed += u128::from(count_of(&st, k));
            }
            if freed >= excess {
                let at = self.start(j.saturating_add(1 + i));
                let wait = clamp_micros(at.saturating_sub(now));
                decision.retry_after = RetryAfter::After(wait.max(Micros::new(1)));
                break;
            }
        }
        (decision, None)
    }
}

impl SlidingSubwindows {
    /// The stored state rolled forward to `now` (a clock that went back
    /// stays where it was); a fresh one if `stored` has another layout.
    fn rolled(&self, stored: Option<&SubwindowState>, now: Micros) -> SubwindowState {
        let m = self.slots() as u64;
        let mut st = match stored {
            Some(s) if s.counts.len() == self.slots() => s.clone(),
            _ => self.empty(now),
        };
        let j = self.subwindow(now).max(st.newest);
        if j - st.newest >= m {
            st.counts.iter_mut().for_each(|c| *c = 0);
        } else {
            for d in 1..=j - st.newest {
                st.counts[((st.newest + d) % m) as usize] = 0;
            }
        }
        st.newest = j;
        st
    }

    /// Gives back `n` units, from the newest sub-window first. `None` when
    /// nothing changes.
    pub fn refund(
        &self,
        stored: Option<&SubwindowState>,
        now: Micros,
        n: u64,
    ) -> Option<SubwindowState> {
        let mut st = self.rolled(Some(stored?), now);
        let m = self.slots() as u64;
        let mut left = n;
        for back in 0..m {
            let Some(k) = st.newest.checked_sub(back) else {
                break;
            };
            let slot = &mut st.counts[(k % m) as usize];
            let take = left.min(*slot);
            *slot -= take;
            left -= take;
        }
        (left < n).then_some(st)
    }

    /// Charges `cost` to the current sub-window whether or not it fits.
    /// `None` if its count would overflow.
    pub fn force(
        &self,
        stored: Option<&SubwindowState>,
        now: Micros,
        cost: u64,
    ) -> Option<SubwindowState> {
        let mut st = self.rolled(stored, now);
        let slot = (st.newest % self.slots() as u64) as usize;
        st.counts[slot] = st.counts[slot].checked_add(cost)?;
        Some(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Micros {
        Micros::from_secs(n)
    }

    #[test]
    fn oldest_partial_sub_window_counts() {
        // 60 s in 4 sub-windows of 15 s.
        let sw = SlidingSubwindows::new(2, s(60), 4);
        let (d, st) = sw.decide(None, s(14), 1);
        assert_eq!((d.allowed, d.reset_after), (true, s(61)));
        let (d, st) = sw.decide(st.as_ref(), s(16), 1);
        assert!(d.allowed);
        let st = st.unwrap();
        // At 62 s the 14 s entry (sub-window 0) is older than the window but
        // still counted: it leaves when sub-window 5 starts at 75 s.
        let (d, _) = sw.decide(Some(&st), s(62), 1);
        assert_eq!(d.retry_after, RetryAfter::After(s(13)));
        let (d, _) = sw.decide(Some(&st), s(75), 2);
        assert_eq!(d.retry_after, RetryAfter::After(s(15)));
        let (d, _) = sw.decide(Some(&st), s(75), 1);
        assert!(d.allowed);
    }

    #[test]
    fn sub_windows_of_fractional_length() {
        // 1 s in 3: sub-windows start at 0, 333_334, 666_667, 1_000_000.
        let sw = SlidingSubwindows::new(1, s(1), 3);
        let (_, st) = sw.decide(None, Micros::ZERO, 1);
        let (d, _) = sw.decide(st.as_ref(), Micros::new(1), 1);
        assert_eq!(d.retry_after, RetryAfter::After(Micros::new(1_333_333)));
        assert_eq!(sw.subwindow(Micros::new(333_333)), 0);
        assert_eq!(sw.subwindow(Micros::new(333_334)), 1);
    }
}
