//! `RL.BUCKET key capacity refill period [COST n] [DRYRUN]`

use super::{horizon_error, load_tat, reply_decision, store_tat, Verdict};
use crate::algorithm::bucket::TokenBucket;
use crate::args::{self, Common, MAX_COUNT};
use crate::codec::Kind;
use crate::error::Error;
use crate::server::clock;
use crate::server::ffi::{Arg, Ctx};
use crate::server::key::LimiterKey;

pub const NAME: &str = "RL.BUCKET";

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
    let capacity = args::integer(capacity.as_ref(), "capacity", 1, MAX_COUNT)?;
    let refill = args::integer(refill.as_ref(), "refill", 1, MAX_COUNT)?;
    let period_us = args::duration_us(period.as_ref(), "period")?;
    let common = Common::parse(tail)?;
    let bucket = TokenBucket::new(capacity, refill, period_us)
        .map_err(|_| horizon_error("capacity * period / refill"))?;
    Ok(Call { bucket, common })
}

pub fn run(ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity("rl.bucket"));
    };
    let call = parse(rest)?;
    let now = clock::now_us();
    let mut key = LimiterKey::open(ctx, *key);
    let stored = load_tat(&key, Kind::Bucket, NAME)?;
    let (decision, new) = call.bucket.decide(stored, now, call.common.cost);
    store_tat(&mut key, Kind::Bucket, new, call.common.dryrun, &decision);
    Ok(reply_decision(ctx, &decision))
}
