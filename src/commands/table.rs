//! Every command and every policy, defined once. Parsing, RL.ALL's policy
//! grammar, COMMAND DOCS, arity, key specs, registration and the INFO
//! counter names are all derived from these definitions.

use super::definition::{CommandDef, Grammar};
use super::grammar::{Opt, Param, PolicyDef, Values};
use super::{clock, lease, policy_command, rl_all, rl_peek, throttle};
use crate::algorithm::concurrency::{Concurrency, MAX_CONCURRENCY_LIMIT};
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::sketch::{
    Sketch, DEFAULT_DEPTH, DEFAULT_WIDTH, MAX_DEPTH, MAX_SKETCH_LIMIT, MAX_WIDTH,
};
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_subwindows::{SlidingSubwindows, MAX_SUBWINDOWS, MIN_SUBWINDOWS};
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::MAX_HORIZON;
use crate::bounds::{MAX_LOG_ENTRIES, MAX_SKETCH_BYTES};
use crate::codec::sketch::{sketch_len, CELL_BYTES, SKETCH_HEADER};
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
    refuses: &[],
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
    refuses: &[],
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
    refuses: &[],
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
    // EXACT, the default: one log entry per unit, up to the operator's bound.
    let max = MAX_LOG_ENTRIES.get();
    if limit > max {
        return Err(Error::LimitTooHigh {
            max,
            mode: "EXACT",
            setting: MAX_LOG_ENTRIES.name,
        });
    }
    Ok(Policy::SlidingLog(SlidingLog::new(limit, window)))
}

pub const FIXED: PolicyDef = PolicyDef {
    keyword: "FIXED",
    params: LIMIT_AND_WINDOW,
    options: &[Opt::flag("ALIGNED")],
    refuses: &[],
    build: build_fixed,
};

fn build_fixed(v: &Values) -> Result<Policy, Error> {
    let fixed = FixedWindow::new(v.param(0), v.duration(1), v.flag(0));
    Ok(Policy::Fixed(fixed))
}

/// Not in [`POLICIES`]: RL.ALL does not take it.
pub const SKETCH: PolicyDef = PolicyDef {
    keyword: "SKETCH",
    params: &[
        Param::bytes("item"),
        Param::integer("limit", 1, MAX_SKETCH_LIMIT),
        Param::duration("window"),
    ],
    options: &[
        Opt::integer("WIDTH", 1, MAX_WIDTH),
        Opt::integer("DEPTH", 1, MAX_DEPTH),
    ],
    // Lowering shared counters could under-count other items, and a debt
    // in a sketch is every colliding item's debt.
    refuses: &["FORCE", "REFUND"],
    build: build_sketch,
};

