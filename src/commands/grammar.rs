//! The grammar every command is defined in, and what is derived from a
//! definition: the parser of a single-key command, the parser of the same
//! policy inside RL.ALL, the syntax quoted in errors, and COMMAND DOCS.
//!
//! A definition is plain data (see `table.rs`); adding an option to a policy
//! is one more [`Opt`] in its definition plus what it means in `build`.

use crate::algorithm::limits::MAX_COUNT;
use crate::algorithm::Micros;
use crate::bounds::Bound;
use crate::commands::args::{self, Options};
use crate::engine::error::{printable, Error};
use crate::engine::penalty::{self, Penalty};
use crate::engine::{Charge, Flow, Request, MAX_WEIGHT};
use crate::policy::Policy;

/// How one value parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parse {
    /// Decimal digits only, in `min..=max`.
    Integer { min: u64, max: u64 },
    /// Decimal digits only, in `min..=MAX_COUNT`, and at most the operator
    /// bound in force (read at each parse: `CONFIG SET` applies at once).
    Bounded { min: u64, bound: &'static Bound },
    /// As redis-cell reads an integer, in `min..=max`: digits, optionally
    /// after one `+`, or `-0` (CL.THROTTLE's arguments only).
    CellInteger { min: u64, max: u64 },
    /// As redis-cell reads an integer, from `-max` to `max`: also a `-`
    /// before digits (CL.THROTTLE's `quantity`, negative to give back).
    /// Parsed here to its magnitude; the handler reads the sign with
    /// [`args::cell_signed`].
    CellSigned { max: u64 },
    /// A positive integer with an optional unit ms, s, m, h or d.
    Duration,
    /// Any bytes, the empty string included (RL.SKETCH's item).
    Bytes,
    /// A lease identifier as RL.ACQUIRE returns it (checked here, read by
    /// the handler).
    Lease,
}

/// A positional argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// The name in COMMAND DOCS.
    pub name: &'static str,
    /// The name in error messages, where it says more than `name`.
    pub called: &'static str,
    pub parse: Parse,
}

impl Param {
    pub const fn integer(name: &'static str, min: u64, max: u64) -> Param {
        Param {
            name,
            called: name,
            parse: Parse::Integer { min, max },
        }
    }

    /// An integer at most an operator bound ([`Parse::Bounded`]).
    pub const fn bounded(name: &'static str, min: u64, bound: &'static Bound) -> Param {
        Param {
            name,
            called: name,
            parse: Parse::Bounded { min, bound },
        }
    }

    /// An integer read as redis-cell reads it ([`Parse::CellInteger`]).
    pub const fn cell_integer(name: &'static str, min: u64, max: u64) -> Param {
        Param {
            name,
            called: name,
            parse: Parse::CellInteger { min, max },
        }
    }

    /// A signed integer read as redis-cell reads it ([`Parse::CellSigned`]).
    pub const fn cell_signed(name: &'static str, max: u64) -> Param {
        Param {
            name,
            called: name,
            parse: Parse::CellSigned { max },
        }
    }

    pub const fn duration(name: &'static str) -> Param {
        Param {
            name,
            called: name,
            parse: Parse::Duration,
        }
    }

    /// Any bytes: taken as they are ([`Values::bytes`]).
    pub const fn bytes(name: &'static str) -> Param {
        Param {
            name,
            called: name,
            parse: Parse::Bytes,
        }
    }

    /// A lease identifier ([`Parse::Lease`]).
    pub const fn lease(name: &'static str) -> Param {
        Param {
            name,
            called: name,
            parse: Parse::Lease,
        }
    }

    /// The same argument, named `called` in error messages.
    pub const fn called(self, called: &'static str) -> Param {
        Param { called, ..self }
    }

    /// Parses `bytes` as this argument: an integer, or a duration in µs (0
    /// for [`Parse::Bytes`], whose value is the bytes themselves).
    pub fn parse(&self, bytes: &[u8]) -> Result<u64, Error> {
        parse_value(self.parse, bytes, self.called)
    }
}

fn parse_value(parse: Parse, bytes: &[u8], called: &'static str) -> Result<u64, Error> {
    match parse {
        Parse::Integer { min, max } => args::integer(bytes, called, min, max),
        Parse::CellInteger { min, max } => args::cell_integer(bytes, called, min, max),
        Parse::CellSigned { max } => args::cell_signed(bytes, called, max).map(i64::unsigned_abs),
        Parse::Bounded { min, bound } => {
            let n = args::integer(bytes, called, min, MAX_COUNT)?;
            if n > bound.get() {
                return Err(Error::AboveBound {
                    arg: called,
                    max: bound.get(),
                    setting: bound.name,
                });
            }
            Ok(n)
        }
        Parse::Duration => args::duration(bytes, called).map(Micros::as_u64),
        Parse::Bytes => Ok(0),
        Parse::Lease => match crate::codec::lease::parse_lease(bytes) {
            Some(_) => Ok(0),
            None => Err(Error::MalformedLease),
        },
    }
}

