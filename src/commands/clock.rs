//! `RL.CLOCK [SET us | ADVANCE us]`: the limiter's time in microseconds
//! since the Unix epoch. SET and ADVANCE work only with `clock manual`.

use super::definition::CommandDef;
use super::grammar::{join_words, Param};
use super::{Host, Reply};
use crate::algorithm::limits::MAX_US;
use crate::algorithm::Micros;
use crate::engine::error::{printable, Error};

const SET: usize = 0;
const ADVANCE: usize = 1;

pub const SUBCOMMANDS: [(&str, Param); 2] = [
    ("SET", Param::integer("microseconds", 0, MAX_US)),
    ("ADVANCE", Param::integer("microseconds", 0, MAX_US)),
];

pub fn run<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let now = match args {
        [_] => host.now(),
        [_, sub, value] => {
            let Some(i) = SUBCOMMANDS
                .iter()
                .position(|(word, _)| sub.as_ref().eq_ignore_ascii_case(word.as_bytes()))
            else {
                let words: Vec<&str> = SUBCOMMANDS.iter().map(|(w, _)| *w).collect();
                return Err(Error::UnknownSubcommand {
                    command: command.name,
                    hint: join_words(&words, "or"),
                    given: printable(sub.as_ref()),
                });
            };
            if !host.clock_is_manual() {
                return Err(Error::ClockNotManual);
            }
            let param = SUBCOMMANDS[i].1;
            let to = match i {
                SET => param.parse(value.as_ref())?,
                _ => {
                    debug_assert_eq!(i, ADVANCE);
                    // Never past the latest time the clock may show.
                    let now = host.now().as_u64().min(MAX_US);
                    let by = Param::integer(param.name, 0, MAX_US - now).parse(value.as_ref())?;
                    now + by
                }
            };
            // Waiters whose time has come are admitted (or time out) now.
            host.set_clock(Micros::new(to));
            Micros::new(to)
        }
        _ => return Err(Error::Arity(command.name)),
    };
    Ok(Reply::Int(i64::try_from(now.as_u64()).unwrap_or(i64::MAX)))
}
