//! Every command and every policy, defined once. Parsing, RL.ALL's policy
//! grammar, COMMAND DOCS, arity, key specs, registration (flags and ACL
//! categories, `fast` from each command's `cost`) and the INFO counter
//! names are all derived from these definitions.

use super::definition::{CommandDef, Cost, Grammar, Handler, OperatorOp, RegistryOp};
use super::grammar::{Opt, Param, PolicyDef, Values};
use super::{clock, lease, throttle};
use crate::algorithm::concurrency::Concurrency;
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::limits::MAX_COUNT;
use crate::algorithm::share::{Definition, Node};
use crate::algorithm::sketch::{
    Sketch, DEFAULT_DEPTH, DEFAULT_WIDTH, MAX_DEPTH, MAX_SKETCH_LIMIT, MAX_WIDTH,
};
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_subwindows::{SlidingSubwindows, MAX_SUBWINDOWS, MIN_SUBWINDOWS};
use crate::algorithm::token_bucket::TokenBucket;
use crate::algorithm::Micros;
use crate::algorithm::MAX_HORIZON;
use crate::bounds::{self, MAX_LOG_ENTRIES, MAX_SKETCH_BYTES};
use crate::codec::sketch::{sketch_len, COUNTER_BYTES, SKETCH_HEADER};
use crate::engine::error::Error;
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
    // in a sketch is every colliding item's debt. Waiting would put every
    // item of the sketch in one line, though each is limited on its own.
    // A block or a debt would be every item's.
    refuses: &[
        "FORCE",
        "REFUND",
        "WAIT",
        "FLOW",
        "WEIGHT",
        "RESERVE",
        "BLOCK",
        "COUNTDENIALS",
    ],
    build: build_sketch,
};