/// An option: a keyword alone (a flag) or followed by a value.
/// A duration in its canonical form (`60s` is `1m`).
pub fn canonical_duration(bytes: &[u8]) -> Vec<u8> {
    canonical_value(Parse::Duration, bytes)
}

/// A valid value in its canonical form (see [`PolicyDef::canonical`]);
/// one that does not parse stays as given.
fn canonical_value(parse: Parse, bytes: &[u8]) -> Vec<u8> {
    let Ok(n) = parse_value(parse, bytes, "") else {
        return bytes.to_vec();
    };
    match parse {
        Parse::Integer { .. } | Parse::Bounded { .. } | Parse::CellInteger { .. } => {
            n.to_string().into_bytes()
        }
        Parse::Duration => {
            let ms = n / 1_000;
            let unit = [
                (86_400_000, "d"),
                (3_600_000, "h"),
                (60_000, "m"),
                (1_000, "s"),
            ]
            .into_iter()
            .find(|(per, _)| ms % per == 0);
            match unit {
                Some((per, unit)) => format!("{}{unit}", ms / per).into_bytes(),
                None => format!("{ms}ms").into_bytes(),
            }
        }
        Parse::Bytes | Parse::Lease | Parse::CellSigned { .. } => bytes.to_vec(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opt {
    pub token: &'static str,
    pub value: Option<Parse>,
    /// Options that share a group exclude each other (a mode).
    pub group: Option<&'static str>,
    /// The value's name in COMMAND DOCS, where not the token in lower case.
    pub value_name: Option<&'static str>,
    /// The option it is given only with (`FLOW` within `WAIT`): COMMAND
    /// DOCS nests it in that one's block.
    pub within: Option<&'static str>,
}

impl Opt {
    pub const fn flag(token: &'static str) -> Opt {
        Opt {
            token,
            value: None,
            group: None,
            value_name: None,
            within: None,
        }
    }

    pub const fn integer(token: &'static str, min: u64, max: u64) -> Opt {
        Opt {
            token,
            value: Some(Parse::Integer { min, max }),
            group: None,
            value_name: None,
            within: None,
        }
    }

    pub const fn duration(token: &'static str) -> Opt {
        Opt {
            token,
            value: Some(Parse::Duration),
            group: None,
            value_name: None,
            within: None,
        }
    }

    /// An option whose value is any bytes (a name).
    pub const fn bytes(token: &'static str) -> Opt {
        Opt {
            token,
            value: Some(Parse::Bytes),
            group: None,
            value_name: None,
            within: None,
        }
    }

    /// The same option, its value called `name` in COMMAND DOCS.
    pub const fn value_named(self, name: &'static str) -> Opt {
        Opt {
            value_name: Some(name),
            ..self
        }
    }

    /// The same option, given only with option `token`.
    pub const fn within(self, token: &'static str) -> Opt {
        Opt {
            within: Some(token),
            ..self
        }
    }

    /// The same option as one of the mutually exclusive `group`.
    pub const fn in_group(self, group: &'static str) -> Opt {
        Opt {
            group: Some(group),
            ..self
        }
    }

    pub fn is(&self, word: &[u8]) -> bool {
        word.eq_ignore_ascii_case(self.token.as_bytes())
    }
}

/// The most options any one policy takes (the common ones apart).
pub const MAX_OPTIONS: usize = 6;
/// The most positional arguments any policy takes.
pub const MAX_PARAMS: usize = 4;

/// The values of one parsed call, by position in its definition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Values<'a> {
    params: [u64; MAX_PARAMS],
    /// A flag given holds `Some(1)`.
    options: [Option<u64>; MAX_OPTIONS],
    /// The argument of the [`Parse::Bytes`] parameter, if there is one.
    bytes: &'a [u8],
}

impl Values<'_> {
    /// The bytes of the [`Parse::Bytes`] parameter (empty if none).
    pub fn bytes(&self) -> &[u8] {
        self.bytes
    }

    /// Positional argument `i`.
    pub fn param(&self, i: usize) -> u64 {
        self.params[i]
    }

    /// Positional argument `i`, a duration.
    pub fn duration(&self, i: usize) -> Micros {
        Micros::new(self.params[i])
    }

    /// The value of option `i` (of the policy's options), if given.
    pub fn option(&self, i: usize) -> Option<u64> {
        self.options[i]
    }

    pub fn flag(&self, i: usize) -> bool {
        self.options[i].is_some()
    }
}

/// Turns parsed values into a policy: the part of a definition that is
/// semantics, not syntax (defaults, cross-argument checks).
pub type Build = fn(&Values) -> Result<Policy, Error>;

/// A limit: the arguments after the key of its own command, and the same
/// after its keyword inside RL.ALL.
#[derive(Debug)]
pub struct PolicyDef {
    /// The word that names it in RL.ALL.
    pub keyword: &'static str,
    pub params: &'static [Param],
    pub options: &'static [Opt],
    /// Common options this policy does not take (by token).
    pub refuses: &'static [&'static str],
    pub build: Build,
}

