//! `RL.ALL numkeys key [key ...] policy [policy ...] [COST n] [DRYRUN]`:
//! several limits in one all-or-nothing decision. Every limit decides
//! against the same clock reading; only if all admit is any charged, so a
//! request that one limit rejects costs the others nothing.

use super::{bucket, fixed, gcra, sliding, Verdict};
use crate::algorithm::{Micros, RetryAfter};
use crate::args::{self, Common};
use crate::error::{printable, Error};
use crate::policy::{Outcome, Policy};
use crate::server::clock;
use crate::server::ffi::{self, Arg, Ctx};
use crate::server::key::LimiterKey;
use crate::server::reply;
use std::collections::HashSet;

/// A parsed call. Keys are the `numkeys` arguments after `numkeys`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub numkeys: usize,
    pub policies: Vec<Policy>,
    pub common: Common,
}

const POLICY_NAMES: [&[u8]; 4] = [b"GCRA", b"BUCKET", b"SLIDING", b"FIXED"];

fn is_policy_name(word: &[u8]) -> bool {
    POLICY_NAMES.iter().any(|n| word.eq_ignore_ascii_case(n))
}

/// Parses one policy from the start of `args` (its name first); returns it
/// and how many arguments it used.
fn parse_policy<A: AsRef<[u8]>>(args: &[A]) -> Result<(Policy, usize), Error> {
    let Some((name, rest)) = args.split_first() else {
        return Err(Error::PolicyCount {
            keys: 0,
            policies: 0,
        });
    };
    let name = name.as_ref();
    let (policy, used) = if name.eq_ignore_ascii_case(b"GCRA") {
        gcra::parse_policy(rest)?
    } else if name.eq_ignore_ascii_case(b"BUCKET") {
        bucket::parse_policy(rest)?
    } else if name.eq_ignore_ascii_case(b"SLIDING") {
        sliding::parse_policy(rest)
            .map_err(|e| short_policy(e, "SLIDING limit window [EXACT | APPROX | BUCKETS n]"))?
    } else if name.eq_ignore_ascii_case(b"FIXED") {
        fixed::parse_policy(rest).map_err(|e| short_policy(e, "FIXED limit window [ALIGNED]"))?
    } else {
        return Err(Error::UnknownPolicy(printable(name)));
    };
    Ok((policy, used + 1))
}

/// A policy cut short reports its syntax rather than the command's arity.
fn short_policy(e: Error, syntax: &'static str) -> Error {
    match e {
        Error::Arity(_) => Error::PolicyArgs(syntax),
        other => other,
    }
}

/// Parses everything after the command name.
pub fn parse<A: AsRef<[u8]>>(args: &[A]) -> Result<Call, Error> {
    let Some((numkeys, rest)) = args.split_first() else {
        return Err(Error::Arity("rl.all"));
    };
    let max_keys = rest.len().max(1) as u64;
    let numkeys = args::integer(numkeys.as_ref(), "numkeys", 1, max_keys)? as usize;
    let mut tail = rest.get(numkeys..).unwrap_or(&[]);
    let mut policies = Vec::with_capacity(numkeys);
    while policies.len() < numkeys {
        match tail.first() {
            Some(word) if is_policy_name(word.as_ref()) => {}
            Some(word) if policies.is_empty() => {
                return Err(Error::UnknownPolicy(printable(word.as_ref())))
            }
            _ => {
                return Err(Error::PolicyCount {
                    keys: numkeys,
                    policies: policies.len(),
                })
            }
        }
        let (policy, used) = parse_policy(tail)?;
        policies.push(policy);
        tail = tail.get(used..).unwrap_or(&[]);
    }
    let extra = tail.iter().filter(|w| is_policy_name(w.as_ref())).count();
    if extra > 0 {
        return Err(Error::PolicyCount {
            keys: numkeys,
            policies: numkeys + extra,
        });
    }
    let common = Common::parse(tail)?;
    Ok(Call {
        numkeys,
        policies,
        common,
    })
}

/// The first repeated key, as 1-based positions (first, again).
pub fn repeated_key<A: AsRef<[u8]>>(keys: &[A]) -> Option<(usize, usize)> {
    let mut seen = HashSet::with_capacity(keys.len());
    let again = keys.iter().position(|k| !seen.insert(k.as_ref()))?;
    let first = keys
        .iter()
        .position(|k| k.as_ref() == keys[again].as_ref())?;
    Some((first + 1, again + 1))
}

/// The combined answer of several decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Combined {
    pub allowed: bool,
    /// 0-based index of the first limit that denied; -1 if none.
    pub blocked_by: i64,
    /// Wait until every limit would admit; -1 if allowed or never.
    pub retry_after_ms: i64,
}

