//! Named policies: `RL.POLICY SET|GET|DEL|LIST|DIGEST|STATS` keep the
//! server's registry (`crate::engine::registry`), and `RL.CHECK key name [OR name
//! ...] [options]` decides under the first of the names that is defined.
//!
//! A definition is an RL.ALL policy (`GCRA 100 1m BURST 20`), checked by the
//! same parser with the same errors, optionally followed by `SHADOW`.
//! `SET` and `DEL` reach replicas and the AOF as themselves: they hold no
//! time, so replaying them does the same.

use super::args;
use super::definition::{CommandDef, Grammar, RegistryOp};
use super::grammar::policy_named;
use super::grammar::{canonical_duration, join_words, parse_common, PolicyDef, COMMON};
use super::policy_command::decide_one;
use super::table::{COMMANDS, POLICIES, SHARE_NODE};
use super::{help, Host, Reply};
use crate::algorithm::share::Node;
use crate::bounds::MAX_PATH_NODES;
use crate::engine::error::{printable, Error};
use crate::engine::gate::Gated;
use crate::engine::penalty::{self, Penalty};
use crate::engine::registry::{self, Entry, Handle, Limits};
use crate::engine::{deny, Verdict};
use crate::policy::Policy;
use smallvec::SmallVec;
use std::sync::Arc;

/// Marks a definition as shadow: decided and charged, never enforced.
pub const SHADOW: &str = "SHADOW";
/// Marks a definition whose denials' waits are spread, as with `JITTER`.
pub const JITTER: &str = "JITTER";
/// Starts a definition that is a path of RL.SHARE nodes.
pub const SHARE: &str = "SHARE";
/// Separates the names of an RL.CHECK chain.
pub const OR: &str = "OR";
const MATCH: &str = "MATCH";

fn is(word: &[u8], token: &str) -> bool {
    word.eq_ignore_ascii_case(token.as_bytes())
}

/// A definition's words (`GCRA 100 1m [JITTER] [SHADOW]`) as a registry
/// entry: the policy parsed as RL.ALL parses it, nothing after it but
/// `JITTER` and `SHADOW`, in either order.
pub fn parse_definition<A: AsRef<[u8]>>(
    words: &[A],
    command: &'static str,
) -> Result<Entry, Error> {
    let (mut words, mut shadow, mut jitter) = (words, false, false);
    while let Some((last, init)) = words.split_last() {
        let flag = match last.as_ref() {
            w if is(w, SHADOW) => (&mut shadow, SHADOW),
            w if is(w, JITTER) => (&mut jitter, JITTER),
            _ => break,
        };
        if *flag.0 {
            return Err(Error::RepeatedOption(flag.1));
        }
        *flag.0 = true;
        words = init;
    }
    let [keyword, rest @ ..] = words else {
        return Err(Error::Arity(command));
    };
    if is(keyword.as_ref(), SHARE) {
        if let Some(option) = [(shadow, SHADOW), (jitter, JITTER)]
            .into_iter()
            .find_map(|(given, option)| given.then_some(option))
        {
            return Err(Error::Combination {
                option,
                with: SHARE,
            });
        }
        return parse_path(rest);
    }
    let definition = policy_named(&POLICIES, keyword.as_ref()).ok_or_else(|| {
        let mut names: Vec<&str> = POLICIES.iter().map(|p| p.keyword).collect();
        names.push(SHARE);
        Error::UnknownPolicy {
            given: printable(keyword.as_ref()),
            expected: join_words(&names, "or"),
        }
    })?;
    let (policy, used) = definition.parse_prefix(rest)?;
    let penalty = parse_penalty(&rest[used..], definition, &policy)?;
    // Equal policies give equal text, and so equal digests.
    let mut text = definition.canonical(&rest[..used]);
    if let Some((option, _, value)) = &penalty {
        text.extend_from_slice(format!(" {option} ").as_bytes());
        text.extend_from_slice(&canonical_duration(value));
    }
    if jitter {
        text.extend_from_slice(b" JITTER");
    }
    if shadow {
        text.extend_from_slice(b" SHADOW");
    }
    Ok(Entry {
        definition: text,
        // Decides on state written under an earlier definition of its name.
        limits: Limits::One(policy.named()),
        shadow,
        jitter,
        penalty: penalty.map(|(_, p, _)| p),
        keyword: definition.keyword,
        refuses: definition.refuses,
    })
}

