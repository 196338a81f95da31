//! Hot keys (RL.HOTKEYS) through a real server: the keys with the most
//! decisions over every decision command, with or without named policies,
//! their rates on the limiter clock, on by default.

mod common;
use common::named::ok;
use common::*;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

/// `[key, per second, error per second]` rows.
fn hot(c: &mut redis::Connection, count: &str) -> Vec<(String, u64, u64)> {
    cmd(&["RL.HOTKEYS", "COUNT", count]).query(c).unwrap()
}

/// Ranks 1..=n drawn with probability proportional to rank^-s, seeded.
fn zipf(n: usize, s: f64, draws: usize, seed: u64) -> Vec<usize> {
    let mut total = 0.0;
    let cumulative: Vec<f64> = (1..=n)
        .map(|rank| {
            total += (rank as f64).powf(-s);
            total
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..draws)
        .map(|_| {
            let u = rng.gen::<f64>() * total;
            cumulative.partition_point(|&c| c < u).min(n - 1) + 1
        })
        .collect()
}

/// One decision on `key` by one of the decision commands (the same
/// command for a key every time, so that its state keeps its kind), all
/// of them admitting for the whole run but `RL.ACQUIRE`'s.
fn decision(pipe: &mut redis::Pipeline, key: &str, policies: bool) {
    let commands = if policies { 10 } else { 9 };
    let which = key.bytes().map(usize::from).sum::<usize>() % commands;
    let args: Vec<&str> = match which {
        0 => vec!["RL.GCRA", key, "1000000", "1h"],
        1 => vec!["RL.BUCKET", key, "1000000", "1000000", "1h"],
        2 => vec!["RL.SLIDING", key, "1000000", "1h", "APPROX"],
        3 => vec!["RL.FIXED", key, "1000000", "1h"],
        4 => vec![
            "RL.SKETCH",
            key,
            "item",
            "1000000",
            "1h",
            "WIDTH",
            "16",
            "DEPTH",
            "1",
        ],
        5 => vec!["RL.ACQUIRE", key, "5", "1h"],
        6 => vec!["RL.ALL", "1", key, "GCRA", "1000000", "1h"],
        7 => vec!["RL.SHARE", "1", key, "1000000", "1h"],
        8 => vec!["CL.THROTTLE", key, "1000000", "1000000", "3600"],
        _ => vec!["RL.CHECK", key, "big"],
    };
    pipe.cmd(args[0]).arg(&args[1..]).ignore();
}

/// Sends `keys` as decisions, 1,000 a pipeline, the clock moved `step_us`
/// after each pipeline.
fn send(c: &mut redis::Connection, keys: &[String], step_us: u64, policies: bool) {
    for chunk in keys.chunks(1_000) {
        let mut pipe = redis::pipe();
        for k in chunk {
            decision(&mut pipe, k, policies);
        }
        pipe.query::<()>(c).unwrap();
        advance(c, step_us);
    }
}

/// The accuracy targets through a real server, on the manual clock: on a
/// Zipf stream (s = 1.1) over 100,000 keys, 300,000 decisions a second,
/// the listed top 10 are the true top 10 (rates within their error); a
/// key that starts taking 1 % of the decisions is listed (among 20) 1 s
/// after its first, and its rate is then within its error of the truth.
fn accuracy(policies: bool) {
    let s = if policies {
        Server::with(Config::default().with_policies())
    } else {
        Server::start()
    };
    let mut c = s.conn();
    clock_set(&mut c, T0);
    if policies {
        ok(
            &mut c,
            &["RL.POLICY", "SET", "big", "GCRA", "1000000", "1h"],
        );
    }
    // On by default.
    let info = common::topology::info_field(&mut c, "ratelimit", "ratelimit_hot_keys").unwrap();
    assert_eq!(info, "counters=320");
    let stream: Vec<String> = zipf(100_000, 1.1, 300_000, 5)
        .into_iter()
        .map(|r| format!("user:{r}"))
        .collect();
    let mut truth = HashMap::<&str, u64>::new();
    for k in &stream {
        *truth.entry(k).or_default() += 1;
    }
    // 300 pipelines 3,330 µs apart: the second from T0 to T0 + 999 ms.
    send(&mut c, &stream, 3_330, policies);
    let mut exact: Vec<(&str, u64)> = truth.iter().map(|(k, n)| (*k, *n)).collect();
    exact.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let listed = hot(&mut c, "10");
    let mut keys: Vec<&str> = listed.iter().map(|k| k.0.as_str()).collect();
    let mut top: Vec<&str> = exact[..10].iter().map(|k| k.0).collect();
    keys.sort_unstable();
    top.sort_unstable();
    assert_eq!(keys, top, "{listed:?}");
    // The window: this period so far (999 ms) and the one before (1 s).
    for (key, per_second, error) in &listed {
        let rate = truth[key.as_str()] * 1_000_000 / 1_999_000;
        assert!(rate.abs_diff(*per_second) <= error + 1, "{key} {rate}");
    }
    // The next second: the same rate of decisions, one in 100 on a new key.
    let mut next: Vec<String> = zipf(100_000, 1.1, 300_000, 6)
        .into_iter()
        .map(|r| format!("user:{r}"))
        .collect();
    for (i, k) in next.iter_mut().enumerate() {
        if i % 100 == 0 {
            *k = "new:hot".to_string();
        }
    }
    send(&mut c, &next, 3_330, policies);
    // 3,000 decisions of it within 999 ms, over a window of 1.998 s.
    let listed = hot(&mut c, "20");
    let found = listed.iter().find(|k| k.0 == "new:hot");
    let (_, per_second, error) = found.unwrap_or_else(|| panic!("{listed:?}"));
    assert!(1_501u64.abs_diff(*per_second) <= error + 1, "{listed:?}");
}

#[test]
fn the_top_ten_of_a_zipf_stream_are_listed_and_a_new_hot_key_within_a_second() {
    accuracy(false);
}

#[test]
fn with_named_policies_the_top_ten_and_a_new_hot_key_are_listed_alike() {
    accuracy(true);
}

#[test]
fn every_decision_command_counts_its_keys_and_rates_start_right() {
    let s = Server::with(Config::default().with_policies());
    let mut c = s.conn();
    clock_set(&mut c, T0);
    ok(
        &mut c,
        &["CONFIG", "SET", "ratelimit.hot-key-counters", "80"],
    );
    ok(&mut c, &["RL.POLICY", "SET", "api", "FIXED", "5", "1m"]);
    for _ in 0..40 {
        decide(&mut c, &["RL.CHECK", "checked", "api"]);
        let _: Vec<i64> = cmd(&["CL.THROTTLE", "cell", "9", "10", "60"])
            .query(&mut c)
            .unwrap();
        combined(
            &mut c,
            &[
                "RL.ALL", "2", "a", "b", "FIXED", "5", "1m", "FIXED", "5", "1m",
            ],
        );
        decide(&mut c, &["RL.SKETCH", "sketch", "item", "5", "1m"]);
        // A look is not a decision.
        decide(&mut c, &["RL.PEEK", "peeked", "FIXED", "5", "1m"]);
    }
    // The clock stood still at a whole second: 40 decisions are 40 a
    // second over the window of at least 1 s (not 40 over no time).
    let listed = hot(&mut c, "100");
    let keys: Vec<&str> = listed.iter().map(|k| k.0.as_str()).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        ["a", "b", "cell", "checked", "sketch"],
        "{listed:?}"
    );
    for (key, per_second, error) in &listed {
        assert!(
            per_second.abs_diff(40) <= *error,
            "{key} {per_second} {error}"
        );
    }
    // Half a second on, the same decisions over 1.5 s.
    advance(&mut c, SECOND / 2);
    for (key, per_second, error) in &hot(&mut c, "100") {
        assert!(per_second.abs_diff(26) <= error + 1, "{key} {per_second}");
    }
    let info = common::topology::info_field(&mut c, "ratelimit", "ratelimit_hot_keys").unwrap();
    assert_eq!(info, "counters=80");
    // Two periods on, all cooled off; setting 0 turns the count off.
    advance(&mut c, 2 * SECOND);
    assert!(hot(&mut c, "10").is_empty());
    ok(
        &mut c,
        &["CONFIG", "SET", "ratelimit.hot-key-counters", "0"],
    );
    for _ in 0..10 {
        decide(&mut c, &["RL.FIXED", "once", "5", "1m"]);
    }
    assert!(hot(&mut c, "10").is_empty());
}
