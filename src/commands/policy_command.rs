//! `RL.GCRA`, `RL.BUCKET`, `RL.SLIDING`, `RL.FIXED`, `RL.SKETCH` and
//! `RL.ACQUIRE`: `key`, one policy's arguments and options, and the common
//! options (`COST n`, `DRYRUN`, `WAIT timeout`, `FORCE`, `PARTIAL`,
//! `REFUND n`) that the policy takes.

use super::definition::{CommandDef, Grammar};
use super::{Host, Reply, Shape};
use crate::engine::error::Error;
use crate::engine::gate::Gated;
use crate::engine::Request;
use crate::policy::Policy;
use std::slice;

pub fn run<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let Grammar::Policy(definition) = command.grammar else {
        return Err(Error::Internal(command.name));
    };
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity(command.name));
    };
    let (policy, request) = definition.parse_command(rest, command.name)?;
    let policy = policy.for_key(|| key.as_ref());
    let keys = slice::from_ref(key);
    // Matched once into the reply: the outcome is moved once, not through
    // each conversion.
    match host.decide(Shape::One, keys, slice::from_ref(&policy), &request) {
        Ok(Gated::Now(outcome)) => Ok(Reply::Decision(outcome)),
        Ok(Gated::Blocked) => Ok(Reply::Blocked),
        Err(e) => Err(e.error),
    }
}

/// One policy over one key through the decision path (waiting included).
#[inline(always)]
pub fn decide_one<H: Host>(
    host: &mut H,
    key: &H::Arg,
    policy: Policy,
    request: &Request,
) -> Result<Gated, Error> {
    let policy = policy.for_key(|| key.as_ref());
    host.decide(
        Shape::One,
        slice::from_ref(key),
        slice::from_ref(&policy),
        request,
    )
    .map_err(|e| e.error)
}
