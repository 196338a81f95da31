//! The hostile tests' table of command shapes ([`hostile::SHAPES`]) is
//! written out by hand, so that it can catch the module's own definitions
//! drifting; this test checks it against those definitions (the command
//! table behind parsing, COMMAND DOCS and registration), without a server:
//! every argument's name and range, every option, and the arity.

mod hostile;

use hostile::{Extra, Parse, Shape, NAMED, SHAPES, T0};
use redis_ratelimit::api::{CommandDef, COMMANDS};

/// The command named `name` (any case).
fn command(name: &str) -> Option<&'static CommandDef> {
    COMMANDS.iter().find(|c| c.name.eq_ignore_ascii_case(name))
}

/// A positional argument as the definitions describe it.
struct Param {
    called: String,
    parse: String,
}

/// An option as the definitions describe it.
struct Opt {
    token: String,
    group: Option<String>,
    value: Option<String>,
}

/// The parameters and options the definitions give a shape, from the
/// module's description of the command (`CommandDef::describe`).
fn defined(shape: &Shape) -> (Vec<Param>, Vec<Opt>) {
    // RL.POLICY's subcommands by their full name (`RL.POLICY|SET`).
    let command = command(shape.name)
        .or_else(|| command(&format!("{}|{}", shape.name, shape.prefix.first()?)))
        .expect("every shape names a command");
    assert_eq!(shape.arity_name, command.lower_name(), "{}", shape.name);
    assert_eq!(
        shape.min_arity as i32,
        -command.arity(),
        "{}: arity",
        shape.name
    );
    // RL.ALL's, RL.PEEK's and RL.POLICY SET's shapes name their policy
    // first, RL.CLOCK's its subcommand; RL.CHECK's names a policy of
    // [`NAMED`], described by its algorithm's keyword.
    let part = match shape.name {
        "RL.CHECK" => NAMED
            .iter()
            .find(|(name, _)| Some(name) == shape.infix.first())
            .map(|(_, definition)| definition[0]),
        _ => shape.infix.first().copied(),
    };
    let lines = command
        .describe(part)
        .or_else(|| command.describe(shape.prefix.first().copied()))
        .unwrap_or_else(|| panic!("{}: no description", shape.name));
    let (mut params, mut options) = (Vec::new(), Vec::new());
    for line in lines {
        if let Some(syntax) = line.strip_prefix("syntax ") {
            // RL.ALL's syntax error quotes the policy's syntax.
            if let Some(short) = shape.short {
                assert_eq!(short, format!("ERR syntax error: the policy is {syntax}"));
            }
        } else if let Some(param) = line.strip_prefix("argument ") {
            let (called, parse) = param.split_once(": ").expect("argument: parse");
            params.push(Param {
                called: called.to_string(),
                parse: parse.to_string(),
            });
        } else if let Some(opt) = line.strip_prefix("option ") {
            let (head, value) = match opt.split_once(": ") {
                Some((head, value)) => (head, Some(value.to_string())),
                None => (opt, None),
            };
            let (token, group) = match head.split_once(" (mode ") {
                Some((token, group)) => (token, group.strip_suffix(')').map(str::to_string)),
                None => (head, None),
            };
            options.push(Opt {
                token: token.to_string(),
                group,
                value,
            });
        } else {
            panic!("{}: unknown description line {line:?}", shape.name);
        }
    }
    (params, options)
}

/// The table's parse as the module describes one: its name and the
/// description.
fn described(shape: &Shape, table: Parse) -> (&'static str, String) {
    match table {
        Parse::Count { name, min, max } => {
            // RL.CLOCK ADVANCE stops at the latest time from T0 on.
            let max = if shape.prefix == ["ADVANCE"] {
                max + T0
            } else {
                max
            };
            (name, format!("integer {min}..={max}"))
        }
        Parse::CellCount { name, min, max } => (name, format!("cell-integer {min}..={max}")),
        Parse::CellSigned { name, max } => (name, format!("cell-integer -{max}..={max}")),
        Parse::Bounded {
            name,
            min,
            max,
            setting,
        } => (name, format!("integer {min}..={setting} (default {max})")),
        Parse::Duration { name } => (name, "duration".to_string()),
        Parse::Item { name } => (name, "bytes".to_string()),
    }
}

fn same_parse(shape: &Shape, table: Parse, def_name: &str, def: &str) {
    let (name, parse) = described(shape, table);
    assert_eq!(name, def_name, "{}", shape.name);
    assert_eq!(
        parse, def,
        "{}: {def_name} parses as {table:?} in the table, {def} in the module",
        shape.name
    );
}

#[test]
fn shapes_agree_with_the_command_definitions() {
    for shape in SHAPES {
        let (params, options) = defined(shape);
        assert_eq!(shape.fixed.len(), params.len(), "{}: arguments", shape.name);
        for ((_, parse), param) in shape.fixed.iter().zip(&params) {
            same_parse(shape, *parse, &param.called, &param.parse);
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
            .find(|o| shape.tail.contains(&o.token.as_str()))
            .and_then(|o| o.group.as_ref());
        let mut expected: Vec<&str> = options
            .iter()
            .filter(|o| {
                o.group.is_none()
                    || o.group.as_ref() != chosen_group
                    || shape.tail.contains(&o.token.as_str())
            })
            .map(|o| o.token.as_str())
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
            match (opt.value, &def.value) {
                (None, None) => {}
                (Some((parse, _)), Some(d)) => same_parse(shape, parse, &def.token, d),
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
