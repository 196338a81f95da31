//! The commands: their definitions (`table`), the grammar those are written
//! in and what is derived from it (`grammar`, `docs`), and the handlers.
//! Handlers are plain Rust: they reach the server only through a [`Host`]
//! and answer a [`Reply`], which the server shell writes.

pub mod args;
pub mod clock;
pub mod definition;
pub mod deny;
mod describe;
pub mod docs;
pub mod grammar;
pub mod help;
pub mod host;
pub mod lease;
pub mod named;
pub mod policy_command;
pub mod rl_all;
pub mod rl_peek;
pub mod share;
pub mod table;
pub mod throttle;

pub use crate::engine::Verdict;
pub use host::{Host, Item, Reply, Shape};

use crate::engine::error::Error;
use definition::{CommandDef, Handler};

/// Runs one call of `command` (its arguments include the command name).
pub fn run<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    match command.run {
        Handler::Decision => policy_command::run(command, host, args),
        Handler::All => rl_all::run(command, host, args),
        Handler::Share => share::run(command, host, args),
        Handler::SharePeek => share::peek(command, host, args),
        Handler::Peek => rl_peek::run(command, host, args),
        Handler::Throttle => throttle::run(command, host, args),
        Handler::Clock => clock::run(command, host, args),
        Handler::Release => lease::release(command, host, args),
        Handler::Renew => lease::renew(command, host, args),
        Handler::Check => named::check(command, host, args),
        Handler::PolicySet => named::set(command, host, args),
        Handler::PolicyGet => named::get(command, args),
        Handler::PolicyDel => named::del(command, host, args),
        Handler::PolicyList => named::list(args),
        Handler::PolicyDigest => named::digest(command, args),
        Handler::PolicyStats => named::stats(command, host, args),
        Handler::PolicyHelp => named::help(command, args),
        Handler::Deny => deny::deny(command, host, args),
        Handler::Undeny => deny::undeny(command, host, args),
        Handler::Denied => deny::denied(command, host, args),
        Handler::DenyList => deny::list(command, host, args),
        Handler::HotKeys => deny::hot_keys(command, host, args),
        Handler::Penalized => deny::penalized(command, host, args),
    }
}
