//! What a command definition is: its grammar, where its keys are, its
//! flags and texts, and its handler; and what follows from it (arity, key
//! positions, names). The definitions themselves are in `table.rs`.

use super::grammar::{Param, PolicyDef};
use crate::commands::args;
use std::ops::Range;

/// Which handler runs a command ([`super::run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// One policy over one key (`policy_command`).
    Decision,
    All,
    /// RL.SHARE: a path of nodes that borrow from their parents.
    Share,
    Peek,
    /// RL.SHARE.PEEK: a look at a path.
    SharePeek,
    Throttle,
    Clock,
    Release,
    Renew,
    /// RL.CHECK: a named policy over one key.
    Check,
    PolicySet,
    PolicyGet,
    PolicyDel,
    PolicyList,
    PolicyDigest,
    PolicyStats,
    PolicyHelp,
    Deny,
    Undeny,
    Denied,
    DenyList,
    HotKeys,
    Penalized,
}

/// What follows a command's name.
#[derive(Debug)]
pub enum Grammar {
    /// `key`, then one policy's arguments, its options and the common ones.
    Policy(&'static PolicyDef),
    /// `numkeys key [key ...] policy [policy ...]`, then the common
    /// options; each policy one of `policies`.
    All {
        policies: &'static [&'static PolicyDef],
    },
    /// `numkeys key [key ...] node [node ...]`, then the common options
    /// but those `node` refuses (RL.SHARE); for a look (RL.SHARE.PEEK),
    /// nothing after the nodes.
    Share {
        node: &'static PolicyDef,
        look: bool,
    },
    /// `key`, then one policy written as in RL.ALL (its keyword first),
    /// one of `policies`; nothing else.
    Peek {
        policies: &'static [&'static PolicyDef],
    },
    /// `key`, then positional arguments, the last `optional` of them optional.
    Positional {
        params: &'static [Param],
        optional: usize,
    },
    /// A subcommand of `RL.POLICY`, on the registry of named policies.
    Registry(RegistryOp),
    /// `key name [OR name ...]`, then the common options (RL.CHECK).
    Check,
    /// No key; optionally one of several `TOKEN value` subcommands.
    Subcommands {
        name: &'static str,
        choices: &'static [(&'static str, Param)],
    },
    /// An operator's command on the deny list, the hot keys or the
    /// penalty box.
    Operator(OperatorOp),
}

/// What an operator's command takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorOp {
    /// `key (duration | FOREVER | UNTIL instant) [REASON text]`.
    Deny,
    /// `key`.
    Undeny,
    /// `key`.
    Denied,
    /// `cursor [COUNT n]`.
    DenyList,
    /// `[COUNT n]`.
    HotKeys,
    /// `[COUNT n]`.
    Penalized,
}

/// What an `RL.POLICY` subcommand does, and so what follows its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryOp {
    /// `name policy [SHADOW]`, the policy written as in RL.ALL.
    Set,
    /// `name`.
    Get,
    /// `name`.
    Del,
    /// `[MATCH pattern]`.
    List,
    /// Nothing.
    Digest,
    /// `name`.
    Stats,
    /// Nothing: the subcommands, one line each.
    Help,
}

/// Where a command's keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    None,
    /// One key, the first argument.
    First,
    /// `numkeys key [key ...]` from the first argument on.
    Counted,
}

/// What one call's work grows with: the one source of a command's
/// COMMAND DOCS complexity, its `fast` flag and its `@fast`/`@slow` ACL
/// category. `fast` only for work that is O(1) in everything, including
/// what other clients accumulated (waiters, leases held, log entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost {
    /// O(1).
    Constant,
    /// At most logarithmic in what grows; the text says in what.
    Logarithmic(&'static str),
    /// Linear in something (perhaps only the caller's own arguments); the
    /// text says in what.
    Linear(&'static str),
}

impl Cost {
    /// As COMMAND DOCS shows it, in Redis's own style.
    pub fn complexity(self) -> &'static str {
        match self {
            Cost::Constant => "O(1)",
            Cost::Logarithmic(text) | Cost::Linear(text) => text,
        }
    }

    pub fn is_fast(self) -> bool {
        self == Cost::Constant
    }

    /// The ACL category of this cost: `fast` or `slow`.
    pub fn acl_category(self) -> &'static str {
        if self.is_fast() {
            "fast"
        } else {
            "slow"
        }
    }
}

#[derive(Debug)]
pub struct CommandDef {
    /// As users write it; Redis matches names in any case.
    pub name: &'static str,
    pub grammar: Grammar,
    /// Redis command flags, except `fast`: that follows `cost`.
    pub flags: &'static str,
    /// ACL categories beyond the derived ones (see
    /// [`CommandDef::acl_categories`]).
    pub more_acl_categories: &'static str,
    pub summary: &'static str,
    pub cost: Cost,
    pub since: &'static str,
    pub run: Handler,
}

