//! redis-cell's `CL.THROTTLE`, reproduced decision for decision.
//!
//! redis-cell 0.5 runs GCRA in nanoseconds with its own conventions: the
//! limit is `max_burst + 1`, the emission interval is `period / count`
//! truncated to whole nanoseconds, and replies are in seconds, rounded up
//! only when the remainder has a whole millisecond. Its state is the TAT as a
//! decimal number of nanoseconds. This module follows those rules so that
//! the two modules can replace each other under traffic, except where
//! redis-cell's answer breaks GCRA (README.md, CL.THROTTLE, lists each case).

use super::Micros;

/// Nanoseconds in one second.
pub const NS_PER_S: i128 = 1_000_000_000;
const NS_PER_MS: i128 = 1_000_000;
const NS_PER_US: i128 = 1_000;

/// Parameters of one `CL.THROTTLE` call, already validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// `max_burst + 1`: the most admitted at once.
    limit: i128,
    /// `period / count` in whole nanoseconds (at least 1).
    interval_ns: i128,
    /// Delay variation tolerance: `interval × limit`.
    tolerance_ns: i128,
}

/// What `CL.THROTTLE` replies, field for field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellReply {
    pub limited: bool,
    pub limit: i64,
    pub remaining: i64,
    pub retry_after_s: i64,
    pub reset_after_s: i64,
}

/// An admitted request's new state: the TAT and how long it must live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellWrite {
    pub tat_ns: i64,
    pub ttl_ns: i64,
}

/// What a give-back changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellGiveBack {
    /// Nothing: no key (a full limiter) or nothing to move.
    Nothing,
    /// The TAT moved back.
    Tat(CellWrite),
    /// The limiter is full again: the key goes, as no key means full.
    Full,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellError {
    /// `count` exceeds one per nanosecond of `period`.
    RateTooHigh,
    /// `(max_burst + 1) × period / count` exceeds `max_tolerance_ns`.
    BurstTooLong,
}

impl Cell {
    /// `max_burst >= 0`, `count >= 1`, `period_s >= 1`; `max_tolerance_ns`
    /// bounds how far ahead of now a TAT may be stored.
    pub fn new(
        max_burst: i64,
        count: i64,
        period_s: i64,
        max_tolerance_ns: i128,
    ) -> Result<Cell, CellError> {
        let interval_ns = i128::from(period_s) * NS_PER_S / i128::from(count.max(1));
        if interval_ns < 1 {
            return Err(CellError::RateTooHigh);
        }
        let limit = i128::from(max_burst) + 1;
        let tolerance_ns = interval_ns * limit;
        if tolerance_ns > max_tolerance_ns {
            return Err(CellError::BurstTooLong);
        }
        Ok(Cell {
            limit,
            interval_ns,
            tolerance_ns,
        })
    }

    /// How far beyond now an admitted request may put the TAT.
    pub fn tolerance_ns(&self) -> i128 {
        self.tolerance_ns
    }

    /// The clock reading `now` in redis-cell's nanoseconds, or `None` if a
    /// TAT that an admitted request may store (up to the tolerance beyond
    /// now) would not fit its signed 64-bit state.
    pub fn now_ns(&self, now: Micros) -> Option<i64> {
        let now_ns = i128::from(now.as_u64()) * NS_PER_US;
        if now_ns + self.tolerance_ns > i128::from(i64::MAX) {
            return None;
        }
        i64::try_from(now_ns).ok()
    }

    /// Decides `quantity >= 0` at `now_ns` against the stored TAT. The write
    /// is `Some` only when the request is admitted with `quantity > 0`.
    pub fn throttle(
        &self,
        stored_tat_ns: Option<i64>,
        now_ns: i64,
        quantity: i64,
    ) -> (CellReply, Option<CellWrite>) {
        let now = i128::from(now_ns);
        // A TAT in the past is a full limiter, as a missing key is.
        // (redis-cell keeps it, and then answers a request it denies with a
        // negative reset and more remaining than its limit.)
        let tat = stored_tat_ns.map_or(now, i128::from).max(now);
        let increment = self.interval_ns * i128::from(quantity);
        let new_tat = tat + increment;
        let allow_at = new_tat - self.tolerance_ns;

        let (limited, ttl, retry_after, write) = if now < allow_at {
            // redis-cell reports -1 s when the request can never fit.
            let retry = if increment <= self.tolerance_ns {
                allow_at - now
            } else {
                -NS_PER_S
            };
            (true, tat - now, retry, None)
        } else {
            let ttl = new_tat - now;
            let write = (quantity > 0).then_some(CellWrite {
                tat_ns: clamp_i64(new_tat),
                ttl_ns: clamp_i64(ttl),
            });
            (false, ttl, -NS_PER_S, write)
        };

        let next = self.tolerance_ns - ttl;
        let remaining = if next > -self.interval_ns {
            let interval_us = self.interval_ns / NS_PER_US;
            let next_us = next / NS_PER_US;
            match interval_us {
                // Below a microsecond redis-cell divides by zero and aborts
                // the server; count in nanoseconds instead (at most limit).
                0 => next / self.interval_ns,
                _ => next_us / interval_us,
            }
            // A TAT stored under a larger limit can lie beyond this one's
            // tolerance: redis-cell then divides a negative and answers -1.
            .max(0)
        } else {
            0
        };

        // A denial that can be waited off says so truthfully: fewer than its
        // quantity remain (redis-cell's whole-microsecond division can say
        // 1), and the wait is at least a second (redis-cell drops a
        // sub-millisecond wait and says 0).
        let (remaining, retry_after_s) = if limited && retry_after >= 0 {
            let fewer = remaining.min((i128::from(quantity) - 1).max(0));
            (fewer, cell_seconds(retry_after).max(1))
        } else {
            (remaining, cell_seconds(retry_after))
        };
        let reply = CellReply {
            limited,
            limit: clamp_i64(self.limit),
            remaining: clamp_i64(remaining),
            retry_after_s: clamp_i64(retry_after_s),
            reset_after_s: clamp_i64(cell_seconds(ttl)),
        };
        (reply, write)
    }

