//! The command handlers, one file per command family, and what they share:
//! the panic guard, the outcome counters, and the schedule-state path that
//! RL.GCRA and RL.BUCKET have in common.

pub mod all;
pub mod bucket;
pub mod clock;
pub mod docs;
pub mod fixed;
pub mod gcra;
pub mod registry;
pub mod sliding;
pub mod throttle;

use crate::algorithm::schedule::Tat;
use crate::algorithm::{ceil_ms, Decision};
use crate::codec::{self, Kind, TAT_MAX_LEN};
use crate::error::Error;
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

/// Reads the TAT that `kind`'s state in `key` holds (`None`: no key).
pub fn load_tat(key: &LimiterKey, kind: Kind, command: &'static str) -> Result<Option<Tat>, Error> {
    match key.value()? {
        None => Ok(None),
        Some(v) => codec::decode_tat(v, kind)
            .map(Some)
            .map_err(|e| Error::state(command, e)),
    }
}

/// Stores a new TAT (unless this is a dry run) with the decision's TTL.
pub fn store_tat(key: &mut LimiterKey, kind: Kind, new: Option<Tat>, dryrun: bool, d: &Decision) {
    if let (Some(tat), false) = (new, dryrun) {
        let mut buf = [0u8; TAT_MAX_LEN];
        let len = codec::encode_tat(kind, tat, &mut buf);
        key.write(&buf[..len], ceil_ms(d.reset_after_us));
    }
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
