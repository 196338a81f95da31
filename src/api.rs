//! The crate's Rust surface, for benches, fuzz targets, examples and
//! tests: the pure core and the command grammar, with no Redis types. The
//! module itself is what `MODULE LOAD` loads; nothing here is a stable
//! library interface.
//!
//! Twenty-one names, in the crate's words (see the crate documentation):
//! - time: [`Micros`];
//! - a *policy* and its *transition* on a *state* ([`Policy::decide`] on a
//!   key's stored bytes): [`Policy`], [`Transition`], its [`Decision`]
//!   with [`RetryAfter`] and its write to the state [`StateWrite`], and
//!   [`StateError`] for bytes that are not the policy's state;
//! - the engine, a *request* under several policies over a store of keys:
//!   [`Request`], [`Charge`], [`decide`], its answer [`Outcome`], and the
//!   store in memory [`MemoryStore`];
//! - parsing, each as the command does: [`parse`], [`parse_policy`],
//!   [`parse_all`], [`parse_share`], [`parse_peek`], [`parse_throttle`], and their
//!   [`Error`];
//! - the command table: [`COMMANDS`], each a [`CommandDef`]
//!   (`CommandDef::describe` gives what a command takes, as text).
//!
//! Policies are built by parsing, as the commands build them; the
//! algorithms, codecs and grammar behind them stay inside the crate.

use crate::commands::definition::Grammar;
use crate::commands::table::POLICIES;

pub use crate::algorithm::{Decision, Micros, RetryAfter};
pub use crate::codec::{Bytes, StateError};
pub use crate::commands::definition::CommandDef;
pub use crate::commands::table::COMMANDS;
pub use crate::engine::error::Error;
pub use crate::engine::store::MemoryStore;
pub use crate::engine::{decide, Charge, Outcome, Request};
pub use crate::policy::{Policy, StateWrite, Transition};

/// The definition of command `name` (any case).
fn command(name: &str) -> Option<&'static CommandDef> {
    COMMANDS.iter().find(|c| c.name.eq_ignore_ascii_case(name))
}

/// Parses a single-key decision command's arguments after the key, as
/// `command_name` (`RL.GCRA`, `RL.BUCKET`, `RL.SLIDING`, `RL.FIXED`,
/// `RL.SKETCH`, `RL.ACQUIRE`) does: the policy and the request.
///
/// # Panics
/// If `command_name` is not such a command.
pub fn parse<A: AsRef<[u8]>>(command_name: &str, args: &[A]) -> Result<(Policy, Request), Error> {
    match command(command_name).map(|c| (c, &c.grammar)) {
        Some((c, Grammar::Policy(p))) => p.parse_command(args, c.name),
        _ => panic!("{command_name} is not a single-key decision command"),
    }
}

/// Parses one RL.ALL policy's words after its keyword (`GCRA`, `BUCKET`,
/// `SLIDING`, `FIXED`, `CONCURRENCY`, any case): the policy and how many
/// of `args` it used.
///
/// # Panics
/// If `keyword` names no RL.ALL policy.
pub fn parse_policy<A: AsRef<[u8]>>(keyword: &str, args: &[A]) -> Result<(Policy, usize), Error> {
    let p = POLICIES
        .iter()
        .find(|p| p.keyword.eq_ignore_ascii_case(keyword))
        .unwrap_or_else(|| panic!("no policy {keyword}"));
    p.parse_prefix(args)
}

/// Parses RL.ALL's arguments after the command name: the call's
/// `numkeys`, one `policies` entry per key and the `request`.
pub fn parse_all<A: AsRef<[u8]>>(args: &[A]) -> Result<crate::commands::rl_all::Call, Error> {
    crate::commands::rl_all::parse(&POLICIES, args)
}

/// Parses RL.SHARE's arguments after the command name: the call's
/// `numkeys`, one node per key (leaf first) and the `request`.
pub fn parse_share<A: AsRef<[u8]>>(args: &[A]) -> Result<crate::commands::share::Call, Error> {
    let share = command("RL.SHARE").expect("RL.SHARE is a command");
    crate::commands::share::parse(share, args)
}

/// Parses a named policy's definition as `RL.POLICY SET name` takes it
/// after the name, and as the RDB keeps it: a policy as in RL.ALL,
/// optionally `SHADOW`, or `SHARE node [node ...]`. Returns its canonical
/// text (what `RL.POLICY GET` answers).
pub fn parse_definition<A: AsRef<[u8]>>(words: &[A]) -> Result<Vec<u8>, Error> {
    crate::commands::named::parse_definition(words, "RL.POLICY|SET").map(|e| e.definition)
}

/// Parses RL.PEEK's arguments after the key (a policy as in RL.ALL).
pub fn parse_peek<A: AsRef<[u8]>>(args: &[A]) -> Result<Policy, Error> {
    crate::commands::rl_peek::parse(&POLICIES, args, "RL.PEEK")
}

/// Parses CL.THROTTLE's arguments after the key; the call's `decide`
/// answers it on a key's stored bytes, as the command does.
pub fn parse_throttle<A: AsRef<[u8]>>(
    args: &[A],
) -> Result<crate::commands::throttle::Call, Error> {
    crate::commands::throttle::parse(args)
}
