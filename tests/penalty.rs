//! The penalty box on a real server, with the manual clock: `BLOCK
//! duration` and `COUNTDENIALS maxdebt` on every algorithm and every
//! command that decides a rate, what RL.PEEK, REFUND, DEL and a changed
//! limit do to a block, its effects on a replica and in the AOF, the
//! errors, RL.PENALIZED and INFO. Periods are hours, so that no key expires
//! on the server's real clock while a test runs.

mod common;
use common::topology::{info_field, primary_with_aof_and_replica, wait_replicas};
use common::*;
use redis::Connection;

const MIN_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;
const MINUTE: u64 = 60 * SECOND;

/// Each rate command, two an hour, `{k}` where the key goes.
const RATES: &[&[&str]] = &[
    &["RL.GCRA", "{k}", "2", "1h"],
    &["RL.BUCKET", "{k}", "2", "2", "1h"],
    &["RL.SLIDING", "{k}", "2", "1h", "EXACT"],
    &["RL.SLIDING", "{k}", "2", "1h", "APPROX"],
    &["RL.SLIDING", "{k}", "2", "1h", "BUCKETS", "4"],
    &["RL.FIXED", "{k}", "2", "1h"],
    &["RL.FIXED", "{k}", "2", "1h", "ALIGNED"],
    &["RL.ALL", "1", "{k}", "GCRA", "2", "1h"],
    &["RL.ALL", "1", "{k}", "SLIDING", "2", "1h", "BUCKETS", "4"],
    &["RL.CHECK", "{k}", "two"],
];

/// `base` on `key`, with `extra` after it.
fn on(base: &[&str], key: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = base.iter().map(|w| w.replace("{k}", key)).collect();
    v.extend(extra.iter().map(|w| w.to_string()));
    v
}

/// The five fields of a decision (RL.ALL's: its one limit's).
fn ask(c: &mut Connection, args: &[String]) -> [i64; 5] {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if args[0] == "RL.ALL" {
        let (allowed, _, retry, per) = combined(c, &args);
        let mut d = per[0];
        assert_eq!((d[0], d[3].max(retry)), (allowed, retry), "{args:?}");
        d[3] = retry;
        return d;
    }
    decide(c, &args)
}

/// The policy of `base` as RL.PEEK takes it.
fn look<'a>(base: &[&'a str]) -> Vec<&'a str> {
    match base[0] {
        "RL.ALL" => base[3..].to_vec(),
        "RL.CHECK" => vec!["POLICY", base[2]],
        command => {
            let mut v = vec![command.trim_start_matches("RL.")];
            v.extend_from_slice(&base[2..]);
            v
        }
    }
}

fn error(c: &mut Connection, args: &[&str]) -> String {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    error_of(c, &args).1
}

fn info_u64(c: &mut Connection, name: &str) -> u64 {
    info_field(c, "ratelimit", name)
        .unwrap_or_else(|| panic!("no {name}"))
        .parse()
        .unwrap()
}

/// RL.PENALIZED's entries.
fn penalized(c: &mut Connection, extra: &[&str]) -> Vec<(String, i64, String)> {
    let mut args = vec!["RL.PENALIZED"];
    args.extend_from_slice(extra);
    redis::from_redis_value(call(c, &args).unwrap()).unwrap()
}

fn server() -> Server {
    let s = Server::with(Config::default().with_policies());
    let mut c = s.conn();
    call(&mut c, &["RL.POLICY", "SET", "two", "GCRA", "2", "1h"]).unwrap();
    s
}

