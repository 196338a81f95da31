//! COMMAND DOCS arguments, derived from a command's definition. Plain data
//! here; `server::register` hands it to Redis.

use super::definition::{CommandDef, Grammar, OperatorOp, RegistryOp};
use super::grammar::{Opt, Param, Parse, PolicyDef, COMMON};
use super::named::{JITTER, OR, POLICY, SHADOW, SHARE};
use super::rl_all::{COST, COSTS};
use super::table::{POLICIES, SHARE_NODE};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocType {
    Key,
    Integer,
    String,
    PureToken,
    OneOf,
    Block,
}

/// One argument as COMMAND DOCS shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocArg {
    pub name: String,
    pub kind: DocType,
    pub token: Option<&'static str>,
    pub optional: bool,
    pub multiple: bool,
    pub subargs: Vec<DocArg>,
}

impl DocArg {
    fn new(name: &str, kind: DocType) -> DocArg {
        DocArg {
            name: name.to_string(),
            kind,
            token: None,
            optional: false,
            multiple: false,
            subargs: Vec::new(),
        }
    }

    fn optional(self) -> DocArg {
        DocArg {
            optional: true,
            ..self
        }
    }

    fn multiple(self) -> DocArg {
        DocArg {
            multiple: true,
            ..self
        }
    }

    fn with_token(self, token: &'static str) -> DocArg {
        DocArg {
            token: Some(token),
            ..self
        }
    }

    fn parent(name: &str, kind: DocType, subargs: Vec<DocArg>) -> DocArg {
        DocArg {
            subargs,
            ..DocArg::new(name, kind)
        }
    }

    /// `name:type`, `TOKEN`, `(a | b)`, `[...]`: a one-line synopsis, as
    /// the integration test reads COMMAND DOCS back.
    #[cfg(test)]
    pub fn synopsis(&self) -> String {
        let parts = || -> Vec<String> { self.subargs.iter().map(DocArg::synopsis).collect() };
        let typed = |kind: &str| match self.token {
            Some(t) => format!("{t} {}:{kind}", self.name),
            None => format!("{}:{kind}", self.name),
        };
        let mut s = match self.kind {
            DocType::Key => typed("key"),
            DocType::Integer => typed("integer"),
            DocType::String => typed("string"),
            DocType::PureToken => self.token.unwrap_or_default().to_string(),
            DocType::OneOf => format!("({})", parts().join(" | ")),
            DocType::Block => {
                let inner = parts().join(" ");
                match self.token {
                    Some(t) => format!("{t} {inner}"),
                    None => inner,
                }
            }
        };
        if self.multiple {
            s.push_str("...");
        }
        if self.optional {
            s = format!("[{s}]");
        }
        s
    }
}

fn key() -> DocArg {
    DocArg::new("key", DocType::Key)
}

fn param(p: &Param) -> DocArg {
    let kind = match p.parse {
        Parse::Integer { .. }
        | Parse::CellInteger { .. }
        | Parse::CellSigned { .. }
        | Parse::Bounded { .. } => DocType::Integer,
        // A duration is an integer with an optional unit: a string.
        Parse::Duration | Parse::Bytes | Parse::Lease => DocType::String,
    };
    DocArg::new(p.name, kind)
}

/// An option's value is named after its token in lower case.
fn option(o: &Opt) -> DocArg {
    let name = o
        .value_name
        .map_or_else(|| o.token.to_ascii_lowercase(), str::to_string);
    let kind = match o.value {
        Some(
            Parse::Integer { .. }
            | Parse::CellInteger { .. }
            | Parse::CellSigned { .. }
            | Parse::Bounded { .. },
        ) => DocType::Integer,
        Some(Parse::Duration | Parse::Bytes | Parse::Lease) => DocType::String,
        None => DocType::PureToken,
    };
    DocArg::new(&name, kind).with_token(o.token)
}

/// A list of options: each optional; a group as one optional one-of; an
/// option with others `within` it as a block of it and them, nested
/// (`[WAIT timeout [FLOW flow [WEIGHT weight]]]`).
fn options(list: &[Opt]) -> Vec<DocArg> {
    let mut out: Vec<DocArg> = Vec::new();
    let mut groups: Vec<&str> = Vec::new();
    let alone = |g| list.iter().filter(|m| m.group == Some(g)).count() == 1;
    for o in list.iter().filter(|o| o.within.is_none()) {
        match o.group {
            Some(g) if groups.contains(&g) => {}
            // A group of one is a plain option.
            Some(g) if alone(g) => out.push(nested(o, list).optional()),
            Some(g) => {
                groups.push(g);
                let members = list.iter().filter(|m| m.group == Some(g)).map(option);
                out.push(DocArg::parent(g, DocType::OneOf, members.collect()).optional());
            }
            None => out.push(nested(o, list).optional()),
        }
    }
    out
}

