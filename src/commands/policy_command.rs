//! `RL.GCRA`, `RL.BUCKET`, `RL.SLIDING`, `RL.FIXED`, `RL.SKETCH` and
//! `RL.ACQUIRE`: `key`, one policy's arguments and options, and the common
//! options (`COST n`, `DRYRUN`, `WAIT timeout`, `FORCE`, `PARTIAL`,
//! `REFUND n`) that the policy takes.

use super::definition::{CommandDef, Grammar};
use super::Verdict;
use crate::engine::Request;
use crate::error::Error;
use crate::policy::Policy;
use crate::server::wait::{self, Outcome, Shape};
use crate::server::{reply, Arg, Ctx};
use std::slice;

pub fn run(command: &CommandDef, ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let Grammar::Policy(definition) = command.grammar else {
        return Err(Error::Internal(command.name));
    };
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity(command.name));
    };
    let (policy, request) = definition.parse_command(rest, command.name)?;
    let outcome = decide_one(command, ctx, key, policy, request);
    // Read where it lies: the decision is too large to move out by copy on
    // every call.
    match &outcome {
        Ok(Outcome::Reply(decided)) => {
            reply::decision(ctx, decided);
            Ok(Verdict::of(decided.allowed))
        }
        Ok(Outcome::Blocked) => Ok(Verdict::Waiting),
        Err(_) => outcome.map(|_| Verdict::Other),
    }
}

/// One policy over one key through the decision path (waiting included).
#[inline(always)]
pub fn decide_one(
    command: &CommandDef,
    ctx: Ctx,
    key: &Arg,
    policy: Policy,
    request: Request,
) -> Result<Outcome, Error> {
    let policy = policy.for_key(|| key.as_ref());
    wait::decide(
        ctx,
        command.index(),
        Shape::One,
        slice::from_ref(key),
        slice::from_ref(&policy),
        request,
    )
    .map_err(|e| e.error)
}
