//! Exact virtual scheduling: the arithmetic that GCRA and the token bucket share.
//!
//! A schedule admits one unit of cost every `interval` microseconds on
//! average and at most `burst` units at once. Its only state is the
//! theoretical arrival time (TAT): the time at which the limiter would be
//! full again. The interval `period / rate` is rarely a whole number of
//! microseconds (1 s / 3), so the TAT is kept as an exact fraction and all
//! arithmetic runs in *ticks* of `1 / den` microseconds, where `den` is the
//! reduced denominator of the interval. Nothing is ever rounded, so there is
//! no drift: the j-th admission after a burst falls exactly at `j × interval`.

use super::{
    clamp_micros, clamp_u64, div_ceil_u128, div_u128, Decision, Micros, RetryAfter, MAX_HORIZON,
};

/// A theoretical arrival time: `whole + frac_num / frac_den` microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tat {
    pub whole: Micros,
    /// Numerator of the sub-microsecond part; 0 when the TAT is whole.
    pub frac_num: u64,
    /// Denominator of the sub-microsecond part; at least 1.
    pub frac_den: u64,
}

impl Tat {
    /// A whole number of microseconds.
    pub fn whole(t: Micros) -> Tat {
        Tat {
            whole: t,
            frac_num: 0,
            frac_den: 1,
        }
    }

    /// This time in ticks of `1/den` µs. A fraction stored with another
    /// denominator (the limit was changed) is rounded up, never down, so a
    /// changed limit can only make the next decision stricter by < 1 µs.
    fn to_ticks(self, den: u64) -> u128 {
        let whole = u128::from(self.whole.as_u64()) * u128::from(den);
        let frac_den = u128::from(self.frac_den.max(1));
        let frac_num = u128::from(self.frac_num).min(frac_den);
        let frac = if frac_den == u128::from(den) {
            frac_num
        } else {
            div_ceil_u128(frac_num * u128::from(den), frac_den)
        };
        whole.saturating_add(frac)
    }

    /// The same time with its fraction in `den`ths of a µs (rounded up,
    /// as [`Tat::to_ticks`] rounds).
    pub fn with_den(self, den: u64) -> Tat {
        let den = den.max(1);
        if self.frac_num == 0 || self.frac_den == den {
            return self;
        }
        Tat::from_ticks(self.to_ticks(den), den)
    }

    fn from_ticks(ticks: u128, den: u64) -> Tat {
        let den128 = u128::from(den);
        let whole = div_u128(ticks, den128);
        let frac_num = (ticks - whole * den128) as u64;
        Tat {
            whole: clamp_micros(whole),
            frac_num,
            frac_den: if frac_num == 0 { 1 } else { den },
        }
    }
}

/// Why a schedule's parameters were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleError {
    /// `burst × period / rate` exceeds [`MAX_HORIZON`].
    HorizonTooLong,
}

/// Admits `rate` units per `period` on average and `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    burst: u64,
    /// The emission interval in ticks: `period / gcd` (in µs).
    interval_ticks: u64,
    /// Ticks per microsecond: `rate / gcd`.
    den: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Schedule {
    /// The emission interval in whole microseconds, rounded up.
    pub fn interval(&self) -> Micros {
        Micros::new(self.interval_ticks.div_ceil(self.den.max(1)))
    }

    /// `burst`, `rate` and `period` must all be at least 1 (µs).
    pub fn new(burst: u64, rate: u64, period: Micros) -> Result<Schedule, ScheduleError> {
        let (burst, rate, period_us) = (burst.max(1), rate.max(1), period.as_u64().max(1));
        let horizon_us = div_ceil_u128(u128::from(burst) * u128::from(period_us), u128::from(rate));
        if horizon_us > u128::from(MAX_HORIZON.as_u64()) {
            return Err(ScheduleError::HorizonTooLong);
        }
        let g = gcd(period_us, rate);
        Ok(Schedule {
            burst,
            interval_ticks: period_us / g,
            den: rate / g,
        })
    }

    /// Decides a request of `cost` units at `now` against the stored TAT
    /// (`None`: a fresh key). Returns the decision and the TAT to store, which
    /// is `Some` only when the state changes (admitted with `cost > 0`).
    pub fn decide(&self, stored: Option<Tat>, now: Micros, cost: u64) -> (Decision, Option<Tat>) {
        let den = u128::from(self.den);
        let interval = u128::from(self.interval_ticks);
        let now = u128::from(now.as_u64()) * den;
        // The span of a full burst: a request is admitted while the backlog it
        // leaves (TAT - now) is at most this.
        let tolerance = u128::from(self.burst) * interval;
        let tat = self.current(stored, now);

        let (allowed, after, retry_after) = if cost == 0 {
            (true, tat, RetryAfter::NotNeeded)
        } else if cost > self.burst {
            (false, tat, RetryAfter::Never)
        } else {
            let new_tat = tat.saturating_add(u128::from(cost) * interval);
            let backlog = new_tat.saturating_sub(now);
            if backlog <= tolerance {
                (true, new_tat, RetryAfter::NotNeeded)
            } else {
                let wait = div_ceil_u128(backlog - tolerance, den);
                (false, tat, RetryAfter::After(clamp_micros(wait)))
            }
        };

        let backlog = after.saturating_sub(now);
        let decision = Decision {
            allowed,
            limit: self.burst,
            remaining: clamp_u64(div_u128(tolerance.saturating_sub(backlog), interval)),
            retry_after,
            reset_after: clamp_micros(div_ceil_u128(backlog, den)),
        };
        let new_state = (allowed && cost > 0).then(|| Tat::from_ticks(after, self.den));
        (decision, new_state)
    }
}