/// Option `o`, or, where options of `list` are given only with it, a block
/// of it and them (each optional, nested in turn).
fn nested(o: &Opt, list: &[Opt]) -> DocArg {
    let inner: Vec<DocArg> = list
        .iter()
        .filter(|m| m.within == Some(o.token))
        .map(|m| nested(m, list).optional())
        .collect();
    if inner.is_empty() {
        return option(o);
    }
    let mut subargs = vec![option(o)];
    subargs.extend(inner);
    DocArg::parent(&o.token.to_ascii_lowercase(), DocType::Block, subargs)
}

/// A policy's arguments after its keyword (or after the key).
fn policy_args(p: &PolicyDef) -> Vec<DocArg> {
    let mut out: Vec<DocArg> = p.params.iter().map(param).collect();
    out.extend(options(p.options));
    out
}

/// One of `policies`, each a block after its keyword.
fn policy_choice(policies: &[&PolicyDef]) -> DocArg {
    let blocks = policies.iter().map(|p| {
        let name = p.keyword.to_ascii_lowercase();
        DocArg::parent(&name, DocType::Block, policy_args(p)).with_token(p.keyword)
    });
    DocArg::parent("policy", DocType::OneOf, blocks.collect())
}

/// One of `policies`, or `POLICY name`: a registered one (RL.ALL, RL.PEEK).
fn policy_or_named(policies: &[&PolicyDef]) -> DocArg {
    let mut choice = policy_choice(policies);
    let named = DocArg::new("name", DocType::String).with_token(POLICY);
    choice.subargs.push(named);
    choice
}

/// The arguments of an operator's command.
fn operator_args(op: OperatorOp) -> Vec<DocArg> {
    let count = || {
        DocArg::new("count", DocType::Integer)
            .with_token("COUNT")
            .optional()
    };
    match op {
        OperatorOp::Deny => {
            let end = vec![
                DocArg::new("duration", DocType::String),
                DocArg::new("forever", DocType::PureToken).with_token("FOREVER"),
                DocArg::new("instant", DocType::Integer).with_token("UNTIL"),
            ];
            vec![
                key(),
                DocArg::parent("end", DocType::OneOf, end),
                DocArg::new("reason", DocType::String)
                    .with_token("REASON")
                    .optional(),
            ]
        }
        OperatorOp::Undeny | OperatorOp::Denied => vec![key()],
        OperatorOp::DenyList => vec![DocArg::new("cursor", DocType::Integer), count()],
        OperatorOp::HotKeys | OperatorOp::Penalized => vec![count()],
    }
}

/// The arguments of `command`, in order, without the command name.
pub fn arguments(command: &CommandDef) -> Vec<DocArg> {
    match &command.grammar {
        Grammar::Policy(p) => {
            let mut out = vec![key()];
            out.extend(policy_args(p));
            let common: Vec<Opt> = p.common().copied().collect();
            out.extend(options(&common));
            out
        }
        Grammar::All { policies } => {
            let mut out = vec![
                DocArg::new("numkeys", DocType::Integer),
                key().multiple(),
                policy_or_named(policies).multiple(),
            ];
            // One amount for every key (COST) or one per key (COSTS).
            let (cost, rest): (Vec<Opt>, Vec<Opt>) = COMMON.iter().partition(|o| o.token == COST);
            let per_key = DocArg::new("costs", DocType::Integer)
                .with_token(COSTS)
                .multiple();
            let amounts = cost.iter().map(option).chain([per_key]).collect();
            out.push(DocArg::parent("amount", DocType::OneOf, amounts).optional());
            out.extend(options(&rest));
            out
        }
        Grammar::Share { node, look } => {
            // The nodes, or `POLICY name`: a path defined by name.
            let path = vec![
                DocArg::parent("node", DocType::Block, policy_args(node)).multiple(),
                DocArg::new("name", DocType::String).with_token(POLICY),
            ];
            let mut out = vec![
                DocArg::new("numkeys", DocType::Integer),
                key().multiple(),
                DocArg::parent("path", DocType::OneOf, path),
            ];
            if !look {
                let common: Vec<Opt> = node.common().copied().collect();
                out.extend(options(&common));
            }
            out
        }
        Grammar::Peek { policies } => vec![key(), policy_or_named(policies)],
        Grammar::Operator(op) => operator_args(*op),
        Grammar::Positional { params, optional } => {
            let required = params.len() - optional;
            let mut out = vec![key()];
            for (i, p) in params.iter().enumerate() {
                let arg = param(p);
                out.push(if i < required { arg } else { arg.optional() });
            }
            out
        }
        Grammar::Subcommands { name, choices } => {
            let mut choices: Vec<DocArg> = choices
                .iter()
                .map(|(token, p)| param(p).with_token(token))
                .collect();
            choices.push(DocArg::new("help", DocType::PureToken).with_token("HELP"));
            vec![DocArg::parent(name, DocType::OneOf, choices).optional()]
        }
        Grammar::Registry(op) => {
            let name = || DocArg::new("name", DocType::String);
            match op {
                RegistryOp::Set => {
                    // A limit, or a path of RL.SHARE nodes (never a
                    // penalty, JITTER or SHADOW).
                    let mut policy = policy_choice(&POLICIES);
                    let node = DocArg::parent("node", DocType::Block, policy_args(&SHARE_NODE));
                    policy.subargs.push(
                        DocArg::parent("share", DocType::Block, vec![node.multiple()])
                            .with_token(SHARE),
                    );
                    // The penalty as the decision commands take it.
                    let penalty = options(&COMMON).into_iter().filter(|a| a.name == "penalty");
                    let mut out = vec![name(), policy];
                    out.extend(penalty);
                    out.extend([
                        DocArg::new("jitter", DocType::PureToken)
                            .with_token(JITTER)
                            .optional(),
                        DocArg::new("shadow", DocType::PureToken)
                            .with_token(SHADOW)
                            .optional(),
                    ]);
                    out
                }
                RegistryOp::Get | RegistryOp::Del | RegistryOp::Stats => vec![name()],
                RegistryOp::List => vec![DocArg::new("pattern", DocType::String)
                    .with_token("MATCH")
                    .optional()],
                RegistryOp::Digest | RegistryOp::Help => Vec::new(),
            }
        }
        Grammar::Check => {
            let mut out = vec![
                key(),
                DocArg::new("name", DocType::String),
                DocArg::new("name", DocType::String)
                    .with_token(OR)
                    .multiple()
                    .optional(),
            ];
            out.extend(options(&COMMON));
            out
        }
    }
}

