//! REFUND, FORCE and PARTIAL on every algorithm and mode, and RL.ALL with
//! COSTS, against a real server with the manual clock.

mod common;
use common::*;

/// Every algorithm and mode with 10 units per 10 h (the bucket: 10
/// tokens, one an hour), as the arguments after the key. Keys expire on the
/// server's real clock, also under the manual one: with periods of hours
/// every key written here outlives the test, however slow the machine.
const ALGORITHMS: [(&str, &[&str]); 6] = [
    ("RL.GCRA", &["10", "10h"]),
    ("RL.BUCKET", &["10", "1", "1h"]),
    ("RL.SLIDING", &["10", "10h", "EXACT"]),
    ("RL.SLIDING", &["10", "10h", "APPROX"]),
    ("RL.SLIDING", &["10", "10h", "BUCKETS", "5"]),
    ("RL.FIXED", &["10", "10h"]),
];

/// A call of algorithm `i` on `key` with extra arguments.
fn args<'a>(i: usize, key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let (name, params) = ALGORITHMS[i];
    let mut v = vec![name, key];
    v.extend_from_slice(params);
    v.extend_from_slice(extra);
    v
}

fn run(c: &mut redis::Connection, i: usize, key: &str, extra: &[&str]) -> Vec<i64> {
    let a = args(i, key, extra);
    cmd(&a).query(c).unwrap_or_else(|e| panic!("{a:?}: {e}"))
}

const DAY_MS: i64 = 86_400_000;

fn exists(c: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(c).unwrap() == 1
}

#[test]
fn a_refund_gives_back_exactly_what_it_says_and_never_beyond_full() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    for i in 0..ALGORITHMS.len() {
        let key = format!("refund:{i}");
        let name = format!("{:?}", args(i, "k", &[]));
        assert_eq!(
            run(&mut c, i, &key, &["COST", "7"])[..3],
            [1, 10, 3],
            "{name}"
        );
        let back = run(&mut c, i, &key, &["REFUND", "4"]);
        assert_eq!(back[..4], [1, 10, 7, -1], "{name}");
        assert_eq!(back.len(), 5, "{name}");
        // Exactly 7 fit now, not 8.
        assert_eq!(
            run(&mut c, i, &key, &["COST", "8", "DRYRUN"])[0],
            0,
            "{name}"
        );
        assert_eq!(
            run(&mut c, i, &key, &["COST", "7", "DRYRUN"])[0],
            1,
            "{name}"
        );
        // Far more than was charged: full, and no more than full.
        let full = run(&mut c, i, &key, &["REFUND", "1000"]);
        assert_eq!(full[..4], [1, 10, 10, -1], "{name}");
        // Back to full is no key at all, for every algorithm.
        assert!(!exists(&mut c, &key), "{name}");
        assert_eq!(
            run(&mut c, i, &key, &["COST", "10"])[..3],
            [1, 10, 0],
            "{name}"
        );
        assert_eq!(run(&mut c, i, &key, &["COST", "1"])[0], 0, "{name}");
        // A refund to a key that does not exist creates nothing.
        let none = format!("refund:none:{i}");
        assert_eq!(
            run(&mut c, i, &none, &["REFUND", "3"]),
            [1, 10, 10, -1, 0],
            "{name}"
        );
        assert!(!exists(&mut c, &none), "{name}");
    }
}

/// A fixed window refunded back to full is deleted, plain or aligned: the
/// next request counts in a window of its own, as on a key never used.
#[test]
fn a_fixed_window_refunded_to_full_starts_afresh() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let fixed = |c: &mut redis::Connection, key: &str, extra: &[&str]| -> Vec<i64> {
        let mut a = vec!["RL.FIXED", key, "3", "1h"];
        a.extend_from_slice(extra);
        cmd(&a).query(c).unwrap()
    };
    for aligned in [false, true] {
        let key = if aligned {
            "fixed:aligned"
        } else {
            "fixed:plain"
        };
        let opt: &[&str] = if aligned { &["ALIGNED"] } else { &[] };
        let with = |extra: &[&'static str]| [opt, extra].concat();
        assert_eq!(fixed(&mut c, key, &with(&["COST", "2"]))[..3], [1, 3, 1]);
        advance(&mut c, 30 * 60 * SECOND);
        let back = fixed(&mut c, key, &with(&["REFUND", "2"]));
        assert_eq!(back, [1, 3, 3, -1, 0], "aligned {aligned}");
        assert!(!exists(&mut c, key), "aligned {aligned}");
        // The next request starts its own window: a plain one a full hour
        // from now, an aligned one at the boundary.
        let next = fixed(&mut c, key, &with(&[]));
        assert_eq!(next[..4], [1, 3, 2, -1], "aligned {aligned}");
        if !aligned {
            assert_eq!(next[4], 3_600_000);
        }
        clock_set(&mut c, T0);
        let _: () = redis::cmd("DEL").arg(key).query(&mut c).unwrap();
    }
}

