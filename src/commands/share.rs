//! `RL.SHARE numkeys key [key ...] node [node ...] [COST n] [DRYRUN] [WAIT
//! timeout [FLOW name [WEIGHT w]]]`: borrowing between limits (see
//! `algorithm::share`). The keys are a path, leaf first and root last;
//! every node but the root is
//! `limit period [BURST n] CEIL limit [CBURST n] [MAXDEBT duration]`, the
//! root `limit period [BURST n] [MAXDEBT duration]`.
//! One decision over the path, through the same decision path as RL.ALL
//! (`engine::decide`, which decides a path of nodes as one).
//!
//! `RL.SHARE.PEEK numkeys key [key ...] node [node ...]`: a look at the
//! path, as RL.PEEK is at one limit: read-only, nothing after the nodes.

use super::definition::{CommandDef, Grammar};
use super::grammar::{parse_common, PolicyDef, COMMON};
use super::rl_all::{decide_keys, keys_of};
use super::{named, Host, Reply};
use crate::commands::args;
use crate::engine::error::{printable, Error};
use crate::engine::gate::Gated;
use crate::engine::registry::{self, Handle};
use crate::engine::{self, deny, Charge, Request, Verdict};
use crate::policy::Policy;

const NAME: &str = "RL.SHARE";

/// A parsed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub numkeys: usize,
    pub nodes: Vec<Policy>,
    pub request: Request,
    /// Where the path sits in the registry when given as `POLICY name`,
    /// for its statistics.
    pub named: Option<Handle>,
}

/// Parses everything after the command name.
pub fn parse<A: AsRef<[u8]>>(command: &CommandDef, args: &[A]) -> Result<Call, Error> {
    let Grammar::Share { node, look } = command.grammar else {
        return Err(Error::Internal(NAME));
    };
    let Some((numkeys, rest)) = args.split_first() else {
        return Err(Error::Arity(NAME));
    };
    let max_keys = rest.len().max(1) as u64;
    let numkeys = args::integer(numkeys.as_ref(), "numkeys", 1, max_keys)? as usize;
    let mut tail = rest.get(numkeys..).unwrap_or(&[]);
    // A count that takes `POLICY` for a key: say that numkeys is wrong,
    // not that what follows the keys is no node.
    let starts_path = |w: &A| {
        let w = w.as_ref();
        w.first().is_some_and(u8::is_ascii_digit) || named::is_policy_word(w)
    };
    if !tail.first().is_some_and(starts_path) {
        let keys = &rest[..numkeys.min(rest.len())];
        if let Some(at) = keys
            .iter()
            .skip(1)
            .position(|k| named::is_policy_word(k.as_ref()))
        {
            return Err(Error::Integer {
                arg: "numkeys",
                min: 1,
                max: at as u64 + 1,
            });
        }
    }
    // `POLICY name`: a path defined by name, in place of the nodes.
    if let [word] = tail {
        if named::is_policy_word(word.as_ref()) {
            return Err(Error::MissingValue(named::POLICY));
        }
    }
    if let [word, name, options @ ..] = tail {
        if named::is_policy_word(word.as_ref()) {
            let path = named::lookup_path(name.as_ref())?;
            if path.nodes.len() != numkeys {
                return Err(Error::PathLength {
                    name: printable(name.as_ref()),
                    nodes: path.nodes.len(),
                    keys: numkeys,
                });
            }
            let request = options_of(node, look, options)?;
            return Ok(Call {
                numkeys,
                nodes: path.nodes.to_vec(),
                request,
                named: Some(path.handle),
            });
        }
    }
    let mut nodes = Vec::with_capacity(numkeys);
    // One node per key, each parsed whole: whatever stands where a node's
    // limit should be is read as one (its error names the argument).
    while nodes.len() < numkeys && !tail.is_empty() {
        let (policy, used) = node.parse_prefix(tail)?;
        nodes.push(policy);
        tail = tail.get(used..).unwrap_or(&[]);
    }
    // Nodes beyond one per key: count them for the error.
    let mut extra = 0;
    while let Some(Ok((_, used))) = tail
        .first()
        .filter(|w| w.as_ref().first().is_some_and(u8::is_ascii_digit))
        .map(|_| node.parse_prefix(tail))
    {
        extra += 1;
        tail = tail.get(used..).unwrap_or(&[]);
    }
    if nodes.len() != numkeys || extra > 0 {
        return Err(Error::NodeCount {
            command: command.name,
            keys: numkeys,
            nodes: nodes.len() + extra,
        });
    }
    for (i, policy) in nodes.iter().enumerate() {
        let root = i + 1 == numkeys;
        if let Policy::Share(n) = policy {
            if n.ceiling.is_none() != root {
                return Err(Error::Ceiling { node: i + 1, root });
            }
        }
    }
    let request = options_of(node, look, tail)?;
    Ok(Call {
        numkeys,
        nodes,
        request,
        named: None,
    })
}

