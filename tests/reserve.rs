//! `RESERVE maxdelay` on a real server, with the manual clock: a request
//! admitted within `maxdelay` is admitted now for a start then, and its
//! key left exactly as a waiter (`WAIT`) admitted at that start leaves it;
//! a reservation never goes ahead of a waiter already in line, and a
//! waiter that comes after one waits for it. Periods are hours, so that no
//! key expires on the server's real clock while a test runs.

mod common;
use common::blocking::*;
use common::topology::{primary_with_aof_and_replica, wait_replicas};
use common::*;
use redis::Connection;

const HOUR_MS: i64 = 3_600_000;
const HOUR: u64 = 3_600 * SECOND;

/// A reply's integers (a decision with `delay_ms`, or a combined reply's
/// first three fields).
fn ints(c: &mut Connection, args: &[&str]) -> Vec<i64> {
    redis::from_redis_value(call(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}")))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// One an hour, no burst.
fn gcra<'a>(key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["RL.GCRA", key, "1", "1h"];
    v.extend_from_slice(extra);
    v
}

fn error(c: &mut Connection, args: &[&str]) -> String {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    error_of(c, &args).1
}

#[test]
fn a_reservation_leaves_the_key_as_a_waiter_admitted_at_its_start() {
    let s = Server::start();
    let (mut c, mut w) = (s.conn(), s.conn());
    clock_set(&mut c, T0);
    for key in ["reserved", "waited"] {
        assert_eq!(decide(&mut c, &gcra(key, &[]))[0], 1);
    }
    // Admitted now, charged now, starting an hour from now; the key is
    // full until an hour after that.
    assert_eq!(
        ints(&mut c, &gcra("reserved", &["RESERVE", "2h"])),
        [1, 1, 0, -1, 2 * HOUR_MS, HOUR_MS]
    );
    // Expiring an hour after the start, two from the reservation (the
    // server's real clock: a little less has passed since).
    let pttl = pttl(&mut c, "reserved");
    assert!(pttl > 2 * HOUR_MS - 60_000 && pttl <= 2 * HOUR_MS, "{pttl}");
    send(&mut w, &gcra("waited", &["WAIT", "2h"]));
    await_waiting(&mut c, 1);
    advance(&mut c, HOUR - 1);
    assert_eq!(waiting(&mut c), 1, "1 µs before the start");
    advance(&mut c, 1);
    assert_eq!(recv5(&mut w), [1, 1, 0, -1, HOUR_MS]);
    // The same state, to the byte; every request after is answered alike.
    assert_eq!(get_bytes(&mut c, "reserved"), get_bytes(&mut c, "waited"));
    for step in [0, HOUR / 2, HOUR / 2] {
        advance(&mut c, step);
        let after = [gcra("reserved", &[]), gcra("waited", &[])];
        assert_eq!(decide(&mut c, &after[0]), decide(&mut c, &after[1]));
    }
}

#[test]
fn beyond_maxdelay_it_is_denied_and_a_dry_run_charges_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    assert_eq!(decide(&mut c, &gcra("k", &[]))[0], 1);
    let before = get_bytes(&mut c, "k");
    // An hour away: a microsecond short is denied as without the option.
    assert_eq!(
        ints(&mut c, &gcra("k", &["RESERVE", "3599999ms"])),
        [0, 1, 0, HOUR_MS, HOUR_MS, -1]
    );
    assert_eq!(
        ints(&mut c, &gcra("k", &["RESERVE", "1h", "DRYRUN"])),
        [1, 1, 0, -1, 2 * HOUR_MS, HOUR_MS]
    );
    // More than the burst: never admitted, whatever the delay.
    assert_eq!(
        ints(&mut c, &gcra("k", &["RESERVE", "1d", "COST", "2"])),
        [0, 1, 0, -1, HOUR_MS, -1]
    );
    assert_eq!(get_bytes(&mut c, "k"), before);
    // Admitted at once: a delay of 0.
    assert_eq!(
        ints(&mut c, &gcra("other", &["RESERVE", "1h"])),
        [1, 1, 0, -1, HOUR_MS, 0]
    );
    // Without the option the reply is as it was: five fields.
    advance(&mut c, 2 * HOUR);
    assert_eq!(decide(&mut c, &gcra("k", &[])), [1, 1, 0, -1, HOUR_MS]);
}