fn build_sketch(v: &Values) -> Result<Policy, Error> {
    let width = v.option(0).unwrap_or(DEFAULT_WIDTH);
    let depth = v.option(1).unwrap_or(DEFAULT_DEPTH);
    // The state is created whole on a key's first call: the operator
    // bounds its size.
    let max_bytes = MAX_SKETCH_BYTES.get() as usize;
    if sketch_len(width as usize, depth as usize) > max_bytes {
        let cells = max_bytes.saturating_sub(SKETCH_HEADER) / CELL_BYTES;
        return Err(Error::SketchTooLarge {
            cells: cells as u64,
        });
    }
    Ok(Policy::Sketch {
        sketch: Sketch::new(v.param(1), v.duration(2), width, depth),
        item: v.bytes().to_vec(),
    })
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
    // A lease is held or not: no debts, partial holds or refunds.
    refuses: &["FORCE", "PARTIAL", "REFUND"],
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

/// ACL categories of a decision: it writes its key. `fast` where its
/// complexity is O(1); RL.SLIDING (EXACT is O(log n + COST), BUCKETS n
/// is O(n)) and RL.ALL (O(keys)) are `slow`.
const DECISION_FAST: &str = "write fast";
const DECISION_SLOW: &str = "write slow";

/// RL.CLOCK touches no key, but with `clock manual` its SET and ADVANCE
/// move the time of every limiter: an administrator's command.
const CLOCK_CATEGORIES: &str = "fast admin dangerous";

/// How many commands there are: the length of [`COMMANDS`] and of every
/// per-command table derived from it.
pub const COMMAND_COUNT: usize = 12;

pub static COMMANDS: [CommandDef; COMMAND_COUNT] = [
    CommandDef {
        name: "RL.GCRA",
        grammar: Grammar::Policy(&GCRA),
        flags: DECISION_FLAGS,
        acl_categories: DECISION_FAST,
        summary: "Admits or denies a request under a GCRA limit: a sustained rate with a burst.",
        complexity: "O(1)",
        since: "0.1.0",
        run: policy_command::run,
    },
    CommandDef {
        name: "RL.BUCKET",
        grammar: Grammar::Policy(&BUCKET),
        flags: DECISION_FLAGS,
        acl_categories: DECISION_FAST,
        summary: "Admits or denies a request under a token bucket that refills continuously.",
        complexity: "O(1)",
        since: "0.1.0",
        run: policy_command::run,
    },
    CommandDef {
        name: "RL.SLIDING",
        grammar: Grammar::Policy(&SLIDING),
        flags: DECISION_FLAGS,
        acl_categories: DECISION_SLOW,
        summary: "Admits or denies a request under a sliding window: exact log, two-window estimate or sub-window buckets.",
        complexity: "O(1) for APPROX; O(log N + COST) for EXACT, N the entries held; O(n) for BUCKETS n",
        since: "0.1.0",
        run: policy_command::run,
    },
    CommandDef {
        name: "RL.FIXED",
        grammar: Grammar::Policy(&FIXED),
        flags: DECISION_FLAGS,
        acl_categories: DECISION_FAST,
        summary: "Admits or denies a request under a fixed window count.",
        complexity: "O(1)",
        since: "0.1.0",
        run: policy_command::run,
    },
    CommandDef {
        name: "RL.SKETCH",
        grammar: Grammar::Policy(&SKETCH),
        acl_categories: DECISION_SLOW,
        flags: DECISION_FLAGS,
        summary: "Admits or denies a request of one item under a per-item sliding-window limit, counted in a fixed-size count-min sketch.",
        complexity: "O(DEPTH)",
        since: "0.1.0",
        run: policy_command::run,
    },
    CommandDef {
        name: "RL.ALL",
        grammar: Grammar::All {
            policies: &POLICIES,
        },
        flags: "write deny-oom fast getkeys-api",
        acl_categories: DECISION_SLOW,
        summary: "Admits a request only if every one of several limits admits it, and then charges them all.",
        complexity: "O(N) where N is the number of keys, plus each limit's own cost",
        since: "0.1.0",
        run: rl_all::run,
    },
    CommandDef {
        name: "RL.PEEK",
        grammar: Grammar::Peek {
            policies: &POLICIES,
        },
        // Reads only: runs on replicas and under OOM, touches nothing.
        flags: "readonly fast",
        acl_categories: "read slow",
        summary: "Reports what a limiter would admit now, without charging, writing or replicating anything.",
        complexity: "O(1) for GCRA, BUCKET, FIXED and APPROX; O(log N) for EXACT; O(n) for BUCKETS n",
        since: "0.1.0",
        run: rl_peek::run,
    },
    CommandDef {
        name: "CL.THROTTLE",
        grammar: Grammar::Positional {
            params: &throttle::PARAMS,
            optional: 1,
        },
        flags: DECISION_FLAGS,
        acl_categories: DECISION_FAST,
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
        acl_categories: CLOCK_CATEGORIES,
        summary: "Returns the limiter clock in microseconds; SET and ADVANCE move a manual clock.",
        complexity: "O(1)",
        since: "0.1.0",
        run: clock::run,
    },
    CommandDef {
        name: "RL.ACQUIRE",
        grammar: Grammar::Policy(&CONCURRENCY),
        flags: DECISION_FLAGS,
        acl_categories: DECISION_SLOW,
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
        acl_categories: DECISION_FAST,
        summary: "Releases a lease from RL.ACQUIRE; its units go to waiters first.",
        // The lease names its slot.
        complexity: "O(1)",
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
        acl_categories: DECISION_FAST,
        summary: "Makes a held lease expire ttl from now.",
        complexity: "O(1)",
        since: "0.1.0",
        run: lease::renew,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command is `fast` or `slow` as its complexity says, and every
    /// command with a key writes it, or only reads it if it is read-only.
    #[test]
    fn acl_categories_follow_the_definitions() {
        for c in &COMMANDS {
            let cats: Vec<&str> = c.acl_categories.split(' ').collect();
            let fast = c.complexity == "O(1)";
            assert_eq!(cats.contains(&"fast"), fast, "{}", c.name);
            assert_eq!(cats.contains(&"slow"), !fast, "{}", c.name);
            let has_key = c.keys() != crate::commands::definition::Keys::None;
            let read_only = c.flags.split(' ').any(|f| f == "readonly");
            assert_eq!(cats.contains(&"write"), has_key && !read_only, "{}", c.name);
            assert_eq!(cats.contains(&"read"), has_key && read_only, "{}", c.name);
        }
    }
}