    /// Gives back `n >= 1` at `now_ns`: a negative `quantity`, which
    /// redis-cell's users send to return what a request took. The TAT
    /// moves back `n` intervals, never before now (a full limiter). The
    /// reply is what `quantity 0` replies after it.
    pub fn give_back(
        &self,
        stored_tat_ns: Option<i64>,
        now_ns: i64,
        n: i64,
    ) -> (CellReply, CellGiveBack) {
        let Some(tat) = stored_tat_ns else {
            return (self.throttle(None, now_ns, 0).0, CellGiveBack::Nothing);
        };
        let new_tat = i128::from(tat) - self.interval_ns * i128::from(n.max(0));
        if new_tat <= i128::from(now_ns) {
            return (self.throttle(None, now_ns, 0).0, CellGiveBack::Full);
        }
        // Below the stored TAT, so within i64.
        let tat_ns = clamp_i64(new_tat);
        let write = CellWrite {
            tat_ns,
            ttl_ns: clamp_i64(new_tat - i128::from(now_ns)),
        };
        (
            self.throttle(Some(tat_ns), now_ns, 0).0,
            CellGiveBack::Tat(write),
        )
    }
}

/// redis-cell's rounding: whole seconds, plus one if the remainder holds at
/// least one whole millisecond (sub-millisecond remainders are dropped).
fn cell_seconds(ns: i128) -> i128 {
    let secs = ns / NS_PER_S;
    let sub_ms = (ns % NS_PER_S) / NS_PER_MS;
    secs + i128::from(sub_ms > 0)
}

