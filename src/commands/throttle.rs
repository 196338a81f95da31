//! `CL.THROTTLE key max_burst count period [quantity]`: redis-cell's
//! command and key format, without its crashes; README.md lists where the
//! replies differ and why. Its state is the TAT as a decimal number of
//! nanoseconds.

use super::args;
use super::definition::CommandDef;
use super::grammar::Param;
use super::{Host, Reply};
use crate::algorithm::cell::{Cell, CellError, CellGiveBack, CellReply, CellWrite};
use crate::algorithm::limits::{MAX_COUNT, MAX_DURATION};
use crate::algorithm::Micros;
use crate::codec::cell::{decode_cell_state, encode_cell_state};
use crate::codec::StateError;
use crate::engine::error::Error;
use crate::engine::store::{self, Store};
use crate::engine::{deny, hot};
use crate::policy::StateWrite;

pub const NAME: &str = "CL.THROTTLE";

/// How far ahead of now a TAT may lie: 100 years, so that any TAT before
/// the year 2162 fits redis-cell's signed 64-bit nanoseconds.
const MAX_TOLERANCE: Micros = Micros::from_secs(100 * 365 * 86_400);

/// `max_burst count period [quantity]`; `period` in whole seconds. Read as
/// redis-cell reads them: `+5` is 5 and `-0` is 0. A negative `quantity`
/// gives back.
pub const PARAMS: [Param; 4] = [
    Param::cell_integer("max_burst", 0, MAX_COUNT - 1),
    Param::cell_integer("count", 1, MAX_COUNT).called("count per period"),
    Param::cell_integer("period", 1, MAX_DURATION.as_u64() / 1_000_000),
    Param::cell_signed("quantity", MAX_COUNT),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub cell: Cell,
    /// Taken; given back when negative.
    pub quantity: i64,
}

/// Parses `max_burst count period [quantity]` (after the key).
pub fn parse<A: AsRef<[u8]>>(args: &[A]) -> Result<Call, Error> {
    if !(3..=4).contains(&args.len()) {
        return Err(Error::Arity(NAME));
    }
    let mut values = [1u64; 3];
    for ((param, arg), value) in PARAMS.iter().zip(args).zip(&mut values) {
        *value = param.parse(arg.as_ref())?;
    }
    let [max_burst, count, period] = values;
    let quantity = match args.get(3) {
        Some(arg) => args::cell_signed(arg.as_ref(), "quantity", MAX_COUNT)?,
        None => 1,
    };
    // All three are at most i64::MAX by the ranges above.
    let as_i64 = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
    let cell = Cell::new(
        as_i64(max_burst),
        as_i64(count),
        as_i64(period),
        i128::from(MAX_TOLERANCE.as_u64()) * 1_000,
    )
    .map_err(|e| match e {
        CellError::RateTooHigh => Error::RateTooHigh,
        CellError::BurstTooLong => {
            Error::horizon("(max_burst + 1) * period / count", MAX_TOLERANCE)
        }
    })?;
    Ok(Call { cell, quantity })
}

impl Call {
    /// The reply to a key on the deny list: limited, nothing charged,
    /// `retry_after` the denial's end in whole seconds rounded up (-1
    /// until removed), `remaining` 0.
    pub fn denied(&self, until: Option<Micros>, now: Micros) -> CellReply {
        let limit = self
            .cell
            .now_ns(now)
            .map_or(0, |ns| self.cell.throttle(None, ns, 0).0.limit);
        let retry_after_s = until.map_or(-1, |end| {
            let us = end.saturating_sub(now).as_u64();
            i64::try_from(us.div_ceil(1_000_000)).unwrap_or(i64::MAX)
        });
        CellReply {
            limited: true,
            limit,
            remaining: 0,
            retry_after_s,
            reset_after_s: 0,
        }
    }