#[test]
fn a_block_holds_every_algorithm_for_its_duration_from_the_denial() {
    let s = server();
    let mut c = s.conn();
    for (i, base) in RATES.iter().enumerate() {
        let key = format!("b{i}");
        clock_set(&mut c, T0);
        let block = on(base, &key, &["BLOCK", "2h"]);
        assert_eq!(ask(&mut c, &block)[0], 1, "{base:?}");
        assert_eq!(ask(&mut c, &block)[0], 1, "{base:?}");
        let blocks = info_u64(&mut c, "ratelimit_penalty_blocks");
        // Denied: the block begins; its end is the wait.
        assert_eq!(
            ask(&mut c, &block),
            [0, 2, 0, 2 * HOUR_MS, 2 * HOUR_MS],
            "{base:?}"
        );
        assert_eq!(info_u64(&mut c, "ratelimit_penalty_blocks"), blocks + 1);
        let ttl = pttl(&mut c, &key);
        assert!(ttl > 2 * HOUR_MS - MIN_MS && ttl <= 2 * HOUR_MS, "{ttl}");
        assert_eq!(
            penalized(&mut c, &["COUNT", "1"]),
            [(key.clone(), 2 * HOUR_MS, "block".to_string())]
        );
        // Requests during it, with the option or not, do not extend it and
        // write nothing; a look sees it.
        let held = info_u64(&mut c, "ratelimit_penalty_denials");
        let before = get_bytes(&mut c, &key);
        advance(&mut c, 90 * MINUTE);
        for args in [block.clone(), on(base, &key, &[])] {
            assert_eq!(ask(&mut c, &args)[..4], [0, 2, 0, 30 * MIN_MS], "{base:?}");
        }
        assert_eq!(get_bytes(&mut c, &key), before, "{base:?}");
        assert_eq!(info_u64(&mut c, "ratelimit_penalty_denials"), held + 2);
        let mut peek = vec!["RL.PEEK".to_string(), key.clone()];
        peek.extend(look(base).iter().map(|w| w.to_string()));
        assert_eq!(ask(&mut c, &peek)[..4], [0, 2, 0, 30 * MIN_MS], "{peek:?}");
        // At its end the limit answers alone again (its hour has passed).
        advance(&mut c, 30 * MINUTE - 1);
        assert_eq!(ask(&mut c, &block)[3], 1, "1 µs before its end");
        advance(&mut c, 1);
        assert_eq!(ask(&mut c, &block)[0], 1, "{base:?}");
        assert!(penalized(&mut c, &[]).iter().all(|e| e.0 != key));
    }
}

#[test]
fn a_limit_s_own_longer_wait_is_the_reply_s_and_a_short_block_ends_first() {
    let s = server();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let block = ["RL.GCRA", "k", "1", "1h", "BLOCK", "1m"];
    assert_eq!(decide(&mut c, &block)[0], 1);
    assert_eq!(decide(&mut c, &block), [0, 1, 0, HOUR_MS, HOUR_MS]);
    advance(&mut c, MINUTE);
    // The block has ended: the limit denies, and a new block begins.
    assert_eq!(decide(&mut c, &block)[..4], [0, 1, 0, 59 * MIN_MS]);
    assert_eq!(penalized(&mut c, &[])[0].1, MIN_MS);
}

#[test]
fn counted_denials_dig_deeper_up_to_maxdebt_on_every_algorithm_that_holds_a_debt() {
    let s = server();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Two an hour: 30 min a unit. Two admitted leave a wait of 30 min;
    // each denial charged adds 30 min, until the wait would pass 2 h.
    let count = ["RL.GCRA", "g", "2", "1h", "COUNTDENIALS", "2h"];
    decide(&mut c, &count);
    decide(&mut c, &count);
    let waits: Vec<i64> = (0..5).map(|_| decide(&mut c, &count)[3]).collect();
    assert_eq!(
        waits,
        [
            60 * MIN_MS,
            90 * MIN_MS,
            120 * MIN_MS,
            120 * MIN_MS,
            120 * MIN_MS
        ]
    );
    assert_eq!(info_u64(&mut c, "ratelimit_penalty_charges"), 3);
    assert_eq!(
        penalized(&mut c, &[])[0],
        ("g".into(), 2 * HOUR_MS, "count".into())
    );
    // A client that stops is admitted at the bound.
    advance(&mut c, 2 * 60 * MINUTE - 1);
    assert_eq!(decide(&mut c, &["RL.GCRA", "g", "2", "1h"])[0], 0);
    advance(&mut c, 1);
    assert_eq!(decide(&mut c, &["RL.GCRA", "g", "2", "1h"])[0], 1);
    // Every other algorithm that holds a debt: no wait beyond the bound
    // or the limit's own, and admitted again once it has passed.
    for (i, base) in RATES.iter().enumerate() {
        if base.contains(&"EXACT") {
            continue;
        }
        let key = format!("c{i}");
        clock_set(&mut c, T0 + 10 * 3_600 * SECOND);
        let count = on(base, &key, &["COUNTDENIALS", "90m"]);
        let mut last = 0;
        for _ in 0..6 {
            let d = ask(&mut c, &count);
            assert!(d[3] <= 90 * MIN_MS, "{base:?}: {d:?}");
            last = d[3];
        }
        advance(&mut c, last as u64 * 1_000);
        assert_eq!(ask(&mut c, &on(base, &key, &[]))[0], 1, "{base:?}");
    }
}

