//! Every command and every policy, defined once. Parsing, RL.ALL's policy
//! grammar, COMMAND DOCS, arity, key specs, registration and the INFO
//! counter names are all derived from these definitions.

use super::grammar::{Opt, Param, PolicyDef, Values};
use super::{clock, policy_command, rl_all, throttle, Verdict};
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::{SlidingLog, MAX_SLIDING_LOG_LIMIT};
use crate::algorithm::sliding_subwindows::{SlidingSubwindows, MAX_SUBWINDOWS, MIN_SUBWINDOWS};
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::MAX_HORIZON;
use crate::args::{self, MAX_COUNT};
use crate::error::Error;
use crate::policy::Policy;
use crate::server::{Arg, Ctx};
use std::ops::Range;

/// Runs one call of `command` (its arguments include the command name).
pub type Handler = fn(&CommandDef, Ctx, &[Arg]) -> Result<Verdict, Error>;

/// What follows a command's name.
#[derive(Debug)]
pub enum Grammar {
    /// `key`, then one policy's arguments, its options and the common ones.
    Policy(&'static PolicyDef),
    /// `numkeys key [key ...] policy [policy ...]`, then the common options.
    All,
    /// `key`, then positional arguments, the last `optional` of them optional.
    Positional {
        params: &'static [Param],
        optional: usize,
    },
    /// No key; optionally one of several `TOKEN value` subcommands.
    Subcommands {
        name: &'static str,
        choices: &'static [(&'static str, Param)],
    },
}

/// Where a command's keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    None,
    /// One key, the first argument.
    First,
    /// `numkeys key [key ...]` from the first argument on.
    Counted,
}

#[derive(Debug)]
pub struct CommandDef {
    /// As users write it; Redis matches names in any case.
    pub name: &'static str,
    pub grammar: Grammar,
    /// Redis command flags.
    pub flags: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
    pub since: &'static str,
    pub run: Handler,
}

impl CommandDef {
    pub fn keys(&self) -> Keys {
        match self.grammar {
            Grammar::Policy(_) | Grammar::Positional { .. } => Keys::First,
            Grammar::All => Keys::Counted,
            Grammar::Subcommands { .. } => Keys::None,
        }
    }

    /// Redis arity: the fewest arguments a call may have, name included,
    /// as a negative number (every command takes optional arguments).
    pub fn arity(&self) -> i32 {
        let fewest = match &self.grammar {
            Grammar::Policy(p) => 2 + p.params.len(),
            // numkeys, one key, a policy's keyword and arguments.
            Grammar::All => {
                let shortest = POLICIES.iter().map(|p| p.params.len()).min();
                4 + shortest.unwrap_or(0)
            }
            Grammar::Positional { params, optional } => 2 + params.len() - optional,
            Grammar::Subcommands { .. } => 1,
        };
        -(fewest as i32)
    }

    /// Where the keys are in a whole call (name first), as far as there
    /// are arguments: what a cluster routes by.
    pub fn key_positions<A: AsRef<[u8]>>(&self, args: &[A]) -> Range<usize> {
        let (first, end) = match self.keys() {
            Keys::None => (1, 1),
            Keys::First => (1, 2),
            Keys::Counted => {
                let numkeys = args
                    .get(1)
                    .and_then(|n| args::integer(n.as_ref(), "numkeys", 1, args.len() as u64).ok())
                    .unwrap_or(0);
                (2, 2 + numkeys as usize)
            }
        };
        first.min(args.len())..end.min(args.len())
    }

    /// How Redis names the command in its own errors: lower case.
    pub fn lower_name(&self) -> String {
        self.name.to_ascii_lowercase()
    }

    /// The INFO field of the command: `RL.GCRA` -> `rl_gcra`.
    pub fn info_field(&self) -> String {
        self.lower_name().replace('.', "_")
    }
}

/// The policy of every single-key decision command and of RL.ALL.
pub const POLICIES: [&PolicyDef; 4] = [&GCRA, &BUCKET, &SLIDING, &FIXED];

pub const GCRA: PolicyDef = PolicyDef {
    keyword: "GCRA",
    params: &[
        Param::integer("limit", 1, MAX_COUNT),
        Param::duration("period"),
    ],
    options: &[Opt::integer("BURST", 1, MAX_COUNT)],
    build: build_gcra,
};

fn build_gcra(v: &Values) -> Result<Policy, Error> {
    let limit = v.param(0);
    let burst = v.option(0).unwrap_or(limit);
    let gcra = Gcra::new(limit, v.duration(1), burst)
        .map_err(|_| Error::horizon("BURST * period / limit", MAX_HORIZON))?;
    Ok(Policy::Gcra(gcra))
}

pub const BUCKET: PolicyDef = PolicyDef {
    keyword: "BUCKET",
    params: &[
        Param::integer("capacity", 1, MAX_COUNT),
        Param::integer("refill", 1, MAX_COUNT),
        Param::duration("period"),
    ],
    options: &[],
    build: build_bucket,
};