/// The options every decision command takes: `COST n`, `DRYRUN`,
/// `WAIT timeout` (in the line of `FLOW name` with `WEIGHT w`), what
/// kind of charge it is (`FORCE`, `PARTIAL` or `REFUND n`), `RESERVE
/// maxdelay` (admitted now for a later start), `JITTER` (a denial's wait
/// spread) and the penalty box's `BLOCK duration` or `COUNTDENIALS
/// maxdebt` (what a denial costs the key).
pub const COMMON: [Opt; 12] = [
    Opt::integer("COST", 0, MAX_COUNT),
    Opt::flag("DRYRUN"),
    Opt::duration("WAIT").value_named("timeout"),
    Opt::bytes("FLOW").within("WAIT"),
    Opt::integer("WEIGHT", 1, MAX_WEIGHT).within("FLOW"),
    Opt::flag("FORCE").in_group("charge"),
    Opt::flag("PARTIAL").in_group("charge"),
    Opt::integer("REFUND", 1, MAX_COUNT).in_group("charge"),
    Opt::duration("RESERVE").value_named("maxdelay"),
    Opt::flag("JITTER"),
    Opt::duration(penalty::BLOCK)
        .value_named("duration")
        .in_group("penalty"),
    Opt::duration(penalty::COUNT_DENIALS)
        .value_named("maxdebt")
        .in_group("penalty"),
];
const COST: usize = 0;
const DRYRUN: usize = 1;
const WAIT: usize = 2;
const FLOW: usize = 3;
const WEIGHT: usize = 4;
const FORCE: usize = 5;
const PARTIAL: usize = 6;
const REFUND: usize = 7;
const RESERVE: usize = 8;
const JITTER: usize = 9;
const BLOCK: usize = 10;
const COUNT_DENIALS: usize = 11;

/// The common options as given: their values, and the bytes of `FLOW`.
struct Common<'a> {
    values: [Option<u64>; COMMON.len()],
    flow: Option<&'a [u8]>,
}

impl<'a> Common<'a> {
    fn new() -> Self {
        Common {
            values: [None; COMMON.len()],
            flow: None,
        }
    }

    /// Takes common option `index`, its value read from `opts`.
    fn take<A: AsRef<[u8]>>(
        &mut self,
        index: usize,
        opts: &mut Options<'a, A>,
    ) -> Result<(), Error> {
        let value = take(&mut self.values, &COMMON, index, opts)?;
        if index == FLOW {
            self.flow = value;
        }
        Ok(())
    }
}

/// Records option `opt` (at `index` of `defined`), reading its value from
/// `opts`: an error if it, or another of its group, was given already.
fn take<'a, A: AsRef<[u8]>>(
    values: &mut [Option<u64>],
    defined: &[Opt],
    index: usize,
    opts: &mut Options<'a, A>,
) -> Result<Option<&'a [u8]>, Error> {
    let opt = &defined[index];
    if values[index].is_some() {
        return Err(Error::RepeatedOption(opt.token));
    }
    if let Some(group) = opt.group {
        let taken = defined
            .iter()
            .zip(values.iter())
            .any(|(o, v)| o.group == Some(group) && v.is_some());
        if taken {
            return Err(Error::Exclusive(exclusive_text(defined, group)));
        }
    }
    let bytes = match opt.value {
        Some(_) => Some(opts.value(opt.token)?),
        None => None,
    };
    values[index] = Some(match (opt.value, bytes) {
        (Some(parse), Some(bytes)) => parse_value(parse, bytes, opt.token)?,
        _ => 1,
    });
    Ok(bytes)
}

/// `EXACT, APPROX and BUCKETS`: the members of an exclusive group.
fn exclusive_text(defined: &[Opt], group: &'static str) -> String {
    let tokens: Vec<&str> = defined
        .iter()
        .filter(|o| o.group == Some(group))
        .map(|o| o.token)
        .collect();
    join_words(&tokens, "and")
}

