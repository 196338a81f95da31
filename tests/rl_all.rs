//! RL.ALL: several limits in one atomic, all-or-nothing decision.

mod common;
use common::*;
use redis::Value;

/// RL.ALL's RESP2 reply: (allowed, blocked_by, retry_after_ms, per-key replies).
fn all(c: &mut redis::Connection, args: &[&str]) -> (i64, i64, i64, Vec<[i64; 5]>) {
    let mut full = vec!["RL.ALL"];
    full.extend_from_slice(args);
    combined(c, &full)
}

/// An hour in milliseconds, as replies give waits.
const HOUR_MS: i64 = 3_600_000;

fn state(c: &mut redis::Connection, key: &str) -> (Option<Vec<u8>>, i64) {
    (get_bytes(c, key), pexpiretime(c, key))
}

#[test]
fn an_organisation_limit_blocks_without_charging_its_users() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let user = |u: &str| -> Vec<String> {
        vec![
            "2".into(),
            format!("{{org:7}}:user:{u}"),
            "{org:7}".into(),
            "GCRA".into(),
            "10".into(),
            "1s".into(),
            "GCRA".into(),
            "15".into(),
            "1s".into(),
        ]
    };
    // The whole timeline in one transaction: a user's key lives a tenth of
    // a second of wall clock per call, which may pass between two calls.
    let (user1, user2) = (user("1"), user("2"));
    let mut u1 = vec!["RL.ALL"];
    u1.extend(user1.iter().map(String::as_str));
    let mut u2 = vec!["RL.ALL"];
    u2.extend(user2.iter().map(String::as_str));
    let keys = ["{org:7}:user:1", "{org:7}:user:2", "{org:7}"];
    let gets: Vec<[&str; 2]> = keys.iter().map(|k| ["GET", k]).collect();
    let expiries: Vec<[&str; 2]> = keys.iter().map(|k| ["PEXPIRETIME", k]).collect();
    let mut commands: Vec<&[&str]> = vec![&u1[..]; 10];
    commands.extend([&gets[2][..], &expiries[2][..]]);
    commands.push(&u1[..]);
    commands.extend([&gets[2][..], &expiries[2][..]]);
    commands.extend(vec![&u2[..]; 5]);
    for k in 0..3 {
        commands.extend([&gets[k][..], &expiries[k][..]]);
    }
    commands.push(&u2[..]);
    for k in 0..3 {
        commands.extend([&gets[k][..], &expiries[k][..]]);
    }
    let replies = &mut atomically(&mut c, &commands).into_iter();
    let next = |replies: &mut std::vec::IntoIter<Value>| replies.next().expect("a reply");
    let state = |replies: &mut std::vec::IntoIter<Value>| -> (Option<Vec<u8>>, i64) {
        let value = redis::from_redis_value(next(replies)).unwrap();
        (value, redis::from_redis_value(next(replies)).unwrap())
    };
    for i in 0..10 {
        let (allowed, blocked_by, retry, limits) = combined_reply(next(replies));
        assert_eq!((allowed, blocked_by, retry), (1, -1, -1), "call {i}");
        assert_eq!(limits[0][..3], [1, 10, 9 - i]);
        assert_eq!(limits[1][..3], [1, 15, 14 - i]);
    }
    // User 1 is now at its own limit: the user limit blocks, nothing is charged.
    let org_before = state(replies);
    let (allowed, blocked_by, retry, limits) = combined_reply(next(replies));
    assert_eq!((allowed, blocked_by, retry), (0, 0, 100));
    assert_eq!(limits[0], [0, 10, 0, 100, 1000]);
    assert_eq!(limits[1], [1, 15, 4, -1, 734]);
    assert_eq!(state(replies), org_before);
    // User 2 gets the organisation's remaining 5, then the organisation blocks.
    for _ in 0..5 {
        assert_eq!(combined_reply(next(replies)).0, 1);
    }
    let before = [state(replies), state(replies), state(replies)];
    let (allowed, blocked_by, retry, limits) = combined_reply(next(replies));
    assert_eq!((allowed, blocked_by), (0, 1));
    assert_eq!(limits[0][..3], [1, 10, 4], "user 2 alone would admit");
    assert_eq!(limits[1][0], 0);
    assert_eq!(retry, limits[1][3]);
    assert_eq!([state(replies), state(replies), state(replies)], before);
}