fn build_bucket(v: &Values) -> Result<Policy, Error> {
    let bucket = TokenBucket::new(v.param(0), v.param(1), v.duration(2))
        .map_err(|_| Error::horizon("capacity * period / refill", MAX_HORIZON))?;
    Ok(Policy::Bucket(bucket))
}

/// The window commands' first two arguments.
const LIMIT_AND_WINDOW: &[Param] = &[
    Param::integer("limit", 1, MAX_COUNT),
    Param::duration("window"),
];

pub const SLIDING: PolicyDef = PolicyDef {
    keyword: "SLIDING",
    params: LIMIT_AND_WINDOW,
    options: &[
        Opt::flag("EXACT").in_group("mode"),
        Opt::flag("APPROX").in_group("mode"),
        Opt::integer("BUCKETS", MIN_SUBWINDOWS, MAX_SUBWINDOWS).in_group("mode"),
    ],
    build: build_sliding,
};

fn build_sliding(v: &Values) -> Result<Policy, Error> {
    let (limit, window) = (v.param(0), v.duration(1));
    if v.flag(1) {
        return Ok(Policy::SlidingApprox(SlidingApprox::new(limit, window)));
    }
    if let Some(n) = v.option(2) {
        return Ok(Policy::SlidingSubwindows(SlidingSubwindows::new(
            limit, window, n,
        )));
    }
    // EXACT, the default.
    if limit > MAX_SLIDING_LOG_LIMIT {
        return Err(Error::LimitTooHigh {
            max: MAX_SLIDING_LOG_LIMIT,
            mode: "EXACT",
        });
    }
    Ok(Policy::SlidingLog(SlidingLog::new(limit, window)))
}

pub const FIXED: PolicyDef = PolicyDef {
    keyword: "FIXED",
    params: LIMIT_AND_WINDOW,
    options: &[Opt::flag("ALIGNED")],
    build: build_fixed,
};

fn build_fixed(v: &Values) -> Result<Policy, Error> {
    let fixed = FixedWindow::new(v.param(0), v.duration(1), v.flag(0));
    Ok(Policy::Fixed(fixed))
}

/// A decision reads the state and writes it; never on a read-only replica,
/// never under OOM; one key lookup.
const DECISION_FLAGS: &str = "write deny-oom fast";

/// How many commands there are: the length of [`COMMANDS`] and of every
/// per-command table derived from it.
pub const COMMAND_COUNT: usize = 7;

pub static COMMANDS: [CommandDef; COMMAND_COUNT] = [
    CommandDef {
        name: "RL.GCRA",
        grammar: Grammar::Policy(&GCRA),
        flags: DECISION_FLAGS,
        summary: "Admits or denies a request under a GCRA limit: a sustained rate with a burst.",
        complexity: "O(1)",
        since: "0.1.0",
        run: policy_command::run,
    },
    CommandDef {
        name: "RL.BUCKET",
        grammar: Grammar::Policy(&BUCKET),
        flags: DECISION_FLAGS,
        summary: "Admits or denies a request under a token bucket that refills continuously.",
        complexity: "O(1)",
        since: "0.1.0",
        run: policy_command::run,
    },
    CommandDef {
        name: "RL.SLIDING",
        grammar: Grammar::Policy(&SLIDING),
        flags: DECISION_FLAGS,
        summary: "Admits or denies a request under a sliding window: exact log, two-window estimate or sub-window buckets.",
        complexity: "O(1) for APPROX; O(log limit + COST) for EXACT; O(n) for BUCKETS n",
        since: "0.1.0",
        run: policy_command::run,
    },
    CommandDef {
        name: "RL.FIXED",
        grammar: Grammar::Policy(&FIXED),
        flags: DECISION_FLAGS,
        summary: "Admits or denies a request under a fixed window count.",
        complexity: "O(1)",
        since: "0.1.0",
        run: policy_command::run,
    },
    CommandDef {
        name: "RL.ALL",
        grammar: Grammar::All,
        flags: "write deny-oom fast getkeys-api",
        summary: "Admits a request only if every one of several limits admits it, and then charges them all.",
        complexity: "O(N) where N is the number of keys, plus each limit's own cost",
        since: "0.1.0",
        run: rl_all::run,
    },
    CommandDef {
        name: "CL.THROTTLE",
        grammar: Grammar::Positional {
            params: &throttle::PARAMS,
            optional: 1,
        },
        flags: DECISION_FLAGS,
        summary: "redis-cell compatible GCRA rate limiting.",
        complexity: "O(1)",
        since: "0.1.0",
        run: throttle::run,
    },
    CommandDef {
        name: "RL.CLOCK",
        grammar: Grammar::Subcommands {
            name: "operation",
            choices: &clock::SUBCOMMANDS,
        },
        flags: "fast",
        summary: "Returns the limiter clock in microseconds; SET and ADVANCE move a manual clock.",
        complexity: "O(1)",
        since: "0.1.0",
        run: clock::run,
    },
];
