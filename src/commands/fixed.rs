//! `RL.FIXED key limit window [ALIGNED] [COST n] [DRYRUN]`

use super::sliding::limit_and_window;
use super::{run_policy, Verdict};
use crate::algorithm::fixed_window::FixedWindow;
use crate::args::{unknown_option, Common, Options};
use crate::error::Error;
use crate::policy::Policy;
use crate::server::ffi::{Arg, Ctx};

fn is_aligned(word: &[u8]) -> bool {
    word.eq_ignore_ascii_case(b"ALIGNED")
}

/// Parses `limit window [ALIGNED]` from the start of `args`, stopping at
/// the first other token; returns the policy and the arguments consumed.
pub fn parse_policy<A: AsRef<[u8]>>(args: &[A]) -> Result<(Policy, usize), Error> {
    let (limit, window_us) = limit_and_window(args, "rl.fixed")?;
    let mut used = 2;
    let mut aligned = false;
    while args.get(used).is_some_and(|w| is_aligned(w.as_ref())) {
        if aligned {
            return Err(Error::RepeatedOption("ALIGNED"));
        }
        aligned = true;
        used += 1;
    }
    let policy = Policy::Fixed(FixedWindow::new(limit, window_us, aligned));
    Ok((policy, used))
}

/// Parses everything after the key, options in any order.
pub fn parse<A: AsRef<[u8]>>(args: &[A]) -> Result<(Policy, Common), Error> {
    let (limit, window_us) = limit_and_window(args, "rl.fixed")?;
    let mut aligned = false;
    let mut common = Common::default();
    let mut opts = Options::new(args.get(2..).unwrap_or_default());
    while let Some(word) = opts.next_keyword() {
        if is_aligned(word) {
            opts.once("ALIGNED")?;
            aligned = true;
        } else if !common.accept(word, &mut opts)? {
            return Err(unknown_option(word));
        }
    }
    let policy = Policy::Fixed(FixedWindow::new(limit, window_us, aligned));
    Ok((policy, common))
}

pub fn run(ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity("rl.fixed"));
    };
    let (policy, common) = parse(rest)?;
    run_policy(ctx, *key, &policy, common)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_prefix_stops_at_the_first_foreign_token() {
        let (p, used) = parse_policy(&["5", "1m", "ALIGNED", "COST", "2"]).unwrap();
        assert_eq!(used, 3);
        let minute = crate::algorithm::Micros::from_secs(60);
        assert_eq!(p, Policy::Fixed(FixedWindow::new(5, minute, true)));
        assert_eq!(parse_policy(&["5", "1m", "RL.GCRA"]).unwrap().1, 2);
        assert_eq!(
            parse_policy(&["5", "1m", "aligned", "ALIGNED"]),
            Err(Error::RepeatedOption("ALIGNED"))
        );
        assert_eq!(parse_policy(&["5"]), Err(Error::Arity("rl.fixed")));
    }
}