#[test]
fn retry_after_is_the_longest_wait_among_denying_limits() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Periods of hours: a key written here lives at least 12 minutes of
    // wall clock (keys expire on the server's real clock), however slowly
    // the commands follow each other.
    // Fill a (1 per 2 h) and b (1 per 5 h), then ask for both.
    decide(&mut c, &["RL.GCRA", "a", "1", "2h"]);
    decide(&mut c, &["RL.BUCKET", "b", "1", "1", "5h"]);
    let (allowed, blocked_by, retry, replies) = all(
        &mut c,
        &[
            "3", "free", "a", "b", "GCRA", "5", "1h", "GCRA", "1", "2h", "BUCKET", "1", "1", "5h",
        ],
    );
    // b's wait is the longest: b blocks, though a denied first.
    assert_eq!((allowed, blocked_by, retry), (0, 2, 5 * HOUR_MS));
    assert_eq!(replies[0][0], 1);
    assert_eq!(replies[1][3], 2 * HOUR_MS);
    assert_eq!(replies[2][3], 5 * HOUR_MS);
    assert_eq!(
        get_bytes(&mut c, "free"),
        None,
        "the admitting limit was not charged"
    );
    // A limit that can never admit makes the whole call never admissible.
    let (allowed, _, retry, _) = all(
        &mut c,
        &[
            "2", "a", "x", "GCRA", "1", "2h", "GCRA", "1", "1h", "COST", "2",
        ],
    );
    assert_eq!((allowed, retry), (0, -1));
    // Once every limit admits, all are charged together.
    advance(&mut c, 5 * 3600 * SECOND);
    let (allowed, _, _, _) = all(
        &mut c,
        &[
            "3", "free", "a", "b", "GCRA", "5", "1h", "GCRA", "1", "2h", "BUCKET", "1", "1", "5h",
        ],
    );
    assert_eq!(allowed, 1);
    assert!(get_bytes(&mut c, "free").is_some(), "free was charged");
    assert_eq!(decide(&mut c, &["RL.GCRA", "a", "1", "2h"])[0], 0);
}

#[test]
fn blocked_by_names_the_limit_that_decides_the_wait() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Periods of hours, as above.
    decide(&mut c, &["RL.GCRA", "a", "2", "2h"]);
    // a denies 2 with a wait of 1 h; b can never admit 2: b blocks.
    let (allowed, blocked_by, retry, replies) = all(
        &mut c,
        &[
            "2", "a", "b", "GCRA", "2", "2h", "GCRA", "1", "1h", "COST", "2",
        ],
    );
    assert_eq!((allowed, blocked_by, retry), (0, 1, -1));
    assert_eq!(replies[0][..4], [0, 2, 1, HOUR_MS]);
    assert_eq!(replies[1][..4], [0, 1, 1, -1]);
    // Two that never can: the first of them.
    let (_, blocked_by, retry, _) = all(
        &mut c,
        &[
            "3", "a", "b", "x", "GCRA", "2", "2h", "GCRA", "1", "1h", "GCRA", "1", "1h", "COST",
            "2",
        ],
    );
    assert_eq!((blocked_by, retry), (1, -1));
    // Equal waits: the first of them.
    decide(&mut c, &["RL.GCRA", "c", "1", "2h"]);
    decide(&mut c, &["RL.GCRA", "d", "1", "2h"]);
    let (_, blocked_by, retry, _) = all(
        &mut c,
        &[
            "3", "free", "c", "d", "GCRA", "5", "1h", "GCRA", "1", "2h", "GCRA", "1", "2h",
        ],
    );
    assert_eq!((blocked_by, retry), (1, 2 * HOUR_MS));
}

#[test]
fn shares_state_with_the_single_key_commands() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // In one transaction: the key lives a third of a second of wall clock.
    let single = ["RL.GCRA", "user:1", "3", "1s"];
    let replies = atomically(
        &mut c,
        &[
            &single,
            &["RL.ALL", "1", "user:1", "GCRA", "3", "1s"],
            &single,
        ],
    );
    assert_eq!(five(&replies[0])[..3], [1, 3, 2]);
    assert_eq!(combined_reply(replies[1].clone()).3[0][..3], [1, 3, 1]);
    assert_eq!(five(&replies[2])[..3], [1, 3, 0]);
    let (code, msg) = error_of(
        &mut c,
        &[b"RL.ALL", b"1", b"user:1", b"BUCKET", b"3", b"1", b"1s"],
    );
    assert_eq!(code, "WRONGTYPE");
    assert_eq!(
        msg,
        "WRONGTYPE key 1 holds RL.GCRA state, not RL.BUCKET state"
    );
}

