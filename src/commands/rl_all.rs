//! `RL.ALL numkeys key [key ...] policy [policy ...] [COST n | COSTS c1 ..
//! cN] [DRYRUN] [WAIT timeout] [FORCE | PARTIAL | REFUND n | REFUND COSTS c1
//! .. cN]`:
//! several limits in one all-or-nothing decision, through the same
//! decision path as a single-key command (`engine::decide`).

use super::definition::{CommandDef, Grammar};
use super::grammar::{parse_common_with, policy_named, unknown_policy, PerKey, PolicyDef};
use super::{named, Host, Reply, Shape};
use crate::algorithm::limits::MAX_COUNT;
use crate::commands::args;
use crate::engine::error::Error;
use crate::engine::gate::Gated;
use crate::engine::registry::{self, Handle};
use crate::engine::Verdict;
use crate::engine::{deny, Request};
use crate::policy::Policy;
use smallvec::SmallVec;
use std::collections::HashSet;

/// A parsed call. Keys are the `numkeys` arguments after `numkeys`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub numkeys: usize,
    pub policies: Vec<Policy>,
    pub request: Request,
    /// The limits given as `POLICY name`: the limit's index and where the
    /// policy sits in the registry, for its statistics.
    pub named: SmallVec<[(usize, Handle); 4]>,
}

