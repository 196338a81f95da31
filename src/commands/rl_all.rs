//! `RL.ALL numkeys key [key ...] policy [policy ...] [COST n] [DRYRUN]
//! [WAIT timeout]`:
//! several limits in one all-or-nothing decision, through the same
//! decision path as a single-key command (`engine::decide`).

use super::definition::{CommandDef, Grammar};
use super::grammar::{join_words, parse_common, PolicyDef};
use super::Verdict;
use crate::args;
use crate::engine::Request;
use crate::error::{printable, Error};
use crate::policy::Policy;
use crate::server::wait::{self, Outcome, Shape};
use crate::server::{reply, Arg, Ctx};
use std::collections::HashSet;

/// A parsed call. Keys are the `numkeys` arguments after `numkeys`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub numkeys: usize,
    pub policies: Vec<Policy>,
    pub request: Request,
}

/// The policies RL.ALL takes.
type Policies = [&'static PolicyDef];

fn policy_named(policies: &Policies, word: &[u8]) -> Option<&'static PolicyDef> {
    policies
        .iter()
        .find(|p| word.eq_ignore_ascii_case(p.keyword.as_bytes()))
        .copied()
}

fn unknown_policy(policies: &Policies, word: &[u8]) -> Error {
    let names: Vec<&str> = policies.iter().map(|p| p.keyword).collect();
    Error::UnknownPolicy {
        given: printable(word),
        expected: join_words(&names, "or"),
    }
}

/// Parses everything after the command name, each policy one of
/// `policies`.
pub fn parse<A: AsRef<[u8]>>(policies_allowed: &Policies, args: &[A]) -> Result<Call, Error> {
    let Some((numkeys, rest)) = args.split_first() else {
        return Err(Error::Arity(NAME));
    };
    let max_keys = rest.len().max(1) as u64;
    let numkeys = args::integer(numkeys.as_ref(), "numkeys", 1, max_keys)? as usize;
    let mut tail = rest.get(numkeys..).unwrap_or(&[]);
    let mut policies = Vec::with_capacity(numkeys);
    while policies.len() < numkeys {
        let definition = match tail.first() {
            Some(word) => match policy_named(policies_allowed, word.as_ref()) {
                Some(d) => d,
                None if policies.is_empty() => {
                    return Err(unknown_policy(policies_allowed, word.as_ref()))
                }
                None => break,
            },
            None => break,
        };
        let (policy, used) = definition.parse_prefix(&tail[1..])?;
        policies.push(policy);
        tail = tail.get(1 + used..).unwrap_or(&[]);
    }
    let extra = tail
        .iter()
        .filter(|w| policy_named(policies_allowed, w.as_ref()).is_some())
        .count();
    if policies.len() < numkeys || extra > 0 {
        // Fewer policies than keys: those found; more: all of them.
        let found = if policies.len() < numkeys { 0 } else { extra };
        return Err(Error::PolicyCount {
            keys: numkeys,
            policies: policies.len() + found,
        });
    }
    let request = parse_common(tail)?;
    Ok(Call {
        numkeys,
        policies,
        request,
    })
}

const NAME: &str = "RL.ALL";

/// The first repeated key, as 1-based positions (first, again).
pub fn repeated_key<A: AsRef<[u8]>>(keys: &[A]) -> Option<(usize, usize)> {
    let mut seen = HashSet::with_capacity(keys.len());
    let again = keys.iter().position(|k| !seen.insert(k.as_ref()))?;
    let first = keys
        .iter()
        .position(|k| k.as_ref() == keys[again].as_ref())?;
    Some((first + 1, again + 1))
}

pub fn run(command: &CommandDef, ctx: Ctx, args: &[Arg]) -> Result<Verdict, Error> {
    let Grammar::All { policies } = command.grammar else {
        return Err(Error::Internal(command.name));
    };
    let [_, rest @ ..] = args else {
        return Err(Error::Arity(NAME));
    };
    let call = parse(policies, rest)?;
    let keys = rest.get(1..=call.numkeys).ok_or(Error::Arity(NAME))?;
    if let Some((first, again)) = repeated_key(keys) {
        return Err(Error::RepeatedKey { first, again });
    }
    let policies: Vec<Policy> = (call.policies.into_iter().zip(keys))
        .map(|(p, k)| p.for_key(k.as_ref()))
        .collect();
    let outcome = wait::decide(
        ctx,
        command.index(),
        Shape::All,
        keys,
        &policies,
        call.request,
    )
    .map_err(|e| Error::InKey {
        position: e.key + 1,
        error: Box::new(e.error),
    })?;
    let Outcome::Reply(decided) = outcome else {
        return Ok(Verdict::Waiting);
    };
    reply::all(ctx, &decided);
    Ok(Verdict::of(decided.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Call, Error> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse(&crate::commands::table::POLICIES, &bytes)
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
            call.request,
            Request {
                cost: 2,
                dryrun: false,
                wait: None,
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
            "ERR syntax error: unknown policy 'LEAKY': expected GCRA, BUCKET, SLIDING, FIXED or CONCURRENCY"
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