fn clamp_i64(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: i128 = 100 * 365 * 86_400 * NS_PER_S;
    const S: i64 = 1_000_000_000;
    const MS: i64 = 1_000_000;

    fn reply(limited: bool, limit: i64, remaining: i64, retry: i64, reset: i64) -> CellReply {
        CellReply {
            limited,
            limit,
            remaining,
            retry_after_s: retry,
            reset_after_s: reset,
        }
    }

    #[test]
    fn readme_example() {
        let c = Cell::new(15, 30, 60, MAX).unwrap();
        let (r, w) = c.throttle(None, 1_000 * S, 1);
        assert_eq!(r, reply(false, 16, 15, -1, 2));
        assert_eq!(
            w,
            Some(CellWrite {
                tat_ns: 1_002 * S,
                ttl_ns: 2 * S
            })
        );
    }

    /// redis-cell's own case table (limit 5, one per second), in seconds.
    #[test]
    fn redis_cell_case_table() {
        let c = Cell::new(4, 1, 1, MAX).unwrap();
        let start = 1_700_000_000 * S;
        let mut tat = None;
        let cases: &[(i64, i64, CellReply)] = &[
            (0, 6, reply(true, 5, 5, -1, 0)),
            (0, 1, reply(false, 5, 4, -1, 1)),
            (0, 1, reply(false, 5, 3, -1, 2)),
            (0, 1, reply(false, 5, 2, -1, 3)),
            (0, 1, reply(false, 5, 1, -1, 4)),
            (0, 1, reply(false, 5, 0, -1, 5)),
            (0, 1, reply(true, 5, 0, 1, 5)),
            (3_000 * MS, 1, reply(false, 5, 2, -1, 3)),
            (3_100 * MS, 1, reply(false, 5, 1, -1, 4)),
            (4_000 * MS, 1, reply(false, 5, 1, -1, 4)),
            (8_000 * MS, 1, reply(false, 5, 4, -1, 1)),
            (9_500 * MS, 1, reply(false, 5, 4, -1, 1)),
            (9_500 * MS, 0, reply(false, 5, 4, -1, 1)),
            (9_500 * MS, 2, reply(false, 5, 2, -1, 3)),
            (9_500 * MS, 5, reply(true, 5, 2, 3, 3)),
        ];
        for (i, &(at, quantity, want)) in cases.iter().enumerate() {
            let (got, write) = c.throttle(tat, start + at, quantity);
            assert_eq!(got, want, "case {i}");
            if let Some(w) = write {
                tat = Some(w.tat_ns);
            }
        }
    }

    #[test]
    fn a_give_back_undoes_a_charge_and_stops_at_full() {
        // 5 at once, one a second.
        let c = Cell::new(4, 1, 1, MAX).unwrap();
        let now = 1_000 * S;
        let (_, w) = c.throttle(None, now, 3);
        let tat = w.unwrap().tat_ns;
        assert_eq!(tat, now + 3 * S);
        // Two back: as if one had been taken.
        let (r, g) = c.give_back(Some(tat), now, 2);
        let one = c.throttle(None, now, 1);
        assert_eq!(r, one.0);
        assert_eq!(g, CellGiveBack::Tat(one.1.unwrap()));
        // More than was taken: full again, the key goes.
        let (r, g) = c.give_back(Some(tat), now, 4);
        assert_eq!((r, g), (reply(false, 5, 5, -1, 0), CellGiveBack::Full));
        // A TAT in the past is full already; no key has nothing to give.
        assert_eq!(c.give_back(Some(now - S), now, 1).1, CellGiveBack::Full);
        assert_eq!(
            c.give_back(None, now, 1),
            (reply(false, 5, 5, -1, 0), CellGiveBack::Nothing)
        );
        // The largest give-back the parser takes does not overflow.
        assert_eq!(
            c.give_back(Some(i64::MAX), now, i64::MAX).1,
            CellGiveBack::Full
        );
    }

    #[test]
    fn sub_microsecond_intervals_count_remaining_in_nanoseconds() {
        // 1e9 per 2 s: one every 2 ns, limit 1001.
        let c = Cell::new(1_000, 1_000_000_000, 2, MAX).unwrap();
        let (r, _) = c.throttle(None, 1_700_000_000 * S, 1);
        assert_eq!(r, reply(false, 1_001, 1_000, -1, 0));
    }

    #[test]
    fn a_denial_leaves_less_than_its_quantity_and_waits_at_least_a_second() {
        // 101 per second: 9,900,990 ns apart, 9,900 whole µs. A TAT 924 ns
        // ahead: redis-cell says remaining 1 (9,900,066 ns is 9,900 µs)
        // and retry 0 (924 ns has no whole millisecond).
        let c = Cell::new(0, 101, 1, MAX).unwrap();
        let now = 1_000 * S;
        let (r, w) = c.throttle(Some(now + 924), now, 1);
        assert_eq!(r, reply(true, 1, 0, 1, 0));
        assert_eq!(w, None);
        // A larger quantity may leave some, fewer than it asks.
        let c = Cell::new(4, 5, 1, MAX).unwrap();
        let (r, _) = c.throttle(Some(now + 3 * 200 * MS), now, 3);
        assert_eq!(r, reply(true, 5, 2, 1, 1));
    }

    #[test]
    fn remaining_is_never_negative() {
        // Found by the fuzzer: a TAT beyond the tolerance by less than one
        // interval (the limit was lowered), divided in truncated µs.
        let c = Cell::new(1, 282_574_370_897_920, 1_328_041_217, MAX).unwrap();
        let (r, w) = c.throttle(Some(46_510), 32_814, 1_189_009_125_497_908_864);
        assert_eq!(r, reply(true, 2, 0, -1, 0));
        assert_eq!(w, None);
    }

    #[test]
    fn a_stale_tat_is_a_full_limiter() {
        let c = Cell::new(1, 1, 10, MAX).unwrap();
        let now = 1_700_000_000 * S;
        // Denied (3 > limit 2) against a TAT 20 s in the past: as if fresh.
        let (r, w) = c.throttle(Some(now - 20 * S), now, 3);
        assert_eq!(r, reply(true, 2, 2, -1, 0));
        assert_eq!(w, None);
        assert_eq!(c.throttle(None, now, 3).0, r);
    }

    #[test]
    fn the_clock_reads_in_nanoseconds_while_a_tat_fits() {
        let c = Cell::new(4, 1, 1, MAX).unwrap();
        let now = Micros::from_secs(1_700_000_000);
        assert_eq!(c.now_ns(now), Some(1_700_000_000 * S));
        // Around 2262 the TAT would no longer fit: 5 s of tolerance.
        let last = (i64::MAX - 5 * S) / 1_000;
        assert_eq!(c.now_ns(Micros::new(last as u64)), Some(last * 1_000));
        assert_eq!(c.now_ns(Micros::new(last as u64 + 1)), None);
        assert_eq!(c.now_ns(Micros::MAX), None);
    }

    #[test]
    fn parameters_are_bounded() {
        assert_eq!(
            Cell::new(0, 2_000_000_000, 1, MAX),
            Err(CellError::RateTooHigh)
        );
        assert_eq!(Cell::new(i64::MAX, 1, 1, MAX), Err(CellError::BurstTooLong));
    }
}
