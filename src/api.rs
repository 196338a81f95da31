//! The crate's Rust surface, for benches, fuzz targets and tests: the pure
//! core and the command grammar, with no Redis types. The module itself is
//! what `MODULE LOAD` loads; nothing here is a stable library interface.

pub use crate::algorithm::cell::{Cell, CellReply, CellWrite};
pub use crate::algorithm::concurrency::{
    release, renew, Concurrency, Header, LeaseId, Leases, Slot, MAX_LEASES,
};
pub use crate::algorithm::fixed_window::{FixedState, FixedWindow};
pub use crate::algorithm::gcra::Gcra;
pub use crate::algorithm::limits::{MAX_COUNT, MAX_DURATION};
pub use crate::algorithm::schedule::{Schedule, ScheduleError, Tat};
pub use crate::algorithm::sketch::{
    fmix64, fnv1a64, Cell as SketchCell, Sketch, SketchCells, SketchChange, SketchState,
    DEFAULT_DEPTH, DEFAULT_WIDTH, MAX_DEPTH, MAX_SKETCH_LIMIT, MAX_WIDTH,
};
pub use crate::algorithm::sliding_approx::{ApproxState, SlidingApprox};
pub use crate::algorithm::sliding_log::{Entries, SlidingLog, MAX_SLIDING_LOG_LIMIT};
pub use crate::algorithm::sliding_subwindows::{SlidingSubwindows, MAX_SUBWINDOWS, MIN_SUBWINDOWS};
pub use crate::algorithm::token_bucket::TokenBucket;
pub use crate::algorithm::{Decision, Micros, RetryAfter, MAX_HORIZON};
pub use crate::codec::cell::{decode_cell_state, encode_cell_state};
pub use crate::codec::lease::{self as lease_codec, format_lease, parse_lease, StoredLeases};
pub use crate::codec::{
    decode_tat, encode_tat, sketch as sketch_codec, sliding_log as log_codec, window, Kind,
    Mismatch, Patch, StateError, TAT_MAX_LEN,
};
pub use crate::commands::args::{duration, integer};
pub use crate::commands::definition::{CommandDef, Cost, Grammar, Keys};
pub use crate::commands::docs::{arguments, synopsis, DocArg, DocType};
pub use crate::commands::grammar::{
    parse_common, parse_common_with, Opt, Param, Parse, PerKey, PolicyDef, COMMON,
};
pub use crate::commands::rl_all::Call as AllCall;
pub use crate::commands::table::{COMMANDS, POLICIES};
pub use crate::commands::throttle::Call as ThrottleCall;
pub use crate::engine::error::{printable, Error};
pub use crate::engine::store::{MemoryStore, Store};
pub use crate::engine::{decide, Charge, Decided, KeyError, Request};
pub use crate::policy::{ForceError, Outcome, Policy, StateWrite};

use crate::commands::definition::Grammar as G;

/// The definition of command `name` (any case).
pub fn command(name: &str) -> Option<&'static CommandDef> {
    COMMANDS.iter().find(|c| c.name.eq_ignore_ascii_case(name))
}

/// Parses a single-key decision command's arguments after the key, as
/// `command` (`RL.GCRA`, `RL.BUCKET`, `RL.SLIDING`, `RL.FIXED`) does.
pub fn parse<A: AsRef<[u8]>>(command_name: &str, args: &[A]) -> Result<(Policy, Request), Error> {
    match command(command_name).map(|c| (c, &c.grammar)) {
        Some((c, G::Policy(p))) => p.parse_command(args, c.name),
        _ => panic!("{command_name} is not a single-key decision command"),
    }
}

/// Parses one RL.ALL policy after its keyword; returns it and the
/// arguments it used.
pub fn parse_policy<A: AsRef<[u8]>>(keyword: &str, args: &[A]) -> Result<(Policy, usize), Error> {
    let p = POLICIES
        .iter()
        .find(|p| p.keyword.eq_ignore_ascii_case(keyword))
        .unwrap_or_else(|| panic!("no policy {keyword}"));
    p.parse_prefix(args)
}

/// Parses RL.ALL's arguments after the command name.
pub fn parse_all<A: AsRef<[u8]>>(args: &[A]) -> Result<AllCall, Error> {
    crate::commands::rl_all::parse(&POLICIES, args)
}

/// Parses RL.PEEK's arguments after the key (a policy as in RL.ALL).
pub fn parse_peek<A: AsRef<[u8]>>(args: &[A]) -> Result<Policy, Error> {
    crate::commands::rl_peek::parse(&POLICIES, args, "RL.PEEK")
}

/// Parses CL.THROTTLE's arguments after the key.
pub fn parse_throttle<A: AsRef<[u8]>>(args: &[A]) -> Result<ThrottleCall, Error> {
    crate::commands::throttle::parse(args)
}