/// The request the words after the path ask: none for a look; the
/// common options but those a node refuses (refused by name) otherwise.
fn options_of<A: AsRef<[u8]>>(node: &PolicyDef, look: bool, tail: &[A]) -> Result<Request, Error> {
    if look {
        return match tail.first() {
            Some(extra) => Err(Error::UnknownOption(printable(extra.as_ref()))),
            None => Ok(Request {
                charge: Charge::Peek,
                ..Request::default()
            }),
        };
    }
    if let Some(word) = tail.iter().find(|w| {
        COMMON
            .iter()
            .any(|o| o.is(w.as_ref()) && node.refuses.contains(&o.token))
    }) {
        let option = COMMON
            .iter()
            .find(|o| o.is(word.as_ref()))
            .map_or(NAME, |o| o.token);
        return Err(Error::Combination { option, with: NAME });
    }
    parse_common(tail)
}

pub fn run<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let [_, rest @ ..] = args else {
        return Err(Error::Arity(NAME));
    };
    let call = parse(command, rest)?;
    let keys = keys_of(rest, call.numkeys, NAME)?;
    let gated = decide_keys(host, keys, &call.nodes, &call.request).map_err(|e| named(e, keys))?;
    if let Some(handle) = call.named {
        record(host, handle, keys, &gated);
    }
    Ok(Reply::of_all(gated))
}

/// Counts a call of a named path: as every named policy's, its leaf's key
/// among the keys denied most, and per node.
fn record<H: Host>(host: &H, handle: Handle, keys: &[H::Arg], gated: &Gated) {
    let now = host.now();
    let leaf = keys.first().map(AsRef::as_ref);
    let listed = matches!(gated, Gated::Now(d) if !d.allowed)
        && keys.iter().any(|k| deny::holds(k.as_ref(), now));
    registry::with(|r| match gated {
        Gated::Blocked => r.record_at(handle, Verdict::Waiting, None, now),
        Gated::Now(d) => {
            let denied = (!d.allowed && !listed).then_some(leaf).flatten();
            r.record_at(handle, Verdict::of(d.allowed), denied, now);
            if let Some(stats) = r.stats_at(handle).filter(|_| listed) {
                stats.deny_listed += 1;
            }
            if let Some(stats) = r.stats_at(handle) {
                let lender = d.lender.map(usize::from);
                stats.record_nodes(d.decisions.iter().map(|x| x.allowed), d.blocked_by, lender);
            }
        }
    });
}

/// A node's conflicting definition named by its key rather than its
/// position.
fn named<A: AsRef<[u8]>>(e: Error, keys: &[A]) -> Error {
    match e {
        Error::InKey { position, error } => match *error {
            Error::Redefined { stored, given, .. } => Error::Redefined {
                key: keys
                    .get(position.wrapping_sub(1))
                    .map_or(String::new(), |k| printable(k.as_ref())),
                stored,
                given,
            },
            error => Error::InKey {
                position,
                error: Box::new(error),
            },
        },
        e => e,
    }
}