#[test]
fn a_reservation_never_goes_ahead_of_a_waiter_already_in_line() {
    let s = Server::start();
    let (mut c, mut w) = (s.conn(), s.conn());
    clock_set(&mut c, T0);
    assert_eq!(decide(&mut c, &gcra("k", &[]))[0], 1);
    send(&mut w, &gcra("k", &["WAIT", "2h"]));
    await_waiting(&mut c, 1);
    let before = get_bytes(&mut c, "k");
    // Behind the line: denied with its wait after the waiter, no delay.
    let reply = ints(&mut c, &gcra("k", &["RESERVE", "3h"]));
    assert_eq!((reply[0], reply[3], reply[5]), (0, 2 * HOUR_MS, -1));
    assert_eq!(get_bytes(&mut c, "k"), before);
    // The waiter is admitted when it was due, not a microsecond later.
    advance(&mut c, HOUR);
    assert_eq!(waiting(&mut c), 0);
    assert_eq!(recv5(&mut w), [1, 1, 0, -1, HOUR_MS]);
}

#[test]
fn a_waiter_after_a_reservation_waits_for_its_start() {
    let s = Server::start();
    let (mut c, mut w) = (s.conn(), s.conn());
    clock_set(&mut c, T0);
    assert_eq!(decide(&mut c, &gcra("k", &[]))[0], 1);
    assert_eq!(ints(&mut c, &gcra("k", &["RESERVE", "2h"]))[5], HOUR_MS);
    send(&mut w, &gcra("k", &["WAIT", "3h"]));
    await_waiting(&mut c, 1);
    // The reservation starts at one hour; the waiter's turn is at two.
    advance(&mut c, 2 * HOUR - 1);
    assert_eq!(waiting(&mut c), 1);
    advance(&mut c, 1);
    assert_eq!(recv5(&mut w), [1, 1, 0, -1, HOUR_MS]);
    // A second reservation stands after both.
    assert_eq!(ints(&mut c, &gcra("k", &["RESERVE", "2h"]))[5], HOUR_MS);
}

