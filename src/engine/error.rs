//! Every error the module replies with, in one place. Each message starts
//! with `ERR` or `WRONGTYPE` and names what is wrong; tests pin the texts.

use crate::algorithm::limits::MAX_DURATION;
use crate::algorithm::Micros;
use crate::codec::lease::LEASE_LEN;
use crate::codec::{Kind, StateError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// An integer argument outside `min..=max` or not an integer at all.
    Integer {
        arg: &'static str,
        min: u64,
        max: u64,
    },
    /// An integer from `-max` to `max` (CL.THROTTLE's `quantity`).
    SignedInteger {
        arg: &'static str,
        max: u64,
    },
    /// A duration that does not parse.
    Duration {
        arg: &'static str,
    },
    /// A duration above [`MAX_DURATION`].
    DurationTooLong {
        arg: &'static str,
    },
    UnknownOption(String),
    /// RL.CHECK: a word after a policy name that is neither OR nor an
    /// option (names not separated by OR), or OR in a name's place.
    ChainSyntax {
        given: String,
        or_first: bool,
    },
    RepeatedOption(&'static str),
    MissingValue(&'static str),
    /// The command (named as users write it) has too few or too many
    /// arguments.
    Arity(&'static str),
    /// An RL.ALL policy without all its arguments; holds its syntax.
    PolicyArgs(String),
    /// An RL.ALL policy name that does not exist, and the names that do.
    UnknownPolicy {
        given: String,
        expected: String,
    },
    /// RL.ALL with fewer policies than keys.
    PolicyCount {
        keys: usize,
        policies: usize,
    },
    /// An error about one of RL.ALL's keys (1-based position).
    /// RL.SHARE or RL.SHARE.PEEK (`command`): not one node per key.
    NodeCount {
        command: &'static str,
        keys: usize,
        nodes: usize,
    },
    /// RL.SHARE: node `node` (1-based) needs CEIL, or is the root and
    /// takes none.
    Ceiling {
        node: usize,
        root: bool,
    },
    InKey {
        position: usize,
        error: Box<Error>,
    },
    /// RL.ALL naming a key twice (1-based positions).
    RepeatedKey {
        first: usize,
        again: usize,
    },
    /// The parameters make the limiter take longer than the horizon to reset.
    HorizonTooLong {
        span: &'static str,
        max: Micros,
    },
    /// Options of which at most one may be given (names them all).
    Exclusive(String),
    /// An RL.SHARE node stored with another definition than the call's
    /// (each as its arguments); `key` is its name, once known.
    Redefined {
        key: String,
        stored: String,
        given: String,
    },
    /// An option given with another it excludes.
    Combination {
        option: &'static str,
        with: &'static str,
    },
    /// An option given without what it needs.
    Needs {
        option: &'static str,
        what: &'static str,
    },
    /// RL.ALL's COSTS with another count of amounts than keys.
    CostsCount {
        keys: usize,
        given: usize,
    },
    /// A forced charge the state of `command` cannot hold.
    ForceTooLarge(&'static str),
    /// `limit` above what a mode accepts: the operator's bound `setting`
    /// (a `ratelimit.*` module config).
    LimitTooHigh {
        max: u64,
        mode: &'static str,
        setting: &'static str,
    },
    /// RL.SKETCH's state (`WIDTH × DEPTH` counters) larger than the operator's
    /// `ratelimit.max-sketch-bytes` allows: at most `counters` counters.
    SketchTooLarge {
        counters: u64,
    },
    /// A value above an operator bound ([`crate::bounds`]), named by its
    /// setting (`ratelimit.NAME`).
    AboveBound {
        arg: &'static str,
        max: u64,
        setting: &'static str,
    },
    /// CL.THROTTLE with more than one request per nanosecond.
    RateTooHigh,
    /// The key holds a list, hash, set, sorted set, stream or module value.
    WrongType,
    /// The key holds a string that is not this command's state.
    State {
        command: &'static str,
        found: StateError,
    },
    /// CL.THROTTLE's key holds a string that is not a decimal TAT.
    NotCellState,
    /// The clock is beyond what a format can represent.
    ClockOutOfRange(&'static str),
    ClockNotManual,
    UnknownSubcommand {
        command: &'static str,
        hint: String,
        given: String,
    },
    /// The server could not take a write; nothing was changed.
    WriteFailed(&'static str),
    /// A panic was caught in a handler; nothing was written.
    Internal(&'static str),
    /// A lease identifier that RL.ACQUIRE cannot have returned.
    MalformedLease,
    /// A named policy that is not defined (RL.POLICY, RL.CHECK, POLICY).
    NoSuchPolicy(String),
    /// An RL.CHECK chain of which no name is defined (all of them).
    NoPolicyOfChain(String),
    /// A policy name longer than `ratelimit.max-policy-name`, or empty.
    PolicyName {
        max: u64,
    },
    /// A SHADOW policy named in RL.ALL.
    ShadowInAll(String),
    /// Named policies used on a server that did not load them.
    PoliciesOff,
    /// A new policy past `ratelimit.max-policies`.
    TooManyPolicies {
        max: u64,
    },
    /// A lease identifier RL.ACQUIRE returned for another key.
    LeaseOfAnotherKey,
    /// A new key past `ratelimit.max-denied-keys`.
    TooManyDenied {
        max: u64,
    },
    /// The deny list used on a server that did not load it.
    DenyListOff,
    /// An RL.DENY reason longer than `max` bytes.
    DenyReason {
        max: usize,
    },
    /// A named path used where one limit is decided on one key (RL.CHECK,
    /// `POLICY name` in RL.ALL and RL.PEEK).
    PathByName {
        name: String,
        nodes: usize,
    },
    /// A named single limit (its keyword) given to RL.SHARE.
    NotAPath {
        name: String,
        keyword: &'static str,
    },
    /// RL.SHARE's keys not one per node of the named path.
    PathLength {
        name: String,
        nodes: usize,
        keys: usize,
    },
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Makes a client-supplied token safe to echo in an error line.
pub fn printable(bytes: &[u8]) -> String {
    let mut s: String = bytes
        .iter()
        .take(32)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    if bytes.len() > 32 {
        s.push_str("...");
    }
    s
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Integer { arg, min, max } => {
                write!(f, "ERR {arg} must be an integer from {min} to {max}")
            }
            Error::SignedInteger { arg, max } => {
                write!(f, "ERR {arg} must be an integer from -{max} to {max}")
            }
            Error::Duration { arg } => write!(
                f,
                "ERR {arg} must be a positive integer with an optional unit ms, s, m, h or d"
            ),
            Error::DurationTooLong { arg } => {
                write!(
                    f,
                    "ERR {arg} must be at most {}d",
                    MAX_DURATION.as_u64() / US_PER_DAY
                )
            }
            Error::UnknownOption(o) => write!(f, "ERR syntax error: unknown option '{o}'"),
            Error::ChainSyntax { given, or_first } => {
                let what = if *or_first {
                    "OR must follow a policy name".to_string()
                } else {
                    format!("unknown option '{given}' (separate policy names with OR)")
                };
                write!(
                    f,
                    "ERR syntax error: {what}: RL.CHECK key name [OR name ...] [options]"
                )
            }
            Error::RepeatedOption(o) => write!(f, "ERR syntax error: {o} given more than once"),
            Error::MissingValue(o) => write!(f, "ERR syntax error: {o} needs a value"),
            Error::Arity(cmd) => write!(
                f,
                "ERR wrong number of arguments for '{}' command",
                cmd.to_ascii_lowercase()
            ),
            Error::PolicyArgs(syntax) => {
                write!(f, "ERR syntax error: the policy is {syntax}")
            }
            Error::UnknownPolicy { given, expected } => write!(
                f,
                "ERR syntax error: unknown policy '{given}': expected {expected}"
            ),
            Error::PolicyCount { keys, policies } => write!(
                f,
                "ERR syntax error: RL.ALL needs one policy per key, got {} and {}",
                plural(*keys, "key", "keys"),
                plural(*policies, "policy", "policies")
            ),
            Error::NodeCount {
                command,
                keys,
                nodes,
            } => write!(
                f,
                "ERR syntax error: {command} needs one node per key, got {} and {}",
                plural(*keys, "key", "keys"),
                plural(*nodes, "node", "nodes")
            ),
            Error::Ceiling { node, root: false } => write!(
                f,
                "ERR syntax error: node {node} needs CEIL limit: every node but the last (the root) has a ceiling"
            ),
            Error::Ceiling { node, root: true } => write!(
                f,
                "ERR syntax error: node {node} is the root (the last node) and takes no CEIL"
            ),
            Error::InKey { position, error } => {
                // Name the key: "WRONGTYPE key 2 holds ...".
                let inner = error.to_string();
                let named = match inner.strip_prefix("WRONGTYPE Operation against a key ") {
                    Some(rest) => format!("WRONGTYPE Operation against key {position} {rest}"),
                    None => inner.replacen(" key ", &format!(" key {position} "), 1),
                };
                f.write_str(&named)
            }
            Error::RepeatedKey { first, again } => write!(
                f,
                "ERR key {again} is the same as key {first}: each limit needs its own key"
            ),
            Error::HorizonTooLong { span, max } => {
                write!(
                    f,
                    "ERR {span} must be at most {} years",
                    max.as_u64() / US_PER_YEAR
                )
            }
            Error::Exclusive(options) => {
                write!(f, "ERR syntax error: {options} are mutually exclusive")
            }
            Error::Redefined { key, stored, given } => write!(
                f,
                "ERR RL.SHARE node '{key}' is defined as '{stored}', not '{given}': one definition \
                 per node (delete the node to change it)"
            ),
            Error::Combination { option, with } => {
                write!(
                    f,
                    "ERR syntax error: {option} cannot be combined with {with}"
                )
            }
            Error::Needs { option, what } => write!(f, "ERR syntax error: {option} needs {what}"),
            Error::CostsCount { keys, given } => write!(
                f,
                "ERR syntax error: COSTS needs one cost per key, got {} for {}",
                plural(*given, "cost", "costs"),
                plural(*keys, "key", "keys")
            ),
            Error::ForceTooLarge(command) => write!(
                f,
                "ERR FORCE would put key beyond what {command} state can hold; nothing was changed"
            ),
            Error::LimitTooHigh { max, mode, setting } => {
                write!(
                    f,
                    "ERR limit must be at most {max} with {mode} (ratelimit.{setting})"
                )
            }
            Error::AboveBound { arg, max, setting } => {
                write!(f, "ERR {arg} must be at most {max} (ratelimit.{setting})")
            }
            Error::SketchTooLarge { counters } => write!(
                f,
                "ERR WIDTH * DEPTH must be at most {counters} (ratelimit.max-sketch-bytes)"
            ),
            Error::RateTooHigh => {
                write!(f, "ERR count per period must be at most one per nanosecond")
            }
            Error::WrongType => {
                write!(
                    f,
                    "WRONGTYPE Operation against a key holding the wrong kind of value"
                )
            }
            Error::State { command, found } => match found {
                StateError::Foreign => {
                    write!(
                        f,
                        "WRONGTYPE key holds a string that is not {command} state"
                    )
                }
                StateError::OtherKind(k) => {
                    write!(
                        f,
                        "WRONGTYPE key holds {} state, not {command} state",
                        k.name()
                    )
                }
                StateError::Corrupt(k) => write!(f, "ERR key holds corrupt {} state", k.name()),
                StateError::Mismatch(m) => {
                    let show = |v: u64| match (m.duration, v % 1_000) {
                        (true, 0) => format!("{}ms", v / 1_000),
                        (true, _) => format!("{v}us"),
                        (false, _) => v.to_string(),
                    };
                    write!(
                        f,
                        "WRONGTYPE key holds {} state with {} {}, not {}",
                        m.kind.name(),
                        m.param,
                        show(m.stored),
                        show(m.given)
                    )
                }
            },
            Error::NotCellState => {
                write!(
                    f,
                    "WRONGTYPE key holds a string that is not CL.THROTTLE state"
                )
            }
            Error::ClockOutOfRange(what) => {
                write!(f, "ERR the clock is beyond what {what} can represent")
            }
            Error::ClockNotManual => write!(
                f,
                "ERR RL.CLOCK SET and ADVANCE need the module loaded with 'clock manual'"
            ),
            Error::UnknownSubcommand {
                command,
                hint,
                given,
            } => {
                write!(
                    f,
                    "ERR unknown subcommand '{given}' for {command}: try {hint}"
                )
            }
            Error::WriteFailed(why) => {
                write!(
                    f,
                    "ERR the key could not be written ({why}); nothing was changed"
                )
            }
            Error::Internal(cmd) => {
                write!(f, "ERR internal error in {cmd}; nothing was changed")
            }
            Error::MalformedLease => write!(
                f,
                "ERR lease must be {LEASE_LEN} lowercase hex digits, as RL.ACQUIRE returns it"
            ),
            Error::ShadowInAll(name) => write!(
                f,
                "ERR policy '{name}' is SHADOW: RL.ALL enforces every policy; use RL.CHECK"
            ),
            Error::PoliciesOff => write!(
                f,
                "ERR named policies are off: load the module with 'policies on'"
            ),
            Error::NoSuchPolicy(name) => write!(f, "ERR no policy named '{name}'"),
            Error::PathByName { name, nodes } => write!(
                f,
                "ERR policy '{name}' is a SHARE path of {}: use RL.SHARE numkeys key [key ...] \
                 POLICY {name}",
                plural(*nodes, "node", "nodes")
            ),
            Error::NotAPath { name, keyword } => write!(
                f,
                "ERR policy '{name}' is {keyword}, not a SHARE path: use RL.CHECK key {name}"
            ),
            Error::PathLength { name, nodes, keys } => write!(
                f,
                "ERR syntax error: policy '{name}' is a path of {}, got {}: one key per node, \
                 leaf first",
                plural(*nodes, "node", "nodes"),
                plural(*keys, "key", "keys")
            ),
            Error::NoPolicyOfChain(names) => {
                write!(f, "ERR none of the policies {names} is defined")
            }
            Error::PolicyName { max } => write!(
                f,
                "ERR policy name must be 1 to {max} bytes (ratelimit.max-policy-name)"
            ),
            Error::TooManyPolicies { max } => write!(
                f,
                "ERR too many policies: at most {max} (ratelimit.max-policies)"
            ),
            Error::LeaseOfAnotherKey => {
                write!(f, "ERR lease was acquired under another key")
            }
            Error::TooManyDenied { max } => write!(
                f,
                "ERR the deny list is full: at most {max} keys (ratelimit.max-denied-keys)"
            ),
            Error::DenyListOff => write!(
                f,
                "ERR the deny list is off: load the module with 'policies on'"
            ),
            Error::DenyReason { max } => {
                write!(f, "ERR REASON must be at most {max} bytes")
            }
        }
    }
}

const US_PER_DAY: u64 = 86_400 * 1_000_000;
/// A year of 365 days, as the horizons are defined.
const US_PER_YEAR: u64 = 365 * US_PER_DAY;

impl Error {
    /// Parameters that make a limiter take longer than `max` to reset.
    pub fn horizon(span: &'static str, max: Micros) -> Error {
        Error::HorizonTooLong { span, max }
    }

    /// The state error of `command`, as found in a key.
    pub fn state(command: &'static str, found: StateError) -> Error {
        Error::State { command, found }
    }

    /// The kind-specific error for a key of `kind` read by `command`.
    pub fn other_kind(command: &'static str, kind: Kind) -> Error {
        Error::State {
            command,
            found: StateError::OtherKind(kind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Mismatch;

    #[test]
    fn every_message_starts_with_an_error_code() {
        let all = [
            Error::Integer {
                arg: "limit",
                min: 1,
                max: 9,
            },
            Error::Duration { arg: "period" },
            Error::DurationTooLong { arg: "period" },
            Error::UnknownOption("X".into()),
            Error::ChainSyntax {
                given: "X".into(),
                or_first: false,
            },
            Error::RepeatedOption("COST"),
            Error::MissingValue("COST"),
            Error::Arity("rl.gcra"),
            Error::PolicyArgs("GCRA limit period [BURST n]".into()),
            Error::UnknownPolicy {
                given: "X".into(),
                expected: "GCRA".into(),
            },
            Error::PolicyCount {
                keys: 2,
                policies: 1,
            },
            Error::RepeatedKey { first: 1, again: 2 },
            Error::InKey {
                position: 2,
                error: Box::new(Error::WrongType),
            },
            Error::horizon("a", Micros::new(1)),
            Error::RateTooHigh,
            Error::Exclusive("A and B".into()),
            Error::Combination {
                option: "REFUND",
                with: "COST",
            },
            Error::Needs {
                option: "FORCE",
                what: "COST n",
            },
            Error::CostsCount { keys: 2, given: 1 },
            Error::ForceTooLarge("RL.GCRA"),
            Error::WriteFailed("x"),
            Error::LimitTooHigh {
                max: 1,
                mode: "EXACT",
                setting: "max-log-entries",
            },
            Error::AboveBound {
                arg: "limit",
                max: 1,
                setting: "max-leases-per-key",
            },
            Error::SketchTooLarge { counters: 1 },
            Error::WrongType,
            Error::state("RL.GCRA", StateError::Foreign),
            Error::state("RL.GCRA", StateError::Corrupt(Kind::Gcra)),
            Error::other_kind("RL.GCRA", Kind::Bucket),
            Error::NotCellState,
            Error::state(
                "RL.SKETCH",
                StateError::Mismatch(Mismatch {
                    kind: Kind::Sketch,
                    param: "WIDTH",
                    stored: 1,
                    given: 2,
                    duration: false,
                }),
            ),
            Error::ClockOutOfRange("x"),
            Error::ClockNotManual,
            Error::UnknownSubcommand {
                command: "RL.CLOCK",
                hint: "SET".into(),
                given: "x".into(),
            },
            Error::Internal("RL.GCRA"),
            Error::PathByName {
                name: "org".into(),
                nodes: 2,
            },
            Error::NotAPath {
                name: "plan".into(),
                keyword: "GCRA",
            },
            Error::PathLength {
                name: "org".into(),
                nodes: 3,
                keys: 2,
            },
            Error::TooManyDenied { max: 1 },
            Error::DenyReason { max: 1 },
            Error::DenyListOff,
        ];
        for e in all {
            let m = e.to_string();
            assert!(m.starts_with("ERR ") || m.starts_with("WRONGTYPE "), "{m}");
            assert!(!m.contains('\r') && !m.contains('\n'));
        }
    }

    #[test]
    fn errors_in_one_of_several_keys_name_it() {
        let in_key = |e: Error| {
            Error::InKey {
                position: 2,
                error: Box::new(e),
            }
            .to_string()
        };
        assert_eq!(
            in_key(Error::WrongType),
            "WRONGTYPE Operation against key 2 holding the wrong kind of value"
        );
        assert_eq!(
            in_key(Error::other_kind("RL.GCRA", Kind::Bucket)),
            "WRONGTYPE key 2 holds RL.BUCKET state, not RL.GCRA state"
        );
        assert_eq!(
            in_key(Error::state("RL.FIXED", StateError::Corrupt(Kind::Fixed))),
            "ERR key 2 holds corrupt RL.FIXED state"
        );
        let count = Error::PolicyCount {
            keys: 1,
            policies: 2,
        }
        .to_string();
        assert_eq!(
            count,
            "ERR syntax error: RL.ALL needs one policy per key, got 1 key and 2 policies"
        );
    }

    #[test]
    fn echoed_tokens_are_printable() {
        assert_eq!(printable(b"ok\r\n\xff"), "ok???");
        assert_eq!(printable(&[b'a'; 40]).len(), 35);
    }
}