/// RL.SHARE.PEEK: what a request of one unit at the leaf would answer
/// now, behind the waiters of the path's keys if there are any; each
/// node's `remaining` the most a request through it could take now.
pub fn peek<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let [_, rest @ ..] = args else {
        return Err(Error::Arity(command.name));
    };
    let call = parse(command, rest)?;
    let keys = keys_of(rest, call.numkeys, command.name)?;
    let now = host.now();
    let decided = match host.behind_line(keys, &call.nodes, now, call.request.clone()) {
        Some(decided) => decided,
        None => {
            let mut store = host.open(keys, true);
            engine::decide(&mut store, &call.nodes, now, &call.request)
        }
    }
    .map_err(|e| {
        let error = Error::InKey {
            position: e.key + 1,
            error: Box::new(e.error),
        };
        named(error, keys)
    })?;
    Ok(Reply::PeekAll(decided))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::table::COMMANDS;

    fn p(args: &[&str]) -> Result<Call, Error> {
        let def = COMMANDS.iter().find(|c| c.name == NAME).unwrap();
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse(def, &bytes)
    }

    #[test]
    fn parses_a_path() {
        let call = p(&[
            "2", "u", "o", "10", "1s", "CEIL", "50", "100", "1s", "BURST", "20", "COST", "2",
            "DRYRUN",
        ])
        .unwrap();
        assert_eq!(call.nodes.len(), 2);
        assert_eq!((call.request.cost, call.request.dryrun), (2, true));
        let Policy::Share(leaf) = call.nodes[0] else {
            panic!("not a node")
        };
        assert!(leaf.ceiling.is_some());
        assert!(p(&["1", "o", "100", "1s", "WAIT", "1s"]).is_ok());
        let debt = p(&[
            "2", "u", "o", "6", "1m", "CEIL", "10", "10", "1m", "MAXDEBT", "6s",
        ]);
        assert!(debt.is_ok(), "{debt:?}");
        let flow = p(&[
            "1", "o", "100", "1s", "WAIT", "1s", "FLOW", "t", "WEIGHT", "3",
        ]);
        assert_eq!(flow.unwrap().request.flow.map(|f| f.weight), Some(3));
    }

    #[test]
    fn a_look_takes_the_path_alone() {
        let def = COMMANDS.iter().find(|c| c.name == "RL.SHARE.PEEK").unwrap();
        let look = |args: &[&str]| {
            let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            parse(def, &bytes)
        };
        let call = look(&["2", "u", "o", "10", "1s", "CEIL", "50", "100", "1s"]).unwrap();
        assert_eq!(call.request.charge, Charge::Peek);
        assert_eq!(call.request.cost, 1);
        let msg = |args: &[&str]| look(args).unwrap_err().to_string();
        assert_eq!(
            msg(&["1", "o", "10", "1s", "COST", "2"]),
            "ERR syntax error: unknown option 'COST'"
        );
        assert_eq!(
            msg(&["1", "o", "10", "1s", "DRYRUN"]),
            "ERR syntax error: unknown option 'DRYRUN'"
        );
        assert_eq!(
            msg(&["2", "u", "o", "10", "1s", "CEIL", "50"]),
            "ERR syntax error: RL.SHARE.PEEK needs one node per key, got 2 keys and 1 node"
        );
        assert_eq!(
            msg(&["2", "u", "o", "10", "1s", "100", "1s"]),
            "ERR syntax error: node 1 needs CEIL limit: every node but the last (the root) has a ceiling"
        );
    }

    #[test]
    fn syntax_errors() {
        let msg = |args: &[&str]| p(args).unwrap_err().to_string();
        assert_eq!(
            msg(&["2", "u", "o", "10", "1s", "CEIL", "50"]),
            "ERR syntax error: RL.SHARE needs one node per key, got 2 keys and 1 node"
        );
        assert_eq!(
            msg(&["2", "u", "o", "10", "1s", "100", "1s"]),
            "ERR syntax error: node 1 needs CEIL limit: every node but the last (the root) has a ceiling"
        );
        assert_eq!(
            msg(&["1", "o", "10", "1s", "CEIL", "50"]),
            "ERR syntax error: node 1 is the root (the last node) and takes no CEIL"
        );
        assert_eq!(
            msg(&["2", "u", "o", "10", "1s", "CEIL", "5", "100", "1s"]),
            format!(
                "ERR CEIL must be an integer from 10 to {}",
                crate::algorithm::limits::MAX_COUNT
            )
        );
        for refused in ["FORCE", "PARTIAL", "REFUND"] {
            assert_eq!(
                msg(&["1", "o", "10", "1s", refused, "1"]),
                format!("ERR syntax error: {refused} cannot be combined with RL.SHARE")
            );
        }
        assert_eq!(
            msg(&["1", "o", "10", "1s", "COSTS", "1"]),
            "ERR syntax error: unknown option 'COSTS'"
        );
        assert_eq!(
            msg(&["1", "o", "x", "1s"]),
            format!(
                "ERR limit must be an integer from 1 to {}",
                crate::algorithm::limits::MAX_COUNT
            )
        );
        assert_eq!(
            msg(&["1", "o", "10", "1s", "20", "1s"]),
            "ERR syntax error: RL.SHARE needs one node per key, got 1 key and 2 nodes"
        );
        assert_eq!(
            msg(&["2", "u", "o", "10", "1s", "CEIL", "20", "COST", "1"]),
            format!(
                "ERR limit must be an integer from 1 to {}",
                crate::algorithm::limits::MAX_COUNT
            )
        );
        assert_eq!(
            msg(&["1", "o", "10", "0"]),
            "ERR period must be a positive integer with an optional unit ms, s, m, h or d"
        );
    }
}
