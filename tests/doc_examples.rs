//! Every redis-cli example of docs/commands.md (a ```text block of
//! `127.0.0.1:6379> COMMAND` lines, each followed by its reply) run against
//! a real server: a fresh server per block, loaded with `clock manual` (and
//! `policies on` where the block uses named policies), each command sent in
//! order and its reply compared with the one written, formatted as
//! redis-cli prints it (whitespace aside). A block that cannot run this way
//! is marked `<!-- not run: reason -->` on the line before it, and listed
//! in [`NOT_RUN`].

mod common;
mod hostile;

use common::Server;
use hostile::{Raw, Reply};

const PROMPT: &str = "127.0.0.1:6379> ";
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
        if !body.iter().any(|l| l.starts_with(PROMPT)) {
            continue; // not a redis-cli session
        }
        let mark = start.checked_sub(1).map(|j| lines[j]).unwrap_or("");
        if let Some(reason) = mark.strip_prefix(MARK) {
            not_run.push(reason.trim_end_matches(" -->").to_string());
            continue;
        }
        let mut steps: Vec<(Vec<String>, String)> = Vec::new();
        for l in body {
            match l.strip_prefix(PROMPT) {
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

#[test]
fn every_example_of_the_command_reference_answers_as_written() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands.md"))
        .expect("docs/commands.md");
    let (run, not_run) = blocks(&doc);
    assert_eq!(not_run, NOT_RUN, "blocks marked not run");
    assert!(run.len() >= 10, "only {} blocks", run.len());
    let mut wrong = Vec::new();
    for block in &run {
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
        assert!(
            block.steps[0].0[..2] == ["RL.CLOCK", "SET"],
            "the block at line {} does not set the clock first",
            block.line
        );
        for (args, want) in &block.steps {
            let got = render(&c.call(args));
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
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