fn build_sketch(v: &Values) -> Result<Policy, Error> {
    let width = v.option(0).unwrap_or(DEFAULT_WIDTH);
    let depth = v.option(1).unwrap_or(DEFAULT_DEPTH);
    // The state is created whole on a key's first call: the operator
    // bounds its size.
    let max_bytes = MAX_SKETCH_BYTES.get() as usize;
    if sketch_len(width as usize, depth as usize) > max_bytes {
        let counters = max_bytes.saturating_sub(SKETCH_HEADER) / COUNTER_BYTES;
        return Err(Error::SketchTooLarge {
            counters: counters as u64,
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
        Param::bounded("limit", 1, &bounds::MAX_LEASES_PER_KEY),
        Param::duration("ttl"),
    ],
    options: &[],
    // A lease is held or not: no debts, partial holds or refunds; when
    // one comes free depends on releases nobody can foresee (no start);
    // a lease is not a rate, to penalize.
    refuses: &[
        "FORCE",
        "PARTIAL",
        "REFUND",
        "RESERVE",
        "BLOCK",
        "COUNTDENIALS",
    ],
    build: build_concurrency,
};

fn build_concurrency(v: &Values) -> Result<Policy, Error> {
    Ok(Policy::Concurrency(Concurrency::new(
        v.param(0),
        v.duration(1),
    )))
}

/// An RL.SHARE node: an assured `limit` per `period` (bursts of BURST,
/// default the limit) and, for every node but the root, a ceiling of CEIL
/// per the same period (bursts of CBURST, default BURST); a debt at most
/// MAXDEBT long (default [`DEFAULT_MAX_DEBT`]). Not in [`POLICIES`]: a node
/// is decided with its path, never alone.
pub const SHARE_NODE: PolicyDef = PolicyDef {
    keyword: "NODE",
    params: &[
        Param::integer("limit", 1, MAX_COUNT),
        Param::duration("period"),
    ],
    options: &[
        Opt::integer("BURST", 1, MAX_COUNT),
        Opt::integer("CEIL", 1, MAX_COUNT),
        Opt::integer("CBURST", 1, MAX_COUNT),
        Opt::duration("MAXDEBT"),
    ],
    // A debt, a partial grant or a refund would need to know which node
    // lent; a path shares its nodes' keys with other leaves, which a
    // leaf's penalty would hold out.
    refuses: &["FORCE", "PARTIAL", "REFUND", "BLOCK", "COUNTDENIALS"],
    build: build_share_node,
};

/// The longest debt an RL.SHARE node keeps by default: Linux HTB's
/// `mbuffer`, 60 seconds.
pub const DEFAULT_MAX_DEBT: Micros = Micros::from_secs(60);

fn build_share_node(v: &Values) -> Result<Policy, Error> {
    let (limit, period) = (v.param(0), v.duration(1));
    let burst = v.option(0).unwrap_or(limit);
    let ceil = v.option(1);
    if ceil.is_some_and(|c| c < limit) {
        return Err(Error::Integer {
            arg: "CEIL",
            min: limit,
            max: MAX_COUNT,
        });
    }
    let cburst = match (v.option(2), ceil) {
        (Some(_), None) => {
            return Err(Error::Combination {
                option: "CBURST",
                with: "the root (a node without CEIL)",
            })
        }
        (c, _) => c.unwrap_or(burst),
    };
    let definition = Definition {
        limit,
        period,
        burst,
        ceil,
        cburst,
        max_debt: v.option(3).map_or(DEFAULT_MAX_DEBT, Micros::new),
    };
    let horizon = |_| Error::horizon("BURST * period / limit", MAX_HORIZON);
    Ok(Policy::Share(Node::new(definition).map_err(horizon)?))
}

/// A release or renewal rewrites bytes already stored, never more: it may
/// run over `maxmemory` (a lease must be releasable when memory is short).
const LEASE_FLAGS: &str = "write";

/// A decision reads the state and writes it; never on a read-only replica,
/// never under OOM.
const DECISION_FLAGS: &str = "write deny-oom";

/// A decision that may wait or meet its key's waiters: O(log(N)) in them.
const WAITING_DECISION: Cost = Cost::Logarithmic(
    "O(1) without waiters; O(log(N)) with WAIT or when the key has waiters, \
     where N is the number of waiting clients",
);

/// How many commands there are: the length of [`COMMANDS`] and of every
/// per-command table derived from it.
pub const COMMAND_COUNT: usize = 28;

pub static COMMANDS: [CommandDef; COMMAND_COUNT] = [
    CommandDef {
        name: "RL.GCRA",
        grammar: Grammar::Policy(&GCRA),
        flags: DECISION_FLAGS,
        more_acl_categories: "",
        summary: "Admits or denies a request under a GCRA limit: a sustained rate with a burst.",
        cost: WAITING_DECISION,
        since: "0.1.0",
        run: Handler::Decision,
    },
    CommandDef {
        name: "RL.BUCKET",
        grammar: Grammar::Policy(&BUCKET),
        flags: DECISION_FLAGS,
        more_acl_categories: "",
        summary: "Admits or denies a request under a token bucket that refills continuously.",
        cost: WAITING_DECISION,
        since: "0.1.0",
        run: Handler::Decision,
    },
    CommandDef {
        name: "RL.SLIDING",
        grammar: Grammar::Policy(&SLIDING),
        flags: DECISION_FLAGS,
        more_acl_categories: "",
        summary: "Admits or denies a request under a sliding window: exact log, two-window estimate or sub-window buckets.",
        cost: Cost::Linear(
            "O(1) for APPROX; O(N) for BUCKETS N; O(COST + log(N)) for EXACT, where N is \
             the number of entries in the log; plus O(log(W)) with WAIT or when the key has \
             waiters, where W is the number of waiting clients",
        ),
        since: "0.1.0",
        run: Handler::Decision,
    },
    CommandDef {
        name: "RL.FIXED",
        grammar: Grammar::Policy(&FIXED),
        flags: DECISION_FLAGS,
        more_acl_categories: "",
        summary: "Admits or denies a request under a fixed window count.",
        cost: WAITING_DECISION,
        since: "0.1.0",
        run: Handler::Decision,
    },
    CommandDef {
        name: "RL.SKETCH",
        grammar: Grammar::Policy(&SKETCH),
        flags: DECISION_FLAGS,
        more_acl_categories: "",
        summary: "Admits or denies a request of one item under a per-item sliding-window limit, counted in a fixed-size count-min sketch.",
        // Creating the key writes every counter.
        cost: Cost::Linear("O(DEPTH); O(WIDTH*DEPTH) when it creates the key"),
        since: "0.1.0",
        run: Handler::Decision,
    },
    CommandDef {
        name: "RL.ALL",
        grammar: Grammar::All {
            policies: &POLICIES,
        },
        flags: "write deny-oom getkeys-api",
        more_acl_categories: "",
        summary: "Admits a request only if every one of several limits admits it, and then charges them all.",
        cost: Cost::Linear(
            "O(N) where N is the number of keys, plus each limit's own cost as in its \
             single-key command",
        ),
        since: "0.1.0",
        run: Handler::All,
    },
    CommandDef {
        name: "RL.SHARE",
        grammar: Grammar::Share {
            node: &SHARE_NODE,
            look: false,
        },
        flags: "write deny-oom getkeys-api",
        more_acl_categories: "",
        summary: "Admits a request along a path of limits, leaf first (given as nodes, or by name with POLICY), where a node over its assured rate borrows its parent's unused rate up to its ceiling.",
        cost: Cost::Linear(
            "O(N) where N is the number of keys; plus O(log(W)) with WAIT or when a key \
             has waiters, where W is the number of waiting clients",
        ),
        since: "0.2.0",
        run: Handler::Share,
    },
    CommandDef {
        name: "RL.PEEK",
        grammar: Grammar::Peek {
            policies: &POLICIES,
        },
        // Reads only: runs on replicas and under OOM, touches nothing.
        flags: "readonly",
        more_acl_categories: "",
        summary: "Reports what a limiter would admit now, without charging, writing or replicating anything.",
        // What the policy's decision reads; a look never waits.
        cost: Cost::Linear(
            "O(1) for GCRA, BUCKET, FIXED and SLIDING APPROX; O(N) for SLIDING BUCKETS N; \
             O(log(N)) for SLIDING EXACT, where N is the number of entries in the log, and \
             for CONCURRENCY, where N is the number of leases held",
        ),
        since: "0.1.0",
        run: Handler::Peek,
    },
    CommandDef {
        name: "RL.SHARE.PEEK",
        grammar: Grammar::Share {
            node: &SHARE_NODE,
            look: true,
        },
        // Reads only, as RL.PEEK: runs on replicas and under OOM.
        flags: "readonly getkeys-api",
        more_acl_categories: "",
        summary: "Reports what a path of RL.SHARE limits would admit now, without charging, writing or replicating anything.",
        cost: Cost::Linear(
            "O(N) where N is the number of keys; plus O(log(W)) when a key has waiters, \
             where W is the number of waiting clients",
        ),
        since: "0.2.0",
        run: Handler::SharePeek,
    },
    CommandDef {
        name: "CL.THROTTLE",
        grammar: Grammar::Positional {
            params: &throttle::PARAMS,
            optional: 1,
        },
        flags: DECISION_FLAGS,
        more_acl_categories: "",
        summary: "redis-cell compatible GCRA rate limiting.",
        // redis-cell's state: no RL.* command waits on such a key.
        cost: Cost::Constant,
        since: "0.1.0",
        run: Handler::Throttle,
    },
    CommandDef {
        name: "RL.CLOCK",
        grammar: Grammar::Subcommands {
            name: "operation",
            choices: &clock::SUBCOMMANDS,
        },
        // Moving a manual clock admits waiters, whose state it writes and
        // replicates: not while writes are paused.
        flags: "may-replicate",
        // It touches no key, but with `clock manual` its SET and ADVANCE
        // move the time of every limiter: an administrator's command.
        more_acl_categories: "admin dangerous",
        summary: "Returns the limiter clock in microseconds; SET and ADVANCE move a manual clock.",
        cost: Cost::Logarithmic(
            "O(1) without arguments; O(log(N)) for each waiter SET or ADVANCE admits or \
             times out, where N is the number of waiting clients, at most \
             ratelimit.wait-events-per-tick of them per event-loop iteration",
        ),
        since: "0.1.0",
        run: Handler::Clock,
    },
    CommandDef {
        name: "RL.ACQUIRE",
        grammar: Grammar::Policy(&CONCURRENCY),
        flags: DECISION_FLAGS,
        more_acl_categories: "",
        summary: "Acquires a lease on COST of limit units held at once, for ttl or until released.",
        cost: Cost::Logarithmic(
            "O(log(N)) where N is the number of leases held; plus O(log(W)) with WAIT or \
             when the key has waiters, where W is the number of waiting clients",
        ),
        since: "0.1.0",
        run: Handler::Decision,
    },
    CommandDef {
        name: "RL.RELEASE",
        grammar: Grammar::Positional {
            params: &lease::RELEASE_PARAMS,
            optional: 0,
        },
        flags: LEASE_FLAGS,
        more_acl_categories: "",
        summary: "Releases a lease from RL.ACQUIRE; its units go to waiters first.",
        cost: Cost::Logarithmic(
            "O(log(N)) where N is the number of leases held; plus O(log(W)) for each waiter \
             it admits, where W is the number of waiting clients, at most \
             ratelimit.wait-events-per-tick of them",
        ),
        since: "0.1.0",
        run: Handler::Release,
    },
    CommandDef {
        name: "RL.RENEW",
        grammar: Grammar::Positional {
            params: &lease::RENEW_PARAMS,
            optional: 0,
        },
        flags: LEASE_FLAGS,
        more_acl_categories: "",
        summary: "Makes a held lease expire ttl from now.",
        cost: Cost::Logarithmic("O(log(N)) where N is the number of leases held"),
        since: "0.1.0",
        run: Handler::Renew,
    },
    CommandDef {
        name: "RL.CHECK",
        grammar: Grammar::Check,
        flags: DECISION_FLAGS,
        more_acl_categories: "",
        summary: "Admits or denies a request under the first defined of one or more named policies.",
        cost: Cost::Linear(
            "O(1) to find the policy, then as its own command: O(1) for GCRA, BUCKET, FIXED \
             and SLIDING APPROX; O(N) for SLIDING BUCKETS N; O(COST + log(N)) for SLIDING \
             EXACT, where N is the number of entries in the log; O(log(N)) for CONCURRENCY, \
             where N is the number of leases held; plus O(log(W)) with WAIT or when the key \
             has waiters, where W is the number of waiting clients",
        ),
        since: "0.2.0",
        run: Handler::Check,
    },
    CommandDef {
        name: "RL.POLICY|SET",
        grammar: Grammar::Registry(RegistryOp::Set),
        // Changes every limiter that uses the name: an administrator's.
        flags: "write deny-oom",
        more_acl_categories: "admin dangerous",
        summary: "Defines or redefines a named policy, as RL.ALL writes a policy (optionally SHADOW), or a path of RL.SHARE nodes after SHARE.",
        cost: Cost::Linear("O(1) for a limit; O(N) for a SHARE path of N nodes"),
        since: "0.2.0",
        run: Handler::PolicySet,
    },
    CommandDef {
        name: "RL.POLICY|GET",
        grammar: Grammar::Registry(RegistryOp::Get),
        flags: "readonly",
        more_acl_categories: "",
        summary: "Returns a named policy's definition.",
        cost: Cost::Constant,
        since: "0.2.0",
        run: Handler::PolicyGet,
    },
    CommandDef {
        name: "RL.POLICY|DEL",
        grammar: Grammar::Registry(RegistryOp::Del),
        flags: "write",
        more_acl_categories: "admin dangerous",
        summary: "Deletes a named policy; the state of keys decided under it stays.",
        cost: Cost::Constant,
        since: "0.2.0",
        run: Handler::PolicyDel,
    },
    CommandDef {
        name: "RL.POLICY|LIST",
        grammar: Grammar::Registry(RegistryOp::List),
        flags: "readonly",
        more_acl_categories: "",
        summary: "Lists the names of the named policies, optionally those matching a pattern.",
        cost: Cost::Linear("O(N log(N)) where N is the number of named policies"),
        since: "0.2.0",
        run: Handler::PolicyList,
    },
    CommandDef {
        name: "RL.POLICY|DIGEST",
        grammar: Grammar::Registry(RegistryOp::Digest),
        flags: "readonly",
        more_acl_categories: "",
        summary: "Returns a hash of every named policy, equal on servers that hold the same policies.",
        cost: Cost::Linear("O(N log(N)) where N is the number of named policies"),
        since: "0.2.0",
        run: Handler::PolicyDigest,
    },
    CommandDef {
        name: "RL.POLICY|STATS",
        grammar: Grammar::Registry(RegistryOp::Stats),
        flags: "readonly",
        more_acl_categories: "",
        summary: "Returns the counts of the calls naming a policy and the keys it denied most recently.",
        // A fixed number of counters per policy.
        cost: Cost::Constant,
        since: "0.2.0",
        run: Handler::PolicyStats,
    },
    CommandDef {
        name: "RL.POLICY|HELP",
        grammar: Grammar::Registry(RegistryOp::Help),
        // As Redis's own HELP subcommands: answers while loading and on a
        // stale replica, touches nothing.
        flags: "allow-loading allow-stale",
        more_acl_categories: "",
        summary: "Returns the subcommands of RL.POLICY, one line each.",
        cost: Cost::Constant,
        since: "0.2.0",
        run: Handler::PolicyHelp,
    },
    CommandDef {
        name: "RL.DENY",
        grammar: Grammar::Operator(OperatorOp::Deny),
        // Holds a key out of every limit: an administrator's.
        flags: "write deny-oom",
        more_acl_categories: "admin dangerous",
        summary: "Denies every decision on a key, for a duration or until removed, with a reason, before any limit is consulted.",
        cost: Cost::Logarithmic("O(log(N)) where N is the number of denied keys"),
        since: "0.3.0",
        run: Handler::Deny,
    },
    CommandDef {
        name: "RL.UNDENY",
        grammar: Grammar::Operator(OperatorOp::Undeny),
        flags: "write",
        more_acl_categories: "admin dangerous",
        summary: "Removes a key from the deny list.",
        cost: Cost::Logarithmic("O(log(N)) where N is the number of denied keys"),
        since: "0.3.0",
        run: Handler::Undeny,
    },
    CommandDef {
        name: "RL.DENIED",
        grammar: Grammar::Operator(OperatorOp::Denied),
        flags: "readonly",
        more_acl_categories: "",
        summary: "Returns how long a key stays denied and why, or nil if it is not.",
        cost: Cost::Constant,
        since: "0.3.0",
        run: Handler::Denied,
    },
    CommandDef {
        name: "RL.DENYLIST",
        grammar: Grammar::Operator(OperatorOp::DenyList),
        flags: "readonly",
        more_acl_categories: "admin",
        summary: "Lists the denied keys a page at a time, with the time left and the reason, from a cursor as SCAN does.",
        cost: Cost::Linear(
            "O(COUNT + log(N)) where N is the number of denied keys",
        ),
        since: "0.3.0",
        run: Handler::DenyList,
    },
    CommandDef {
        name: "RL.HOTKEYS",
        grammar: Grammar::Operator(OperatorOp::HotKeys),
        flags: "readonly",
        more_acl_categories: "",
        summary: "Returns the keys with the most decisions, with their decisions per second and its error bound.",
        cost: Cost::Linear(
            "O(C log(C)) where C is ratelimit.hot-key-counters",
        ),
        since: "0.3.0",
        run: Handler::HotKeys,
    },
    CommandDef {
        name: "RL.PENALIZED",
        grammar: Grammar::Operator(OperatorOp::Penalized),
        flags: "readonly",
        more_acl_categories: "",
        summary: "Returns the keys whose penalty block or counted debt still runs, the most recent first, with the time left and the form.",
        cost: Cost::Linear("O(N log(P)) where N is COUNT and P is ratelimit.penalized-keys"),
        since: "0.3.0",
        run: Handler::Penalized,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The `fast` flag, the `@fast`/`@slow` category and the complexity
    /// text all follow the cost; `@write`/`@read` follow the flags.
    #[test]
    fn flags_categories_and_complexity_follow_the_cost() {
        for c in &COMMANDS {
            let flags = c.command_flags();
            let flags: Vec<&str> = flags.split(' ').collect();
            let cats = c.acl_categories();
            let cats: Vec<&str> = cats.split(' ').collect();
            let fast = c.cost == Cost::Constant;
            assert_eq!(c.complexity() == "O(1)", fast, "{}", c.name);
            assert_eq!(flags.contains(&"fast"), fast, "{}", c.name);
            assert_eq!(cats.contains(&"fast"), fast, "{}", c.name);
            assert_eq!(cats.contains(&"slow"), !fast, "{}", c.name);
            // Only the cost says fast or slow, only the flags read or write.
            assert!(!c.has_flag("fast"), "{}", c.name);
            for derived in ["fast", "slow", "read", "write"] {
                let extra = c.more_acl_categories.split(' ');
                assert!(extra.clone().all(|x| x != derived), "{}", c.name);
            }
            let read_only = c.has_flag("readonly");
            assert_eq!(cats.contains(&"write"), c.has_flag("write"), "{}", c.name);
            assert_eq!(cats.contains(&"read"), read_only, "{}", c.name);
        }
    }

    /// The `O(...)` terms of a complexity text.
    fn terms(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("O(") {
            let mut depth = 0;
            let end = rest[start + 1..]
                .find(|ch| {
                    depth += match ch {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(rest.len(), |i| start + 2 + i);
            out.push(&rest[start..end]);
            rest = &rest[end..];
        }
        out
    }

    /// A logarithmic cost's text has only O(1) and O(log(...)) terms; a
    /// linear one has a term that is neither.
    #[test]
    fn complexity_texts_say_what_their_cost_is() {
        assert_eq!(
            terms("O(1) for A; O(COST + log(N)) for B, O(log(W))"),
            ["O(1)", "O(COST + log(N))", "O(log(W))"]
        );
        let bounded = |t: &&str| *t == "O(1)" || (t.starts_with("O(log(") && t.ends_with("))"));
        for c in &COMMANDS {
            let terms = terms(c.complexity());
            assert!(!terms.is_empty(), "{}", c.name);
            match c.cost {
                Cost::Constant => assert_eq!(terms, ["O(1)"]),
                Cost::Logarithmic(text) => {
                    assert!(terms.iter().all(bounded), "{}: {text}", c.name);
                    assert!(text.contains("log("), "{}: {text}", c.name);
                }
                Cost::Linear(text) => {
                    assert!(!terms.iter().all(bounded), "{}: {text}", c.name)
                }
            }
        }
    }

    /// What each command registers, as the README's ACL table gives it.
    #[test]
    fn what_each_command_registers() {
        let write_slow = ("write deny-oom", "write slow");
        let expected = [
            ("RL.GCRA", write_slow),
            ("RL.BUCKET", write_slow),
            ("RL.SLIDING", write_slow),
            ("RL.FIXED", write_slow),
            ("RL.SKETCH", write_slow),
            ("RL.ALL", ("write deny-oom getkeys-api", "write slow")),
            ("RL.SHARE", ("write deny-oom getkeys-api", "write slow")),
            ("RL.PEEK", ("readonly", "read slow")),
            ("RL.SHARE.PEEK", ("readonly getkeys-api", "read slow")),
            ("CL.THROTTLE", ("write deny-oom fast", "write fast")),
            ("RL.CLOCK", ("may-replicate", "slow admin dangerous")),
            ("RL.ACQUIRE", write_slow),
            ("RL.RELEASE", ("write", "write slow")),
            ("RL.RENEW", ("write", "write slow")),
            ("RL.CHECK", write_slow),
            (
                "RL.POLICY|SET",
                ("write deny-oom", "write slow admin dangerous"),
            ),
            ("RL.POLICY|GET", ("readonly fast", "read fast")),
            (
                "RL.POLICY|DEL",
                ("write fast", "write fast admin dangerous"),
            ),
            ("RL.POLICY|LIST", ("readonly", "read slow")),
            ("RL.POLICY|DIGEST", ("readonly", "read slow")),
            ("RL.POLICY|STATS", ("readonly fast", "read fast")),
            ("RL.POLICY|HELP", ("allow-loading allow-stale fast", "fast")),
            ("RL.DENY", ("write deny-oom", "write slow admin dangerous")),
            ("RL.UNDENY", ("write", "write slow admin dangerous")),
            ("RL.DENIED", ("readonly fast", "read fast")),
            ("RL.DENYLIST", ("readonly", "read slow admin")),
            ("RL.HOTKEYS", ("readonly", "read slow")),
            ("RL.PENALIZED", ("readonly", "read slow")),
        ];
        let got: Vec<(&str, (String, String))> = COMMANDS
            .iter()
            .map(|c| (c.name, (c.command_flags(), c.acl_categories())))
            .collect();
        let expected: Vec<(&str, (String, String))> = expected
            .iter()
            .map(|(n, (f, a))| (*n, (f.to_string(), a.to_string())))
            .collect();
        assert_eq!(got, expected);
    }
}
