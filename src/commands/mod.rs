//! The command handlers, one file per command family, and what they share:
//! the panic guard, the outcome counters, and the decision path of every
//! single-key RL.* command ([`run_policy`]).

pub mod all;
pub mod bucket;
pub mod clock;
pub mod docs;
pub mod fixed;
pub mod gcra;
pub mod registry;
pub mod sliding;
pub mod throttle;

use crate::algorithm::Decision;
use crate::args::Common;
use crate::error::Error;
use crate::policy::Policy;
use crate::server::ffi::{self, Arg, Ctx, RString};
use crate::server::key::LimiterKey;
use crate::server::reply;
use crate::stats;
use redis_module::raw;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a successful call did, for the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Denied,
    /// Not a decision (RL.CLOCK).
    Other,
}

impl Verdict {
    pub fn of(allowed: bool) -> Verdict {
        if allowed {
            Verdict::Allowed
        } else {
            Verdict::Denied
        }
    }
}

pub type Handler = fn(Ctx, &[Arg]) -> Result<Verdict, Error>;

/// Runs a handler so that no panic reaches Redis: an unexpected panic
/// becomes an error reply. Handlers write state only after every check has
/// passed and reply last, so a caught panic leaves nothing half-written.
///
/// # Safety
/// `ctx`, `argv` and `argc` are what Redis passed to the command callback.
pub unsafe fn guard(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut RString,
    argc: c_int,
    command: stats::Command,
    handler: Handler,
) -> c_int {
    let ctx = Ctx(ctx);
    // SAFETY: forwarded from the caller's contract.
    let args = unsafe { ffi::argv(argv, argc) };
    let outcome = catch_unwind(AssertUnwindSafe(|| handler(ctx, args)));
    match outcome {
        Ok(Ok(verdict)) => stats::record(command, verdict),
        Ok(Err(e)) => {
            stats::record_error(command);
            ffi::reply_error(ctx, &e.to_string());
        }
        Err(_) => {
            stats::record_error(command);
            ffi::reply_error(ctx, &Error::Internal(command.name()).to_string());
        }
    }
    raw::REDISMODULE_OK as c_int
}

/// Reads the clock once, decides against the key's state, stores the write
/// (unless DRYRUN) with a TTL of the decision's reset, and replies.
pub fn run_policy(ctx: Ctx, key: Arg, policy: &Policy, common: Common) -> Result<Verdict, Error> {
    let now = crate::server::clock::now();
    let mut key = LimiterKey::open(ctx, key);
    let outcome = policy
        .decide(key.value()?, now, common.cost)
        .map_err(|e| Error::state(policy.command(), e))?;
    if let (Some(write), false) = (&outcome.write, common.dryrun) {
        key.apply(write, outcome.decision.reset_after.ceil_millis());
    }
    Ok(reply_decision(ctx, &outcome.decision))
}

/// The error for a horizon that is too long, in the command's own words.
pub fn horizon_error(span: &'static str) -> Error {
    Error::HorizonTooLong {
        span,
        max: "1000 years",
    }
}

/// Replies with a decision in the caller's protocol.
pub fn reply_decision(ctx: Ctx, d: &Decision) -> Verdict {
    reply::decision(ctx, ffi::is_resp3(ctx), d);
    Verdict::of(d.allowed)
}