/// A penalty given in a definition: the option, what it asks, its value.
type Given<'a> = (&'static str, Penalty, &'a [u8]);

/// The words after a policy in its definition: nothing, or its penalty
/// (`BLOCK duration` or `COUNTDENIALS maxdebt`), as the decision commands
/// take it; with the option's name.
fn parse_penalty<'a, A: AsRef<[u8]>>(
    tail: &'a [A],
    definition: &PolicyDef,
    policy: &Policy,
) -> Result<Option<Given<'a>>, Error> {
    let Some(first) = tail.first() else {
        return Ok(None);
    };
    let option = [penalty::BLOCK, penalty::COUNT_DENIALS]
        .into_iter()
        .find(|o| is(first.as_ref(), o))
        .ok_or_else(|| Error::UnknownOption(printable(first.as_ref())))?;
    let Some(value) = tail.get(1) else {
        return Err(Error::MissingValue(option));
    };
    if let Some(extra) = tail.get(2) {
        let other = [penalty::BLOCK, penalty::COUNT_DENIALS]
            .into_iter()
            .any(|o| is(extra.as_ref(), o));
        return Err(match other {
            true => Error::Exclusive(format!("{} and {}", penalty::BLOCK, penalty::COUNT_DENIALS)),
            false => Error::UnknownOption(printable(extra.as_ref())),
        });
    }
    if definition.refuses.contains(&option) {
        return Err(Error::Combination {
            option,
            with: definition.keyword,
        });
    }
    let d = args::duration(value.as_ref(), option)?;
    let penalty = match option {
        penalty::BLOCK => Penalty::Block(d),
        _ if !policy.holds_debt() => {
            return Err(Error::Combination {
                option,
                with: policy.command(),
            })
        }
        _ => Penalty::Count(d),
    };
    Ok(Some((option, penalty, value.as_ref())))
}

/// A path's nodes after `SHARE`, as RL.SHARE takes them (leaf first, the
/// last the root, every other with its CEIL), and nothing after them.
/// Each node decides on state written under an earlier definition of its
/// name by the named policies' rule of change, not as a conflicting
/// definition.
fn parse_path<A: AsRef<[u8]>>(mut rest: &[A]) -> Result<Entry, Error> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut text = SHARE.as_bytes().to_vec();
    while let Some(first) = rest.first() {
        // After a node, what does not start as a number is no node.
        if !nodes.is_empty() && !first.as_ref().first().is_some_and(u8::is_ascii_digit) {
            return Err(Error::UnknownOption(printable(first.as_ref())));
        }
        let (node, used) = SHARE_NODE.parse_prefix(rest).map_err(|e| match e {
            Error::PolicyArgs(_) => path_syntax(),
            e => e,
        })?;
        let Policy::Share(node) = node else {
            return Err(Error::Internal("RL.POLICY|SET"));
        };
        let canonical = SHARE_NODE.canonical(&rest[..used]);
        // Without the node grammar's own keyword.
        let words = canonical.get(SHARE_NODE.keyword.len()..).unwrap_or(&[]);
        text.extend_from_slice(words);
        nodes.push(node);
        rest = rest.get(used..).unwrap_or(&[]);
    }
    if nodes.is_empty() {
        return Err(path_syntax());
    }
    let count = nodes.len();
    for (i, node) in nodes.iter().enumerate() {
        let root = i + 1 == count;
        if node.ceiling.is_none() != root {
            return Err(Error::Ceiling { node: i + 1, root });
        }
    }
    let nodes = nodes.into_iter().map(|n| Policy::Share(n).named());
    Ok(Entry {
        definition: text,
        limits: Limits::Path(nodes.collect()),
        shadow: false,
        jitter: false,
        penalty: None,
        keyword: SHARE,
        refuses: SHARE_NODE.refuses,
    })
}

