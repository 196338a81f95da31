//! `RL.BUCKET key capacity refill period [COST n] [DRYRUN]`

use super::{horizon_error, run_policy, Verdict};
use crate::algorithm::token_bucket::TokenBucket;
use crate::args::{self, Common, MAX_COUNT};
use crate::error::Error;
use crate::policy::Policy;
use crate::server::ffi::{Arg, Ctx};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub bucket: TokenBucket,
    pub common: Common,
}

/// Parses `capacity refill period [COST n] [DRYRUN]` (after the key).
pub fn parse<A: AsRef<[u8]>>(args: &[A]) -> Result<Call, Error> {
    let [capacity, refill, period, tail @ ..] = args else {
        return Err(Error::Arity("rl.bucket"));
    };
    let bucket = build(capacity.as_ref(), refill.as_ref(), period.as_ref())?;
    let common = Common::parse(tail)?;
    Ok(Call { bucket, common })
}

/// Parses RL.ALL's `BUCKET capacity refill period` (after the word BUCKET).
pub fn parse_policy<A: AsRef<[u8]>>(args: &[A]) -> Result<(Policy, usize), Error> {
    let [capacity, refill, period, ..] = args else {
        return Err(Error::PolicyArgs("BUCKET capacity refill period"));
    };
    let bucket = build(capacity.as_ref(), refill.as_ref(), period.as_ref())?;
    Ok((Policy::Bucket(bucket), 3))
}

fn build(capacity: &[u8], refill: &[u8], period: &[u8]) -> Result<TokenBucket, Error> {
    let capacity = args::integer(capacity, "capacity", 1, MAX_COUNT)?;
    let refill = args::integer(refill, "refill", 1, MAX_COUNT)?;
    let period_us = args::duration(period, "period")?;
    TokenBucket::new(capacity, refill, period_us)
        .map_err(|_| horizon_error("capacity * period / refill"))
}

pub fn run(ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity("rl.bucket"));
    };
    let call = parse(rest)?;
    run_policy(ctx, *key, &Policy::Bucket(call.bucket), call.common)
}
