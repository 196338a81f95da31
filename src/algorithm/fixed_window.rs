//! Fixed windows (`RL.FIXED`): a count per window of length `window`. By
//! default a window starts at the key's first admitted request (the
//! INCR + EXPIRE pattern); `aligned` windows start at multiples of `window`
//! since the epoch, so every key shares the same boundaries. Any interval
//! of length `window` meets at most two windows: at most `2 × limit`.

use super::{not_before, settled_without_state, Decision, Micros, RetryAfter};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    limit: u64,
    window: Micros,
    aligned: bool,
}

/// The current window's start and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedState {
    pub start: Micros,
    pub count: u64,
}

impl FixedWindow {
    pub fn new(limit: u64, window: Micros, aligned: bool) -> FixedWindow {
        FixedWindow {
            limit: limit.max(1),
            window: window.max(Micros::new(1)),
            aligned,
        }
    }

    /// The time in which it admits one unit on average.
    pub fn interval(&self) -> Micros {
        super::per_unit(self.window, self.limit)
    }

    /// Whether windows start at multiples of the window since the epoch.
    pub fn aligned(&self) -> bool {
        self.aligned
    }

    /// Whether `start` is where an aligned window of this length may start.
    pub fn is_boundary(&self, start: Micros) -> bool {
        start.as_u64().is_multiple_of(self.window.as_u64())
    }

    /// Decides `cost` at `now`. A window that starts after `now` (a
    /// reservation charged in the window where it starts, or a clock that
    /// stepped back) admits nothing before its start ([`not_before`]).
    pub fn decide(
        &self,
        stored: Option<FixedState>,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<FixedState>) {
        if let Some(s) = stored.filter(|s| s.count > 0 && s.start > now) {
            let (d, _) = self.decide(stored, s.start, cost);
            return (not_before(d, s.start.saturating_sub(now), cost), None);
        }
        let end = |s: &FixedState| s.start.saturating_add(self.window);
        let live = self.live(stored, now);
        let count = live.map_or(0, |s| s.count);
        let until_end = |s: &FixedState| end(s).saturating_sub(now);
        let mut decision = Decision {
            allowed: false,
            limit: self.limit,
            remaining: self.limit.saturating_sub(count),
            retry_after: RetryAfter::Never,
            reset_after: live.as_ref().map_or(Micros::ZERO, until_end),
        };
        if settled_without_state(&mut decision, cost, self.limit) {
            return (decision, None);
        }
        if u128::from(count) + u128::from(cost) <= u128::from(self.limit) {
            let new = match live {
                Some(s) => FixedState {
                    start: s.start,
                    count: count + cost,
                },
                None => FixedState {
                    start: self.start_at(now),
                    count: cost,
                },
            };
            decision.allowed = true;
            decision.retry_after = RetryAfter::NotNeeded;
            decision.remaining = self.limit - new.count;
            decision.reset_after = until_end(&new);
            return (decision, Some(new));
        }
        // Denied only inside a live window: wait for its end.
        let wait = live.as_ref().map_or(Micros::ZERO, until_end);
        decision.retry_after = RetryAfter::After(wait.max(Micros::new(1)));
        (decision, None)
    }
}

impl FixedWindow {
    /// The stored window if it still counts at `now`. One that has ended,
    /// or holds nothing (a refund took it back to full), is no window: the
    /// next request starts a new one, as with no key.
    fn live(&self, stored: Option<FixedState>, now: Micros) -> Option<FixedState> {
        stored.filter(|s| s.count > 0 && now < s.start.saturating_add(self.window))
    }

    /// Gives back `n` units: the live window's count falls, never below 0.
    /// `None` when nothing changes.
    pub fn refund(&self, stored: Option<FixedState>, now: Micros, n: u64) -> Option<FixedState> {
        let live = self.live(stored, now).filter(|s| s.count > 0 && n > 0)?;
        Some(FixedState {
            start: live.start,
            count: live.count.saturating_sub(n),
        })
    }

    /// Charges `cost` whether or not it fits: the count may exceed the
    /// limit until the window ends. `None` if the count would overflow.
    pub fn force(&self, stored: Option<FixedState>, now: Micros, cost: u64) -> Option<FixedState> {
        Some(match self.live(stored, now) {
            Some(s) => FixedState {
                start: s.start,
                count: s.count.checked_add(cost)?,
            },
            None => FixedState {
                start: self.start_at(now),
                count: cost,
            },
        })
    }

    fn start_at(&self, now: Micros) -> Micros {
        if self.aligned {
            let (now, window) = (now.as_u64(), self.window.as_u64());
            Micros::new(now - now % window)
        } else {
            now
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Micros {
        Micros::from_secs(n)
    }

    #[test]
    fn window_starts_at_first_request_unless_aligned() {
        let f = FixedWindow::new(2, s(60), false);
        let (_, st) = f.decide(None, s(10), 1);
        assert_eq!(st.unwrap().start, s(10));
        let (d, st) = f.decide(st, s(20), 1);
        assert_eq!((d.remaining, d.reset_after), (0, s(50)));
        let (d, _) = f.decide(st, s(30), 1);
        assert_eq!(d.retry_after, RetryAfter::After(s(40)));
        let (d, _) = f.decide(st, s(70), 2);
        assert!(d.allowed);
        let a = FixedWindow::new(2, s(60), true);
        let (d, st) = a.decide(None, s(70), 1);
        assert_eq!(st.unwrap().start, s(60));
        assert_eq!(d.reset_after, s(50));
    }
}
