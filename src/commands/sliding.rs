//! `RL.SLIDING key limit window [EXACT | APPROX | BUCKETS n] [COST n] [DRYRUN]`

use super::{run_policy, Verdict};
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::{SlidingLog, MAX_SLIDING_LOG_LIMIT};
use crate::algorithm::sliding_subwindows::{SlidingSubwindows, MAX_SUBWINDOWS, MIN_SUBWINDOWS};
use crate::algorithm::Micros;
use crate::args::{self, unknown_option, Common, Options, MAX_COUNT};
use crate::error::Error;
use crate::policy::Policy;
use crate::server::ffi::{Arg, Ctx};

/// The mode keywords seen so far; at most one may be given.
#[derive(Debug, Default)]
struct Mode {
    chosen: Option<&'static str>,
    buckets: u64,
}

impl Mode {
    /// Consumes `word` (and, for BUCKETS, its value from `value`) if it is
    /// a mode keyword.
    fn accept<'a>(
        &mut self,
        word: &[u8],
        value: impl FnOnce(&'static str) -> Result<&'a [u8], Error>,
    ) -> Result<bool, Error> {
        let name = ["EXACT", "APPROX", "BUCKETS"]
            .into_iter()
            .find(|n| word.eq_ignore_ascii_case(n.as_bytes()));
        let Some(name) = name else {
            return Ok(false);
        };
        match self.chosen {
            Some(c) if c == name => return Err(Error::RepeatedOption(name)),
            Some(_) => return Err(Error::Exclusive("EXACT, APPROX and BUCKETS")),
            None => self.chosen = Some(name),
        }
        if name == "BUCKETS" {
            self.buckets =
                args::integer(value("BUCKETS")?, "BUCKETS", MIN_SUBWINDOWS, MAX_SUBWINDOWS)?;
        }
        Ok(true)
    }

    fn policy(&self, limit: u64, window_us: Micros) -> Result<Policy, Error> {
        Ok(match self.chosen {
            Some("APPROX") => Policy::SlidingApprox(SlidingApprox::new(limit, window_us)),
            Some("BUCKETS") => {
                Policy::SlidingSubwindows(SlidingSubwindows::new(limit, window_us, self.buckets))
            }
            _ => {
                if limit > MAX_SLIDING_LOG_LIMIT {
                    return Err(Error::LimitTooHigh {
                        max: MAX_SLIDING_LOG_LIMIT,
                        mode: "EXACT",
                    });
                }
                Policy::SlidingLog(SlidingLog::new(limit, window_us))
            }
        })
    }
}

/// `limit window`, the two arguments every window command starts with.
pub fn limit_and_window<A: AsRef<[u8]>>(
    args: &[A],
    command: &'static str,
) -> Result<(u64, Micros), Error> {
    let [limit, window, ..] = args else {
        return Err(Error::Arity(command));
    };
    let limit = args::integer(limit.as_ref(), "limit", 1, MAX_COUNT)?;
    let window_us = args::duration(window.as_ref(), "window")?;
    Ok((limit, window_us))
}

/// Parses `limit window [EXACT | APPROX | BUCKETS n]` from the start of
/// `args`, stopping at the first token that is not a mode keyword; returns
/// the policy and how many arguments it consumed.
pub fn parse_policy<A: AsRef<[u8]>>(args: &[A]) -> Result<(Policy, usize), Error> {
    let (limit, window_us) = limit_and_window(args, "rl.sliding")?;
    let mut mode = Mode::default();
    let mut used = 2;
    while let Some(word) = args.get(used) {
        let mut took_value = false;
        let value_at = used + 1;
        let value = |name| {
            took_value = true;
            args.get(value_at)
                .map(AsRef::as_ref)
                .ok_or(Error::MissingValue(name))
        };
        if !mode.accept(word.as_ref(), value)? {
            break;
        }
        used += 1 + usize::from(took_value);
    }
    Ok((mode.policy(limit, window_us)?, used))
}

/// Parses everything after the key: the mode and the common options, in
/// any order.
pub fn parse<A: AsRef<[u8]>>(args: &[A]) -> Result<(Policy, Common), Error> {
    let (limit, window_us) = limit_and_window(args, "rl.sliding")?;
    let mut mode = Mode::default();
    let mut common = Common::default();
    let mut opts = Options::new(args.get(2..).unwrap_or_default());
    while let Some(word) = opts.next_keyword() {
        if !mode.accept(word, |name| opts.value(name))? && !common.accept(word, &mut opts)? {
            return Err(unknown_option(word));
        }
    }
    Ok((mode.policy(limit, window_us)?, common))
}

pub fn run(ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity("rl.sliding"));
    };
    let (policy, common) = parse(rest)?;
    run_policy(ctx, *key, &policy, common)
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Micros = Micros::from_secs(60);

    #[test]
    fn policy_prefix_stops_at_the_first_foreign_token() {
        let (p, used) = parse_policy(&["5", "1m", "BUCKETS", "10", "COST", "2"]).unwrap();
        assert_eq!(used, 4);
        assert_eq!(
            p,
            Policy::SlidingSubwindows(SlidingSubwindows::new(5, M, 10))
        );
        let (p, used) = parse_policy(&["5", "1m", "approx", "FIXED"]).unwrap();
        assert_eq!(
            (p, used),
            (Policy::SlidingApprox(SlidingApprox::new(5, M)), 3)
        );
        let (p, used) = parse_policy(&["5", "1m"]).unwrap();
        assert_eq!((p, used), (Policy::SlidingLog(SlidingLog::new(5, M)), 2));
        assert_eq!(
            parse_policy(&["5", "1m", "BUCKETS"]),
            Err(Error::MissingValue("BUCKETS"))
        );
    }

    #[test]
    fn modes_and_common_options_in_any_order() {
        let (p, c) = parse(&["5", "1m", "COST", "2", "APPROX", "DRYRUN"]).unwrap();
        assert_eq!(p, Policy::SlidingApprox(SlidingApprox::new(5, M)));
        assert_eq!((c.cost, c.dryrun), (2, true));
        assert_eq!(
            parse(&["5", "1m", "EXACT", "APPROX"]),
            Err(Error::Exclusive("EXACT, APPROX and BUCKETS"))
        );
        assert_eq!(
            parse(&["5", "1m", "EXACT", "exact"]),
            Err(Error::RepeatedOption("EXACT"))
        );
        assert_eq!(
            parse(&["5", "1m", "BUCKETS", "1"]),
            Err(Error::Integer {
                arg: "BUCKETS",
                min: 2,
                max: 1024
            })
        );
        assert_eq!(
            parse(&["1000001", "1m"]),
            Err(Error::LimitTooHigh {
                max: 1_000_000,
                mode: "EXACT"
            })
        );
        assert!(parse(&["1000001", "1m", "APPROX"]).is_ok());
    }
}
