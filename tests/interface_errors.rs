//! What a user who types a command slightly wrong gets back, against a
//! real server: `HELP` of the commands with subcommands, an unknown
//! subcommand named as one, RL.ALL's `numkeys` error when the count takes
//! a policy for a key, RL.CHECK's `OR` hint, "given more than once" for a
//! repeated option, and `WAIT` in the duration syntax of periods.

mod common;
mod hostile;

use common::blocking::await_waiting;
use common::Server;
use hostile::{Raw, Reply, T0};

fn status_lines(reply: &Reply) -> Vec<String> {
    match reply {
        Reply::Array(Some(items)) => items
            .iter()
            .map(|r| match r {
                Reply::Status(s) => s.clone(),
                other => panic!("a HELP line is a simple string, got {other:?}"),
            })
            .collect(),
        other => panic!("HELP answers an array, got {other:?}"),
    }
}

fn server() -> (Server, Raw) {
    let s = Server::with(common::Config::default().with_policies());
    let mut c = Raw::connect(s.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    (s, c)
}

#[test]
fn help_lists_every_subcommand_as_config_help_does() {
    let (_s, mut c) = server();
    let clock = status_lines(&c.call(&["RL.CLOCK", "help"]));
    assert_eq!(
        clock,
        [
            "RL.CLOCK [<subcommand> [<arg>]]. Subcommands are:",
            "(no subcommand)",
            "    Return the limiter clock in microseconds since the Unix epoch.",
            "SET <microseconds>",
            "    Set the manual clock to <microseconds> since the Unix epoch (needs 'clock manual').",
            "ADVANCE <microseconds>",
            "    Move the manual clock forward by <microseconds> (needs 'clock manual').",
            "HELP",
            "    Print this help.",
        ]
    );
    let policy = status_lines(&c.call(&["RL.POLICY", "HELP"]));
    assert_eq!(
        policy[0],
        "RL.POLICY <subcommand> [<arg> ...]. Subcommands are:"
    );
    let syntax: Vec<&str> = policy[1..]
        .iter()
        .filter(|l| !l.starts_with(' '))
        .map(String::as_str)
        .collect();
    assert_eq!(
        syntax,
        [
            "SET <name> (<policy> [BLOCK <duration> | COUNTDENIALS <maxdebt>] [JITTER] [SHADOW] | SHARE <node> [<node> ...])",
            "GET <name>",
            "DEL <name>",
            "LIST [MATCH <pattern>]",
            "DIGEST",
            "STATS <name>",
            "HELP",
        ]
    );
    // Each syntax line has one line of text under it.
    assert_eq!(policy.len(), 1 + 2 * syntax.len());
    for args in [&["RL.CLOCK", "HELP", "x"][..], &["RL.POLICY", "HELP", "x"]] {
        let got = c.call(args);
        let e = got.error().unwrap_or_default();
        assert!(
            e.starts_with("ERR wrong number of arguments"),
            "{args:?}: {got:?}"
        );
    }
}

#[test]
fn an_unknown_subcommand_is_named_whatever_follows_it() {
    let (_s, mut c) = server();
    let want =
        |w: &str| format!("ERR unknown subcommand '{w}' for RL.CLOCK: try SET, ADVANCE or HELP");
    for args in [
        &["RL.CLOCK", "FOO"][..],
        &["RL.CLOCK", "FOO", "1"],
        &["RL.CLOCK", "FOO", "1", "2"],
        &["RL.CLOCK", "GET"],
    ] {
        assert_eq!(
            c.call(args).error(),
            Some(want(args[1]).as_str()),
            "{args:?}"
        );
    }
    // A known subcommand with the wrong count stays an arity error.
    assert_eq!(
        c.call(&["RL.CLOCK", "SET"]).error(),
        Some("ERR wrong number of arguments for 'rl.clock' command")
    );
}

#[test]
fn rl_all_says_numkeys_when_the_count_swallows_a_policy() {
    let (_s, mut c) = server();
    let numkeys = |max: u64| format!("ERR numkeys must be an integer from 1 to {max}");
    for (args, max) in [
        (&["RL.ALL", "3", "a", "b", "GCRA", "10", "1m"][..], 2),
        (
            &[
                "RL.ALL", "3", "a", "b", "GCRA", "10", "1m", "GCRA", "10", "1m",
            ],
            2,
        ),
        (&["RL.ALL", "2", "a", "POLICY", "p", "DRYRUN"], 1),
    ] {
        assert_eq!(
            c.call(args).error(),
            Some(numkeys(max).as_str()),
            "{args:?}"
        );
    }
    // A key may be named as a policy's keyword where the count says so.
    let all = c.call(&["RL.ALL", "1", "GCRA", "GCRA", "10", "1m"]);
    assert!(
        matches!(&all, Reply::Array(Some(v)) if v[0] == Reply::Int(1)),
        "{all:?}"
    );
    // A count too small still names the word that is no policy.
    assert_eq!(
        c.call(&["RL.ALL", "1", "a", "b", "GCRA", "10", "1m"]).error(),
        Some("ERR syntax error: unknown policy 'b': expected GCRA, BUCKET, SLIDING, FIXED or CONCURRENCY")
    );
}

#[test]
fn rl_check_hints_at_or() {
    let (_s, mut c) = server();
    c.ok(&["RL.POLICY", "SET", "plan:free", "GCRA", "10", "1m"]);
    let hint = "RL.CHECK key name [OR name ...] [options]";
    for args in [
        &["RL.CHECK", "k", "OR", "plan:free"][..],
        &["RL.CHECK", "k", "plan:pro", "OR", "or", "plan:free"],
    ] {
        let want = format!("ERR syntax error: OR must follow a policy name: {hint}");
        assert_eq!(c.call(args).error(), Some(want.as_str()), "{args:?}");
    }
    let want = format!(
        "ERR syntax error: unknown option 'plan:free' (separate policy names with OR): {hint}"
    );
    assert_eq!(
        c.call(&["RL.CHECK", "k", "plan:pro", "plan:free"]).error(),
        Some(want.as_str())
    );
    assert_eq!(
        c.call(&["RL.CHECK", "k", "plan:pro", "OR", "plan:free", "COST", "2"])
            .ints()[0],
        1
    );
}

#[test]
fn an_option_given_twice_is_named() {
    let (_s, mut c) = server();
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "RL.POLICY",
                "SET",
                "p",
                "GCRA",
                "1",
                "1s",
                "SHADOW",
                "SHADOW",
            ],
            "SHADOW",
        ),
        (
            &["RL.GCRA", "k", "1", "1s", "COST", "1", "COST", "1"],
            "COST",
        ),
        (&["RL.GCRA", "k", "1", "1s", "DRYRUN", "dryrun"], "DRYRUN"),
        (
            &["RL.GCRA", "k", "1", "1s", "WAIT", "1s", "WAIT", "1s"],
            "WAIT",
        ),
        (
            &["RL.GCRA", "k", "1", "1s", "BURST", "1", "BURST", "2"],
            "BURST",
        ),
        (
            &["RL.FIXED", "k", "1", "1s", "ALIGNED", "ALIGNED"],
            "ALIGNED",
        ),
        (
            &[
                "RL.ALL", "1", "k", "GCRA", "1", "1s", "COSTS", "1", "COSTS", "1",
            ],
            "COSTS",
        ),
        (&["RL.POLICY", "LIST", "MATCH", "a", "MATCH", "b"], "MATCH"),
    ];
    for (args, option) in cases {
        let want = format!("ERR syntax error: {option} given more than once");
        assert_eq!(c.call(args).error(), Some(want.as_str()), "{args:?}");
    }
}