impl CommandDef {
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.split(' ').any(|f| f == flag)
    }

    /// The flags Redis registers: `flags`, and `fast` where the cost is O(1).
    pub fn command_flags(&self) -> String {
        if self.cost.is_fast() {
            format!("{} fast", self.flags)
        } else {
            self.flags.to_string()
        }
    }

    /// ACL categories, where the server lets modules set them (Redis 7.2+,
    /// Valkey 8): `write` or `read` as the flags say, `fast` or `slow` as
    /// the cost says, then `more_acl_categories`. The module's own
    /// `ratelimit` category is added to these where the server has it.
    pub fn acl_categories(&self) -> String {
        let access = if self.has_flag("write") {
            Some("write")
        } else if self.has_flag("readonly") {
            Some("read")
        } else {
            None
        };
        let extra = Some(self.more_acl_categories).filter(|c| !c.is_empty());
        let all = [access, Some(self.cost.acl_category()), extra];
        all.into_iter().flatten().collect::<Vec<_>>().join(" ")
    }

    pub fn complexity(&self) -> &'static str {
        self.cost.complexity()
    }

    pub fn keys(&self) -> Keys {
        match self.grammar {
            Grammar::Policy(_)
            | Grammar::Peek { .. }
            | Grammar::Positional { .. }
            | Grammar::Check
            | Grammar::Operator(OperatorOp::Deny | OperatorOp::Undeny | OperatorOp::Denied) => {
                Keys::First
            }
            Grammar::All { .. } | Grammar::Share { .. } => Keys::Counted,
            Grammar::Subcommands { .. }
            | Grammar::Registry(_)
            | Grammar::Operator(
                OperatorOp::DenyList | OperatorOp::HotKeys | OperatorOp::Penalized,
            ) => Keys::None,
        }
    }

    /// Redis arity: the fewest arguments a call may have, name included,
    /// as a negative number (every command takes optional arguments).
    pub fn arity(&self) -> i32 {
        let fewest = match &self.grammar {
            Grammar::Policy(p) => 2 + p.params.len(),
            // numkeys, one key, a policy's keyword and arguments (`POLICY
            // name` the shortest).
            Grammar::All { .. } => 5,
            // numkeys, one key, one node (the root: limit period).
            Grammar::Share { .. } => 5,
            // A key, a policy's keyword and arguments (`POLICY name`).
            Grammar::Peek { .. } => 4,
            Grammar::Positional { params, optional } => 2 + params.len() - optional,
            Grammar::Subcommands { .. } => 1,
            // A subcommand's arity counts both words of its name.
            Grammar::Registry(op) => match op {
                // A name, a policy's keyword and one argument: as with
                // RL.PEEK, fewer after that are the policy's syntax error.
                RegistryOp::Set => 5,
                RegistryOp::Get | RegistryOp::Del | RegistryOp::Stats => 3,
                RegistryOp::List | RegistryOp::Digest | RegistryOp::Help => 2,
            },
            // A key and a name.
            Grammar::Check => 3,
            Grammar::Operator(op) => match op {
                OperatorOp::Deny => 3,
                OperatorOp::Undeny | OperatorOp::Denied | OperatorOp::DenyList => 2,
                OperatorOp::HotKeys | OperatorOp::Penalized => 1,
            },
        };
        -(fewest as i32)
    }

    /// Where the keys are in a whole call (name first), as far as there
    /// are arguments: what a cluster routes by.
    pub fn key_positions<A: AsRef<[u8]>>(&self, args: &[A]) -> Range<usize> {
        let (first, end) = match self.keys() {
            Keys::None => (1, 1),
            Keys::First => (1, 2),
            Keys::Counted => {
                let numkeys = args
                    .get(1)
                    .and_then(|n| args::integer(n.as_ref(), "numkeys", 1, args.len() as u64).ok())
                    .unwrap_or(0);
                (2, 2 + numkeys as usize)
            }
        };
        first.min(args.len())..end.min(args.len())
    }

    /// How Redis names the command in its own errors: lower case
    /// (`container|subcommand` for a subcommand).
    pub fn lower_name(&self) -> String {
        self.name.to_ascii_lowercase()
    }

    /// The container command and the subcommand, for a subcommand
    /// (`RL.POLICY|SET`).
    pub fn container(&self) -> Option<(&'static str, &'static str)> {
        self.name.split_once('|')
    }

    /// The INFO field of the command: `RL.GCRA` -> `rl_gcra`,
    /// `RL.POLICY|SET` -> `rl_policy_set`.
    pub fn info_field(&self) -> String {
        self.lower_name().replace(['.', '|'], "_")
    }
}
