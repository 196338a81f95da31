//! Fixed windows (`RL.FIXED`): a count per window of length `window`. By
//! default a window starts at the key's first admitted request (the
//! INCR + EXPIRE pattern); `aligned` windows start at multiples of `window`
//! since the epoch, so every key shares the same boundaries. Any interval
//! of length `window` meets at most two windows: at most `2 × limit`.

use super::{clamp_u64, settled_without_state, Decision, RetryAfter};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    limit: u64,
    window_us: u64,
    aligned: bool,
}

/// The current window's start and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedState {
    pub start_us: u64,
    pub count: u64,
}

impl FixedWindow {
    pub fn new(limit: u64, window_us: u64, aligned: bool) -> FixedWindow {
        FixedWindow {
            limit: limit.max(1),
            window_us: window_us.max(1),
            aligned,
        }
    }

    pub fn decide(
        &self,
        stored: Option<FixedState>,
        now_us: u64,
        cost: u64,
    ) -> (Decision, Option<FixedState>) {
        let end = |s: &FixedState| s.start_us.saturating_add(self.window_us);
        let live = stored.filter(|s| now_us < end(s));
        let count = live.map_or(0, |s| s.count);
        let until_end = |s: &FixedState| end(s) - now_us.min(end(s));
        let mut decision = Decision {
            allowed: false,
            limit: self.limit,
            remaining: self.limit.saturating_sub(count),
            retry_after: RetryAfter::Never,
            reset_after_us: live.as_ref().map_or(0, until_end),
        };
        if settled_without_state(&mut decision, cost, self.limit) {
            return (decision, None);
        }
        if u128::from(count) + u128::from(cost) <= u128::from(self.limit) {
            let new = match live {
                Some(s) => FixedState {
                    start_us: s.start_us,
                    count: count + cost,
                },
                None => FixedState {
                    start_us: if self.aligned {
                        now_us - now_us % self.window_us
                    } else {
                        now_us
                    },
                    count: cost,
                },
            };
            decision.allowed = true;
            decision.retry_after = RetryAfter::NotNeeded;
            decision.remaining = self.limit - new.count;
            decision.reset_after_us = until_end(&new);
            return (decision, Some(new));
        }
        // Denied only inside a live window: wait for its end.
        let wait = live.as_ref().map_or(1, until_end);
        decision.retry_after = RetryAfter::After(clamp_u64(u128::from(wait)).max(1));
        (decision, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    #[test]
    fn window_starts_at_first_request_unless_aligned() {
        let f = FixedWindow::new(2, 60 * S, false);
        let (_, st) = f.decide(None, 10 * S, 1);
        assert_eq!(st.unwrap().start_us, 10 * S);
        let (d, st) = f.decide(st, 20 * S, 1);
        assert_eq!((d.remaining, d.reset_after_us), (0, 50 * S));
        let (d, _) = f.decide(st, 30 * S, 1);
        assert_eq!(d.retry_after, RetryAfter::After(40 * S));
        let (d, _) = f.decide(st, 70 * S, 2);
        assert!(d.allowed);
        let a = FixedWindow::new(2, 60 * S, true);
        let (d, st) = a.decide(None, 70 * S, 1);
        assert_eq!(st.unwrap().start_us, 60 * S);
        assert_eq!(d.reset_after_us, 50 * S);
    }
}