/// `a, b and c` (or `or`).
pub fn join_words(words: &[&str], last: &str) -> String {
    match words {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., tail] => format!("{} {last} {tail}", init.join(", ")),
    }
}

impl PolicyDef {
    /// The common options this policy takes: [`COMMON`] less those it
    /// refuses.
    pub fn common(&self) -> impl Iterator<Item = &'static Opt> + '_ {
        COMMON.iter().filter(|o| !self.refuses.contains(&o.token))
    }

    /// Parses a single-key command's arguments after the key: the
    /// positional ones, then this policy's options and the common ones in
    /// any order. `command` names it in an arity error.
    pub fn parse_command<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        command: &'static str,
    ) -> Result<(Policy, Request), Error> {
        let Some((positional, tail)) = split(args, self.params.len()) else {
            return Err(Error::Arity(command));
        };
        let mut values = Values::default();
        self.positional(positional, &mut values)?;
        if tail.is_empty() {
            // No options: the plain request, without walking the option
            // tables or checking combinations of none.
            return Ok(((self.build)(&values)?, Request::default()));
        }
        let mut common = Common::new();
        let mut opts = Options::new(tail);
        while let Some(word) = opts.next_keyword() {
            if let Some(i) = self.options.iter().position(|o| o.is(word)) {
                take(&mut values.options, self.options, i, &mut opts)?;
            } else if let Some(i) = COMMON.iter().position(|o| o.is(word)) {
                if self.refuses.contains(&COMMON[i].token) {
                    return Err(Error::Combination {
                        option: COMMON[i].token,
                        with: command,
                    });
                }
                common.take(i, &mut opts)?;
            } else {
                return Err(Error::UnknownOption(printable(word)));
            }
        }
        let policy = (self.build)(&values)?;
        Ok((policy, common_of(&common, PerKey::default())?))
    }

    /// Parses the policy from the start of `args` (after its keyword),
    /// taking its own options while they follow; returns it and how many
    /// arguments it used. What follows is the next policy or the common
    /// options.
    pub fn parse_prefix<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<(Policy, usize), Error> {
        let Some((positional, tail)) = split(args, self.params.len()) else {
            return Err(Error::PolicyArgs(self.syntax()));
        };
        let mut values = Values::default();
        self.positional(positional, &mut values)?;
        let mut opts = Options::new(tail);
        let mut used = positional.len();
        while let Some(i) = opts
            .peek()
            .and_then(|w| self.options.iter().position(|o| o.is(w)))
        {
            opts.next_keyword();
            take(&mut values.options, self.options, i, &mut opts)?;
            used = positional.len() + opts.position();
        }
        Ok(((self.build)(&values)?, used))
    }

    /// The canonical text of a policy this definition parsed from `args`
    /// (the words [`PolicyDef::parse_prefix`] used): keywords in upper case,
    /// numbers without leading zeros, durations in their largest whole unit
    /// (`60s` and `60000ms` are `1m`), so that equal policies read the same.
    pub fn canonical<A: AsRef<[u8]>>(&self, args: &[A]) -> Vec<u8> {
        let mut words: Vec<Vec<u8>> = vec![self.keyword.as_bytes().to_vec()];
        let (positional, tail) = args.split_at(self.params.len().min(args.len()));
        for (param, arg) in self.params.iter().zip(positional) {
            words.push(canonical_value(param.parse, arg.as_ref()));
        }
        let mut tail = tail.iter().map(AsRef::as_ref);
        while let Some(word) = tail.next() {
            match self.options.iter().find(|o| o.is(word)) {
                Some(opt) => {
                    words.push(opt.token.as_bytes().to_vec());
                    if let Some(parse) = opt.value {
                        if let Some(value) = tail.next() {
                            words.push(canonical_value(parse, value));
                        }
                    }
                }
                None => words.push(word.to_vec()),
            }
        }
        words.join(&b' ')
    }

    /// Parses the positional arguments into `values` (filled in place: the
    /// values are too large to return by copy on every call).
    fn positional<'a, A: AsRef<[u8]>>(
        &self,
        args: &'a [A],
        values: &mut Values<'a>,
    ) -> Result<(), Error> {
        for ((param, arg), slot) in self.params.iter().zip(args).zip(&mut values.params) {
            *slot = param.parse(arg.as_ref())?;
            if param.parse == Parse::Bytes {
                values.bytes = arg.as_ref();
            }
        }
        Ok(())
    }

    /// `GCRA limit period [BURST n]`, as errors quote it.
    pub fn syntax(&self) -> String {
        let mut words: Vec<String> = vec![self.keyword.to_string()];
        words.extend(self.params.iter().map(|p| p.name.to_string()));
        let mut done: Vec<&str> = Vec::new();
        for opt in self.options {
            match opt.group {
                Some(g) if done.contains(&g) => {}
                Some(g) => {
                    done.push(g);
                    let members: Vec<String> = self
                        .options
                        .iter()
                        .filter(|o| o.group == Some(g))
                        .map(opt_syntax)
                        .collect();
                    words.push(format!("[{}]", members.join(" | ")));
                }
                None => words.push(format!("[{}]", opt_syntax(opt))),
            }
        }
        words.join(" ")
    }
}