/// The whole synopsis of `command`.
#[cfg(test)]
pub fn synopsis(command: &CommandDef) -> String {
    let args: Vec<String> = arguments(command).iter().map(DocArg::synopsis).collect();
    args.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::table::COMMANDS;

    #[test]
    fn synopses_read_as_documented() {
        let all: Vec<(String, String)> = COMMANDS
            .iter()
            .map(|c| (c.lower_name(), synopsis(c)))
            .collect();
        let get = |name: &str| all.iter().find(|(n, _)| n == name).unwrap().1.clone();
        assert_eq!(
            get("rl.gcra"),
            "key:key limit:integer period:string [BURST burst:integer] [COST cost:integer] [DRYRUN] \
             [WAIT timeout:string [FLOW flow:string [WEIGHT weight:integer]]] \
             [(FORCE | PARTIAL | REFUND refund:integer)] [RESERVE maxdelay:string] [JITTER] \
             [(BLOCK duration:string | COUNTDENIALS maxdebt:string)]"
        );
        assert_eq!(
            get("rl.sliding"),
            "key:key limit:integer window:string [(EXACT | APPROX | BUCKETS buckets:integer)] \
             [COST cost:integer] [DRYRUN] [WAIT timeout:string [FLOW flow:string [WEIGHT weight:integer]]] [(FORCE | PARTIAL | REFUND refund:integer)] \
             [RESERVE maxdelay:string] [JITTER] [(BLOCK duration:string | COUNTDENIALS maxdebt:string)]"
        );
        assert_eq!(
            get("rl.peek"),
            "key:key (GCRA limit:integer period:string [BURST burst:integer] | \
             BUCKET capacity:integer refill:integer period:string | \
             SLIDING limit:integer window:string [(EXACT | APPROX | BUCKETS buckets:integer)] | \
             FIXED limit:integer window:string [ALIGNED] | CONCURRENCY limit:integer ttl:string | \
             POLICY name:string)"
        );
        assert_eq!(
            get("cl.throttle"),
            "key:key max_burst:integer count:integer period:integer [quantity:integer]"
        );
        assert_eq!(
            get("rl.check"),
            "key:key name:string [OR name:string...] [COST cost:integer] [DRYRUN] \
             [WAIT timeout:string [FLOW flow:string [WEIGHT weight:integer]]] \
             [(FORCE | PARTIAL | REFUND refund:integer)] [RESERVE maxdelay:string] [JITTER] \
             [(BLOCK duration:string | COUNTDENIALS maxdebt:string)]"
        );
        assert_eq!(get("rl.policy|list"), "[MATCH pattern:string]");
        assert!(get("rl.policy|set").starts_with("name:string (GCRA limit:integer"));
        assert!(get("rl.policy|set").ends_with(
            "ttl:string | SHARE limit:integer period:string [BURST burst:integer] \
             [CEIL ceil:integer] [CBURST cburst:integer] [MAXDEBT maxdebt:string]...) \
             [(BLOCK duration:string | COUNTDENIALS maxdebt:string)] [JITTER] [SHADOW]"
        ));
        assert_eq!(
            get("rl.share.peek"),
            "numkeys:integer key:key... (limit:integer period:string [BURST burst:integer] \
             [CEIL ceil:integer] [CBURST cburst:integer] [MAXDEBT maxdebt:string]... | \
             POLICY name:string)"
        );
        assert_eq!(
            get("rl.clock"),
            "[(SET microseconds:integer | ADVANCE microseconds:integer | HELP)]"
        );
    }
}
