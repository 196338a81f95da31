//! `RL.CLOCK [SET us | ADVANCE us | HELP]`: the limiter's time in
//! microseconds since the Unix epoch. SET and ADVANCE work only with
//! `clock manual`.

use super::definition::CommandDef;
use super::grammar::{join_words, Param};
use super::{help, Host, Reply};
use crate::algorithm::limits::MAX_US;
use crate::algorithm::Micros;
use crate::engine::error::{printable, Error};

const SET: usize = 0;
const ADVANCE: usize = 1;

pub const SUBCOMMANDS: [(&str, Param); 2] = [
    ("SET", Param::integer("microseconds", 0, MAX_US)),
    ("ADVANCE", Param::integer("microseconds", 0, MAX_US)),
];

/// What each of [`SUBCOMMANDS`] does, for `RL.CLOCK HELP`.
const WHAT: [&str; 2] = [
    "Set the manual clock to <microseconds> since the Unix epoch (needs 'clock manual').",
    "Move the manual clock forward by <microseconds> (needs 'clock manual').",
];

/// `RL.CLOCK HELP`.
fn help(command: &CommandDef) -> Reply {
    let mut entries = vec![(
        "(no subcommand)".to_string(),
        "Return the limiter clock in microseconds since the Unix epoch.",
    )];
    for ((word, param), what) in SUBCOMMANDS.iter().zip(WHAT) {
        entries.push((format!("{word} <{}>", param.name), what));
    }
    help::reply(command.name, "[<subcommand> [<arg>]]", &entries)
}

/// The error for a word that is no subcommand.
fn unknown(command: &CommandDef, sub: &[u8]) -> Error {
    let mut words: Vec<&str> = SUBCOMMANDS.iter().map(|(w, _)| *w).collect();
    words.push("HELP");
    Error::UnknownSubcommand {
        command: command.name,
        hint: join_words(&words, "or"),
        given: printable(sub),
    }
}

pub fn run<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let now = match args {
        [_] => host.now(),
        [_, sub] if help::is_help(sub.as_ref()) => return Ok(help(command)),
        [_, sub, ..] if help::is_help(sub.as_ref()) => return Err(Error::Arity(command.name)),
        // A word that names no subcommand is that, whatever follows it.
        [_, sub, ..] if position(sub.as_ref()).is_none() => {
            return Err(unknown(command, sub.as_ref()))
        }
        [_, sub, value] => {
            let Some(i) = position(sub.as_ref()) else {
                return Err(unknown(command, sub.as_ref()));
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

/// Which of [`SUBCOMMANDS`] `word` names (any case).
fn position(word: &[u8]) -> Option<usize> {
    SUBCOMMANDS
        .iter()
        .position(|(name, _)| word.eq_ignore_ascii_case(name.as_bytes()))
}
