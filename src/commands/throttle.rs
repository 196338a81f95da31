//! `CL.THROTTLE key max_burst count period [quantity]`: redis-cell's
//! command, reply for reply and byte for byte in the key, without its
//! crashes. Its state is the TAT as a decimal number of nanoseconds.

use super::Verdict;
use crate::algorithm::cell::{Cell, CellError};
use crate::args::{self, MAX_COUNT, MAX_DURATION_MS};
use crate::codec::cell::{decode_cell_state, encode_cell_state};
use crate::codec::StateError;
use crate::error::Error;
use crate::server::clock;
use crate::server::ffi::{self, Arg, Ctx};
use crate::server::key::LimiterKey;

pub const NAME: &str = "CL.THROTTLE";

/// How far ahead of now a TAT may lie: 100 years, so that any TAT before
/// the year 2162 fits redis-cell's signed 64-bit nanoseconds.
const MAX_TOLERANCE_NS: i128 = 100 * 365 * 86_400 * 1_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub cell: Cell,
    pub quantity: i64,
}

/// Parses `max_burst count period [quantity]` (after the key).
pub fn parse<A: AsRef<[u8]>>(args: &[A]) -> Result<Call, Error> {
    let (max_burst, count, period, quantity) = match args {
        [b, c, p] => (b, c, p, None),
        [b, c, p, q] => (b, c, p, Some(q)),
        _ => return Err(Error::Arity("cl.throttle")),
    };
    let max_burst = args::integer(max_burst.as_ref(), "max_burst", 0, MAX_COUNT - 1)?;
    let count = args::integer(count.as_ref(), "count per period", 1, MAX_COUNT)?;
    let period = args::integer(period.as_ref(), "period", 1, MAX_DURATION_MS / 1_000)?;
    let quantity = match quantity {
        Some(q) => args::integer(q.as_ref(), "quantity", 0, MAX_COUNT)?,
        None => 1,
    };
    // All four are at most i64::MAX by the ranges above.
    let as_i64 = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
    let cell = Cell::new(
        as_i64(max_burst),
        as_i64(count),
        as_i64(period),
        MAX_TOLERANCE_NS,
    )
    .map_err(|e| match e {
        CellError::RateTooHigh => Error::RateTooHigh,
        CellError::BurstTooLong => Error::HorizonTooLong {
            span: "(max_burst + 1) * period / count",
            max: "100 years",
        },
    })?;
    Ok(Call {
        cell,
        quantity: as_i64(quantity),
    })
}

pub fn run(ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity("cl.throttle"));
    };
    let call = parse(rest)?;
    // redis-cell's state is signed 64-bit nanoseconds: refuse a time at
    // which an admitted request's TAT would not fit (around 2262), rather
    // than store a clamped, too early one.
    let now_ns = call
        .cell
        .now_ns(clock::now())
        .ok_or(Error::ClockOutOfRange("CL.THROTTLE's nanosecond state"))?;
    let mut key = LimiterKey::open(ctx, *key);
    let stored = key
        .value()?
        .map(decode_cell_state)
        .transpose()
        .map_err(|e| match e {
            StateError::OtherKind(kind) => Error::other_kind(NAME, kind),
            _ => Error::NotCellState,
        })?;
    let (reply, write) = call.cell.throttle(stored, now_ns, call.quantity);
    if let Some(w) = write {
        let ttl_ms = u64::try_from(w.ttl_ns).unwrap_or(0).div_ceil(1_000_000);
        key.write(&encode_cell_state(w.tat_ns), ttl_ms);
    }
    ffi::reply_array(ctx, 5);
    ffi::reply_int(ctx, i64::from(reply.limited));
    ffi::reply_int(ctx, reply.limit);
    ffi::reply_int(ctx, reply.remaining);
    ffi::reply_int(ctx, reply.retry_after_s);
    ffi::reply_int(ctx, reply.reset_after_s);
    Ok(Verdict::of(!reply.limited))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing() {
        assert!(parse(&[&b"15"[..], b"30", b"60"]).is_ok());
        assert_eq!(
            parse(&[&b"-1"[..], b"30", b"60"]).unwrap_err().to_string(),
            "ERR max_burst must be an integer from 0 to 9223372036854775806"
        );
        assert_eq!(
            parse(&[&b"1"[..], b"30", b"60", b"-1"])
                .unwrap_err()
                .to_string(),
            "ERR quantity must be an integer from 0 to 9223372036854775807"
        );
        assert_eq!(parse(&[&b"1"[..], b"30"]), Err(Error::Arity("cl.throttle")));
    }
}
