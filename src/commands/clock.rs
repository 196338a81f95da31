//! `RL.CLOCK [SET us | ADVANCE us]`: the limiter's time in microseconds
//! since the Unix epoch. SET and ADVANCE work only with `clock manual`.

use super::Verdict;
use crate::algorithm::Micros;
use crate::args;
use crate::error::{printable, Error};
use crate::server::clock::{self, MAX_US};
use crate::server::ffi::{self, Arg, Ctx};

pub fn run(ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let now = match args {
        [_] => clock::now().as_u64(),
        [_, sub, value] if sub.as_ref().eq_ignore_ascii_case(b"SET") => {
            require_manual()?;
            let us = args::integer(value.as_ref(), "microseconds", 0, MAX_US)?;
            clock::set_us(Micros::new(us));
            us
        }
        [_, sub, value] if sub.as_ref().eq_ignore_ascii_case(b"ADVANCE") => {
            require_manual()?;
            let now = clock::now().as_u64();
            let us = args::integer(value.as_ref(), "microseconds", 0, MAX_US - now.min(MAX_US))?;
            clock::set_us(Micros::new(now + us));
            now + us
        }
        [_, sub, _] => {
            return Err(Error::UnknownSubcommand {
                command: "RL.CLOCK",
                hint: "SET or ADVANCE",
                given: printable(sub.as_ref()),
            })
        }
        _ => return Err(Error::Arity("rl.clock")),
    };
    ffi::reply_int(ctx, i64::try_from(now).unwrap_or(i64::MAX));
    Ok(Verdict::Other)
}

fn require_manual() -> Result<(), Error> {
    if clock::is_manual() {
        Ok(())
    } else {
        Err(Error::ClockNotManual)
    }
}