/// On a key of `RL.GCRA key 1 period` just charged, a waiter for `wait`
/// (as long as the period) waits `period_us`: still waiting 1 µs before,
/// admitted then; a wait 1 ms shorter is denied at once.
fn waits_exactly(c: &mut Raw, s: &Server, key: &str, period: &str, wait: &str, period_us: u64) {
    // Charged and kept without its TTL in one transaction: the key lives
    // a period of wall clock, and expiring it would wake the line early.
    let charged = c.atomically(&[&["RL.GCRA", key, "1", period][..], &["PERSIST", key]]);
    assert_eq!(charged[0].ints()[0], 1);
    let shorter = format!("{}ms", period_us / 1_000 - 1);
    let denied = c.call(&["RL.GCRA", key, "1", period, "WAIT", &shorter]);
    assert_eq!(denied.ints()[0], 0, "WAIT {shorter}");
    let mut waiter = Raw::connect(s.port);
    waiter.send(&["RL.GCRA", key, "1", period, "WAIT", wait]);
    waiter.flush();
    let mut watch = s.conn();
    await_waiting(&mut watch, 1);
    c.ok(&["RL.CLOCK", "ADVANCE", &(period_us - 1).to_string()]);
    await_waiting(&mut watch, 1);
    c.ok(&["RL.CLOCK", "ADVANCE", "1"]);
    assert_eq!(waiter.read().ints()[0], 1, "WAIT {wait}");
    await_waiting(&mut watch, 0);
}