    /// Answers the call at `now` on the key's stored value (`None`: no
    /// key), as the command does: the reply and, when admitted, the new
    /// state and its TTL.
    pub fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
    ) -> Result<(CellReply, Option<(StateWrite, Micros)>), Error> {
        // redis-cell's state is signed 64-bit nanoseconds: refuse a time at
        // which an admitted request's TAT would not fit (around 2262),
        // rather than store a clamped, too early one.
        let now_ns = self
            .cell
            .now_ns(now)
            .ok_or(Error::ClockOutOfRange("CL.THROTTLE's nanosecond state"))?;
        let stored = stored
            .map(decode_cell_state)
            .transpose()
            .map_err(|e| match e {
                StateError::OtherKind(kind) => Error::other_kind(NAME, kind),
                _ => Error::NotCellState,
            })?;
        let tat = |w: CellWrite| {
            let ttl = Micros::new(u64::try_from(w.ttl_ns).unwrap_or(0).div_ceil(1_000));
            (StateWrite::Value(encode_cell_state(w.tat_ns).into()), ttl)
        };
        if self.quantity < 0 {
            let (reply, give) = self.cell.give_back(stored, now_ns, -self.quantity);
            let write = match give {
                CellGiveBack::Nothing => None,
                CellGiveBack::Tat(w) => Some(tat(w)),
                CellGiveBack::Full => Some((StateWrite::Delete, Micros::ZERO)),
            };
            return Ok((reply, write));
        }
        let (reply, write) = self.cell.throttle(stored, now_ns, self.quantity);
        Ok((reply, write.map(tat)))
    }
}

pub fn run<H: Host>(_command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity(NAME));
    };
    let call = parse(rest)?;
    let now = host.now();
    // Refuse a time out of range before opening the key.
    call.cell
        .now_ns(now)
        .ok_or(Error::ClockOutOfRange("CL.THROTTLE's nanosecond state"))?;
    let keys = std::slice::from_ref(key);
    if hot::is_on() {
        hot::count(keys, now);
    }
    if let Some(until) = deny::ends(key.as_ref(), now) {
        return Ok(Reply::Throttle(call.denied(until, now)));
    }
    let mut store = host.open(keys, false);
    let (reply, write) = call.decide(store.value(0)?, now)?;
    if let Some((value, ttl)) = write {
        store::write_one(&mut store, 0, &value, ttl)?;
    }
    Ok(Reply::Throttle(reply))
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
        // A negative quantity gives back.
        assert_eq!(
            parse(&[&b"1"[..], b"30", b"60", b"-3"]).unwrap().quantity,
            -3
        );
        assert_eq!(
            parse(&[&b"1"[..], b"30", b"60", b"+3"]).unwrap().quantity,
            3
        );
        assert_eq!(
            parse(&[&b"1"[..], b"30", b"60", b"-0"]).unwrap().quantity,
            0
        );
        assert_eq!(
            parse(&[&b"1"[..], b"30", b"60", b"-9223372036854775807"])
                .unwrap()
                .quantity,
            -i64::MAX
        );
        for bad in [
            &b"-9223372036854775808"[..],
            b"--1",
            b"-+1",
            b"-",
            b"x",
            b"9223372036854775808",
        ] {
            assert_eq!(
                parse(&[&b"1"[..], b"30", b"60", bad])
                    .unwrap_err()
                    .to_string(),
                "ERR quantity must be an integer from -9223372036854775807 to 9223372036854775807",
                "{bad:?}"
            );
        }
        assert_eq!(parse(&[&b"1"[..], b"30"]), Err(Error::Arity(NAME)));
        // Signs as redis-cell reads them.
        assert_eq!(
            parse(&[&b"+15"[..], b"+30", b"60", b"-0"]),
            parse(&[&b"15"[..], b"30", b"60", b"0"])
        );
        for bad in [
            &b"-5"[..],
            b"++5",
            b"+",
            b"-",
            b" 5",
            b"+-0",
            b"-+0",
            b"+ 5",
        ] {
            assert_eq!(
                parse(&[bad, b"30", b"60"]).unwrap_err().to_string(),
                "ERR max_burst must be an integer from 0 to 9223372036854775806",
                "{bad:?}"
            );
        }
    }
}