/// The error for a path without all of its nodes' arguments: its syntax.
fn path_syntax() -> Error {
    let node = SHARE_NODE.syntax();
    let node = node.get(SHARE_NODE.keyword.len() + 1..).unwrap_or_default();
    Error::PolicyArgs(format!("{SHARE} node [node ...], each node {node}"))
}

/// The word that names a registered policy inside RL.ALL and RL.PEEK:
/// `POLICY name` where a policy's keyword may stand.
pub const POLICY: &str = "POLICY";

/// Whether `word` is [`POLICY`].
pub fn is_policy_word(word: &[u8]) -> bool {
    is(word, POLICY)
}

/// A registered policy as RL.ALL and RL.PEEK take it.
pub struct Named {
    pub policy: Policy,
    /// The common options it refuses.
    pub refuses: &'static [&'static str],
    /// Its policy's keyword, as a refusal names it.
    pub keyword: &'static str,
    /// Its denials' waits are spread (`JITTER` in its definition).
    pub jitter: bool,
    /// What its denials cost their keys (a penalty in its definition).
    pub penalty: Option<Penalty>,
    /// Where it sits, to count the call that uses it.
    pub handle: Handle,
}

/// The registered policy `name` for RL.ALL (`enforced`: a SHADOW one is
/// refused there, where one limit's denial denies all) or RL.PEEK.
pub fn lookup(name: &[u8], enforced: bool) -> Result<Named, Error> {
    registry::enabled()?;
    registry::with(|r| {
        let (handle, entry) = r
            .find(name)
            .ok_or_else(|| Error::NoSuchPolicy(printable(name)))?;
        if enforced && entry.shadow {
            return Err(Error::ShadowInAll(printable(name)));
        }
        Ok(Named {
            policy: one_limit(name, entry)?,
            refuses: entry.refuses,
            keyword: entry.keyword,
            jitter: entry.jitter,
            penalty: entry.penalty,
            handle,
        })
    })
}

/// The limit a name stands for where one limit is decided on one key: a
/// path is refused, saying how to decide it.
fn one_limit(name: &[u8], entry: &Entry) -> Result<Policy, Error> {
    match &entry.limits {
        Limits::One(policy) => Ok(policy.clone()),
        Limits::Path(nodes) => Err(Error::PathByName {
            name: printable(name),
            nodes: nodes.len(),
        }),
    }
}

/// A registered path as RL.SHARE and RL.SHARE.PEEK take it.
pub struct NamedPath {
    pub nodes: Arc<[Policy]>,
    /// Where it sits, to count the call that uses it.
    pub handle: Handle,
}

/// The registered path `name` (`RL.SHARE numkeys key ... POLICY name`).
pub fn lookup_path(name: &[u8]) -> Result<NamedPath, Error> {
    registry::enabled()?;
    registry::with(|r| {
        let (handle, entry) = r
            .find(name)
            .ok_or_else(|| Error::NoSuchPolicy(printable(name)))?;
        match &entry.limits {
            Limits::Path(nodes) => Ok(NamedPath {
                nodes: nodes.clone(),
                handle,
            }),
            Limits::One(_) => Err(Error::NotAPath {
                name: printable(name),
                keyword: entry.keyword,
            }),
        }
    })
}

/// `RL.POLICY SET name policy [SHADOW]`, or `RL.POLICY SET name SHARE
/// node [node ...]` (at most `ratelimit.max-path-nodes` nodes).
pub fn set<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let [_, _, name, words @ ..] = args else {
        return Err(Error::Arity(command.name));
    };
    registry::enabled()?;
    let name = name.as_ref();
    registry::with(|r| r.check(name))?;
    let entry = parse_definition(words, command.name)?;
    let max = MAX_PATH_NODES.get();
    if entry.limits.nodes() as u64 > max {
        return Err(Error::AboveBound {
            arg: "a path's number of nodes",
            max,
            setting: MAX_PATH_NODES.name,
        });
    }
    registry::with(|r| r.set(name, entry))?;
    host.replicate_verbatim();
    Ok(Reply::Ok)
}

/// `RL.POLICY GET name`: the definition.
pub fn get<A: AsRef<[u8]>>(command: &CommandDef, args: &[A]) -> Result<Reply, Error> {
    let [_, _, name] = args else {
        return Err(Error::Arity(command.name));
    };
    let definition = registry::with(|r| r.get(name.as_ref()).map(|e| e.definition.clone()))
        .ok_or_else(|| Error::NoSuchPolicy(printable(name.as_ref())))?;
    Ok(Reply::Bulk(definition))
}