/// RL.ALL over a GCRA limit and a bucket: each key left as the waiter
/// admitted at the start leaves it, the bucket (which alone would admit
/// at once) charged at the start, not now.
#[test]
fn rl_all_reserves_every_limit_at_the_one_start() {
    let s = Server::start();
    let (mut c, mut w) = (s.conn(), s.conn());
    clock_set(&mut c, T0);
    let all = |tag: &'static str, extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> = ["RL.ALL", "2"].map(String::from).to_vec();
        v.push(format!("{{{tag}}}:g"));
        v.push(format!("{{{tag}}}:b"));
        for word in ["GCRA", "1", "1h", "BUCKET", "2", "1", "1h", "COST", "1"] {
            v.push(word.into());
        }
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |c: &mut Connection, v: &[String]| {
        let args: Vec<&str> = v.iter().map(String::as_str).collect();
        call(c, &args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    };
    for tag in ["r", "w"] {
        assert_eq!(combined_reply(run(&mut c, &all(tag, &[]))).0, 1);
    }
    let reply = run(&mut c, &all("r", &["RESERVE", "2h"]));
    let items: Vec<redis::Value> = redis::from_redis_value(reply).unwrap();
    let limits: Vec<Vec<i64>> = items[3..]
        .iter()
        .map(|v| redis::from_redis_value(v.clone()).unwrap())
        .collect();
    // Both limits say the call's delay.
    assert_eq!(limits[0][5], HOUR_MS);
    assert_eq!(limits[1][5], HOUR_MS);
    let waiter = all("w", &["WAIT", "2h"]);
    send(
        &mut w,
        &waiter.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    await_waiting(&mut c, 1);
    advance(&mut c, HOUR);
    let (allowed, ..) = combined_reply(w.recv_response().unwrap());
    assert_eq!(allowed, 1);
    for key in ["g", "b"] {
        assert_eq!(
            get_bytes(&mut c, &format!("{{r}}:{key}")),
            get_bytes(&mut c, &format!("{{w}}:{key}")),
            "{key}"
        );
    }
}

/// RL.SHARE: a user at its ceiling reserves; its path is left as a waiter
/// admitted at the start leaves it.
#[test]
fn rl_share_reserves_along_the_path() {
    let s = Server::start();
    let (mut c, mut w) = (s.conn(), s.conn());
    clock_set(&mut c, T0);
    let path = |org: &str, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec!["RL.SHARE".into(), "2".into()];
        v.push(format!("{{{org}}}:user"));
        v.push(format!("{{{org}}}"));
        for word in ["1", "1h", "CEIL", "2", "CBURST", "2", "10", "1h"] {
            v.push(word.into());
        }
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |c: &mut Connection, v: Vec<String>| {
        let a: Vec<&str> = v.iter().map(String::as_str).collect();
        call(c, &a).unwrap_or_else(|e| panic!("{a:?}: {e}"))
    };
    for org in ["r", "w"] {
        for _ in 0..2 {
            assert_eq!(combined_reply(run(&mut c, path(org, &[]))).0, 1);
        }
    }
    let items: Vec<redis::Value> =
        redis::from_redis_value(run(&mut c, path("r", &["RESERVE", "1h"]))).unwrap();
    let leaf: Vec<i64> = redis::from_redis_value(items[3].clone()).unwrap();
    // The ceiling of 2 an hour admits again in half an hour.
    assert_eq!((leaf[0], leaf[5]), (1, HOUR_MS / 2));
    let waiter = path("w", &["WAIT", "1h"]);
    let waiter: Vec<&str> = waiter.iter().map(String::as_str).collect();
    send(&mut w, &waiter);
    await_waiting(&mut c, 1);
    advance(&mut c, HOUR / 2);
    assert_eq!(combined_reply(w.recv_response().unwrap()).0, 1);
    for key in [":user", ""] {
        assert_eq!(
            get_bytes(&mut c, &format!("{{r}}{key}")),
            get_bytes(&mut c, &format!("{{w}}{key}")),
            "{key}"
        );
    }
}

#[test]
fn sketches_and_leases_refuse_it_by_name() {
    let s = Server::with(Config::default().with_policies());
    let mut c = s.conn();
    let refused = |with: &str| format!("ERR syntax error: RESERVE cannot be combined with {with}");
    for (args, with) in [
        (
            &["RL.SKETCH", "k", "i", "1", "1h", "RESERVE", "1h"][..],
            "RL.SKETCH",
        ),
        (
            &["RL.ACQUIRE", "k", "1", "1h", "RESERVE", "1h"],
            "RL.ACQUIRE",
        ),
        (
            &[
                "RL.ALL",
                "2",
                "a",
                "b",
                "GCRA",
                "1",
                "1h",
                "CONCURRENCY",
                "1",
                "1h",
                "RESERVE",
                "1h",
            ],
            "CONCURRENCY",
        ),
        (
            &["RL.GCRA", "k", "1", "1h", "RESERVE", "1h", "WAIT", "1s"],
            "WAIT",
        ),
    ] {
        assert_eq!(error(&mut c, args), refused(with), "{args:?}");
    }
    assert_eq!(
        error(
            &mut c,
            &["RL.GCRA", "k", "1", "1h", "RESERVE", "1h", "FORCE", "COST", "1"]
        ),
        "ERR syntax error: FORCE cannot be combined with RESERVE"
    );
    let e = error(&mut c, &["RL.GCRA", "k", "1", "1h", "RESERVE", "0"]);
    assert!(e.starts_with("ERR RESERVE"), "{e}");
    call(
        &mut c,
        &["RL.POLICY", "SET", "slots", "CONCURRENCY", "1", "1h"],
    )
    .unwrap();
    assert_eq!(
        error(&mut c, &["RL.CHECK", "k", "slots", "RESERVE", "1h"]),
        refused("CONCURRENCY")
    );
    // A named GCRA policy and a named window reserve through RL.CHECK.
    call(&mut c, &["RL.POLICY", "SET", "hourly", "GCRA", "1", "1h"]).unwrap();
    call(
        &mut c,
        &["RL.POLICY", "SET", "per-hour", "FIXED", "1", "1h"],
    )
    .unwrap();
    clock_set(&mut c, T0);
    for name in ["hourly", "per-hour"] {
        let key = format!("k:{name}");
        assert_eq!(ints(&mut c, &["RL.CHECK", &key, name])[0], 1);
        assert_eq!(
            ints(&mut c, &["RL.CHECK", &key, name, "RESERVE", "1h"]),
            [1, 1, 0, -1, 2 * HOUR_MS, HOUR_MS],
            "{name}"
        );
    }
}

#[test]
fn resp3_names_the_delay() {
    let s = Server::start();
    let mut c = s.conn_resp3();
    clock_set(&mut c, T0);
    let fields = resp3_map(call(&mut c, &gcra("k", &["RESERVE", "1h"])).unwrap());
    let mut want: Vec<&str> = DECISION_FIELDS.to_vec();
    want.push("delay_ms");
    assert_eq!(names(&fields), want);
    assert_eq!(fields[5].1, redis::Value::Int(0));
    let fields = resp3_map(call(&mut c, &gcra("k", &[])).unwrap());
    assert_eq!(names(&fields), DECISION_FIELDS);
}

/// Many clients reserving on one key at one instant, from threads on
/// connections of their own: each admitted one takes the next start, one
/// emission interval after the last, whatever the order they arrive in;
/// past `maxdelay` they are denied and charge nothing.
#[test]
fn concurrent_reservations_take_successive_starts() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let mut conn = s.conn();
            std::thread::spawn(move || {
                (0..5)
                    .map(|_| ints(&mut conn, &gcra("k", &["RESERVE", "1d"]))[5])
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let mut delays: Vec<i64> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("a client thread"))
        .collect();
    delays.sort_unstable();
    // 40 asked: the one admitted now, then one an hour for a day.
    let mut want = vec![-1; 15];
    want.extend((0..=24).map(|h| h * HOUR_MS));
    assert_eq!(delays, want);
    // The server's state: the next start is 25 hours away.
    let peek = decide(&mut c, &["RL.PEEK", "k", "GCRA", "1", "1h"]);
    assert_eq!(peek[3], 25 * HOUR_MS);
}

/// Replicas and the AOF receive a reservation's effect, as any
/// admission's (never the command); a denied one sends nothing.
#[test]
fn a_replica_and_the_aof_carry_a_reservation_as_an_admission() {
    let (primary, replica) = primary_with_aof_and_replica();
    let (mut p, mut r) = (primary.conn(), replica.conn());
    clock_set(&mut p, T0);
    assert_eq!(decide(&mut p, &gcra("k", &[]))[0], 1);
    assert_eq!(ints(&mut p, &gcra("k", &["RESERVE", "2h"]))[5], HOUR_MS);
    assert_eq!(ints(&mut p, &gcra("k", &["RESERVE", "1m"]))[5], -1);
    // A window: charged in the window where the admission starts.
    let fixed = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = vec!["RL.FIXED", "w", "1", "1h"];
        v.extend_from_slice(extra);
        v
    };
    assert_eq!(decide(&mut p, &fixed(&[]))[0], 1);
    assert_eq!(ints(&mut p, &fixed(&["RESERVE", "2h"]))[5], HOUR_MS);
    call(&mut p, &["SET", "marker", "1"]).unwrap();
    wait_replicas(&mut p, 1);
    for key in ["k", "w"] {
        assert_eq!(get_bytes(&mut r, key), get_bytes(&mut p, key), "{key}");
        assert_eq!(pexpiretime(&mut r, key), pexpiretime(&mut p, key), "{key}");
    }
    let text = aof_through(&primary, "marker");
    assert!(!text.to_lowercase().contains("reserve"), "{text}");
    assert_eq!(text.matches("PXAT").count(), 4, "{text}");
}