#[test]
fn wait_takes_the_duration_syntax_of_periods() {
    let (s, mut c) = server();
    waits_exactly(&mut c, &s, "w:ms", "500ms", "500ms", 500_000);
    waits_exactly(&mut c, &s, "w:s", "2s", "2s", 2_000_000);
    waits_exactly(&mut c, &s, "w:m", "1m", "1m", 60_000_000);
    // A bare number keeps its documented unit: seconds.
    waits_exactly(&mut c, &s, "w:bare", "2s", "2", 2_000_000);
    for bad in ["0", "500us", "1.5s", "-1", "soon"] {
        let got = c.call(&["RL.GCRA", "w:bad", "1", "1d", "WAIT", bad]);
        let e = got.error().unwrap_or_default();
        assert!(e.starts_with("ERR WAIT "), "WAIT {bad}: {got:?}");
    }
}

/// A load with the default arguments logs nothing at warning level (`#`
/// in Redis's log) from the module or about it: no ACL category the server
/// does not know, no defrag API it lacks.
#[test]
fn a_clean_load_logs_no_warning() {
    let s = Server::with(common::Config::real_clock());
    let mut c = Raw::connect(s.port);
    assert!(c.ping());
    let log = s.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" # "))
        .filter(|l| {
            ["ratelimit", "categor", "defrag", "module", "Module"]
                .iter()
                .any(|w| l.contains(w))
        })
        .collect();
    assert!(warnings.is_empty(), "{}", warnings.join("\n"));
}

/// CLIENT UNBLOCK ends a wait where the server can do that safely, as INFO
/// says; elsewhere it answers 0 and the wait goes on.
#[test]
fn client_unblock_ends_a_wait_where_info_says_it_can() {
    let (s, mut c) = server();
    let info = c.call(&["INFO", "ratelimit"]).bulk().unwrap_or_default();
    let info = String::from_utf8_lossy(&info).into_owned();
    let allowed = info
        .lines()
        .find_map(|l| l.strip_prefix("ratelimit_client_unblock:"))
        .expect("ratelimit_client_unblock in INFO");
    assert!(allowed == "yes" || allowed == "no", "{allowed}");
    assert_eq!(c.call(&["RL.GCRA", "u", "1", "1m"]).ints()[0], 1);
    let mut waiter = Raw::connect(s.port);
    let id = waiter.call(&["CLIENT", "ID"]).int();
    waiter.send(&["RL.GCRA", "u", "1", "1m", "WAIT", "1m"]);
    waiter.flush();
    let mut watch = s.conn();
    await_waiting(&mut watch, 1);
    let unblocked = c.call(&["CLIENT", "UNBLOCK", &id.to_string()]).int();
    assert_eq!(unblocked == 1, allowed == "yes");
    if allowed == "no" {
        // The wait goes on, to its admission.
        c.ok(&["RL.CLOCK", "ADVANCE", "60000000"]);
        assert_eq!(waiter.read().ints()[0], 1);
    } else {
        assert_eq!(waiter.read().ints()[0], 0);
    }
    await_waiting(&mut watch, 0);
}
