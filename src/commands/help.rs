//! `HELP` of the commands that have subcommands (`RL.CLOCK HELP`,
//! `RL.POLICY HELP`), in the form of Redis's own `CONFIG HELP`: a first
//! line of usage, then each subcommand's syntax and, indented, what it does.

use super::Reply;

/// The reply to `command HELP`: `usage`, then each `(syntax, what)` entry,
/// then HELP itself.
pub fn reply(command: &str, usage: &str, entries: &[(String, &str)]) -> Reply {
    let mut lines = vec![format!("{command} {usage}. Subcommands are:")];
    for (syntax, what) in entries {
        lines.push(syntax.clone());
        lines.push(format!("    {what}"));
    }
    lines.push("HELP".to_string());
    lines.push("    Print this help.".to_string());
    Reply::Lines(lines)
}

/// Whether `word` is `HELP` (any case).
pub fn is_help(word: &[u8]) -> bool {
    word.eq_ignore_ascii_case(b"HELP")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_is_usage_then_syntax_and_indented_text() {
        let Reply::Lines(lines) = reply("X", "<subcommand>", &[("A <n>".into(), "Does A.")]) else {
            panic!("not lines");
        };
        assert_eq!(
            lines,
            [
                "X <subcommand>. Subcommands are:",
                "A <n>",
                "    Does A.",
                "HELP",
                "    Print this help."
            ]
        );
        assert!(is_help(b"help") && !is_help(b"HELPS"));
    }
}
