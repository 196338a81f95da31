//! Token bucket: holds up to `capacity` tokens, starts full, gains `refill`
//! tokens per `period` continuously, and each request takes `cost` tokens.
//!
//! The state is the time at which the bucket will be full again, so the
//! token count at any moment is exact: `capacity - (full_at - now) × refill /
//! period`. For equal parameters this admits exactly what GCRA admits (the
//! two are the same policy seen from two sides); the bucket's parameters
//! speak in tokens, GCRA's in a rate and a burst.

use super::schedule::{Schedule, ScheduleError};
use super::Micros;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    schedule: Schedule,
}

impl TokenBucket {
    /// All arguments at least 1.
    pub fn new(capacity: u64, refill: u64, period: Micros) -> Result<TokenBucket, ScheduleError> {
        Ok(TokenBucket {
            schedule: Schedule::new(capacity, refill, period)?,
        })
    }

    /// The schedule that decides, refunds and forces for it; its stored
    /// state is the time the bucket is full again (`None`: full now).
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::RetryAfter;

    const SECOND: Micros = Micros::from_secs(1);
    const HALF_SECOND: Micros = Micros::from_millis(500);

    #[test]
    fn starts_full_and_refills_continuously() {
        // 10 tokens, 2 per second.
        let b = TokenBucket::new(10, 2, SECOND).unwrap();
        let (d, full_at) = b.schedule().decide(None, Micros::ZERO, 10);
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.reset_after, Micros::from_secs(5));
        // Half a second later one token is back; two cost 1 s of refill.
        let (d, _) = b.schedule().decide(full_at, HALF_SECOND, 2);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 1);
        assert_eq!(d.retry_after, RetryAfter::After(HALF_SECOND));
        let (d, _) = b.schedule().decide(full_at, HALF_SECOND, 1);
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
    }
}
