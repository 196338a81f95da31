//! GCRA, the generic cell rate algorithm: a sustained `limit` per `period`,
//! and up to `burst` at once. Requests are spaced by the emission interval
//! `period / limit`; a burst may run ahead of that schedule by `burst`
//! intervals.

use super::schedule::{Schedule, ScheduleError};
use super::Micros;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    schedule: Schedule,
}

impl Gcra {
    /// `limit` requests per `period` sustained, `burst` at once
    /// (the caller defaults `burst` to `limit`). All at least 1.
    pub fn new(limit: u64, period: Micros, burst: u64) -> Result<Gcra, ScheduleError> {
        Ok(Gcra {
            schedule: Schedule::new(burst, limit, period)?,
        })
    }

    /// The schedule that decides, refunds and forces for it.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::RetryAfter;

    fn ms(n: u64) -> Micros {
        Micros::from_millis(n)
    }

    /// A case table in the style of redis-cell's: limit 5 per 5 s (one per
    /// second), burst 5, driven by an explicit clock.
    #[test]
    fn case_table() {
        let g = Gcra::new(5, ms(5_000), 5).unwrap();
        let mut state = None;
        // (now ms, cost, allowed, remaining, retry ms, reset ms)
        type Case = (u64, u64, bool, u64, Option<u64>, u64);
        let cases: &[Case] = &[
            (0, 6, false, 5, None, 0),
            (0, 1, true, 4, None, 1_000),
            (0, 1, true, 3, None, 2_000),
            (0, 1, true, 2, None, 3_000),
            (0, 1, true, 1, None, 4_000),
            (0, 1, true, 0, None, 5_000),
            (0, 1, false, 0, Some(1_000), 5_000),
            (3_000, 1, true, 2, None, 3_000),
            (3_100, 1, true, 1, None, 3_900),
            (4_000, 1, true, 1, None, 4_000),
            (8_000, 1, true, 4, None, 1_000),
            (9_500, 1, true, 4, None, 1_000),
            (9_500, 0, true, 4, None, 1_000),
            (9_500, 2, true, 2, None, 3_000),
            (9_500, 5, false, 2, Some(3_000), 3_000),
        ];
        for (i, &(now, cost, allowed, remaining, retry, reset)) in cases.iter().enumerate() {
            let (d, new) = g.schedule().decide(state, ms(now), cost);
            if let Some(t) = new {
                state = Some(t);
            }
            let want_retry = match (allowed, retry) {
                (true, _) => RetryAfter::NotNeeded,
                (false, Some(wait)) => RetryAfter::After(ms(wait)),
                (false, None) => RetryAfter::Never,
            };
            assert_eq!(d.allowed, allowed, "case {i}");
            assert_eq!(d.limit, 5, "case {i}");
            assert_eq!(d.remaining, remaining, "case {i}");
            assert_eq!(d.retry_after, want_retry, "case {i}");
            assert_eq!(d.reset_after, ms(reset), "case {i}");
        }
    }

    #[test]
    fn burst_above_limit_allows_a_larger_first_burst() {
        let g = Gcra::new(1, ms(1_000), 10).unwrap();
        let mut state = None;
        let mut n = 0;
        for _ in 0..20 {
            let (d, new) = g.schedule().decide(state, Micros::ZERO, 1);
            if let Some(t) = new {
                state = Some(t);
            }
            n += usize::from(d.allowed);
        }
        assert_eq!(n, 10);
    }
}
