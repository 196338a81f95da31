//! `RL.PEEK key policy`: what a limiter would admit now, with the policy
//! written as in RL.ALL. Read-only: the key is opened for reading, and the
//! decision path is asked for a peek, which never writes.

use super::definition::{CommandDef, Grammar};
use super::grammar::{policy_named, unknown_policy};
use super::{named, Host, Reply};
use crate::engine::error::{printable, Error};
use crate::engine::{self, Charge, Request};
use crate::policy::Policy;
use std::slice;

/// Parses the arguments after the key: one policy, nothing after it.
pub fn parse<A: AsRef<[u8]>>(
    policies: &'static [&'static crate::commands::grammar::PolicyDef],
    args: &[A],
    command: &'static str,
) -> Result<Policy, Error> {
    let [keyword, rest @ ..] = args else {
        return Err(Error::Arity(command));
    };
    // `POLICY name`: a registered policy (a SHADOW one reports what
    // enforcing it would answer).
    if named::is_policy_word(keyword.as_ref()) {
        return match rest {
            [name] => Ok(named::lookup(name.as_ref(), false)?.policy),
            [] => Err(Error::MissingValue(named::POLICY)),
            [_, extra, ..] => Err(Error::UnknownOption(printable(extra.as_ref()))),
        };
    }
    let definition = policy_named(policies, keyword.as_ref())
        .ok_or_else(|| unknown_policy(policies, keyword.as_ref()))?;
    let (policy, used) = definition.parse_prefix(rest)?;
    match rest.get(used) {
        Some(extra) => Err(Error::UnknownOption(printable(extra.as_ref()))),
        None => Ok(policy),
    }
}

pub fn run<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let Grammar::Peek { policies } = command.grammar else {
        return Err(Error::Internal(command.name));
    };
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity(command.name));
    };
    let policy = parse(policies, rest, command.name)?;
    let request = Request {
        charge: Charge::Peek,
        ..Request::default()
    };
    let now = host.now();
    // With waiters on the key, a request now would be denied behind them.
    let behind = host.behind_line(
        slice::from_ref(key),
        slice::from_ref(&policy),
        now,
        request.clone(),
    );
    let mut decided = match behind {
        Some(decided) => decided,
        None => {
            let mut store = host.open(slice::from_ref(key), true);
            engine::decide(&mut store, slice::from_ref(&policy), now, &request)
        }
    }
    .map_err(|e| e.error)?;
    // A look holds no lease: the five fields only.
    decided.leases.clear();
    Ok(Reply::Peek(decided))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::table::POLICIES;

    fn p(args: &[&str]) -> Result<Policy, Error> {
        parse(&POLICIES, args, "RL.PEEK")
    }

    #[test]
    fn one_policy_and_nothing_else() {
        assert_eq!(p(&["gcra", "10", "1s"]).unwrap().command(), "RL.GCRA");
        assert_eq!(
            p(&["SLIDING", "10", "1s", "APPROX"]).unwrap().command(),
            "RL.SLIDING APPROX"
        );
        let msg = |args: &[&str]| p(args).unwrap_err().to_string();
        assert_eq!(
            msg(&["GCRA", "10", "1s", "COST", "2"]),
            "ERR syntax error: unknown option 'COST'"
        );
        assert_eq!(
            msg(&["LEAKY", "1", "1s"]),
            "ERR syntax error: unknown policy 'LEAKY': expected GCRA, BUCKET, SLIDING, FIXED or CONCURRENCY"
        );
        assert_eq!(
            msg(&["FIXED", "1"]),
            "ERR syntax error: the policy is FIXED limit window [ALIGNED]"
        );
    }
}
