//! Every command and every policy, defined once. Parsing, RL.ALL's policy
//! grammar, COMMAND DOCS, arity, key specs, registration and the INFO
//! counter names are all derived from these definitions.

use super::definition::{CommandDef, Grammar};
use super::grammar::{Opt, Param, PolicyDef, Values};
use super::{clock, lease, policy_command, rl_all, throttle};
use crate::algorithm::concurrency::{Concurrency, MAX_CONCURRENCY_LIMIT};
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::{SlidingLog, MAX_SLIDING_LOG_LIMIT};
use crate::algorithm::sliding_subwindows::{SlidingSubwindows, MAX_SUBWINDOWS, MIN_SUBWINDOWS};
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::MAX_HORIZON;
use crate::error::Error;
use crate::limits::MAX_COUNT;
use crate::policy::Policy;

/// The policy of every single-key decision command and of RL.ALL.
pub const POLICIES: [&PolicyDef; 5] = [&GCRA, &BUCKET, &SLIDING, &FIXED, &CONCURRENCY];

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

/// RL.ACQUIRE's and RL.ALL's CONCURRENCY: `limit` units held at once,
/// each lease for `ttl`.
pub const CONCURRENCY: PolicyDef = PolicyDef {
    keyword: "CONCURRENCY",
    params: &[
        Param::integer("limit", 1, MAX_CONCURRENCY_LIMIT),
        Param::duration("ttl"),
    ],
    options: &[],
    build: build_concurrency,
};

fn build_concurrency(v: &Values) -> Result<Policy, Error> {
    Ok(Policy::Concurrency(Concurrency::new(
        v.param(0),
        v.duration(1),
    )))
}

/// A release or renewal rewrites bytes already stored, never more: it may
/// run over `maxmemory` (a lease must be releasable when memory is short).
const LEASE_FLAGS: &str = "write fast";

/// A decision reads the state and writes it; never on a read-only replica,
/// never under OOM; one key lookup.
const DECISION_FLAGS: &str = "write deny-oom fast";

/// How many commands there are: the length of [`COMMANDS`] and of every
/// per-command table derived from it.
pub const COMMAND_COUNT: usize = 10;

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
        grammar: Grammar::All {
            policies: &POLICIES,
        },
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
        // Moving a manual clock admits waiters, whose state it writes and
        // replicates: not while writes are paused.
        flags: "fast may-replicate",
        summary: "Returns the limiter clock in microseconds; SET and ADVANCE move a manual clock.",
        complexity: "O(1)",
        since: "0.1.0",
        run: clock::run,
    },
    CommandDef {
        name: "RL.ACQUIRE",
        grammar: Grammar::Policy(&CONCURRENCY),
        flags: DECISION_FLAGS,
        summary: "Acquires a lease on COST of limit units held at once, for ttl or until released.",
        complexity: "O(N) where N is the number of leases held",
        since: "0.1.0",
        run: policy_command::run,
    },
    CommandDef {
        name: "RL.RELEASE",
        grammar: Grammar::Positional {
            params: &lease::RELEASE_PARAMS,
            optional: 0,
        },
        flags: LEASE_FLAGS,
        summary: "Releases a lease from RL.ACQUIRE; its units go to waiters first.",
        complexity: "O(N) where N is the number of leases held",
        since: "0.1.0",
        run: lease::release,
    },
    CommandDef {
        name: "RL.RENEW",
        grammar: Grammar::Positional {
            params: &lease::RENEW_PARAMS,
            optional: 0,
        },
        flags: LEASE_FLAGS,
        summary: "Makes a held lease expire ttl from now.",
        complexity: "O(N) where N is the number of leases held",
        since: "0.1.0",
        run: lease::renew,
    },
];
