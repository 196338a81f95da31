//! RL.BUCKET as a policy: a [`Schedule`] stored under [`Kind::Bucket`]
//! (the shared schedule glue is in [`super::schedule`]).

use super::schedule::Scheduled;
use crate::algorithm::schedule::Schedule;
use crate::algorithm::token_bucket::TokenBucket;
use crate::codec::Kind;

impl Scheduled for TokenBucket {
    const KIND: Kind = Kind::Bucket;

    fn schedule(&self) -> &Schedule {
        TokenBucket::schedule(self)
    }
}