#[test]
fn refund_gives_back_during_a_block_del_ends_it_and_a_changed_limit_keeps_it() {
    let s = server();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let block = ["RL.GCRA", "k", "2", "1h", "BLOCK", "2h"];
    for _ in 0..3 {
        decide(&mut c, &block);
    }
    // REFUND: given back to the limit (its fields say so), the block stays.
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "k", "2", "1h", "REFUND", "2"])[..3],
        [1, 2, 2]
    );
    assert_eq!(decide(&mut c, &block)[..4], [0, 2, 0, 2 * HOUR_MS]);
    // Another limit on the key: the block holds.
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "k", "100", "1h"])[..4],
        [0, 100, 0, 2 * HOUR_MS]
    );
    // DEL ends it: the key starts afresh.
    call(&mut c, &["DEL", "k"]).unwrap();
    assert_eq!(decide(&mut c, &block), [1, 2, 1, -1, 30 * MIN_MS]);
}

#[test]
fn a_named_policy_s_penalty_applies_to_its_plain_calls() {
    let s = server();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    call(
        &mut c,
        &[
            "RL.POLICY",
            "SET",
            "boxed",
            "GCRA",
            "1",
            "1h",
            "BLOCK",
            "120m",
        ],
    )
    .unwrap();
    let def: String =
        redis::from_redis_value(call(&mut c, &["RL.POLICY", "GET", "boxed"]).unwrap()).unwrap();
    assert_eq!(def, "GCRA 1 1h BLOCK 2h");
    assert_eq!(decide(&mut c, &["RL.CHECK", "k", "boxed"])[0], 1);
    assert_eq!(decide(&mut c, &["RL.CHECK", "k", "boxed"])[3], 2 * HOUR_MS);
    assert_eq!(
        decide(&mut c, &["RL.PEEK", "k", "POLICY", "boxed"])[3],
        2 * HOUR_MS
    );
    // In RL.ALL too.
    let (allowed, _, retry, _) = combined(&mut c, &["RL.ALL", "1", "j", "POLICY", "boxed"]);
    assert_eq!((allowed, retry), (1, -1));
    let (allowed, _, retry, _) = combined(&mut c, &["RL.ALL", "1", "j", "POLICY", "boxed"]);
    assert_eq!((allowed, retry), (0, 2 * HOUR_MS));
    // The definitions it refuses, as the commands refuse the option.
    for (words, message) in [
        (
            &["SLIDING", "1", "1h", "COUNTDENIALS", "1m"][..],
            "ERR syntax error: COUNTDENIALS cannot be combined with RL.SLIDING EXACT",
        ),
        (
            &["CONCURRENCY", "1", "1h", "BLOCK", "1m"],
            "ERR syntax error: BLOCK cannot be combined with CONCURRENCY",
        ),
        (
            &["GCRA", "1", "1h", "BLOCK", "1m", "COUNTDENIALS", "1m"],
            "ERR syntax error: BLOCK and COUNTDENIALS are mutually exclusive",
        ),
        (
            &["GCRA", "1", "1h", "BLOCK"],
            "ERR syntax error: BLOCK needs a value",
        ),
    ] {
        let mut args = vec!["RL.POLICY", "SET", "bad"];
        args.extend_from_slice(words);
        assert_eq!(error(&mut c, &args), message, "{words:?}");
    }
}