/// The policies RL.ALL takes.
type Policies = [&'static PolicyDef];

/// Parses everything after the command name, each policy one of
/// `policies`.
pub fn parse<A: AsRef<[u8]>>(policies_allowed: &Policies, args: &[A]) -> Result<Call, Error> {
    let Some((numkeys, rest)) = args.split_first() else {
        return Err(Error::Arity(NAME));
    };
    let max_keys = rest.len().max(1) as u64;
    let numkeys = args::integer(numkeys.as_ref(), "numkeys", 1, max_keys)? as usize;
    let mut tail = rest.get(numkeys..).unwrap_or(&[]);
    let starts_policy = |w: &A| {
        policy_named(policies_allowed, w.as_ref()).is_some() || named::is_policy_word(w.as_ref())
    };
    // A count that takes the first policy's keyword for a key: say that
    // numkeys is wrong, not that what follows the keys is no policy.
    if !tail.first().is_some_and(starts_policy) {
        if let Some(first) = rest[..numkeys.min(rest.len())]
            .iter()
            .skip(1)
            .position(starts_policy)
        {
            return Err(Error::Integer {
                arg: "numkeys",
                min: 1,
                max: first as u64 + 1,
            });
        }
    }
    let mut policies = Vec::with_capacity(numkeys);
    // The common options a policy given refuses, and its keyword.
    let mut refused: Vec<(&'static str, &'static str)> = Vec::new();
    let mut named = SmallVec::new();
    // A named policy defined with `JITTER` spreads the call's waits.
    let mut jitter = false;
    // The first named policy's penalty, for a call that gives none.
    let mut penalty = None;
    while policies.len() < numkeys {
        // `POLICY name`: a registered policy, parsed when it was defined.
        if let Some([word, name, ..]) = tail.get(..2) {
            if named::is_policy_word(word.as_ref()) {
                let found = named::lookup(name.as_ref(), true)?;
                named.push((policies.len(), found.handle));
                policies.push(found.policy);
                refused.extend(found.refuses.iter().map(|t| (*t, found.keyword)));
                jitter |= found.jitter;
                penalty = penalty.or(found.penalty);
                tail = &tail[2..];
                continue;
            }
        }
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
        refused.extend(definition.refuses.iter().map(|t| (*t, definition.keyword)));
        tail = tail.get(1 + used..).unwrap_or(&[]);
    }
    let extra = tail
        .iter()
        .filter(|w| {
            policy_named(policies_allowed, w.as_ref()).is_some()
                || named::is_policy_word(w.as_ref())
        })
        .count();
    if policies.len() < numkeys || extra > 0 {
        // Fewer policies than keys: those found; more: all of them.
        let found = if policies.len() < numkeys { 0 } else { extra };
        return Err(Error::PolicyCount {
            keys: numkeys,
            policies: policies.len() + found,
        });
    }
    let (tail, per_key) = take_costs(tail, numkeys)?;
    let mut request = parse_common_with(&tail, per_key)?;
    request.jitter |= jitter;
    request.penalize_by_default(penalty);
    // A common option one of the policies does not take (CONCURRENCY takes
    // no FORCE, PARTIAL, REFUND or RESERVE).
    for option in request.refusable() {
        if let Some((_, with)) = refused.iter().find(|(t, _)| *t == option) {
            return Err(Error::Combination { option, with });
        }
    }
    Ok(Call {
        numkeys,
        policies,
        request,
        named,
    })
}

const NAME: &str = "RL.ALL";
/// RL.ALL's amounts: one for every key, or one per key.
pub const COST: &str = "COST";
pub const COSTS: &str = "COSTS";
const REFUND: &str = "REFUND";

/// Takes `COSTS c1 .. cN` (or `REFUND COSTS c1 .. cN`) out of the options
/// tail: one amount per key. Every option value is an integer, so the word
/// COSTS is never a value; the amounts are the number-like words after it.
fn take_costs<A: AsRef<[u8]>>(tail: &[A], numkeys: usize) -> Result<(Vec<&[u8]>, PerKey), Error> {
    let is = |w: &[u8], token: &str| w.eq_ignore_ascii_case(token.as_bytes());
    let number_like = |w: &&A| {
        let w = w.as_ref();
        w.first()
            .is_some_and(|b| b.is_ascii_digit() || *b == b'-' || *b == b'+')
    };
    let mut rest: Vec<&[u8]> = Vec::with_capacity(tail.len());
    let mut per_key = PerKey::default();
    let mut i = 0;
    while i < tail.len() {
        let word = tail[i].as_ref();
        i += 1;
        if !is(word, COSTS) {
            rest.push(word);
            continue;
        }
        if per_key.costs.is_some() {
            return Err(Error::RepeatedOption(COSTS));
        }
        let given = tail[i..].iter().take_while(number_like).count();
        if given != numkeys {
            return Err(Error::CostsCount {
                keys: numkeys,
                given,
            });
        }
        let costs = tail[i..i + given]
            .iter()
            .map(|c| args::integer(c.as_ref(), COSTS, 0, MAX_COUNT))
            .collect::<Result<Vec<u64>, Error>>()?;
        i += given;
        per_key.costs = Some(costs);
        if rest.last().is_some_and(|w| is(w, REFUND)) {
            rest.pop();
            per_key.refund = true;
        }
    }
    Ok((rest, per_key))
}

/// The first repeated key, as 1-based positions (first, again).
fn repeated_key<A: AsRef<[u8]>>(keys: &[A]) -> Option<(usize, usize)> {
    let mut seen = HashSet::with_capacity(keys.len());
    let again = keys.iter().position(|k| !seen.insert(k.as_ref()))?;
    let first = keys
        .iter()
        .position(|k| k.as_ref() == keys[again].as_ref())?;
    Some((first + 1, again + 1))
}

/// The `numkeys` keys after `numkeys` in `rest` (the arguments after the
/// command name), each named once.
pub fn keys_of<'a, A: AsRef<[u8]>>(
    rest: &'a [A],
    numkeys: usize,
    command: &'static str,
) -> Result<&'a [A], Error> {
    let keys = rest.get(1..=numkeys).ok_or(Error::Arity(command))?;
    if let Some((first, again)) = repeated_key(keys) {
        return Err(Error::RepeatedKey { first, again });
    }
    Ok(keys)
}

/// One decision over several keys through the gate; an error names the
/// key (1-based) it is about.
pub fn decide_keys<H: Host>(
    host: &mut H,
    keys: &[H::Arg],
    policies: &[Policy],
    request: &Request,
) -> Result<Gated, Error> {
    host.decide(Shape::All, keys, policies, request)
        .map_err(|e| Error::InKey {
            position: e.key + 1,
            error: Box::new(e.error),
        })
}

