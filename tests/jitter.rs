//! `JITTER` on a real server, with the manual clock: a denial's
//! `retry_after_ms` lies in `[true wait, true wait + spread)`, the spread
//! one emission interval per client the key denied recently, each client
//! in an interval of its own; the same
//! requests at the same instants are told the same waits; denials write
//! nothing; `ratelimit.jitter 1` spreads every denial.

mod common;
use common::*;
use redis::Connection;

/// 100 a second, no burst beyond it: an emission interval of 10 ms.
fn gcra<'a>(key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["RL.GCRA", key, "100", "1s"];
    v.extend_from_slice(extra);
    v
}

/// Uses up the key, then denies `n` requests with JITTER at one instant:
/// their `retry_after_ms`, and the true wait.
fn herd(c: &mut Connection, key: &str, n: usize) -> (Vec<i64>, i64) {
    clock_set(c, T0);
    assert_eq!(decide(c, &gcra(key, &["COST", "100"]))[0], 1);
    let truth = decide(c, &gcra(key, &[]))[3];
    let before = get_bytes(c, key);
    let waits = (0..n)
        .map(|_| {
            let d = decide(c, &gcra(key, &["JITTER"]));
            assert_eq!(d[0], 0);
            d[3]
        })
        .collect();
    assert_eq!(get_bytes(c, key), before, "a denial writes nothing");
    (waits, truth)
}

#[test]
fn clients_denied_together_are_spread_over_an_interval_each() {
    let s = Server::start();
    let mut c = s.conn();
    let (waits, truth) = herd(&mut c, "k", 100);
    assert_eq!(truth, 10);
    // The i-th denial (from 0) takes the i-th interval of 10 ms after the
    // true wait (the reply rounds up to the millisecond): one per interval.
    for (i, w) in waits.iter().enumerate() {
        let from = truth + 10 * i as i64;
        assert!(*w >= from && *w <= from + 10, "denial {i}: {w}");
    }
    // Spread out: the last 50 over about a second, no 100 ms holding
    // more than a third of them.
    let late = &waits[50..];
    for start in (0..1_000).step_by(100) {
        let inside = late
            .iter()
            .filter(|w| (start..start + 100).contains(*w))
            .count();
        assert!(
            inside <= 17,
            "{inside} in [{start}, {}): {late:?}",
            start + 100
        );
    }
    // Without JITTER: the true wait.
    assert_eq!(decide(&mut c, &gcra("k", &[]))[3], truth);
}

#[test]
fn the_same_requests_at_the_same_instants_are_told_the_same_waits() {
    let first = {
        let s = Server::start();
        herd(&mut s.conn(), "k", 20).0
    };
    let s = Server::start();
    assert_eq!(herd(&mut s.conn(), "k", 20).0, first);
    // Another key, another draw.
    assert_ne!(herd(&mut s.conn(), "other", 20).0, first);
}

#[test]
fn a_herd_drains_at_the_rate_the_key_admits() {
    let s = Server::start();
    let mut c = s.conn();
    herd(&mut c, "k", 30);
    // 300 ms later, 30 intervals: a lone denial again, spread over one.
    advance(&mut c, 300 * MS);
    let d = decide(&mut c, &gcra("k", &["JITTER"]));
    let truth = decide(&mut c, &gcra("k", &[]))[3];
    assert!(d[3] >= truth && d[3] <= truth + 10, "{d:?} {truth}");
}

#[test]
fn the_configuration_spreads_every_denial() {
    let s = Server::start();
    let mut c = s.conn();
    let set = |c: &mut Connection, v: &str| {
        call(c, &["CONFIG", "SET", "ratelimit.jitter", v]).unwrap();
    };
    set(&mut c, "1");
    clock_set(&mut c, T0);
    assert_eq!(decide(&mut c, &gcra("k", &["COST", "100"]))[0], 1);
    let waits: Vec<i64> = (0..20)
        .map(|_| decide(&mut c, &gcra("k", &[]))[3])
        .collect();
    assert!(waits.iter().all(|w| *w >= 10), "{waits:?}");
    assert!(waits.iter().any(|w| *w > 20), "{waits:?}");
    set(&mut c, "0");
    assert_eq!(decide(&mut c, &gcra("k", &[]))[3], 10);
    let e = call(&mut c, &["CONFIG", "SET", "ratelimit.jitter", "2"]).unwrap_err();
    assert!(e.to_string().contains("jitter"), "{e}");
}

#[test]
fn every_decision_command_takes_it_and_an_admission_is_as_without() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    assert_eq!(
        decide(&mut c, &["RL.FIXED", "f", "1", "1h", "JITTER"]),
        decide(&mut c, &["RL.FIXED", "g", "1", "1h"])
    );
    for args in [
        &["RL.FIXED", "f", "1", "1h", "JITTER"][..],
        &["RL.SLIDING", "s", "1", "1h", "APPROX", "JITTER"],
        &["RL.SKETCH", "sk", "i", "1", "1h", "JITTER", "COST", "2"],
        &["RL.ACQUIRE", "a", "1", "1h", "JITTER", "COST", "2"],
        &["RL.BUCKET", "b", "1", "1", "1h", "JITTER", "COST", "2"],
    ] {
        let reply: Vec<redis::Value> =
            redis::from_redis_value(call(&mut c, args).unwrap()).unwrap();
        assert!(reply.len() >= 5, "{args:?}");
    }
}

/// A named policy defined with JITTER spreads the waits of RL.CHECK and
/// of `POLICY name` in RL.ALL, without the option in the call.
#[test]
fn a_named_policy_can_carry_it() {
    let s = Server::with(Config::default().with_policies());
    let mut c = s.conn();
    call(
        &mut c,
        &["RL.POLICY", "SET", "api", "gcra", "100", "1s", "jitter"],
    )
    .unwrap();
    let text: String =
        redis::from_redis_value(call(&mut c, &["RL.POLICY", "GET", "api"]).unwrap()).unwrap();
    assert_eq!(text, "GCRA 100 1s JITTER");
    clock_set(&mut c, T0);
    assert_eq!(
        decide(&mut c, &["RL.CHECK", "k", "api", "COST", "100"])[0],
        1
    );
    let waits: Vec<i64> = (0..20)
        .map(|_| decide(&mut c, &["RL.CHECK", "k", "api"])[3])
        .collect();
    assert!(waits.iter().all(|w| *w >= 10), "{waits:?}");
    assert!(waits.iter().any(|w| *w > 20), "{waits:?}");
    let all = ["RL.ALL", "1", "k", "POLICY", "api"];
    let (allowed, _, retry, _) = combined(&mut c, &all);
    assert_eq!(allowed, 0);
    assert!(retry >= 10, "{retry}");
    let words = "RL.POLICY SET p SHARE 10 1s CEIL 20 100 1s JITTER";
    let args: Vec<&[u8]> = words.split(' ').map(str::as_bytes).collect();
    assert_eq!(
        error_of(&mut c, &args).1,
        "ERR syntax error: JITTER cannot be combined with SHARE"
    );
}