/// `RL.POLICY DEL name`.
pub fn del<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let [_, _, name] = args else {
        return Err(Error::Arity(command.name));
    };
    if !registry::with(|r| r.remove(name.as_ref())) {
        return Err(Error::NoSuchPolicy(printable(name.as_ref())));
    }
    host.replicate_verbatim();
    Ok(Reply::Ok)
}

/// `RL.POLICY LIST [MATCH pattern]`: the names, sorted. `MATCH` is an
/// option as the decision commands' are, with their errors.
pub fn list<A: AsRef<[u8]>>(args: &[A]) -> Result<Reply, Error> {
    let mut pattern: Option<&[u8]> = None;
    let mut words = args.get(2..).unwrap_or(&[]).iter().map(AsRef::as_ref);
    while let Some(token) = words.next() {
        if !is(token, MATCH) {
            return Err(Error::UnknownOption(printable(token)));
        }
        let value = words.next().ok_or(Error::MissingValue(MATCH))?;
        if pattern.replace(value).is_some() {
            return Err(Error::RepeatedOption(MATCH));
        }
    }
    let names = registry::with(|r| r.names(pattern).into_iter().map(<[u8]>::to_vec).collect());
    Ok(Reply::Bulks(names))
}

/// `RL.POLICY DIGEST`: a hash of every name and definition.
pub fn digest<A: AsRef<[u8]>>(command: &CommandDef, args: &[A]) -> Result<Reply, Error> {
    if args.len() != 2 {
        return Err(Error::Arity(command.name));
    }
    let digest = registry::with(|r| r.digest());
    Ok(Reply::Bulk(digest.into_bytes()))
}

/// The names of a chain and the options after them.
fn split_chain<A: AsRef<[u8]>>(args: &[A]) -> Result<(Chain<'_>, &[A]), Error> {
    let Some((first, mut tail)) = args.split_first() else {
        return Err(Error::Arity(CHECK));
    };
    let misplaced_or = |word: &[u8]| Error::ChainSyntax {
        given: printable(word),
        or_first: true,
    };
    if is(first.as_ref(), OR) {
        return Err(misplaced_or(first.as_ref()));
    }
    let mut names = Chain::new();
    names.push(first.as_ref());
    while let Some((word, rest)) = tail.split_first() {
        if !is(word.as_ref(), OR) {
            break;
        }
        let (name, rest) = rest.split_first().ok_or(Error::MissingValue(OR))?;
        if is(name.as_ref(), OR) {
            return Err(misplaced_or(name.as_ref()));
        }
        names.push(name.as_ref());
        tail = rest;
    }
    // What follows the names starts with an option: a word that is none is
    // most likely a name without its OR.
    if let Some(word) = tail.first() {
        if !COMMON.iter().any(|o| o.is(word.as_ref())) {
            return Err(Error::ChainSyntax {
                given: printable(word.as_ref()),
                or_first: false,
            });
        }
    }
    Ok((names, tail))
}

const CHECK: &str = "RL.CHECK";

/// The names of a chain (most chains are short: no allocation).
type Chain<'a> = SmallVec<[&'a [u8]; 4]>;