#[test]
fn a_forced_charge_is_a_debt_waited_off_exactly() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    for i in 0..ALGORITHMS.len() {
        let key = format!("force:{i}");
        let name = format!("{:?}", args(i, "k", &[]));
        // A forced charge that fits is an ordinary one.
        assert_eq!(
            run(&mut c, i, &key, &["COST", "3", "FORCE"])[..4],
            [1, 10, 7, -1],
            "{name}"
        );
        // 25 more do not fit, and are charged anyway.
        let forced = run(&mut c, i, &key, &["FORCE", "COST", "25"]);
        assert_eq!(forced[..3], [0, 10, 0], "{name}");
        let wait = forced[3];
        assert!(wait > 0, "{name}: {forced:?}");
        assert!(exists(&mut c, &key));
        // Every later request is denied with the same exact wait ...
        let denied = run(&mut c, i, &key, &[]);
        assert_eq!(denied[..4], [0, 10, 0, wait], "{name}");
        // ... counting down to the millisecond, and admitted on time.
        advance(&mut c, (wait as u64 - 1) * MS);
        assert_eq!(run(&mut c, i, &key, &[])[..4], [0, 10, 0, 1], "{name}");
        advance(&mut c, MS);
        assert_eq!(run(&mut c, i, &key, &[])[0], 1, "{name}");
        clock_set(&mut c, T0);
    }
    // A debt past what the state can hold is refused, nothing written.
    let (_, msg) = error_of(
        &mut c,
        &[
            b"RL.GCRA", b"far", b"1", b"365d", b"FORCE", b"COST", b"1001",
        ],
    );
    assert_eq!(
        msg,
        "ERR FORCE would put key beyond what RL.GCRA state can hold; nothing was changed"
    );
    assert!(!exists(&mut c, "far"));
    assert_eq!(
        decide(
            &mut c,
            &["RL.GCRA", "far", "1", "365d", "FORCE", "COST", "999"]
        )[0],
        0
    );
}

#[test]
fn partial_grants_all_some_or_none() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    for i in 0..ALGORITHMS.len() {
        let key = format!("partial:{i}");
        let name = format!("{:?}", args(i, "k", &[]));
        let all = run(&mut c, i, &key, &["COST", "4", "PARTIAL"]);
        assert_eq!(
            [all[0], all[1], all[2], all[3], all[5]],
            [1, 10, 6, -1, 4],
            "{name}"
        );
        let some = run(&mut c, i, &key, &["PARTIAL", "COST", "50"]);
        assert_eq!([some[0], some[2], some[5]], [1, 0, 6], "{name}");
        let none = run(&mut c, i, &key, &["PARTIAL", "COST", "3"]);
        assert_eq!([none[0], none[2], none[5]], [0, 0, 0], "{name}");
        // The wait of a denied PARTIAL is the one for a single unit.
        let one = run(&mut c, i, &key, &[]);
        assert_eq!(none[3], one[3], "{name}");
        assert!(none[3] > 0);
        // Dry run: reports the grant, charges nothing.
        let fresh = format!("partial:dry:{i}");
        let dry = run(&mut c, i, &fresh, &["PARTIAL", "COST", "50", "DRYRUN"]);
        assert_eq!([dry[0], dry[2], dry[5]], [1, 0, 10], "{name}");
        assert!(!exists(&mut c, &fresh), "{name}");
    }
    // RESP3: a map with `granted` last.
    let mut c3 = s.conn_resp3();
    let v = call(
        &mut c3,
        &["RL.GCRA", "p3", "10", "10h", "COST", "4", "PARTIAL"],
    )
    .unwrap();
    let fields = resp3_map(v);
    let mut expected = DECISION_FIELDS.to_vec();
    expected.push("granted");
    assert_eq!(names(&fields), expected);
    assert_eq!(fields[5].1, redis::Value::Int(4));
}