#[test]
fn bad_penalty_options_are_refused_naming_the_argument_and_change_nothing() {
    let s = server();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    decide(&mut c, &["RL.GCRA", "k", "1", "1h"]);
    let before = get_bytes(&mut c, "k");
    let g = |extra: &[&'static str]| {
        let mut v = vec!["RL.GCRA", "k", "1", "1h"];
        v.extend_from_slice(extra);
        v
    };
    for (args, message) in [
        (
            g(&["BLOCK", "1m", "COUNTDENIALS", "1m"]),
            "ERR syntax error: BLOCK and COUNTDENIALS are mutually exclusive",
        ),
        (
            g(&["BLOCK", "1m", "BLOCK", "2m"]),
            "ERR syntax error: BLOCK given more than once",
        ),
        (g(&["BLOCK"]), "ERR syntax error: BLOCK needs a value"),
        (
            g(&["BLOCK", "0"]),
            "ERR BLOCK must be a positive integer with an optional unit ms, s, m, h or d",
        ),
        (
            g(&["COUNTDENIALS", "x"]),
            "ERR COUNTDENIALS must be a positive integer with an optional unit ms, s, m, h or d",
        ),
        (
            g(&["BLOCK", "1m", "WAIT", "1s"]),
            "ERR syntax error: BLOCK cannot be combined with WAIT",
        ),
        (
            g(&["COUNTDENIALS", "1m", "RESERVE", "1s"]),
            "ERR syntax error: COUNTDENIALS cannot be combined with RESERVE",
        ),
        (
            g(&["BLOCK", "1m", "COST", "2", "FORCE"]),
            "ERR syntax error: BLOCK cannot be combined with FORCE",
        ),
        (
            g(&["BLOCK", "1m", "REFUND", "1"]),
            "ERR syntax error: BLOCK cannot be combined with REFUND",
        ),
        (
            vec!["RL.SLIDING", "k2", "1", "1h", "COUNTDENIALS", "1m"],
            "ERR syntax error: COUNTDENIALS cannot be combined with RL.SLIDING EXACT",
        ),
        (
            vec!["RL.SKETCH", "k3", "i", "1", "1h", "BLOCK", "1m"],
            "ERR syntax error: BLOCK cannot be combined with RL.SKETCH",
        ),
        (
            vec!["RL.ACQUIRE", "k4", "1", "1h", "BLOCK", "1m"],
            "ERR syntax error: BLOCK cannot be combined with RL.ACQUIRE",
        ),
        (
            vec![
                "RL.ALL",
                "2",
                "k",
                "k5",
                "GCRA",
                "1",
                "1h",
                "CONCURRENCY",
                "1",
                "1h",
                "BLOCK",
                "1m",
            ],
            "ERR syntax error: BLOCK cannot be combined with CONCURRENCY",
        ),
        (
            vec!["RL.SHARE", "1", "k6", "1", "1h", "BLOCK", "1m"],
            "ERR syntax error: BLOCK cannot be combined with RL.SHARE",
        ),
        (
            vec!["CL.THROTTLE", "k7", "1", "1", "3600", "1", "BLOCK", "1m"],
            "ERR wrong number of arguments for 'cl.throttle' command",
        ),
        (
            vec!["RL.PENALIZED", "COUNT", "0"],
            "ERR COUNT must be an integer from 1 to 1000",
        ),
        (
            vec!["RL.PENALIZED", "LIMIT", "1"],
            "ERR syntax error: unknown option 'LIMIT'",
        ),
    ] {
        assert_eq!(error(&mut c, &args), message, "{args:?}");
    }
    assert_eq!(get_bytes(&mut c, "k"), before);
    for key in ["k2", "k3", "k4", "k5", "k6", "k7"] {
        assert_eq!(get_bytes(&mut c, key), None, "{key}");
    }
    assert_eq!(info_u64(&mut c, "ratelimit_penalty_blocks"), 0);
}

#[test]
fn a_block_and_a_charged_denial_reach_the_replica_and_the_aof_as_their_effects() {
    let (primary, replica) = primary_with_aof_and_replica();
    let (mut p, mut r) = (primary.conn(), replica.conn());
    clock_set(&mut p, T0);
    decide(&mut p, &["RL.GCRA", "b", "1", "1h", "BLOCK", "2h"]);
    decide(&mut p, &["RL.GCRA", "b", "1", "1h", "BLOCK", "2h"]);
    // Denied by the block: nothing more written.
    decide(&mut p, &["RL.GCRA", "b", "1", "1h", "BLOCK", "2h"]);
    decide(&mut p, &["RL.FIXED", "f", "1", "1h", "COUNTDENIALS", "2h"]);
    decide(&mut p, &["RL.FIXED", "f", "1", "1h", "COUNTDENIALS", "2h"]);
    call(&mut p, &["SET", "marker", "1"]).unwrap();
    wait_replicas(&mut p, 1);
    for key in ["b", "f"] {
        assert_eq!(get_bytes(&mut r, key), get_bytes(&mut p, key), "{key}");
    }
    let b = get_bytes(&mut p, "b").unwrap();
    assert_eq!(b[0], 0xB3, "the block's header");
    // The replica answers the block as the primary does.
    clock_set(&mut r, T0 + 3_600 * SECOND);
    assert_eq!(
        decide(&mut r, &["RL.PEEK", "b", "GCRA", "1", "1h"])[3],
        HOUR_MS
    );
    let text = aof_through(&primary, "marker");
    assert!(
        !text.contains("BLOCK") && !text.contains("COUNTDENIALS"),
        "{text}"
    );
    // b: the admission and the block; f: the admission and the charge.
    assert_eq!(text.matches("PXAT").count(), 4, "{text}");
    // Restarted from its AOF, the server holds the block.
    let mut again = primary.restart();
    let mut a = again.conn();
    clock_set(&mut a, T0 + 3_600 * SECOND);
    assert_eq!(decide(&mut a, &["RL.GCRA", "b", "1", "1h"])[3], HOUR_MS);
    again.stop();
}