pub fn run<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let Grammar::All { policies } = command.grammar else {
        return Err(Error::Internal(command.name));
    };
    let [_, rest @ ..] = args else {
        return Err(Error::Arity(NAME));
    };
    let call = parse(policies, rest)?;
    let keys = keys_of(rest, call.numkeys, NAME)?;
    let policies: Vec<Policy> = (call.policies.into_iter().zip(keys))
        .map(|(p, k)| p.for_key(|| k.as_ref()))
        .collect();
    let gated = decide_keys(host, keys, &policies, &call.request)?;
    if !call.named.is_empty() {
        let now = host.now();
        let listed = matches!(&gated, Gated::Now(d) if !d.allowed)
            && keys.iter().any(|k| deny::holds(k.as_ref(), now));
        registry::with(|r| {
            for &(limit, handle) in &call.named {
                let (verdict, denied_key) = match &gated {
                    Gated::Blocked => (Verdict::Waiting, None),
                    Gated::Now(d) if d.allowed => (Verdict::Allowed, None),
                    // The key counts among the policy's top denied keys
                    // when its own limit denied it.
                    Gated::Now(d) => {
                        let own = d.decisions.get(limit).is_some_and(|x| !x.allowed);
                        (Verdict::Denied, keys.get(limit).filter(|_| own && !listed))
                    }
                };
                r.record_at(handle, verdict, denied_key.map(AsRef::as_ref), now);
                if let Some(stats) = r.stats_at(handle).filter(|_| listed) {
                    stats.deny_listed += 1;
                }
            }
        });
    }
    Ok(Reply::of_all(gated))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Charge;

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
                ..Request::default()
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
    fn takes_wait_and_flow() {
        let wait = p(&["1", "a", "GCRA", "10", "1s", "WAIT", "1s"]).unwrap();
        assert!(wait.request.wait.is_some());
        let flow = [
            "1", "a", "GCRA", "10", "1s", "WAIT", "1s", "FLOW", "t", "WEIGHT", "2",
        ];
        let flow = p(&flow).unwrap().request.flow.unwrap();
        assert_eq!((&flow.name[..], flow.weight), (&b"t"[..], 2));
    }

    #[test]
    fn costs_per_key() {
        let head = ["2", "a", "b", "GCRA", "10", "1s", "FIXED", "1000", "1m"];
        let with = |tail: &[&str]| p(&[&head[..], tail].concat());
        let call = with(&["COSTS", "1", "512"]).unwrap();
        assert_eq!(call.request.costs, Some(vec![1, 512]));
        assert_eq!(call.request.cost_of(1), 512);
        let call = with(&["FORCE", "costs", "1", "512"]).unwrap();
        assert_eq!(call.request.charge, Charge::Force);
        let call = with(&["REFUND", "COSTS", "0", "100"]).unwrap();
        assert_eq!(call.request.charge, Charge::Refund);
        assert_eq!(call.request.costs, Some(vec![0, 100]));
        let call = with(&["REFUND", "7"]).unwrap();
        assert_eq!(
            (call.request.charge, call.request.cost_of(1)),
            (Charge::Refund, 7)
        );
        let msg = |tail: &[&str]| with(tail).unwrap_err().to_string();
        assert_eq!(
            msg(&["COSTS", "1"]),
            "ERR syntax error: COSTS needs one cost per key, got 1 cost for 2 keys"
        );
        assert_eq!(
            msg(&["COSTS", "1", "2", "3"]),
            "ERR syntax error: COSTS needs one cost per key, got 3 costs for 2 keys"
        );
        assert_eq!(
            msg(&["COSTS", "1", "x"]),
            "ERR syntax error: COSTS needs one cost per key, got 1 cost for 2 keys"
        );
        assert_eq!(
            msg(&["COSTS", "1", "-2"]),
            format!("ERR COSTS must be an integer from 0 to {MAX_COUNT}")
        );
        assert_eq!(
            msg(&["COSTS", "1", "2", "COST", "3"]),
            "ERR syntax error: COST and COSTS are mutually exclusive"
        );
        assert_eq!(
            msg(&["COSTS", "1", "2", "COSTS", "1", "2"]),
            "ERR syntax error: COSTS given more than once"
        );
        assert_eq!(
            msg(&["PARTIAL", "COSTS", "1", "2"]),
            "ERR syntax error: PARTIAL cannot be combined with COSTS"
        );
        assert_eq!(
            msg(&["REFUND", "1", "COSTS", "1", "2"]),
            "ERR syntax error: REFUND cannot be combined with COSTS"
        );
    }

    #[test]
    fn repeated_keys_are_found() {
        assert_eq!(repeated_key(&["a", "b", "c"]), None);
        assert_eq!(repeated_key(&["a", "b", "a"]), Some((1, 3)));
        assert_eq!(repeated_key(&["a", "b", "b"]), Some((2, 3)));
    }
}
