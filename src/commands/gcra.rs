//! `RL.GCRA key limit period [BURST n] [COST n] [DRYRUN]`

use super::{horizon_error, run_policy, Verdict};
use crate::algorithm::gcra::Gcra;
use crate::args::{self, unknown_option, Common, Options, MAX_COUNT};
use crate::error::Error;
use crate::policy::Policy;
use crate::server::ffi::{Arg, Ctx};

/// A parsed call: the limiter and the common options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub gcra: Gcra,
    pub common: Common,
}

/// Parses `limit period [BURST n] [COST n] [DRYRUN]` (after the key).
pub fn parse<A: AsRef<[u8]>>(args: &[A]) -> Result<Call, Error> {
    let [limit, period, tail @ ..] = args else {
        return Err(Error::Arity("rl.gcra"));
    };
    let limit = args::integer(limit.as_ref(), "limit", 1, MAX_COUNT)?;
    let period_us = args::duration(period.as_ref(), "period")?;
    let mut burst = limit;
    let mut common = Common::default();
    let mut opts = Options::new(tail);
    while let Some(word) = opts.next_keyword() {
        if word.eq_ignore_ascii_case(b"BURST") {
            opts.once("BURST")?;
            burst = args::integer(opts.value("BURST")?, "BURST", 1, MAX_COUNT)?;
        } else if !common.accept(word, &mut opts)? {
            return Err(unknown_option(word));
        }
    }
    let gcra =
        Gcra::new(limit, period_us, burst).map_err(|_| horizon_error("BURST * period / limit"))?;
    Ok(Call { gcra, common })
}

/// Parses RL.ALL's `GCRA limit period [BURST n]` (after the word GCRA) from
/// the start of `args`; returns the policy and how many arguments it used.
pub fn parse_policy<A: AsRef<[u8]>>(args: &[A]) -> Result<(Policy, usize), Error> {
    let [limit, period, rest @ ..] = args else {
        return Err(Error::PolicyArgs("GCRA limit period [BURST n]"));
    };
    let limit = args::integer(limit.as_ref(), "limit", 1, MAX_COUNT)?;
    let period_us = args::duration(period.as_ref(), "period")?;
    let (burst, used) = match rest {
        [word, value, ..] if word.as_ref().eq_ignore_ascii_case(b"BURST") => {
            (args::integer(value.as_ref(), "BURST", 1, MAX_COUNT)?, 4)
        }
        [word] if word.as_ref().eq_ignore_ascii_case(b"BURST") => {
            return Err(Error::MissingValue("BURST"))
        }
        _ => (limit, 2),
    };
    // A second BURST would otherwise reach the common options as unknown.
    let again = rest.get(used - 2).map(AsRef::as_ref);
    if used == 4 && again.is_some_and(|w| w.eq_ignore_ascii_case(b"BURST")) {
        return Err(Error::RepeatedOption("BURST"));
    }
    let gcra =
        Gcra::new(limit, period_us, burst).map_err(|_| horizon_error("BURST * period / limit"))?;
    Ok((Policy::Gcra(gcra), used))
}

pub fn run(ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity("rl.gcra"));
    };
    let call = parse(rest)?;
    run_policy(ctx, *key, &Policy::Gcra(call.gcra), call.common)
}
