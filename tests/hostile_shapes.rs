//! The hostile tests' table of command shapes ([`hostile::SHAPES`]) is
//! written out by hand, so that it can catch the module's own definitions
//! drifting; this test checks it against those definitions (the command
//! table behind parsing, COMMAND DOCS and registration), without a server:
//! every argument's name and range, every option, and the arity.

mod hostile;

use hostile::{Extra, Parse, Shape, NAMED, SHAPES, T0};
use redis_ratelimit::api::{self, Grammar, Opt, Param, PolicyDef};

/// A policy's own options and the common ones it takes.
fn with_common(p: &PolicyDef) -> Vec<Opt> {
    p.options.iter().chain(p.common()).copied().collect()
}

/// The parameters and options the definitions give a shape.
fn defined(shape: &Shape) -> (Vec<Param>, Vec<Opt>) {
    // RL.POLICY's subcommands by their full name (`RL.POLICY|SET`).
    let command = api::command(shape.name)
        .or_else(|| api::command(&format!("{}|{}", shape.name, shape.prefix.first()?)))
        .expect("every shape names a command");
    assert_eq!(shape.arity_name, command.lower_name(), "{}", shape.name);
    assert_eq!(
        shape.min_arity as i32,
        -command.arity(),
        "{}: arity",
        shape.name
    );
    match &command.grammar {
        Grammar::Policy(p) => (p.params.to_vec(), with_common(p)),
        Grammar::All { policies } => {
            let keyword = shape.infix[0];
            let p = policies
                .iter()
                .find(|p| p.keyword == keyword)
                .expect("an RL.ALL shape names a policy");
            if let Some(short) = shape.short {
                assert_eq!(
                    short,
                    format!("ERR syntax error: the policy is {}", p.syntax())
                );
            }
            (p.params.to_vec(), with_common(p))
        }
        // RL.PEEK: the policy alone, no common options.
        Grammar::Peek { policies } => {
            let keyword = shape.infix[0];
            let p = policies
                .iter()
                .find(|p| p.keyword == keyword)
                .expect("an RL.PEEK shape names a policy");
            (p.params.to_vec(), p.options.to_vec())
        }
        Grammar::Positional { params, .. } => (params.to_vec(), Vec::new()),
        // RL.CHECK: the common options the named policy's algorithm takes.
        Grammar::Check => {
            let (_, definition) = NAMED
                .iter()
                .find(|(name, _)| *name == shape.infix[0])
                .expect("an RL.CHECK shape names a policy of NAMED");
            let p = rl_all_policy(definition[0]);
            (Vec::new(), p.common().copied().collect())
        }
        Grammar::Registry(_) => match shape.prefix[0] {
            // The definition: RL.ALL's policy, without the common options.
            "SET" => {
                let p = rl_all_policy(shape.infix[0]);
                if let Some(short) = shape.short {
                    assert_eq!(
                        short,
                        format!("ERR syntax error: the policy is {}", p.syntax())
                    );
                }
                (p.params.to_vec(), p.options.to_vec())
            }
            "GET" | "DEL" | "STATS" => (vec![Param::bytes("name")], Vec::new()),
            "LIST" => {
                let pattern = Opt {
                    token: "MATCH",
                    value: Some(api::Parse::Bytes),
                    group: None,
                    value_name: None,
                };
                (Vec::new(), vec![pattern])
            }
            _ => (Vec::new(), Vec::new()),
        },
        Grammar::Subcommands { choices, .. } => {
            let (_, param) = choices
                .iter()
                .find(|(word, _)| *word == shape.prefix[0])
                .expect("a clock shape names a subcommand");
            (vec![*param], Vec::new())
        }
    }
}

/// RL.ALL's policy named `keyword`.
fn rl_all_policy(keyword: &str) -> &'static PolicyDef {
    let Some(Grammar::All { policies }) = api::command("RL.ALL").map(|c| &c.grammar) else {
        panic!("RL.ALL takes policies");
    };
    policies
        .iter()
        .find(|p| p.keyword == keyword)
        .expect("a policy of RL.ALL")
}

fn same_parse(shape: &Shape, table: Parse, def_name: &str, def: api::Parse) {
    match (table, def) {
        (Parse::Count { name, min, max }, api::Parse::Integer { min: lo, max: hi })
        | (Parse::CellCount { name, min, max }, api::Parse::CellInteger { min: lo, max: hi }) => {
            assert_eq!((name, min), (def_name, lo), "{}: {name}", shape.name);
            // RL.CLOCK ADVANCE stops at the latest time from T0 on.
            let hi = if shape.prefix == ["ADVANCE"] {
                hi - T0
            } else {
                hi
            };
            assert_eq!(max, hi, "{}: {name} maximum", shape.name);
        }
        (
            Parse::Bounded {
                name,
                min,
                max,
                setting,
            },
            api::Parse::Bounded { min: lo, bound },
        ) => {
            assert_eq!((name, min), (def_name, lo), "{}: {name}", shape.name);
            assert_eq!(
                (max, setting),
                (bound.default, bound.name),
                "{}",
                shape.name
            );
        }
        (Parse::Duration { name }, api::Parse::Duration)
        | (Parse::Item { name }, api::Parse::Bytes) => {
            assert_eq!(name, def_name, "{}", shape.name)
        }
        (t, d) => panic!(
            "{}: {def_name} parses as {t:?} in the table, {d:?} in the module",
            shape.name
        ),
    }
}

#[test]
fn shapes_agree_with_the_command_definitions() {
    for shape in SHAPES {
        let (params, options) = defined(shape);
        assert_eq!(shape.fixed.len(), params.len(), "{}: arguments", shape.name);
        for ((_, parse), param) in shape.fixed.iter().zip(&params) {
            same_parse(shape, *parse, param.called, param.parse);
        }
        // The shape's options, and the mode its tail already chose, are the
        // definition's options.
        let mut tokens: Vec<&str> = shape.options.iter().map(|o| o.word).collect();
        tokens.extend(
            shape
                .tail
                .iter()
                .filter(|w| !w.starts_with(|c: char| c.is_ascii_digit())),
        );
        let chosen_group = options
            .iter()
            .find(|o| shape.tail.contains(&o.token))
            .and_then(|o| o.group);
        let mut expected: Vec<&str> = options
            .iter()
            .filter(|o| {
                o.group.is_none() || o.group != chosen_group || shape.tail.contains(&o.token)
            })
            .map(|o| o.token)
            .collect();
        tokens.sort_unstable();
        expected.sort_unstable();
        assert_eq!(tokens, expected, "{}: options", shape.name);
        for opt in shape.options {
            let def = options
                .iter()
                .find(|o| o.token == opt.word)
                .expect("defined");
            assert_eq!(
                opt.mode,
                def.group.is_some(),
                "{}: {}",
                shape.name,
                opt.word
            );
            match (opt.value, def.value) {
                (None, None) => {}
                (Some((parse, _)), Some(d)) => same_parse(shape, parse, def.token, d),
                _ => panic!(
                    "{}: {} takes a value in one and not the other",
                    shape.name, opt.word
                ),
            }
        }
        // RL.PEEK answers an unknown word after its policy as an option.
        let takes_options = !options.is_empty() || shape.name == "RL.PEEK";
        assert_eq!(
            shape.extra == Extra::UnknownOption,
            takes_options,
            "{}: extra words",
            shape.name
        );
    }
}