#[test]
fn rl_all_with_costs_counts_requests_and_bytes() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // 100 requests and 1000 bytes a day (a day: every key outlives the
    // test on the wall clock).
    let limits = [
        "RL.ALL", "2", "req", "bytes", "GCRA", "100", "1d", "FIXED", "1000", "1d",
    ];
    let with = |tail: &[&'static str]| -> Vec<&'static str> { [&limits[..], tail].concat() };
    // One transaction: the denial is read against the state it saw.
    let charge = with(&["COSTS", "1", "600"]);
    let replies = atomically(
        &mut c,
        &[
            &charge,
            &["GET", "req"],
            &["GET", "bytes"],
            // 600 bytes more do not fit: denied by the second limit,
            // nothing written.
            &charge,
            &["GET", "req"],
            &["GET", "bytes"],
        ],
    );
    let v: Vec<redis::Value> = redis::from_redis_value(replies[0].clone()).unwrap();
    assert_eq!(v[0], redis::Value::Int(1));
    let bytes: Vec<i64> = redis::from_redis_value(v[4].clone()).unwrap();
    assert_eq!(bytes[..3], [1, 1000, 400]);
    let r: Vec<redis::Value> = redis::from_redis_value(replies[3].clone()).unwrap();
    assert_eq!(r[..2], [redis::Value::Int(0), redis::Value::Int(1)]);
    assert_eq!(replies[1..3], replies[4..6], "nothing written");
    // Reconcile: give back 1 request and 300 bytes.
    let r: Vec<redis::Value> = cmd(&with(&["REFUND", "COSTS", "1", "300"]))
        .query(&mut c)
        .unwrap();
    let req: Vec<i64> = redis::from_redis_value(r[3].clone()).unwrap();
    let bytes: Vec<i64> = redis::from_redis_value(r[4].clone()).unwrap();
    assert_eq!((req[2], bytes[2]), (100, 700));
    // A forced charge: each limit takes its cost, fitted or not.
    let r: Vec<redis::Value> = cmd(&with(&["FORCE", "COSTS", "1", "800"]))
        .query(&mut c)
        .unwrap();
    let head = [
        redis::Value::Int(0),
        redis::Value::Int(1),
        redis::Value::Int(DAY_MS),
    ];
    assert_eq!(r[..3], head);
    let req: Vec<i64> = redis::from_redis_value(r[3].clone()).unwrap();
    let bytes: Vec<i64> = redis::from_redis_value(r[4].clone()).unwrap();
    assert_eq!((req[0], req[2]), (1, 99));
    assert_eq!(bytes[..4], [0, 1000, 0, DAY_MS]);
    // PARTIAL across limits: the most that every limit admits.
    let both = [
        "RL.ALL", "2", "p1", "p2", "GCRA", "10", "10h", "FIXED", "5", "10h",
    ];
    let r: Vec<redis::Value> = cmd(&[&both[..], &["COST", "8", "PARTIAL"]].concat())
        .query(&mut c)
        .unwrap();
    assert_eq!(r[0], redis::Value::Int(1));
    let remaining = [5, 0];
    for (limit, left) in r[3..].iter().zip(remaining) {
        let f: Vec<i64> = redis::from_redis_value(limit.clone()).unwrap();
        assert_eq!((f[2], f[5]), (left, 5));
    }
    let r: Vec<redis::Value> = cmd(&[&both[..], &["COST", "8", "PARTIAL"]].concat())
        .query(&mut c)
        .unwrap();
    assert_eq!(r[..2], [redis::Value::Int(0), redis::Value::Int(1)]);
    // Bad input changes nothing.
    let before = (get_bytes(&mut c, "req"), get_bytes(&mut c, "bytes"));
    for (tail, msg) in [
        (
            &["COSTS", "1"][..],
            "ERR syntax error: COSTS needs one cost per key, got 1 cost for 2 keys",
        ),
        (
            &["COSTS", "1", "2", "COST", "1"][..],
            "ERR syntax error: COST and COSTS are mutually exclusive",
        ),
        (
            &["PARTIAL", "COSTS", "1", "2"][..],
            "ERR syntax error: PARTIAL cannot be combined with COSTS",
        ),
    ] {
        let a: Vec<&[u8]> = with(tail).iter().map(|s| s.as_bytes()).collect();
        assert_eq!(error_of(&mut c, &a).1, msg);
    }
    assert_eq!(
        before,
        (get_bytes(&mut c, "req"), get_bytes(&mut c, "bytes"))
    );
}

#[test]
fn bad_charges_are_errors_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    decide(&mut c, &["RL.GCRA", "k", "10", "10h", "COST", "5"]);
    let before = get_bytes(&mut c, "k");
    let max = i64::MAX;
    for (tail, msg) in [
        (
            &["REFUND", "0"][..],
            format!("ERR REFUND must be an integer from 1 to {max}"),
        ),
        (
            &["REFUND", "-3"][..],
            format!("ERR REFUND must be an integer from 1 to {max}"),
        ),
        (
            &["REFUND", "x"][..],
            format!("ERR REFUND must be an integer from 1 to {max}"),
        ),
        (
            &["REFUND"][..],
            "ERR syntax error: REFUND needs a value".into(),
        ),
        (
            &["REFUND", "1", "COST", "1"][..],
            "ERR syntax error: REFUND cannot be combined with COST".into(),
        ),
        (
            &["REFUND", "1", "DRYRUN"][..],
            "ERR syntax error: REFUND cannot be combined with DRYRUN".into(),
        ),
        (
            &["REFUND", "1", "FORCE"][..],
            "ERR syntax error: FORCE, PARTIAL and REFUND are mutually exclusive".into(),
        ),
        (
            &["FORCE"][..],
            "ERR syntax error: FORCE needs COST n of 1 or more".into(),
        ),
        (
            &["PARTIAL", "COST", "0"][..],
            "ERR syntax error: PARTIAL needs COST n of 1 or more".into(),
        ),
        (
            &["PARTIAL", "FORCE", "COST", "2"][..],
            "ERR syntax error: FORCE, PARTIAL and REFUND are mutually exclusive".into(),
        ),
        (
            &["COSTS", "1"][..],
            "ERR syntax error: unknown option 'COSTS'".into(),
        ),
    ] {
        let mut a: Vec<&[u8]> = vec![b"RL.GCRA", b"k", b"10", b"10h"];
        a.extend(tail.iter().map(|s| s.as_bytes()));
        assert_eq!(error_of(&mut c, &a).1, msg, "{tail:?}");
    }
    assert_eq!(get_bytes(&mut c, "k"), before);
}