#[test]
fn rl_penalized_lists_the_most_recent_blocks_in_memory_the_operator_bounds() {
    let s = server();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    call(&mut c, &["CONFIG", "SET", "ratelimit.penalized-keys", "10"]).unwrap();
    // 1,000 times the listing's bound: each key blocked once, pipelined.
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        let key = format!("p{i}");
        for _ in 0..2 {
            pipe.cmd("RL.GCRA")
                .arg(&key)
                .arg(1)
                .arg("1h")
                .arg("BLOCK")
                .arg(format!("{}m", 10 + i % 50));
        }
    }
    let _: Vec<redis::Value> = pipe.query(&mut c).unwrap();
    assert_eq!(info_u64(&mut c, "ratelimit_penalty_blocks"), 10_000);
    assert!(info_u64(&mut c, "ratelimit_penalty_listed") <= 10);
    let listed = penalized(&mut c, &["COUNT", "1000"]);
    let keys: Vec<&str> = listed.iter().map(|e| e.0.as_str()).collect();
    let expected: Vec<String> = (9_990..10_000).rev().map(|i| format!("p{i}")).collect();
    assert_eq!(keys, expected, "the most recent first");
    assert_eq!(penalized(&mut c, &[]).len(), 10, "COUNT 10 by default");
    assert_eq!(penalized(&mut c, &["COUNT", "3"]).len(), 3);
    // Ended blocks are not listed: p9999's was 59 min, p9990's 50 min.
    advance(&mut c, 55 * MINUTE);
    let left: Vec<(String, i64)> = penalized(&mut c, &[])
        .into_iter()
        .map(|e| (e.0, e.1))
        .collect();
    assert_eq!(
        left,
        (9_996..10_000)
            .rev()
            .map(|i| (format!("p{i}"), ((i % 50) + 10 - 55) as i64 * MIN_MS))
            .collect::<Vec<_>>()
    );
    // 0: nothing listed.
    call(&mut c, &["CONFIG", "SET", "ratelimit.penalized-keys", "0"]).unwrap();
    decide(&mut c, &["RL.GCRA", "z", "1", "1h", "BLOCK", "1h"]);
    decide(&mut c, &["RL.GCRA", "z", "1", "1h", "BLOCK", "1h"]);
    assert!(penalized(&mut c, &[]).iter().all(|e| e.0 != "z"));
}

#[test]
fn a_waiter_on_a_blocked_key_is_admitted_when_the_block_ends() {
    use common::blocking::{await_waiting, recv5, send, waiting};
    let s = server();
    let (mut c, mut w) = (s.conn(), s.conn());
    clock_set(&mut c, T0);
    decide(&mut c, &["RL.GCRA", "k", "1", "1m", "BLOCK", "2h"]);
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "k", "1", "1m", "BLOCK", "2h"])[3],
        2 * HOUR_MS
    );
    // WAIT takes no penalty; a waiter without it waits the block out.
    send(&mut w, &["RL.GCRA", "k", "1", "1m", "WAIT", "3h"]);
    await_waiting(&mut c, 1);
    advance(&mut c, 2 * 3_600 * SECOND - 1);
    assert_eq!(waiting(&mut c), 1, "1 µs before the block's end");
    advance(&mut c, 1);
    assert_eq!(recv5(&mut w), [1, 1, 0, -1, MIN_MS]);
    // Its admission wrote the limit's state alone (the ended block's
    // header dropped with the whole value).
    assert_eq!(get_bytes(&mut c, "k").unwrap()[0], 0xA1);
    assert_eq!(
        decide(&mut c, &["RL.GCRA", "k", "1", "1m"])[..4],
        [0, 1, 0, MIN_MS]
    );
}