#[test]
fn cost_dryrun_and_resp3() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let (allowed, _, _, replies) = all(
        &mut c,
        &[
            "2", "p", "q", "GCRA", "10", "1s", "BUCKET", "4", "1", "1s", "COST", "3", "DRYRUN",
        ],
    );
    assert_eq!(allowed, 1);
    assert_eq!(replies[0][..3], [1, 10, 7]);
    assert_eq!(replies[1][..3], [1, 4, 1]);
    assert_eq!(get_bytes(&mut c, "p"), None);
    assert_eq!(get_bytes(&mut c, "q"), None);
    all(
        &mut c,
        &[
            "2", "p", "q", "GCRA", "10", "1s", "BUCKET", "4", "1", "1s", "COST", "0",
        ],
    );
    assert_eq!(get_bytes(&mut c, "p"), None);

    let mut c3 = s.conn_resp3();
    let v = call(
        &mut c3,
        &[
            "RL.ALL", "2", "p", "q", "GCRA", "10", "1s", "BUCKET", "4", "1", "1s",
        ],
    )
    .unwrap();
    let fields = resp3_map(v);
    assert_eq!(
        names(&fields),
        ["allowed", "blocked_by", "retry_after_ms", "limits"]
    );
    assert_eq!(fields[0].1, Value::Boolean(true));
    assert_eq!(fields[1].1, Value::Int(-1));
    let Value::Array(limits) = &fields[3].1 else {
        panic!("limits not an array")
    };
    assert_eq!(limits.len(), 2);
    assert_eq!(names(&resp3_map(limits[0].clone())), DECISION_FIELDS);
}

#[test]
fn errors_are_specific_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("hi")
        .query(&mut c)
        .unwrap();
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[
                b"RL.ALL", b"2", b"a", b"a", b"GCRA", b"1", b"1", b"GCRA", b"1", b"1",
            ],
            "ERR key 2 is the same as key 1: each limit needs its own key",
        ),
        (
            &[b"RL.ALL", b"2", b"a", b"b", b"GCRA", b"1", b"1"],
            "ERR syntax error: RL.ALL needs one policy per key, got 2 keys and 1 policy",
        ),
        (
            &[
                b"RL.ALL", b"1", b"a", b"GCRA", b"1", b"1", b"GCRA", b"1", b"1",
            ],
            "ERR syntax error: RL.ALL needs one policy per key, got 1 key and 2 policies",
        ),
        (
            &[b"RL.ALL", b"1", b"a", b"TOKEN", b"1", b"1"],
            "ERR syntax error: unknown policy 'TOKEN': expected GCRA, BUCKET, SLIDING, FIXED or CONCURRENCY",
        ),
        (
            &[b"RL.ALL", b"1", b"a", b"GCRA"],
            "ERR wrong number of arguments for 'rl.all' command",
        ),
        // Enough words for `POLICY name`, the shortest policy: the module
        // says what the policy needs.
        (
            &[b"RL.ALL", b"1", b"a", b"GCRA", b"1"],
            "ERR syntax error: the policy is GCRA limit period [BURST n]",
        ),
        (
            &[b"RL.ALL", b"1", b"a", b"GCRA", b"0", b"1"],
            "ERR limit must be an integer from 1 to 9223372036854775807",
        ),
        (
            &[b"RL.ALL", b"x", b"a", b"GCRA", b"1", b"1"],
            "ERR numkeys must be an integer from 1 to 4",
        ),
        (
            &[b"RL.ALL", b"1", b"a", b"GCRA", b"1", b"1", b"COST"],
            "ERR syntax error: COST needs a value",
        ),
        (
            &[
                b"RL.ALL", b"2", b"a", b"text", b"GCRA", b"1", b"1", b"GCRA", b"1", b"1",
            ],
            "WRONGTYPE key 2 holds a string that is not RL.GCRA state",
        ),
    ];
    for (args, want) in cases {
        let (_, msg) = error_of(&mut c, args);
        assert_eq!(&msg, want, "{args:?}");
    }
    // The first key was valid, but the call failed: nothing was written.
    assert_eq!(get_bytes(&mut c, "a"), None);
    assert_eq!(get_bytes(&mut c, "text").unwrap(), b"hi");
}

#[test]
fn keys_are_declared_for_getkeys_and_cluster_routing() {
    let s = Server::start();
    let mut c = s.conn();
    let keys: Vec<String> = cmd(&[
        "COMMAND", "GETKEYS", "RL.ALL", "2", "x", "y", "GCRA", "1", "1", "FIXED", "1", "1",
    ])
    .query(&mut c)
    .unwrap();
    assert_eq!(keys, ["x", "y"]);

    let cluster = Server::with(
        Config::default()
            .arg("cluster-enabled", "yes")
            .arg("cluster-config-file", "nodes.conf"),
    );
    let mut c = cluster.conn();
    let _: () = cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"])
        .query(&mut c)
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let info: String = cmd(&["CLUSTER", "INFO"]).query(&mut c).unwrap();
        if info.contains("cluster_state:ok") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "cluster never became ok"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (code, _) = error_of(
        &mut c,
        &[
            b"RL.ALL", b"2", b"user:1", b"org:7", b"GCRA", b"1", b"1", b"GCRA", b"1", b"1",
        ],
    );
    assert_eq!(code, "CROSSSLOT");
    let (allowed, ..) = all(
        &mut c,
        &[
            "2",
            "{org:7}:user:1",
            "{org:7}",
            "GCRA",
            "1",
            "1",
            "GCRA",
            "1",
            "1",
        ],
    );
    assert_eq!(allowed, 1);
}