/// `RL.CHECK key name [OR name ...] [COST n] [DRYRUN] [WAIT timeout]
/// [FORCE | PARTIAL | REFUND n]`: the named policy's decision, replied as
/// its own command replies.
pub fn check<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity(command.name));
    };
    let (names, options) = split_chain(rest)?;
    let mut request = parse_common(options)?;
    registry::enabled()?;
    let (applies, policy, shadow) = registry::with(|r| {
        let (handle, entry) = registry::first_defined(r, &names)?;
        let policy = match &entry.limits {
            Limits::One(policy) => policy.clone(),
            Limits::Path(nodes) => {
                // The name found, for the error only (a second look-up).
                let name = names.iter().find(|n| r.get(n).is_some());
                return Err(Error::PathByName {
                    name: name.map_or(String::new(), |n| printable(n)),
                    nodes: nodes.len(),
                });
            }
        };
        if let Some(token) = request.refusable().find(|t| entry.refuses.contains(t)) {
            return Err(Error::Combination {
                option: token,
                with: entry.keyword,
            });
        }
        request.jitter |= entry.jitter;
        request.penalize_by_default(entry.penalty);
        Ok((handle, policy, entry.shadow))
    })?;
    if shadow {
        // Enforcement would make the client wait; a shadow policy never does.
        request.wait = None;
        request.flow = None;
    }
    let gated = decide_one(host, key, policy, &request)?;
    let now = host.now();
    // The deny list is enforced even under a shadow policy. Asked again
    // only for a denial, and only when keys are denied.
    let listed = matches!(&gated, Gated::Now(d) if !d.allowed) && deny::holds(key.as_ref(), now);
    let verdict = match &gated {
        Gated::Blocked => Verdict::Waiting,
        Gated::Now(d) if d.allowed => Verdict::Allowed,
        Gated::Now(_) if shadow && !listed => Verdict::ShadowDenied,
        Gated::Now(_) => Verdict::Denied,
    };
    let denied_key = (matches!(verdict, Verdict::Denied | Verdict::ShadowDenied) && !listed)
        .then_some(key.as_ref());
    registry::with(|r| {
        r.record_at(applies, verdict, denied_key, now);
        if let Some(stats) = r.stats_at(applies).filter(|_| listed) {
            stats.deny_listed += 1;
        }
    });
    Ok(match gated {
        Gated::Blocked => Reply::Blocked,
        Gated::Now(decided) if shadow && !listed => Reply::Shadow(decided),
        Gated::Now(decided) => Reply::Decision(decided),
    })
}

/// `RL.POLICY HELP`: each subcommand's syntax and summary, from the table.
pub fn help<A: AsRef<[u8]>>(command: &CommandDef, args: &[A]) -> Result<Reply, Error> {
    if args.len() != 2 {
        return Err(Error::Arity(command.name));
    }
    let entries: Vec<(String, &str)> = COMMANDS
        .iter()
        .filter_map(|c| match c.grammar {
            Grammar::Registry(op) if op != RegistryOp::Help => Some((usage(op), c.summary)),
            _ => None,
        })
        .collect();
    Ok(help::reply(
        "RL.POLICY",
        "<subcommand> [<arg> ...]",
        &entries,
    ))
}

/// An `RL.POLICY` subcommand's syntax, as `RL.POLICY HELP` shows it.
fn usage(op: RegistryOp) -> String {
    match op {
        RegistryOp::Set => {
            let (block, count) = (penalty::BLOCK, penalty::COUNT_DENIALS);
            format!(
                "SET <name> (<policy> [{block} <duration> | {count} <maxdebt>] [{JITTER}] \
                 [{SHADOW}] | {SHARE} <node> [<node> ...])"
            )
        }
        RegistryOp::Get => "GET <name>".into(),
        RegistryOp::Del => "DEL <name>".into(),
        RegistryOp::List => format!("LIST [{MATCH} <pattern>]"),
        RegistryOp::Digest => "DIGEST".into(),
        RegistryOp::Stats => "STATS <name>".into(),
        RegistryOp::Help => "HELP".into(),
    }
}

/// How many keys RL.POLICY STATS reports.
const TOP_KEYS: usize = 10;

