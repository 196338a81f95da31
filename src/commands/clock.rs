//! `RL.CLOCK [SET us | ADVANCE us]`: the limiter's time in microseconds
//! since the Unix epoch. SET and ADVANCE work only with `clock manual`.

use super::definition::CommandDef;
use super::grammar::{join_words, Param};
use super::Verdict;
use crate::algorithm::Micros;
use crate::error::{printable, Error};
use crate::server::clock::{self, MAX_US};
use crate::server::{reply, wait, Arg, Ctx};

const SET: usize = 0;
const ADVANCE: usize = 1;

pub const SUBCOMMANDS: [(&str, Param); 2] = [
    ("SET", Param::integer("microseconds", 0, MAX_US)),
    ("ADVANCE", Param::integer("microseconds", 0, MAX_US)),
];

pub fn run(command: &CommandDef, ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let now = match args {
        [_] => clock::now(),
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
            if !clock::is_manual() {
                return Err(Error::ClockNotManual);
            }
            let param = SUBCOMMANDS[i].1;
            let to = match i {
                SET => param.parse(value.as_ref())?,
                _ => {
                    debug_assert_eq!(i, ADVANCE);
                    // Never past the latest time the clock may show.
                    let now = clock::now().as_u64().min(MAX_US);
                    let by = Param::integer(param.name, 0, MAX_US - now).parse(value.as_ref())?;
                    now + by
                }
            };
            let from = clock::now();
            clock::set(Micros::new(to));
            // Waiters whose time has come are admitted (or time out) now.
            wait::clock_moved(ctx, from, Micros::new(to));
            Micros::new(to)
        }
        _ => return Err(Error::Arity(command.name)),
    };
    reply::int(ctx, i64::try_from(now.as_u64()).unwrap_or(i64::MAX));
    Ok(Verdict::Other)
}
