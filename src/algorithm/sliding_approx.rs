//! The two-window counter (`RL.SLIDING ... APPROX`). Windows are aligned to
//! multiples of `window` since the epoch. The estimate of the trailing
//! window is `prev × (1 − elapsed / window) + cur`; a request is admitted
//! when `estimate + cost ≤ limit`, compared exactly after multiplying by
//! `window`: `prev × (window − elapsed) + (cur + cost) × window ≤ limit ×
//! window` in `u128`. A window holds at most `limit`, so any interval of
//! length `window` (which meets at most two windows) admits at most
//! `2 × limit`.

use super::{
    clamp_micros, clamp_u64, not_before, settled_without_state, Decision, Micros, RetryAfter,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingApprox {
    limit: u64,
    window: Micros,
}

/// The counts of aligned window `index` (`cur`) and the one before (`prev`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApproxState {
    pub index: u64,
    pub prev: u64,
    pub cur: u64,
}

impl SlidingApprox {
    /// The time in which it admits one unit on average.
    pub fn interval(&self) -> Micros {
        super::per_unit(self.window, self.limit)
    }

    pub fn new(limit: u64, window: Micros) -> SlidingApprox {
        SlidingApprox {
            limit: limit.max(1),
            window: window.max(Micros::new(1)),
        }
    }

    /// Decides `cost` at `now`. Counts of a window that starts after `now`
    /// (a reservation charged in the window where it starts, or a clock
    /// that stepped back) admit nothing before its start ([`not_before`]).
    pub fn decide(
        &self,
        stored: Option<ApproxState>,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<ApproxState>) {
        let rolled = self.rolled(stored, now);
        let start = u128::from(rolled.index) * u128::from(self.window.as_u64());
        if start > u128::from(now.as_u64()) && (rolled.prev > 0 || rolled.cur > 0) {
            let start = clamp_micros(start);
            let (d, _) = self.decide_rolled(rolled, start, cost);
            return (not_before(d, start.saturating_sub(now), cost), None);
        }
        self.decide_rolled(rolled, now, cost)
    }

    /// [`SlidingApprox::decide`] on counts already rolled forward to `now`
    /// (a clock that went back stays in the stored window, at its start).
    fn decide_rolled(
        &self,
        rolled: ApproxState,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<ApproxState>) {
        let w = u128::from(self.window.as_u64());
        let limit = u128::from(self.limit);
        let ApproxState { index, prev, cur } = rolled;
        let start = u128::from(index) * w;
        let now = u128::from(now.as_u64());
        let elapsed = now.max(start) - start;
        let (prev, cur) = (u128::from(prev), u128::from(cur));
        // Saturating only matters for corrupt counts with absurd windows.
        let used = |cur: u128| {
            prev.saturating_mul(w - elapsed)
                .saturating_add(cur.saturating_mul(w))
        };
        let remaining_after = |cur: u128| clamp_u64((limit * w).saturating_sub(used(cur)) / w);
        let reset = |cur: u128| {
            let end = if cur > 0 {
                start.saturating_add(2 * w)
            } else if prev > 0 {
                start.saturating_add(w)
            } else {
                now
            };
            clamp_micros(end.saturating_sub(now))
        };
        let mut decision = Decision {
            allowed: false,
            limit: self.limit,
            remaining: remaining_after(cur),
            retry_after: RetryAfter::Never,
            reset_after: reset(cur),
        };
        let cost128 = u128::from(cost);
        if settled_without_state(&mut decision, cost, self.limit) {
            return (decision, None);
        }
        if used(cur.saturating_add(cost128)) <= limit * w {
            let cur = cur + cost128;
            decision.allowed = true;
            decision.retry_after = RetryAfter::NotNeeded;
            decision.remaining = remaining_after(cur);
            decision.reset_after = reset(cur);
            let state = ApproxState {
                index,
                prev: clamp_u64(prev),
                cur: clamp_u64(cur),
            };
            return (decision, Some(state));
        }
        // The earliest time the estimate admits `cost`, solved exactly.
        let at = if cur + cost128 <= limit {
            // Later in this window, as the previous count's weight shrinks:
            // the least e with prev × (w − e) ≤ (limit − cur − cost) × w.
            // (prev > 0, or this request would have been admitted.)
            let room = (limit - cur - cost128) * w;
            start.saturating_add(w) - (room / prev.max(1)).min(w)
        } else {
            // In the next window, where this window's count is `prev`:
            // the least e with cur × (w − e) ≤ (limit − cost) × w (cur > 0).
            let room = (limit - cost128) * w;
            start.saturating_add(2 * w) - (room / cur.max(1)).min(w)
        };
        let wait = clamp_micros(at.saturating_sub(now));
        decision.retry_after = RetryAfter::After(wait.max(Micros::new(1)));
        (decision, None)
    }
}

impl SlidingApprox {
    /// The stored counts rolled forward to `now`: a gap of more than one
    /// window clears both; a clock that went back stays in the stored
    /// window.
    fn rolled(&self, stored: Option<ApproxState>, now: Micros) -> ApproxState {
        let now_index = now.as_u64() / self.window.as_u64();
        let (index, prev, cur) = match stored {
            None => (now_index, 0, 0),
            Some(s) if s.index >= now_index => (s.index, s.prev, s.cur),
            Some(s) if s.index + 1 == now_index => (now_index, s.cur, 0),
            Some(_) => (now_index, 0, 0),
        };
        ApproxState { index, prev, cur }
    }

    /// Gives back `n` units from the current window's count (never below
    /// 0). `None` when nothing changes.
    pub fn refund(&self, stored: Option<ApproxState>, now: Micros, n: u64) -> Option<ApproxState> {
        let s = self.rolled(Some(stored?), now);
        (s.cur > 0 && n > 0).then(|| ApproxState {
            cur: s.cur.saturating_sub(n),
            ..s
        })
    }

    /// Charges `cost` whether or not it fits: the current count may exceed
    /// the limit. `None` if it would overflow.
    pub fn force(
        &self,
        stored: Option<ApproxState>,
        now: Micros,
        cost: u64,
    ) -> Option<ApproxState> {
        let s = self.rolled(stored, now);
        Some(ApproxState {
            cur: s.cur.checked_add(cost)?,
            ..s
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Micros {
        Micros::from_secs(n)
    }

    #[test]
    fn estimate_weights_the_previous_window() {
        let a = SlidingApprox::new(10, s(60));
        let st = Some(ApproxState {
            index: 0,
            prev: 0,
            cur: 10,
        });
        // 15 s into the next window: estimate = 10 × 45/60 = 7.5.
        let (d, new) = a.decide(st, s(75), 2);
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(
            new,
            Some(ApproxState {
                index: 1,
                prev: 10,
                cur: 2
            })
        );
        // 7.5 + 2 + 1 > 10: wait until 10 × (60 − e) ≤ (10 − 2 − 1) × 60,
        // e ≥ 18 s.
        let (d, _) = a.decide(new, s(75), 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, RetryAfter::After(s(3)));
        assert_eq!(d.reset_after, s(105));
        // A cost the current count alone blocks waits for the next window
        // (120 s) and then until 2 × (60 − e) ≤ (10 − 9) × 60: e ≥ 30 s.
        let (d, _) = a.decide(new, s(75), 9);
        assert_eq!(d.retry_after, RetryAfter::After(s(75)));
    }
}
