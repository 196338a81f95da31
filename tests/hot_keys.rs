//! Hot keys (RL.HOTKEYS) through a real server: the keys with the most
//! decisions over every decision command, with or without named policies,
//! their rates on the limiter clock, off by default.

mod common;
use common::named::ok;
use common::*;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

/// `[key, per second, error per second]` rows.
fn hot(c: &mut redis::Connection, count: &str) -> Vec<(String, i64, i64)> {
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

/// Sends `keys` as RL.GCRA decisions, 1,000 a pipeline, the clock moved
/// `step_us` after each pipeline.
fn send(c: &mut redis::Connection, keys: &[String], step_us: u64) {
    for chunk in keys.chunks(1_000) {
        let mut pipe = redis::pipe();
        for k in chunk {
            pipe.cmd("RL.GCRA").arg(k).arg("1000000").arg("1s").ignore();
        }
        pipe.query::<()>(c).unwrap();
        advance(c, step_us);
    }
}

#[test]
fn the_top_ten_of_a_zipf_stream_are_listed_and_a_new_hot_key_within_a_second() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Off by default: nothing counted.
    send(&mut c, &["a".to_string()], 0);
    assert!(hot(&mut c, "10").is_empty());
    ok(
        &mut c,
        &["CONFIG", "SET", "ratelimit.hot-key-counters", "320"],
    );
    // 40,000 decisions over 10,000 keys (Zipf s = 1.1) in 1 s.
    let stream: Vec<String> = zipf(10_000, 1.1, 40_000, 5)
        .into_iter()
        .map(|r| format!("user:{r}"))
        .collect();
    let mut truth = HashMap::<&str, i64>::new();
    for k in &stream {
        *truth.entry(k).or_default() += 1;
    }
    send(&mut c, &stream, 25_000);
    let mut exact: Vec<(&str, i64)> = truth.iter().map(|(k, n)| (*k, *n)).collect();
    exact.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let listed = hot(&mut c, "10");
    assert_eq!(listed.len(), 10);
    let tenth = exact[9].1;
    for (key, per_second, error) in &listed {
        // A true top-ten key (ties with the tenth allowed), its rate over
        // the second counted within the error bound.
        let count = truth[key.as_str()];
        assert!(count >= tenth, "{key}: {count} below {tenth}");
        assert!(
            *per_second >= count && per_second - error <= count,
            "{key} {count}"
        );
    }
    // A new key takes 1 % of the decisions: listed within 1 s of its
    // first, at every moment checked after that.
    let mut next: Vec<String> = zipf(10_000, 1.1, 40_000, 6)
        .into_iter()
        .map(|r| format!("user:{r}"))
        .collect();
    for (i, k) in next.iter_mut().enumerate() {
        if i % 100 == 0 {
            *k = "new:hot".to_string();
        }
    }
    send(&mut c, &next, 25_000);
    let listed = hot(&mut c, "20");
    let found = listed.iter().find(|k| k.0 == "new:hot");
    let (_, per_second, error) = found.unwrap_or_else(|| panic!("{listed:?}"));
    // 400 decisions in the last second, as a rate over the two periods.
    assert!(per_second + error >= 200, "{listed:?}");
}

#[test]
fn every_decision_command_counts_its_keys() {
    let s = Server::with(Config::default().with_policies());
    let mut c = s.conn();
    clock_set(&mut c, T0);
    ok(
        &mut c,
        &["CONFIG", "SET", "ratelimit.hot-key-counters", "80"],
    );
    ok(&mut c, &["RL.POLICY", "SET", "api", "FIXED", "5", "1m"]);
    for _ in 0..3 {
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
    }
    decide(&mut c, &["RL.FIXED", "once", "5", "1m"]);
    // A look is not a decision.
    decide(&mut c, &["RL.PEEK", "peeked", "FIXED", "5", "1m"]);
    advance(&mut c, SECOND / 2);
    let listed = hot(&mut c, "100");
    let keys: Vec<(&str, i64)> = listed.iter().map(|k| (k.0.as_str(), k.1)).collect();
    // 3 decisions in 0.5 s: 6 a second.
    assert_eq!(
        keys,
        [
            ("a", 6),
            ("b", 6),
            ("cell", 6),
            ("checked", 6),
            ("sketch", 6),
            ("once", 2)
        ]
    );
    let info = common::topology::info_field(&mut c, "ratelimit", "ratelimit_hot_keys").unwrap();
    assert_eq!(info, "counters=80");
    // Two periods on, all cooled off; setting 0 turns the count off.
    advance(&mut c, 2 * SECOND);
    assert!(hot(&mut c, "10").is_empty());
    ok(
        &mut c,
        &["CONFIG", "SET", "ratelimit.hot-key-counters", "0"],
    );
    decide(&mut c, &["RL.FIXED", "once", "5", "1m"]);
    assert!(hot(&mut c, "10").is_empty());
}