fn opt_syntax(opt: &Opt) -> String {
    match opt.value {
        Some(_) => format!("{} n", opt.token),
        None => opt.token.to_string(),
    }
}

/// The first `n` arguments and the rest; `None` if there are fewer.
fn split<A>(args: &[A], n: usize) -> Option<(&[A], &[A])> {
    (args.len() >= n).then(|| args.split_at(n))
}

/// RL.ALL's per-key amounts: `COSTS c1 .. cN`, or `REFUND COSTS c1 .. cN`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerKey {
    pub costs: Option<Vec<u64>>,
    /// The costs are amounts to give back.
    pub refund: bool,
}

/// The request the common options make, checked for the combinations the
/// interface excludes.
fn common_of(common: &Common, per_key: PerKey) -> Result<Request, Error> {
    let values = &common.values;
    let token = |i: usize| COMMON[i].token;
    let given = |i: usize| values[i].is_some();
    let costs = per_key.costs.is_some();
    if costs && given(COST) {
        return Err(Error::Exclusive(join_words(&[token(COST), "COSTS"], "and")));
    }
    if per_key.refund && given(REFUND) {
        return Err(Error::RepeatedOption(token(REFUND)));
    }
    let charge = if given(REFUND) || per_key.refund {
        Charge::Refund
    } else if given(FORCE) {
        Charge::Force
    } else if given(PARTIAL) {
        Charge::Partial
    } else {
        Charge::Normal
    };
    let exclude = |option: usize, with: &'static str| Error::Combination {
        option: token(option),
        with,
    };
    // Waiting is for a charge that may have to wait its turn; the others
    // are settled at once.
    // A reservation is admitted now, or denied: it never waits, and it is
    // a plain charge (a start for a debt, a part or a refund means
    // nothing).
    if given(RESERVE) {
        if given(WAIT) {
            return Err(exclude(RESERVE, token(WAIT)));
        }
        if let Some(option) = charge.token() {
            return Err(Error::Combination {
                option,
                with: token(RESERVE),
            });
        }
    }
    // A penalty is what a plain charge's denial costs: it answers at once
    // (a waiter would only wait the block out) and no start is planned.
    let penalty = match (values[BLOCK], values[COUNT_DENIALS]) {
        (Some(d), _) => Some((token(BLOCK), Penalty::Block(Micros::new(d)))),
        (None, Some(d)) => Some((token(COUNT_DENIALS), Penalty::Count(Micros::new(d)))),
        (None, None) => None,
    };
    if let Some((option, _)) = penalty {
        let with = [WAIT, RESERVE].into_iter().filter(|&o| given(o)).map(token);
        if let Some(with) = with.chain(charge.token()).next() {
            return Err(Error::Combination { option, with });
        }
    }
    if given(WAIT) && charge != Charge::Normal {
        let option = match charge {
            Charge::Force => FORCE,
            Charge::Partial => PARTIAL,
            _ => REFUND,
        };
        return Err(exclude(option, token(WAIT)));
    }
    // A flow is where a waiter waits: nothing without WAIT.
    if given(WEIGHT) && !given(FLOW) {
        return Err(Error::Needs {
            option: token(WEIGHT),
            what: "FLOW name",
        });
    }
    if given(FLOW) && !given(WAIT) {
        return Err(Error::Needs {
            option: token(FLOW),
            what: "WAIT timeout",
        });
    }
    let flow = common.flow.map(|name| Flow {
        name: name.to_vec(),
        weight: values[WEIGHT].unwrap_or(1),
    });
    let mut cost = values[COST].unwrap_or(1);
    match charge {
        Charge::Refund => {
            if given(COST) {
                return Err(exclude(REFUND, token(COST)));
            }
            if given(DRYRUN) {
                return Err(exclude(REFUND, token(DRYRUN)));
            }
            if costs && !per_key.refund {
                return Err(exclude(REFUND, "COSTS"));
            }
            cost = values[REFUND].unwrap_or(0);
        }
        Charge::Partial if costs => return Err(exclude(PARTIAL, "COSTS")),
        Charge::Force | Charge::Partial => {
            let option = if charge == Charge::Force {
                FORCE
            } else {
                PARTIAL
            };
            if !costs && values[COST].unwrap_or(0) == 0 {
                return Err(Error::Needs {
                    option: token(option),
                    what: "COST n of 1 or more",
                });
            }
        }
        Charge::Normal | Charge::Peek => {}
    }
    Ok(Request {
        cost,
        costs: per_key.costs,
        charge,
        dryrun: given(DRYRUN),
        wait: values[WAIT].map(Micros::new),
        flow,
        reserve: values[RESERVE].map(Micros::new),
        jitter: given(JITTER),
        penalty: penalty.map(|(_, p)| p),
    })
}

