//! RL.GCRA as a policy: a [`Schedule`] stored under [`Kind::Gcra`] (the
//! shared schedule glue is in [`super::schedule`]).

use super::schedule::Scheduled;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::schedule::Schedule;
use crate::codec::Kind;

impl Scheduled for Gcra {
    const KIND: Kind = Kind::Gcra;

    fn schedule(&self) -> &Schedule {
        Gcra::schedule(self)
    }
}