/// A schedule's pace: its emission interval, `interval_ticks / den` µs
/// (reduced). What a stored TAT needs besides itself to say how many units
/// it holds: the units used are the backlog over the interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    pub interval_ticks: u64,
    /// Ticks per microsecond; at least 1.
    pub den: u64,
}

impl Schedule {
    /// The pace this schedule emits at.
    pub fn pace(&self) -> Pace {
        Pace {
            interval_ticks: self.interval_ticks,
            den: self.den,
        }
    }

    /// `tat`, written at the pace `from`, as this schedule's TAT holding
    /// the same units used at `now`: the backlog is rescaled from one
    /// interval to the other, rounded up (never a fraction of a unit
    /// given away), and capped at [`MAX_HORIZON`]. A TAT already past
    /// (nothing used) is kept as it is. Used units then drain at this
    /// schedule's rate.
    pub fn carry(&self, tat: Tat, from: Pace, now: Micros) -> Tat {
        let (from_den, from_interval) = (from.den.max(1), from.interval_ticks.max(1));
        if from == self.pace() {
            return tat;
        }
        let now_from = u128::from(now.as_u64()) * u128::from(from_den);
        let backlog = tat.to_ticks(from_den).saturating_sub(now_from);
        if backlog == 0 {
            return tat;
        }
        let (whole, part) = (
            backlog / u128::from(from_interval),
            backlog % u128::from(from_interval),
        );
        let to = u128::from(self.interval_ticks);
        let horizon = u128::from(MAX_HORIZON.as_u64()) * u128::from(self.den);
        let rescaled = whole
            .checked_mul(to)
            .and_then(|w| w.checked_add(div_ceil_u128(part * to, u128::from(from_interval))))
            .map_or(horizon, |b| b.min(horizon));
        let now_to = u128::from(now.as_u64()) * u128::from(self.den);
        Tat::from_ticks(now_to + rescaled, self.den)
    }
}

impl Schedule {
    /// The TAT in ticks as a decision at `now` (in ticks) sees it.
    ///
    /// A TAT in the past means the limiter is full, and capacity beyond
    /// full is lost: the schedule restarts at `now`, as for a fresh key.
    /// The clock reads whole microseconds, so a TAT less than 1 µs before
    /// `now` is the moment the schedule asked for, which the clock could not
    /// show: it is kept, or a burst of 1 at a rate that does not divide the
    /// period would drift by the rounding on every request. Anything older
    /// restarts exactly at `now`, never earlier.
    fn current(&self, stored: Option<Tat>, now: u128) -> u128 {
        let within_a_microsecond = now.saturating_sub(u128::from(self.den) - 1);
        match stored.map(|t| t.to_ticks(self.den)) {
            Some(tat) if tat >= within_a_microsecond => tat,
            _ => now,
        }
    }

    /// Gives back `n` units: the TAT moves back `n` emission intervals,
    /// never before `now` (a full limiter). `None` when nothing changes.
    pub fn refund(&self, stored: Option<Tat>, now: Micros, n: u64) -> Option<Tat> {
        let now = u128::from(now.as_u64()) * u128::from(self.den);
        let tat = self.current(Some(stored?), now);
        if tat <= now || n == 0 {
            return None;
        }
        let back = u128::from(n).saturating_mul(u128::from(self.interval_ticks));
        Some(Tat::from_ticks(tat.saturating_sub(back).max(now), self.den))
    }