pub fn combine(outcomes: &[Outcome]) -> Combined {
    let denied = || outcomes.iter().filter(|o| !o.decision.allowed);
    let blocked_by = outcomes.iter().position(|o| !o.decision.allowed);
    let retry_after_ms =
        if blocked_by.is_none() || denied().any(|o| o.decision.retry_after == RetryAfter::Never) {
            -1
        } else {
            let us = denied()
                .filter_map(|o| match o.decision.retry_after {
                    RetryAfter::After(us) => Some(us),
                    _ => None,
                })
                .max()
                .unwrap_or(Micros::ZERO);
            i64::try_from(us.ceil_millis()).unwrap_or(i64::MAX)
        };
    Combined {
        allowed: blocked_by.is_none(),
        blocked_by: blocked_by.map_or(-1, |i| i as i64),
        retry_after_ms,
    }
}

/// Answers a keys-position request: the `numkeys` arguments after
/// `numkeys`. Redis 7.0 routes cluster requests (and raises CROSSSLOT) from
/// this, not from the key spec, for commands whose keys move.
pub fn declare_keys(ctx: Ctx, args: &[Arg]) {
    let numkeys = args
        .get(1)
        .and_then(|n| args::integer(n.as_ref(), "numkeys", 1, args.len() as u64).ok())
        .unwrap_or(0) as usize;
    for pos in 2..(2 + numkeys).min(args.len()) {
        ffi::key_at_pos(ctx, pos);
    }
}

pub fn run(ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let [_, rest @ ..] = args else {
        return Err(Error::Arity("rl.all"));
    };
    let call = parse(rest)?;
    let key_args = rest.get(1..=call.numkeys).ok_or(Error::Arity("rl.all"))?;
    if let Some((first, again)) = repeated_key(key_args) {
        return Err(Error::RepeatedKey { first, again });
    }
    let now = clock::now();
    let mut keys: Vec<LimiterKey> = key_args.iter().map(|k| LimiterKey::open(ctx, *k)).collect();
    let mut outcomes = Vec::with_capacity(keys.len());
    for (i, (key, policy)) in keys.iter().zip(&call.policies).enumerate() {
        let in_key = |error| Error::InKey {
            position: i + 1,
            error: Box::new(error),
        };
        let stored = key.value().map_err(in_key)?;
        let outcome = policy
            .decide(stored, now, call.common.cost)
            .map_err(|e| in_key(Error::state(policy.command(), e)))?;
        outcomes.push(outcome);
    }
    let combined = combine(&outcomes);
    if combined.allowed && !call.common.dryrun {
        for (key, outcome) in keys.iter_mut().zip(&outcomes) {
            if let Some(write) = &outcome.write {
                key.apply(write, outcome.decision.reset_after.ceil_millis());
            }
        }
    }
    let decisions: Vec<_> = outcomes.iter().map(|o| o.decision).collect();
    reply::all(
        ctx,
        combined.allowed,
        combined.blocked_by,
        combined.retry_after_ms,
        &decisions,
    );
    Ok(Verdict::of(combined.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Call, Error> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse(&bytes)
    }

    #[test]
    fn parses_policies_in_key_order() {
        let call = p(&[
            "2", "a", "b", "GCRA", "10", "1s", "BURST", "20", "bucket", "5", "1", "1m", "COST", "2",
        ])
        .unwrap();
        assert_eq!(call.numkeys, 2);
        assert_eq!(call.policies[0].command(), "RL.GCRA");
        assert_eq!(call.policies[1].command(), "RL.BUCKET");
        assert_eq!(
            call.common,
            Common {
                cost: 2,
                dryrun: false
            }
        );
    }

    #[test]
    fn syntax_errors() {
        let msg = |args: &[&str]| p(args).unwrap_err().to_string();
        assert_eq!(
            msg(&["2", "a", "b", "GCRA", "1", "1"]),
            "ERR syntax error: RL.ALL needs one policy per key, got 2 keys and 1 policy"
        );
        assert_eq!(
            msg(&["1", "a", "GCRA", "1", "1", "GCRA", "1", "1"]),
            "ERR syntax error: RL.ALL needs one policy per key, got 1 key and 2 policies"
        );
        assert_eq!(
            msg(&["1", "a", "LEAKY", "1", "1"]),
            "ERR syntax error: unknown policy 'LEAKY': expected GCRA, BUCKET, SLIDING or FIXED"
        );
        assert_eq!(
            msg(&["1", "a", "GCRA", "1"]),
            "ERR syntax error: the policy is GCRA limit period [BURST n]"
        );
        assert_eq!(
            msg(&["1", "a", "GCRA", "1", "1", "BURST"]),
            "ERR syntax error: BURST needs a value"
        );
        assert_eq!(
            msg(&["1", "a", "BUCKET", "1", "1"]),
            "ERR syntax error: the policy is BUCKET capacity refill period"
        );
        assert_eq!(
            msg(&["0", "a", "GCRA", "1", "1"]),
            "ERR numkeys must be an integer from 1 to 4"
        );
        assert_eq!(
            msg(&["1", "a", "GCRA", "1", "1", "NOW"]),
            "ERR syntax error: unknown option 'NOW'"
        );
    }

    #[test]
    fn repeated_keys_are_found() {
        assert_eq!(repeated_key(&["a", "b", "c"]), None);
        assert_eq!(repeated_key(&["a", "b", "a"]), Some((1, 3)));
        assert_eq!(repeated_key(&["a", "b", "b"]), Some((2, 3)));
    }
}
