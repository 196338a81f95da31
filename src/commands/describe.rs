//! A command's arguments as its definition gives them, in plain text: for
//! tests that check a table written out by hand against the definitions,
//! without the grammar's types.

use super::definition::{CommandDef, Grammar, RegistryOp};
use super::grammar::{Opt, Param, Parse, PolicyDef};
use super::table::POLICIES;

impl CommandDef {
    /// What the command takes, one line each: `syntax WORDS` for an RL.ALL
    /// policy, then `argument NAME: PARSE` per positional argument in
    /// order (NAME as error messages say it), then `option TOKEN`, with
    /// ` (mode GROUP)` when it excludes the others of its group and
    /// `: PARSE` when it takes a value. PARSE is `integer MIN..=MAX`,
    /// `cell-integer MIN..=MAX` (redis-cell's reading),
    /// `integer MIN..=SETTING (default N)` (an operator bound),
    /// `duration`, `bytes` or `lease`.
    ///
    /// `part` chooses the policy (by keyword) of RL.ALL, RL.PEEK, RL.CHECK
    /// (the common options the named policy's algorithm takes) and
    /// `RL.POLICY SET` (the definition, as RL.PEEK takes it), and the
    /// subcommand of RL.CLOCK; `None` when it names none.
    pub fn describe(&self, part: Option<&str>) -> Option<Vec<String>> {
        let keyword = |policies: &[&'static PolicyDef]| {
            policies.iter().copied().find(|p| Some(p.keyword) == part)
        };
        let (syntax, params, options): (_, &[Param], Vec<Opt>) = match &self.grammar {
            Grammar::Policy(p) => (None, p.params, with_common(p)),
            Grammar::All { policies } => {
                let p = keyword(policies)?;
                (Some(p.syntax()), p.params, with_common(p))
            }
            // RL.PEEK: the policy alone, no common options.
            Grammar::Peek { policies } => {
                let p = keyword(policies)?;
                (None, p.params, p.options.to_vec())
            }
            Grammar::Share { node, look } => {
                let options = if *look {
                    node.options.to_vec()
                } else {
                    with_common(node)
                };
                (Some(node.syntax()), node.params, options)
            }
            Grammar::Positional { params, .. } => (None, *params, Vec::new()),
            Grammar::Subcommands { choices, .. } => {
                let (_, param) = choices.iter().find(|(word, _)| Some(*word) == part)?;
                (None, std::slice::from_ref(param), Vec::new())
            }
            Grammar::Check => {
                let p = keyword(&POLICIES)?;
                (None, &[], p.common().copied().collect())
            }
            Grammar::Registry(RegistryOp::Set) => {
                let p = keyword(&POLICIES)?;
                (Some(p.syntax()), p.params, p.options.to_vec())
            }
            Grammar::Registry(RegistryOp::Get | RegistryOp::Del | RegistryOp::Stats) => {
                (None, &NAME, Vec::new())
            }
            Grammar::Registry(RegistryOp::List) => (None, &[], vec![MATCH]),
            Grammar::Registry(RegistryOp::Digest | RegistryOp::Help) => (None, &[], Vec::new()),
            Grammar::Operator(_) => (None, &[], Vec::new()),
        };
        let mut lines: Vec<String> = syntax.map(|s| format!("syntax {s}")).into_iter().collect();
        lines.extend(
            params
                .iter()
                .map(|p| format!("argument {}: {}", p.called, parse_text(p.parse))),
        );
        lines.extend(options.iter().map(|o| {
            let mut line = format!("option {}", o.token);
            if let Some(group) = o.group {
                line.push_str(&format!(" (mode {group})"));
            }
            if let Some(value) = o.value {
                line.push_str(&format!(": {}", parse_text(value)));
            }
            line
        }));
        Some(lines)
    }
}

/// A named policy's name.
const NAME: [Param; 1] = [Param::bytes("name")];

/// `RL.POLICY LIST`'s pattern.
const MATCH: Opt = Opt {
    token: "MATCH",
    value: Some(Parse::Bytes),
    group: None,
    value_name: None,
    within: None,
};

/// A policy's own options and the common ones it takes.
fn with_common(p: &PolicyDef) -> Vec<Opt> {
    p.options.iter().chain(p.common()).copied().collect()
}

fn parse_text(parse: Parse) -> String {
    match parse {
        Parse::Integer { min, max } => format!("integer {min}..={max}"),
        Parse::CellInteger { min, max } => format!("cell-integer {min}..={max}"),
        Parse::CellSigned { max } => format!("cell-integer -{max}..={max}"),
        Parse::Bounded { min, bound } => {
            format!("integer {min}..={} (default {})", bound.name, bound.default)
        }
        Parse::Duration => "duration".to_string(),
        Parse::Bytes => "bytes".to_string(),
        Parse::Lease => "lease".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use crate::commands::table::COMMANDS;

    fn describe(name: &str, part: Option<&str>) -> Vec<String> {
        let def = COMMANDS.iter().find(|c| c.name == name).expect("defined");
        def.describe(part).expect("described")
    }

    #[test]
    fn lines() {
        let gcra = describe("RL.ALL", Some("GCRA"));
        assert_eq!(gcra[0], "syntax GCRA limit period [BURST n]");
        assert_eq!(gcra[1], "argument limit: integer 1..=9223372036854775807");
        assert_eq!(gcra[2], "argument period: duration");
        assert_eq!(gcra[3], "option BURST: integer 1..=9223372036854775807");
        let sliding = describe("RL.SLIDING", None);
        assert!(sliding.contains(&"option APPROX (mode mode)".to_string()));
        assert!(sliding.contains(&"option BUCKETS (mode mode): integer 2..=1024".to_string()));
        // RL.ALL and RL.PEEK need their policy; named policies have none.
        let all = COMMANDS.iter().find(|c| c.name == "RL.ALL").unwrap();
        assert_eq!(all.describe(None), None);
        let check = COMMANDS.iter().find(|c| c.name == "RL.CHECK").unwrap();
        assert_eq!(check.describe(None), None);
        let set = describe("RL.POLICY|SET", Some("GCRA"));
        assert_eq!(set[0], "syntax GCRA limit period [BURST n]");
        assert!(!set.iter().any(|l| l.starts_with("option COST")));
        assert_eq!(describe("RL.POLICY|GET", None), ["argument name: bytes"]);
        assert_eq!(describe("RL.POLICY|LIST", None), ["option MATCH: bytes"]);
    }
}