#[test]
fn one_call_mixes_all_four_algorithms() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Periods of an hour: every key outlives the test on the wall clock.
    let args = [
        "4", "{u}:g", "{u}:b", "{u}:s", "{u}:f", "GCRA", "5", "1h", "BUCKET", "4", "1", "1h",
        "SLIDING", "3", "1h", "APPROX", "FIXED", "2", "1h", "ALIGNED",
    ];
    // FIXED (limit 2) is the tightest: two calls pass, the third is blocked
    // by it (index 3) while every other limit would still admit.
    for left in [[4, 3, 2, 1], [3, 2, 1, 0]] {
        let (allowed, blocked_by, _, replies) = all(&mut c, &args);
        assert_eq!((allowed, blocked_by), (1, -1));
        let remaining: Vec<i64> = replies.iter().map(|r| r[2]).collect();
        assert_eq!(remaining, left);
    }
    let before: Vec<_> = ["{u}:g", "{u}:b", "{u}:s", "{u}:f"]
        .iter()
        .map(|k| state(&mut c, k))
        .collect();
    let (allowed, blocked_by, retry, replies) = all(&mut c, &args);
    assert_eq!((allowed, blocked_by), (0, 3));
    assert_eq!(
        replies.iter().map(|r| r[0]).collect::<Vec<_>>(),
        [1, 1, 1, 0]
    );
    // ALIGNED windows end on multiples of an hour since the epoch; T0 is one.
    assert_eq!(retry, HOUR_MS);
    let after: Vec<_> = ["{u}:g", "{u}:b", "{u}:s", "{u}:f"]
        .iter()
        .map(|k| state(&mut c, k))
        .collect();
    assert_eq!(before, after, "a blocked call charges no limit");
    // Each key holds its own command's state.
    assert_eq!(
        decide(&mut c, &["RL.SLIDING", "{u}:s", "3", "1h", "APPROX"])[..3],
        [1, 3, 0]
    );
    assert_eq!(
        decide(&mut c, &["RL.FIXED", "{u}:f", "2", "1h", "ALIGNED"])[0],
        0
    );
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// One an hour: the keys' TTLs (on the wall clock) outlive the tests.
const HOUR: u64 = 3_600 * 1_000_000;

#[test]
fn flows_offered_10_to_1_share_the_shared_limit_half_and_half() {
    let s = Server::start();
    let mut flows = common::flows::Flows::new(&s);
    clock_set(&mut flows.ctl, T0);
    // A tenant's own limit (ample) and the org's, one an hour for all.
    let tenant = |t| {
        let own = format!("{{org}}:{t}");
        let words = [
            "RL.ALL", "2", &own, "{org}", "GCRA", "100", "1h", "GCRA", "1", "1h",
        ];
        words.map(String::from)
    };
    let (heavy, light) = (tenant("heavy"), tenant("light"));
    assert_eq!(all(&mut flows.ctl, &strs(&heavy)[1..]).0, 1);
    flows.offer_ten_to_one(&strs(&heavy), &strs(&light), 6);
    flows.advance_until_ended(HOUR, 12);
    assert_eq!(flows.admitted_by_flow(), [("heavy", 6), ("light", 6)]);
}

/// Waiters naming the same keys in opposite orders, each behind another
/// flow on one key and ahead on the other: all are admitted, one an hour.
#[test]
fn waiters_over_keys_in_opposite_orders_are_all_admitted() {
    let s = Server::start();
    let mut flows = common::flows::Flows::new(&s);
    clock_set(&mut flows.ctl, T0);
    let one = |k: &'static str| ["RL.GCRA", k, "1", "1h"];
    let ab = [
        "RL.ALL", "2", "a", "b", "GCRA", "1", "1h", "GCRA", "1", "1h",
    ];
    let ba = [
        "RL.ALL", "2", "b", "a", "GCRA", "1", "1h", "GCRA", "1", "1h",
    ];
    assert_eq!(all(&mut flows.ctl, &ab[1..]).0, 1);
    for _ in 0..3 {
        flows.offer(&one("a"), "x", 1, "100d");
        flows.offer(&one("b"), "y", 1, "100d");
    }
    flows.offer(&ab, "y", 1, "100d");
    flows.offer(&ba, "x", 2, "100d");
    flows.offer(&one("a"), "z", 1, "100d");
    flows.advance_until_ended(HOUR, 9);
    assert_eq!(
        flows.admitted_by_flow(),
        [("x", 4), ("y", 4), ("z", 1)],
        "every wait admitted"
    );
}