/// `RL.POLICY STATS name`: the counts of the calls naming the policy and
/// the keys it denied most in the last one to two minutes.
pub fn stats<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let [_, _, name] = args else {
        return Err(Error::Arity(command.name));
    };
    let stats = registry::with(|r| r.stats(name.as_ref()))
        .ok_or_else(|| Error::NoSuchPolicy(printable(name.as_ref())))?;
    let top = stats.top_denied.top(host.now(), TOP_KEYS);
    Ok(Reply::PolicyStats(stats, top))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(words: &str) -> Result<Entry, Error> {
        let words: Vec<&str> = words.split(' ').filter(|w| !w.is_empty()).collect();
        parse_definition(&words, "RL.POLICY|SET")
    }

    #[test]
    fn definitions_parse_as_rl_all_policies() {
        let e = def("gcra 100 1m burst 20").unwrap();
        assert_eq!(e.definition, b"GCRA 100 1m BURST 20");
        assert!(!e.shadow);
        let e = def("SLIDING 1000 1h approx shadow").unwrap();
        assert_eq!(e.definition, b"SLIDING 1000 1h APPROX SHADOW");
        assert!(e.shadow);
        assert!(matches!(&e.limits, Limits::One(p) if p.command() == "RL.SLIDING APPROX"));
        // Numbers and durations in one form: equal policies read the same.
        let e = def("gcra 0100 60s burst 020").unwrap();
        assert_eq!(e.definition, b"GCRA 100 1m BURST 20");
        for (given, canonical) in [
            ("FIXED 10 3600000ms aligned", "FIXED 10 1h ALIGNED"),
            ("FIXED 10 90", "FIXED 10 90s"),
            ("FIXED 10 1500MS", "FIXED 10 1500ms"),
            ("bucket 5 1 48h", "BUCKET 5 1 2d"),
            ("sliding 5 120m buckets 04", "SLIDING 5 2h BUCKETS 4"),
        ] {
            assert_eq!(def(given).unwrap().definition, canonical.as_bytes());
        }
        let e = def("CONCURRENCY 5 30s").unwrap();
        assert_eq!(
            e.refuses,
            [
                "FORCE",
                "PARTIAL",
                "REFUND",
                "RESERVE",
                "BLOCK",
                "COUNTDENIALS"
            ]
        );
        // A penalty follows the limit, before JITTER and SHADOW.
        let e = def("gcra 1 1s countdenials 90s jitter").unwrap();
        assert_eq!(e.definition, b"GCRA 1 1s COUNTDENIALS 90s JITTER");
        assert_eq!(
            e.penalty,
            Some(Penalty::Count(crate::algorithm::Micros::from_secs(90)))
        );
        assert_eq!(
            def("GCRA 1 1s JITTER BLOCK 1s"),
            Err(Error::UnknownOption("JITTER".into()))
        );
        // The canonical text parses back to the same entry.
        let again = def(std::str::from_utf8(&e.definition).unwrap()).unwrap();
        assert_eq!(again, e);
    }

    #[test]
    fn a_path_is_its_nodes_as_rl_share_takes_them() {
        let e = def("share 010 60m cburst 20 ceil 50 100 3600s maxdebt 60000ms").unwrap();
        assert_eq!(
            e.definition,
            b"SHARE 10 1h CBURST 20 CEIL 50 100 1h MAXDEBT 1m"
        );
        assert_eq!((e.keyword, e.shadow), ("SHARE", false));
        assert_eq!(
            e.refuses,
            ["FORCE", "PARTIAL", "REFUND", "BLOCK", "COUNTDENIALS"]
        );
        let Limits::Path(nodes) = &e.limits else {
            panic!("not a path")
        };
        // Each node is named: it carries state across a change.
        assert!(nodes.iter().all(|n| matches!(n, Policy::Named(_))));
        assert_eq!(nodes.len(), 2);
        // The canonical text parses back to the same entry.
        let again = def(std::str::from_utf8(&e.definition).unwrap()).unwrap();
        assert_eq!(again, e);
        assert_eq!(def("SHARE 5 1s").unwrap().limits.nodes(), 1);
        let msg = |w: &str| def(w).unwrap_err().to_string();
        let syntax = "ERR syntax error: the policy is SHARE node [node ...], each node limit \
                      period [BURST n] [CEIL n] [CBURST n] [MAXDEBT n]";
        assert_eq!(msg("SHARE"), syntax);
        assert_eq!(msg("SHARE 10 1s CEIL 20 5"), syntax);
        assert_eq!(
            msg("SHARE 10 1s CEIL 20 100 1s BURST"),
            "ERR syntax error: BURST needs a value"
        );
        assert_eq!(
            msg("SHARE 10 1s CEIL 20 100 1s DRYRUN"),
            "ERR syntax error: unknown option 'DRYRUN'"
        );
        assert_eq!(
            msg("SHARE 10 1s CEIL 20 100 1s SHADOW"),
            "ERR syntax error: SHADOW cannot be combined with SHARE"
        );
        assert_eq!(
            msg("SHARE 10 1s CEIL 20 20 1s CEIL 30"),
            "ERR syntax error: node 2 is the root (the last node) and takes no CEIL"
        );
        assert_eq!(
            msg("SHARE 10 1s 20 1s CEIL 30 100 1s"),
            "ERR syntax error: node 1 needs CEIL limit: every node but the last (the root) has a ceiling"
        );
    }

    #[test]
    fn malformed_definitions_are_rl_all_errors() {
        let msg = |w: &str| def(w).unwrap_err().to_string();
        assert_eq!(
            msg("LEAKY 1 1s"),
            "ERR syntax error: unknown policy 'LEAKY': expected GCRA, BUCKET, SLIDING, FIXED, CONCURRENCY or SHARE"
        );
        assert_eq!(
            msg("GCRA 1"),
            "ERR syntax error: the policy is GCRA limit period [BURST n]"
        );
        assert_eq!(
            msg("GCRA 1 1s COST 2"),
            "ERR syntax error: unknown option 'COST'"
        );
        assert_eq!(
            msg("GCRA 0 1s"),
            "ERR limit must be an integer from 1 to 9223372036854775807"
        );
        assert_eq!(
            msg("SHADOW"),
            "ERR wrong number of arguments for 'rl.policy|set' command"
        );
        assert!(msg("POLICY x").contains("unknown policy 'POLICY'"));
    }

    #[test]
    fn a_chain_is_names_joined_by_or() {
        let args = ["cust:7", "OR", "plan:pro", "or", "plan:free", "COST", "2"];
        let (names, options) = split_chain(&args).unwrap();
        assert_eq!(names[..], [&b"cust:7"[..], b"plan:pro", b"plan:free"]);
        assert_eq!(options, ["COST", "2"]);
        // A name may be any word, an option's token included.
        let (names, options) = split_chain(&["COST", "OR", "DRYRUN", "DRYRUN"]).unwrap();
        assert_eq!(names[..], [&b"COST"[..], b"DRYRUN"]);
        assert_eq!(options, ["DRYRUN"]);
        assert_eq!(
            split_chain(&["a", "OR"]).unwrap_err().to_string(),
            "ERR syntax error: OR needs a value"
        );
        let hint = "RL.CHECK key name [OR name ...] [options]";
        for args in [&["OR", "plan:free"][..], &["a", "OR", "OR", "b"]] {
            assert_eq!(
                split_chain(args).unwrap_err().to_string(),
                format!("ERR syntax error: OR must follow a policy name: {hint}")
            );
        }
        assert_eq!(
            split_chain(&["plan:pro", "plan:free"])
                .unwrap_err()
                .to_string(),
            format!(
                "ERR syntax error: unknown option 'plan:free' (separate policy names with OR): {hint}"
            )
        );
    }

    #[test]
    fn jitter_and_shadow_follow_a_limit_in_either_order() {
        let def = |text: &str| {
            let words: Vec<&str> = text.split(' ').collect();
            parse_definition(&words, "RL.POLICY|SET")
        };
        let e = def("gcra 1 1s shadow jitter").unwrap();
        assert_eq!(e.definition, b"GCRA 1 1s JITTER SHADOW");
        assert!(e.jitter && e.shadow);
        let again = def(std::str::from_utf8(&e.definition).unwrap()).unwrap();
        assert_eq!(again, e);
        assert!(!def("GCRA 1 1s").unwrap().jitter);
        assert_eq!(
            def("GCRA 1 1s JITTER jitter"),
            Err(Error::RepeatedOption(JITTER))
        );
        assert_eq!(
            def("SHARE 10 1s CEIL 20 100 1s JITTER"),
            Err(Error::Combination {
                option: JITTER,
                with: SHARE
            })
        );
    }

    #[test]
    fn shadow_twice_is_given_more_than_once() {
        assert_eq!(
            parse_definition(&["GCRA", "1", "1s", "SHADOW", "shadow"], "RL.POLICY|SET")
                .err()
                .map(|e| e.to_string()),
            Some("ERR syntax error: SHADOW given more than once".into())
        );
    }
}