/// Parses a tail that holds only the common options.
pub fn parse_common<A: AsRef<[u8]>>(tail: &[A]) -> Result<Request, Error> {
    if tail.is_empty() {
        // The plain request, without walking the option table.
        return Ok(Request::default());
    }
    parse_common_with(tail, PerKey::default())
}

/// Parses a tail of common options, with RL.ALL's per-key amounts already
/// taken out of it.
pub fn parse_common_with<A: AsRef<[u8]>>(tail: &[A], per_key: PerKey) -> Result<Request, Error> {
    let mut common = Common::new();
    let mut opts = Options::new(tail);
    while let Some(word) = opts.next_keyword() {
        let i = COMMON
            .iter()
            .position(|o| o.is(word))
            .ok_or_else(|| Error::UnknownOption(printable(word)))?;
        common.take(i, &mut opts)?;
    }
    common_of(&common, per_key)
}

/// The policy of `policies` whose keyword is `word` (any case).
pub fn policy_named(policies: &[&'static PolicyDef], word: &[u8]) -> Option<&'static PolicyDef> {
    policies
        .iter()
        .find(|p| word.eq_ignore_ascii_case(p.keyword.as_bytes()))
        .copied()
}

/// The error for a word that names none of `policies`.
pub fn unknown_policy(policies: &[&'static PolicyDef], word: &[u8]) -> Error {
    let names: Vec<&str> = policies.iter().map(|p| p.keyword).collect();
    Error::UnknownPolicy {
        given: printable(word),
        expected: join_words(&names, "or"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::fixed_window::FixedWindow;
    use crate::algorithm::sliding_approx::SlidingApprox;
    use crate::algorithm::sliding_log::SlidingLog;
    use crate::algorithm::sliding_subwindows::SlidingSubwindows;
    use crate::commands::table::{FIXED, GCRA, SLIDING};

    const M: Micros = Micros::new(60_000_000);

    #[test]
    fn no_common_options_are_the_plain_request() {
        let none: [&[u8]; 0] = [];
        assert_eq!(
            parse_common(&none).unwrap(),
            parse_common_with(&none, PerKey::default()).unwrap()
        );
    }

    #[test]
    fn policy_prefix_stops_at_the_first_foreign_token() {
        let (p, used) = SLIDING
            .parse_prefix(&["5", "1m", "BUCKETS", "10", "COST", "2"])
            .unwrap();
        assert_eq!(used, 4);
        assert_eq!(
            p,
            Policy::SlidingSubwindows(SlidingSubwindows::new(5, M, 10))
        );
        let (p, used) = SLIDING
            .parse_prefix(&["5", "1m", "approx", "FIXED"])
            .unwrap();
        assert_eq!(
            (p, used),
            (Policy::SlidingApprox(SlidingApprox::new(5, M)), 3)
        );
        let (p, used) = SLIDING.parse_prefix(&["5", "1m"]).unwrap();
        assert_eq!((p, used), (Policy::SlidingLog(SlidingLog::new(5, M)), 2));
        assert_eq!(
            SLIDING.parse_prefix(&["5", "1m", "BUCKETS"]),
            Err(Error::MissingValue("BUCKETS"))
        );
        let (p, used) = FIXED
            .parse_prefix(&["5", "1m", "ALIGNED", "COST", "2"])
            .unwrap();
        assert_eq!(used, 3);
        assert_eq!(p, Policy::Fixed(FixedWindow::new(5, M, true)));
        assert_eq!(FIXED.parse_prefix(&["5", "1m", "RL.GCRA"]).unwrap().1, 2);
        assert_eq!(
            FIXED.parse_prefix(&["5", "1m", "aligned", "ALIGNED"]),
            Err(Error::RepeatedOption("ALIGNED"))
        );
        assert_eq!(
            FIXED.parse_prefix(&["5"]),
            Err(Error::PolicyArgs("FIXED limit window [ALIGNED]".into()))
        );
    }

    #[test]
    fn options_and_common_options_in_any_order() {
        let (p, c) = SLIDING
            .parse_command(&["5", "1m", "COST", "2", "APPROX", "DRYRUN"], "RL.SLIDING")
            .unwrap();
        assert_eq!(p, Policy::SlidingApprox(SlidingApprox::new(5, M)));
        assert_eq!((c.cost, c.dryrun), (2, true));
        // No options at all: the request the common options default to.
        let (p, c) = SLIDING.parse_command(&["5", "1m"], "RL.SLIDING").unwrap();
        assert_eq!(p, Policy::SlidingLog(SlidingLog::new(5, M)));
        assert_eq!(c, Request::default());
        assert_eq!(c, parse_common::<&str>(&[]).unwrap());
        let err = |args: &[&str]| SLIDING.parse_command(args, "RL.SLIDING").unwrap_err();
        assert_eq!(
            err(&["5", "1m", "EXACT", "APPROX"]),
            Error::Exclusive("EXACT, APPROX and BUCKETS".into())
        );
        assert_eq!(
            err(&["5", "1m", "EXACT", "exact"]),
            Error::RepeatedOption("EXACT")
        );
        assert_eq!(
            err(&["5", "1m", "BUCKETS", "1"]),
            Error::Integer {
                arg: "BUCKETS",
                min: 2,
                max: 1024
            }
        );
        assert_eq!(
            err(&["100001", "1m"]),
            Error::LimitTooHigh {
                max: 100_000,
                mode: "EXACT",
                setting: "max-log-entries",
            }
        );
        assert_eq!(err(&["5"]), Error::Arity("RL.SLIDING"));
        assert_eq!(err(&["5", "1m", "NOW"]), Error::UnknownOption("NOW".into()));
        assert_eq!(
            err(&["5", "1m", "COST", "1", "cost", "2"]),
            Error::RepeatedOption("COST")
        );
    }

    #[test]
    fn an_item_is_any_bytes_even_a_keyword() {
        use crate::algorithm::sketch::Sketch;
        use crate::commands::table::SKETCH;
        let parse = |args: &[&[u8]]| SKETCH.parse_command(args, "RL.SKETCH");
        let sketch = |item: &[u8], w, d| Policy::Sketch {
            sketch: Sketch::new(5, M, w, d),
            item: item.to_vec(),
        };
        let (p, c) = parse(&[b"COST", b"5", b"1m", b"DEPTH", b"2", b"COST", b"3"]).unwrap();
        assert_eq!((p, c.cost), (sketch(b"COST", 2048, 2), 3));
        let (p, _) = parse(&[b"", b"5", b"1m"]).unwrap();
        assert_eq!(p, sketch(b"", 2048, 4));
        let (p, _) = parse(&[b"\xff\x00\r\n", b"5", b"1m", b"width", b"1"]).unwrap();
        assert_eq!(p, sketch(b"\xff\x00\r\n", 1, 4));
        assert_eq!(
            parse(&[b"x", b"5", b"1m", b"WIDTH", b"0"]),
            Err(Error::Integer {
                arg: "WIDTH",
                min: 1,
                max: 262_144
            })
        );
        assert_eq!(
            SKETCH.syntax(),
            "SKETCH item limit window [WIDTH n] [DEPTH n]"
        );
    }

    #[test]
    fn syntax_is_derived_from_the_definition() {
        assert_eq!(GCRA.syntax(), "GCRA limit period [BURST n]");
        assert_eq!(
            SLIDING.syntax(),
            "SLIDING limit window [EXACT | APPROX | BUCKETS n]"
        );
        assert_eq!(join_words(&["A", "B", "C"], "or"), "A, B or C");
    }

    #[test]
    fn charges_and_what_they_exclude() {
        let ok = |args: &[&str]| parse_common(args).unwrap();
        let err = |args: &[&str]| parse_common(args).unwrap_err().to_string();
        let r = ok(&["REFUND", "3"]);
        assert_eq!((r.charge, r.cost), (Charge::Refund, 3));
        let r = ok(&["COST", "4", "force"]);
        assert_eq!((r.charge, r.cost), (Charge::Force, 4));
        let r = ok(&["PARTIAL", "COST", "9", "DRYRUN"]);
        assert_eq!((r.charge, r.cost, r.dryrun), (Charge::Partial, 9, true));
        assert_eq!(
            err(&["REFUND", "0"]),
            format!("ERR REFUND must be an integer from 1 to {MAX_COUNT}")
        );
        assert_eq!(
            err(&["REFUND", "-1"]),
            format!("ERR REFUND must be an integer from 1 to {MAX_COUNT}")
        );
        assert_eq!(
            err(&["REFUND", "1", "COST", "2"]),
            "ERR syntax error: REFUND cannot be combined with COST"
        );
        assert_eq!(
            err(&["REFUND", "1", "DRYRUN"]),
            "ERR syntax error: REFUND cannot be combined with DRYRUN"
        );
        assert_eq!(
            err(&["FORCE", "PARTIAL", "COST", "1"]),
            "ERR syntax error: FORCE, PARTIAL and REFUND are mutually exclusive"
        );
        assert_eq!(
            err(&["FORCE"]),
            "ERR syntax error: FORCE needs COST n of 1 or more"
        );
        assert_eq!(
            err(&["PARTIAL", "COST", "0"]),
            "ERR syntax error: PARTIAL needs COST n of 1 or more"
        );
    }

    /// An option `within` another is refused without it (its own parent's
    /// parents given), as COMMAND DOCS nests it.
    #[test]
    fn an_option_within_another_needs_it() {
        let parent_of = |token: &str| COMMON.iter().find(|o| o.token == token)?.within;
        let value = |token: &str| if token == "WAIT" { "1s" } else { "1" };
        let nested: Vec<&Opt> = COMMON.iter().filter(|o| o.within.is_some()).collect();
        assert_eq!(nested.len(), 2);
        for o in nested {
            let parent = o.within.unwrap_or_default();
            let mut args = vec![o.token, value(o.token)];
            let mut up = parent_of(parent);
            while let Some(token) = up {
                args.extend([token, value(token)]);
                up = parent_of(token);
            }
            match parse_common(&args) {
                Err(Error::Needs { option, what }) => {
                    assert_eq!(option, o.token);
                    assert!(what.starts_with(parent), "{what}");
                }
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn common_options() {
        assert_eq!(parse_common::<&[u8]>(&[]), Ok(Request::default()));
        assert_eq!(
            parse_common(&[&b"cost"[..], b"0", b"DryRun"]),
            Ok(Request {
                cost: 0,
                dryrun: true,
                ..Request::default()
            })
        );
        assert_eq!(
            parse_common(&[&b"WAIT"[..], b"250ms"]),
            Ok(Request {
                wait: Some(Micros::new(250_000)),
                ..Request::default()
            })
        );
        for bad in [
            &[&b"WAIT"[..]][..],
            &[b"WAIT", b"0"],
            &[b"WAIT", b"-1"],
            &[b"WAIT", b"soon"],
        ] {
            let e = parse_common(bad).unwrap_err().to_string();
            assert!(e.starts_with("ERR") && e.contains("WAIT"), "{e}");
        }
        assert_eq!(
            parse_common(&[&b"WAIT"[..], b"1s", b"wait", b"2s"]),
            Err(Error::RepeatedOption("WAIT"))
        );
        assert_eq!(
            parse_common(&[&b"flow"[..], b"tenant a", b"WAIT", b"1s", b"Weight", b"3"]),
            Ok(Request {
                wait: Some(Micros::new(1_000_000)),
                flow: Some(Flow {
                    name: b"tenant a".to_vec(),
                    weight: 3,
                }),
                ..Request::default()
            })
        );
        assert_eq!(
            parse_common(&[&b"WAIT"[..], b"1s", b"FLOW", b""]).map(|r| r.flow),
            Ok(Some(Flow {
                name: Vec::new(),
                weight: 1,
            }))
        );
        let needs = |option, what| Err(Error::Needs { option, what });
        assert_eq!(
            parse_common(&[&b"FLOW"[..], b"a"]),
            needs("FLOW", "WAIT timeout")
        );
        assert_eq!(
            parse_common(&[&b"WAIT"[..], b"1s", b"WEIGHT", b"2"]),
            needs("WEIGHT", "FLOW name")
        );
        for bad in [&b"0"[..], b"1001", b"-1", b"x"] {
            let e = parse_common(&[&b"WAIT"[..], b"1s", b"FLOW", b"a", b"WEIGHT", bad])
                .unwrap_err()
                .to_string();
            assert_eq!(e, "ERR WEIGHT must be an integer from 1 to 1000");
        }
        assert!(parse_common(&[&b"WAIT"[..], b"36501d"])
            .unwrap_err()
            .to_string()
            .contains("WAIT"));
        assert_eq!(
            parse_common(&[&b"COST"[..]]),
            Err(Error::MissingValue("COST"))
        );
        assert_eq!(
            parse_common(&[&b"DRYRUN"[..], b"DRYRUN"]),
            Err(Error::RepeatedOption("DRYRUN"))
        );
        assert_eq!(
            parse_common(&[&b"FOO"[..]]),
            Err(Error::UnknownOption("FOO".into()))
        );
    }
}