    /// The most it admits at once.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Charges `cost` units whether or not they fit, as [`Schedule::force`],
    /// but never leaving a debt (the backlog beyond a full burst) longer
    /// than `max_debt` to repay: what is charged beyond it is forgotten.
    pub fn force_capped(
        &self,
        stored: Option<Tat>,
        now: Micros,
        cost: u64,
        max_debt: Micros,
    ) -> Option<Tat> {
        let new = self.force(stored, now, cost)?;
        let den = u128::from(self.den);
        let cap = u128::from(now.as_u64()) * den
            + u128::from(self.burst) * u128::from(self.interval_ticks)
            + u128::from(max_debt.as_u64()) * den;
        let old = stored.map_or(0, |t| t.to_ticks(self.den));
        let ticks = new.to_ticks(self.den);
        // A debt already past the cap (the cap was lowered) is kept, never
        // grown; one within it grows up to the cap.
        Some(if ticks <= cap {
            new
        } else if old >= cap {
            stored?
        } else {
            Tat::from_ticks(cap, self.den)
        })
    }

    /// Charges `cost` units whether or not they fit: the TAT may run ahead
    /// of `now` by more than a burst (debt). `None` when the limiter would
    /// then take longer than [`MAX_HORIZON`] to be full again.
    pub fn force(&self, stored: Option<Tat>, now: Micros, cost: u64) -> Option<Tat> {
        let now = u128::from(now.as_u64()) * u128::from(self.den);
        let tat = self.current(stored, now);
        let new =
            tat.checked_add(u128::from(cost).checked_mul(u128::from(self.interval_ticks))?)?;
        let backlog_us = div_ceil_u128(new.saturating_sub(now), u128::from(self.den));
        (backlog_us <= u128::from(MAX_HORIZON.as_u64())).then(|| Tat::from_ticks(new, self.den))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000;

    fn us(n: u64) -> Micros {
        Micros::new(n)
    }

    fn run(s: &Schedule, state: &mut Option<Tat>, now: u64, cost: u64) -> Decision {
        let (d, new) = s.decide(*state, us(now), cost);
        if let Some(t) = new {
            *state = Some(t);
        }
        d
    }

    #[test]
    fn a_changed_pace_carries_the_units_used() {
        let hour = us(3_600 * SECOND);
        let two = Schedule::new(2, 2, hour).unwrap();
        let four = Schedule::new(4, 4, hour).unwrap();
        // Two admitted under 2 per hour: raised to 4, two more at once.
        let mut st = None;
        assert!(run(&two, &mut st, 0, 1).allowed);
        assert!(run(&two, &mut st, 0, 1).allowed);
        let mut raised = Some(four.carry(st.unwrap(), two.pace(), us(0)));
        assert_eq!(run(&four, &mut raised, 0, 0).remaining, 2);
        assert!(run(&four, &mut raised, 0, 1).allowed);
        assert!(run(&four, &mut raised, 0, 1).allowed);
        assert!(!run(&four, &mut raised, 0, 1).allowed);
        // Three used under 4 per hour, cut to 2: denied until one is left
        // (1.5 h of backlog at 30 min a unit drains to 1 in an hour).
        let mut st = None;
        for _ in 0..3 {
            assert!(run(&four, &mut st, 0, 1).allowed);
        }
        let mut cut = Some(two.carry(st.unwrap(), four.pace(), us(0)));
        let d = run(&two, &mut cut, 0, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, RetryAfter::After(us(3_600 * SECOND)));
        assert!(run(&two, &mut cut, 3_600 * SECOND, 1).allowed);
        // The same pace, or nothing used: the TAT as it was.
        let t = Tat::whole(us(5));
        assert_eq!(two.carry(t, two.pace(), us(9)), t);
        assert_eq!(four.carry(t, two.pace(), us(9)), t);
    }

    #[test]
    fn carrying_rounds_up_and_caps_at_the_horizon() {
        let third = Schedule::new(3, 3, us(SECOND)).unwrap();
        let whole = Schedule::new(1, 1, us(SECOND)).unwrap();
        // Half a unit used at 1 per second is half a unit at 3 per second.
        let t = Tat::whole(us(500_000));
        let carried = third.carry(t, whole.pace(), us(0));
        assert_eq!(carried.to_ticks(3), 500_000);
        // A third of a unit at 3 µs a unit is 2/3 µs at 2 µs a unit: 1 µs.
        let three = Schedule::new(1, 1, us(3)).unwrap();
        let two = Schedule::new(1, 1, us(2)).unwrap();
        let carried = two.carry(Tat::whole(us(1)), three.pace(), us(0));
        assert_eq!(carried, Tat::whole(us(1)));
        // A backlog beyond what the new interval can hold is capped.
        let fast = Schedule::new(1, 1_000_000, us(1)).unwrap();
        let slow = Schedule::new(1, 1, MAX_HORIZON).unwrap();
        let far = Tat::whole(us(1_000_000));
        let capped = slow.carry(far, fast.pace(), us(0));
        assert_eq!(capped.whole, MAX_HORIZON);
    }

    #[test]
    fn fresh_key_admits_a_burst_then_denies_with_exact_wait() {
        let s = Schedule::new(3, 3, us(SECOND)).unwrap();
        let mut st = None;
        for left in [2, 1, 0] {
            let d = run(&s, &mut st, 0, 1);
            assert!(d.allowed);
            assert_eq!(d.remaining, left);
        }
        let d = run(&s, &mut st, 0, 1);
        assert!(!d.allowed);
        // One unit frees up after 1/3 s = 333_333.33 µs: rounded up.
        assert_eq!(d.retry_after, RetryAfter::After(us(333_334)));
        assert_eq!(d.reset_after, us(SECOND));
    }

    #[test]
    fn no_drift_for_rates_that_do_not_divide_the_period() {
        for (burst, rate, period) in [
            (1, 3, SECOND),
            (3, 3, SECOND),
            (7, 7, 60 * SECOND),
            (1, 7, 60 * SECOND),
            (2, 999_983, SECOND),
        ] {
            let s = Schedule::new(burst, rate, us(period)).unwrap();
            let mut st = None;
            for _ in 0..burst {
                assert!(run(&s, &mut st, 0, 1).allowed);
            }
            for j in 1..2_000u128 {
                let exact = j * u128::from(period);
                let at = div_ceil_u128(exact, u128::from(rate)) as u64;
                assert!(!run(&s, &mut st, at - 1, 1).allowed, "j={j} early");
                assert!(run(&s, &mut st, at, 1).allowed, "j={j} on time");
            }
        }
    }

    #[test]
    fn a_schedule_in_the_past_restarts_at_now() {
        // 9 per second, bursts of 2: 111,111.1 µs apart (den 9).
        let s = Schedule::new(2, 9, us(SECOND)).unwrap();
        let t0 = 1_900_000_000_000_000;
        let mut idle = None;
        run(&s, &mut idle, t0, 1);
        run(&s, &mut idle, t0 + 500_000, 2);
        let mut fresh = None;
        run(&s, &mut fresh, t0 + 500_000, 2);
        assert_eq!(idle, fresh, "an idle key restarts as a fresh one");
        let (d, _) = s.decide(idle, us(t0 + 722_222), 1);
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
        // A TAT less than 1 µs behind is the moment the schedule asked for.
        let just = Tat {
            whole: us(t0 - 1),
            frac_num: 1,
            frac_den: 9,
        };
        let (_, kept) = s.decide(Some(just), us(t0), 1);
        assert_eq!(
            kept.unwrap().to_ticks(9),
            (u128::from(t0) - 1) * 9 + 1 + 1_000_000
        );
    }

    #[test]
    fn cost_above_burst_is_never_admitted() {
        let s = Schedule::new(5, 1, us(SECOND)).unwrap();
        let (d, new) = s.decide(None, Micros::ZERO, 6);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, RetryAfter::Never);
        assert_eq!(d.remaining, 5);
        assert_eq!(new, None);
    }

