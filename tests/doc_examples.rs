//! Every redis-cli example of docs/commands.md and README.md (a ```text
//! block of `127.0.0.1:6379> COMMAND` or `$ redis-cli COMMAND` lines, each
//! followed by its reply) run against
//! a real server: a fresh server per block, loaded with `clock manual` (and
//! `policies on` where the block uses named policies), its commands sent in
//! order (in one transaction where the server takes them all in one) and
//! each reply compared with the one written, formatted as
//! redis-cli prints it (whitespace aside). A block that cannot run this way
//! is marked `<!-- not run: reason -->` on the line before it, and listed
//! in [`NOT_RUN`].

mod common;
mod hostile;

use common::Server;
use hostile::{Raw, Reply};

const PROMPTS: [&str; 2] = ["127.0.0.1:6379> ", "$ redis-cli "];
/// The instant the examples are written at (2026-01-01 00:00 UTC); a README
/// block that does not set the clock runs at it.
const INSTANT: &str = "1767225600000000";
const MARK: &str = "<!-- not run: ";

/// The blocks of docs/commands.md that are not run, and why.
const NOT_RUN: &[&str] = &[
    "a WAIT that blocks until a second client's clock move",
    "fair waiting: blocked clients of several flows, without replies",
    "a lease whose id holds the server's run id, and a blocked second client",
];

/// One example block: where it starts, and its commands with their replies.
struct Block {
    line: usize,
    steps: Vec<(Vec<String>, String)>,
}

/// Text after ` #` (a comment) removed.
fn uncomment(line: &str) -> &str {
    match line.find("  #").or_else(|| line.find(" # ")) {
        Some(i) => &line[..i],
        None => line,
    }
    .trim_end()
}

/// The words of a command line; `"..."` quotes one word.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').expect("closing quote");
            out.push(quoted[..end].to_string());
            rest = quoted[end + 1..].trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = rest[end..].trim_start();
        }
    }
    out
}

/// The command of a prompt line.
fn command(line: &str) -> Option<&str> {
    PROMPTS.iter().find_map(|p| line.strip_prefix(p))
}

/// The blocks to run and the reasons of those marked not run.
fn blocks(doc: &str) -> (Vec<Block>, Vec<String>) {
    let lines: Vec<&str> = doc.lines().collect();
    let mut run = Vec::new();
    let mut not_run = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i] != "```text" {
            i += 1;
            continue;
        }
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && lines[i] != "```" {
            body.push(lines[i]);
            i += 1;
        }
        if !body.iter().any(|l| command(l).is_some()) {
            continue; // not a redis-cli session
        }
        let mark = start.checked_sub(1).map(|j| lines[j]).unwrap_or("");
        if let Some(reason) = mark.strip_prefix(MARK) {
            not_run.push(reason.trim_end_matches(" -->").to_string());
            continue;
        }
        let mut steps: Vec<(Vec<String>, String)> = Vec::new();
        for l in body {
            match command(l) {
                Some(cmd) => steps.push((words(uncomment(cmd)), String::new())),
                None => {
                    let (_, reply) = steps.last_mut().expect("a reply before any command");
                    reply.push(' ');
                    reply.push_str(uncomment(l));
                }
            }
        }
        run.push(Block {
            line: start + 1,
            steps,
        });
    }
    (run, not_run)
}

/// A reply as redis-cli prints it.
fn render(reply: &Reply) -> String {
    match reply {
        Reply::Status(s) => s.clone(),
        Reply::Error(e) => format!("(error) {e}"),
        Reply::Int(n) => format!("(integer) {n}"),
        Reply::Bulk(None) | Reply::Array(None) => "(nil)".into(),
        Reply::Bulk(Some(b)) => format!("\"{}\"", b.escape_ascii()),
        Reply::Array(Some(items)) if items.is_empty() => "(empty array)".into(),
        Reply::Array(Some(items)) => items
            .iter()
            .enumerate()
            .map(|(i, r)| format!("{}) {}", i + 1, render(r)))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn normal(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Runs every block of `doc` on a fresh server; the blocks that answered
/// otherwise than written. Without `RL.CLOCK SET` first, a block runs at
/// [`INSTANT`] when `implicit_instant`, and is an error otherwise.
fn run_blocks(run: &[Block], implicit_instant: bool) -> Vec<String> {
    let mut wrong = Vec::new();
    for block in run {
        let named = block.steps.iter().any(|(w, _)| {
            w[0].eq_ignore_ascii_case("RL.POLICY") || w[0].eq_ignore_ascii_case("RL.CHECK")
        });
        let config = common::Config::default();
        let s = Server::with(if named {
            config.with_policies()
        } else {
            config
        });
        let mut c = Raw::connect(s.port);
        if block.steps[0].0[..2] != ["RL.CLOCK", "SET"] {
            assert!(
                implicit_instant,
                "the block at line {} does not set the clock first",
                block.line
            );
            c.ok(&["RL.CLOCK", "SET", INSTANT]);
        }
        let commands: Vec<&[String]> = block.steps.iter().map(|(args, _)| &args[..]).collect();
        for ((args, want), reply) in block.steps.iter().zip(replies(&mut c, &commands)) {
            let got = render(&reply);
            if normal(&got) != normal(want) {
                wrong.push(format!(
                    "line {}: {}\n   got {}\n  want {}",
                    block.line,
                    args.join(" "),
                    normal(&got),
                    normal(want)
                ));
            }
        }
    }
    wrong
}

/// The replies of a block's commands: all in one transaction where the
/// server queues every one of them, one by one otherwise (a command refused
/// as it is queued, such as one with too few arguments, aborts the
/// transaction). The examples use periods of seconds and keys expire on the
/// server's real clock, also under the manual one; during EXEC no key
/// expires between two commands, however slow the machine.
fn replies(c: &mut Raw, commands: &[&[String]]) -> Vec<Reply> {
    c.send(&["MULTI"]);
    for args in commands {
        c.send(args);
    }
    assert_eq!(c.read(), Reply::Status("OK".into()), "MULTI");
    let mut queued = true;
    for _ in commands {
        queued &= c.read() == Reply::Status("QUEUED".into());
    }
    if !queued {
        assert_eq!(c.call(&["DISCARD"]), Reply::Status("OK".into()));
        return commands.iter().map(|args| c.call(args)).collect();
    }
    match c.call(&["EXEC"]) {
        Reply::Array(Some(replies)) => replies,
        other => panic!("EXEC: {other:?}"),
    }
}

fn read(file: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .expect(file)
}

#[test]
fn every_example_of_the_command_reference_answers_as_written() {
    let (run, not_run) = blocks(&read("docs/commands.md"));
    assert_eq!(not_run, NOT_RUN, "blocks marked not run");
    assert!(run.len() >= 10, "only {} blocks", run.len());
    let wrong = run_blocks(&run, false);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The README's examples (the first screen's among them) at the examples'
/// instant.
#[test]
fn every_example_of_the_readme_answers_as_written() {
    let (run, not_run) = blocks(&read("README.md"));
    assert_eq!(not_run, ["a WAIT that blocks until the clock moves"]);
    assert!(run.len() >= 2, "only {} blocks", run.len());
    let wrong = run_blocks(&run, true);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