    #[test]
    fn zero_cost_never_changes_state() {
        let s = Schedule::new(5, 1, us(SECOND)).unwrap();
        let (d, new) = s.decide(Some(Tat::whole(us(3 * SECOND))), us(SECOND), 0);
        assert!(d.allowed);
        assert_eq!(new, None);
        assert_eq!(d.remaining, 3);
        assert_eq!(d.reset_after, us(2 * SECOND));
    }

    #[test]
    fn a_changed_rate_rounds_the_stored_fraction_up() {
        let tat = Tat {
            whole: us(10),
            frac_num: 1,
            frac_den: 3,
        };
        assert_eq!(tat.to_ticks(3), 31);
        assert_eq!(tat.to_ticks(7), 73);
        assert_eq!(Tat::from_ticks(31, 3), tat);
    }

    #[test]
    fn horizon_is_bounded() {
        assert_eq!(
            Schedule::new(u64::MAX, 1, us(SECOND)),
            Err(ScheduleError::HorizonTooLong)
        );
        assert!(Schedule::new(u64::MAX >> 1, u64::MAX >> 1, us(36_500 * 86_400 * SECOND)).is_ok());
    }

    #[test]
    fn extreme_times_do_not_overflow() {
        let s = Schedule::new(i64::MAX as u64, i64::MAX as u64, us(SECOND)).unwrap();
        let hostile = Tat {
            whole: Micros::MAX,
            frac_num: u64::MAX,
            frac_den: u64::MAX,
        };
        let (d, _) = s.decide(Some(hostile), us(i64::MAX as u64), i64::MAX as u64);
        assert!(!d.allowed);
        let (d, new) = s.decide(None, us(i64::MAX as u64), i64::MAX as u64);
        assert!(d.allowed);
        assert!(new.is_some());
    }
}
