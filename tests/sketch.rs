//! RL.SKETCH against a real server with the manual clock: one item up to
//! its limit, other items unaffected, forced collisions, window roll-over,
//! parameter mismatches, bad input, the fixed size of the key and what an
//! admitted request replicates.

mod common;
use common::*;

fn at(c: &mut redis::Connection, us: u64) {
    clock_set(c, T0 + us);
}

fn err(c: &mut redis::Connection, args: &[&str]) -> String {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    error_of(c, &args).1
}

fn strlen(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("STRLEN").arg(key).query(c).expect("STRLEN")
}

#[test]
fn one_item_up_to_its_limit_then_denied_then_rolled_over() {
    let s = Server::start();
    let mut c = s.conn();
    let ip = |item| ["RL.SKETCH", "s", item, "3", "60"];
    at(&mut c, 0);
    assert_eq!(decide(&mut c, &ip("198.51.100.1")), [1, 3, 2, -1, 120000]);
    assert_eq!(decide(&mut c, &ip("198.51.100.1")), [1, 3, 1, -1, 120000]);
    let (reply, written) = decide_timed(&mut c, &ip("198.51.100.1"));
    assert_eq!(reply, [1, 3, 0, -1, 120000]);
    // 3 in the previous window weigh at most 2 from 20 s into the next.
    assert_eq!(
        decide(&mut c, &ip("198.51.100.1")),
        [0, 3, 0, 80000, 120000]
    );
    // The last write's TTL is its reset_after_ms; the denial wrote nothing.
    assert_expires_after(&mut c, "s", 120_000, written);
    // Another item is not affected in a wide sketch (the default 2048 × 4).
    assert_eq!(decide(&mut c, &ip("198.51.100.2")), [1, 3, 2, -1, 120000]);
    assert_eq!(strlen(&mut c, "s"), 26 + 12 * 2048 * 4);
    at(&mut c, 80 * SECOND - MS);
    assert_eq!(decide(&mut c, &ip("198.51.100.1"))[..4], [0, 3, 0, 1]);
    at(&mut c, 80 * SECOND);
    assert_eq!(decide(&mut c, &ip("198.51.100.1")), [1, 3, 0, -1, 100000]);
    // Two windows on, every count has rolled out.
    at(&mut c, 200 * SECOND);
    assert_eq!(decide(&mut c, &ip("198.51.100.1")), [1, 3, 2, -1, 100000]);
}

#[test]
fn forced_collisions_deny_with_the_wait_of_the_estimate() {
    let s = Server::start();
    let mut c = s.conn();
    let one_cell = |item, cost| {
        [
            "RL.SKETCH",
            "s",
            item,
            "5",
            "1m",
            "WIDTH",
            "1",
            "DEPTH",
            "1",
            "COST",
            cost,
        ]
    };
    at(&mut c, 0);
    assert_eq!(decide(&mut c, &one_cell("a", "3")), [1, 5, 2, -1, 120000]);
    // b shares a's only cell: its estimate is 3, and 3 + 3 > 5 until the 3
    // of the previous window weigh at most 2, 20 s into the next window.
    assert_eq!(
        decide(&mut c, &one_cell("b", "3")),
        [0, 5, 2, 80000, 120000]
    );
    assert_eq!(decide(&mut c, &one_cell("b", "2")), [1, 5, 0, -1, 120000]);
    // Now 5: anything waits for the next window, and then until 5 × (60 −
    // e) / 60 ≤ 4, e ≥ 12 s.
    assert_eq!(
        decide(&mut c, &one_cell("c", "1")),
        [0, 5, 0, 72000, 120000]
    );
    at(&mut c, 72 * SECOND - MS);
    assert_eq!(decide(&mut c, &one_cell("c", "1"))[..4], [0, 5, 0, 1]);
    at(&mut c, 72 * SECOND);
    assert_eq!(decide(&mut c, &one_cell("c", "1")), [1, 5, 0, -1, 108000]);
}

#[test]
fn collisions_never_admit_an_item_beyond_its_own_limit() {
    // Every request the sketch admits is replayed on the item's own
    // RL.SLIDING APPROX key, which must admit it too.
    let s = Server::start();
    let mut c = s.conn();
    at(&mut c, 0);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut admitted, mut denied) = (0, 0);
    for _ in 0..600 {
        let r = next();
        // Steps of up to 42 min against windows of 10 h: the keys outlive
        // the test on the wall clock, however slow the machine.
        advance(&mut c, (r % 700) * 3_600 * MS);
        let item = format!("i{}", (r >> 16) % 9);
        let cost = ((r >> 32) % 3 + 1).to_string();
        let d = decide(
            &mut c,
            &[
                "RL.SKETCH",
                "s",
                &item,
                "4",
                "10h",
                "WIDTH",
                "3",
                "DEPTH",
                "2",
                "COST",
                &cost,
            ],
        );
        if d[0] == 1 {
            admitted += 1;
            let own = format!("own:{item}");
            let mine = decide(
                &mut c,
                &["RL.SLIDING", &own, "4", "10h", "APPROX", "COST", &cost],
            );
            assert_eq!(
                mine[0], 1,
                "{item} admitted by the sketch beyond its own limit"
            );
            assert!(
                d[2] <= mine[2],
                "remaining {} above the item's own {}",
                d[2],
                mine[2]
            );
        } else {
            denied += 1;
        }
    }
    assert!(
        admitted > 50 && denied > 50,
        "{admitted} admitted, {denied} denied"
    );
}

#[test]
fn dryrun_and_cost_zero_write_nothing_and_the_empty_item_is_an_item() {
    let s = Server::start();
    let mut c = s.conn();
    at(&mut c, 0);
    let base = [
        "RL.SKETCH",
        "s",
        "x",
        "2",
        "1m",
        "WIDTH",
        "16",
        "DEPTH",
        "2",
    ];
    let with = |extra: &[&'static str]| [&base[..], extra].concat();
    assert_eq!(decide(&mut c, &with(&["DRYRUN"])), [1, 2, 1, -1, 120000]);
    assert_eq!(decide(&mut c, &with(&["COST", "0"])), [1, 2, 2, -1, 0]);
    assert_eq!(get_bytes(&mut c, "s"), None);
    assert_eq!(decide(&mut c, &with(&["COST", "3"])), [0, 2, 2, -1, 0]);
    let empty = ["RL.SKETCH", "s", "", "2", "1m", "WIDTH", "16", "DEPTH", "2"];
    assert_eq!(decide(&mut c, &empty), [1, 2, 1, -1, 120000]);
    assert_eq!(strlen(&mut c, "s"), 26 + 12 * 32);
}

#[test]
fn a_sketch_with_other_parameters_is_an_error_naming_the_mismatch() {
    let s = Server::start();
    let mut c = s.conn();
    at(&mut c, 0);
    decide(
        &mut c,
        &[
            "RL.SKETCH",
            "s",
            "x",
            "5",
            "1m",
            "WIDTH",
            "16",
            "DEPTH",
            "2",
        ],
    );
    assert_eq!(
        err(
            &mut c,
            &["RL.SKETCH", "s", "x", "5", "1m", "WIDTH", "8", "DEPTH", "2"]
        ),
        "WRONGTYPE key holds RL.SKETCH state with WIDTH 16, not 8"
    );
    assert_eq!(
        err(&mut c, &["RL.SKETCH", "s", "x", "5", "1m", "WIDTH", "16"]),
        "WRONGTYPE key holds RL.SKETCH state with DEPTH 2, not 4"
    );
    assert_eq!(
        err(&mut c, &["RL.SKETCH", "s", "x", "5", "1m"]),
        "WRONGTYPE key holds RL.SKETCH state with WIDTH 16, not 2048"
    );
    assert_eq!(
        err(
            &mut c,
            &[
                "RL.SKETCH",
                "s",
                "x",
                "5",
                "30s",
                "WIDTH",
                "16",
                "DEPTH",
                "2"
            ]
        ),
        "WRONGTYPE key holds RL.SKETCH state with window 60000ms, not 30000ms"
    );
    assert_eq!(
        err(&mut c, &["RL.SLIDING", "s", "5", "1m", "APPROX"]),
        "WRONGTYPE key holds RL.SKETCH state, not RL.SLIDING APPROX state"
    );
    decide(&mut c, &["RL.GCRA", "g", "5", "1m"]);
    assert_eq!(
        err(&mut c, &["RL.SKETCH", "g", "x", "5", "1m"]),
        "WRONGTYPE key holds RL.GCRA state, not RL.SKETCH state"
    );
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("text")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        err(&mut c, &["RL.SKETCH", "t", "x", "5", "1m"]),
        "WRONGTYPE key holds a string that is not RL.SKETCH state"
    );
    // A different limit on the same sketch is a different policy, not a
    // different layout: allowed.
    assert_eq!(
        decide(
            &mut c,
            &[
                "RL.SKETCH",
                "s",
                "x",
                "9",
                "1m",
                "WIDTH",
                "16",
                "DEPTH",
                "2"
            ]
        ),
        [1, 9, 7, -1, 120000]
    );
}

#[test]
fn bad_arguments_are_named() {
    let s = Server::start();
    let mut c = s.conn();
    let call = |opt: &'static str, v: &'static str| ["RL.SKETCH", "s", "x", "5", "1m", opt, v];
    for v in ["0", "262145", "abc", "-1", "99999999999999999999999"] {
        assert_eq!(
            err(&mut c, &call("WIDTH", v)),
            "ERR WIDTH must be an integer from 1 to 262144"
        );
    }
    for v in ["0", "9", "x"] {
        assert_eq!(
            err(&mut c, &call("DEPTH", v)),
            "ERR DEPTH must be an integer from 1 to 8"
        );
    }
    assert_eq!(
        err(&mut c, &["RL.SKETCH", "s", "x", "4294967296", "1m"]),
        "ERR limit must be an integer from 1 to 4294967295"
    );
    assert_eq!(
        err(&mut c, &["RL.SKETCH", "s", "x", "5"]),
        "ERR wrong number of arguments for 'rl.sketch' command"
    );
    assert_eq!(
        err(
            &mut c,
            &["RL.SKETCH", "s", "x", "5", "1m", "WIDTH", "4", "WIDTH", "4"]
        ),
        "ERR syntax error: WIDTH given more than once"
    );
    assert_eq!(get_bytes(&mut c, "s"), None);
}

fn start_replica_of(primary: &Server) -> Server {
    let replica = Server::with(topology::replica_config(primary));
    topology::wait_link_up(&replica);
    replica
}

/// Replication bytes per admitted request on a sketch of `width` × 4.
fn bytes_per_request(p: &mut redis::Connection, width: &str) -> u64 {
    let key = format!("s{width}");
    let call = |item: String| {
        // An hour: the key outlives the test on the wall clock.
        let args = ["RL.SKETCH", &key, &item, "1000", "1h", "WIDTH", width];
        args.map(str::to_string)
    };
    let call_ok = |p: &mut redis::Connection, item: String| {
        let args = call(item);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(decide(p, &args)[0], 1);
    };
    call_ok(p, "first".into());
    let before = topology::repl_offset(p);
    for i in 0..8 {
        call_ok(p, format!("item{i}"));
    }
    (topology::repl_offset(p) - before) / 8
}

#[test]
fn replicas_get_patches_that_grow_with_depth_not_width() {
    let primary = Server::start();
    let replica = start_replica_of(&primary);
    let mut p = primary.conn();
    at(&mut p, 0);
    // A 3 MiB sketch is beyond the default ratelimit.max-sketch-bytes.
    let _: () = cmd(&["CONFIG", "SET", "ratelimit.max-sketch-bytes", "4194304"])
        .query(&mut p)
        .unwrap();
    let narrow = bytes_per_request(&mut p, "16");
    let wide = bytes_per_request(&mut p, "65536");
    println!(
        "RL.SKETCH replication bytes per admitted request: WIDTH 16: {narrow}, WIDTH 65536: {wide}"
    );
    // The header's index and sweep, up to five 12-byte cells, as SETRANGEs,
    // and a PEXPIREAT. The wide sketch's key name and offsets are longer,
    // and its counters are never next to each other (merged into one range);
    // its value is 3 MiB.
    assert!(narrow < 600 && wide < 600, "{narrow} {wide}");
    assert!(
        wide.abs_diff(narrow) <= 100,
        "WIDTH 16: {narrow}, WIDTH 65536: {wide}"
    );
    let mut r = replica.conn();
    topology::wait_replicas(&mut p, 1);
    for key in ["s16", "s65536"] {
        assert_eq!(get_bytes(&mut r, key), get_bytes(&mut p, key), "{key}");
        assert_eq!(pexpiretime(&mut r, key), pexpiretime(&mut p, key), "{key}");
    }
}

/// The five reply fields of a core decision, as the server sends them.
fn fields(d: &redis_ratelimit::api::Decision) -> [i64; 5] {
    use redis_ratelimit::api::RetryAfter;
    let retry = match d.retry_after {
        RetryAfter::After(us) => us.ceil_millis() as i64,
        RetryAfter::NotNeeded | RetryAfter::Never => -1,
    };
    [
        i64::from(d.allowed),
        d.limit as i64,
        d.remaining as i64,
        retry,
        d.reset_after.ceil_millis() as i64,
    ]
}

#[test]
fn the_server_decides_and_stores_exactly_as_the_core() {
    use redis_ratelimit::api::{self, MemoryStore, Micros, Request};
    let s = Server::start();
    let mut c = s.conn();
    let mut store = MemoryStore::new(1);
    let mut now = T0 + 7 * SECOND;
    // The core's timeline first; then the server's, in one transaction:
    // the key lives a few seconds of wall clock, which must not pass
    // between two of its 400 steps.
    let mut steps = Vec::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..400 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        now += (seed % 900) * MS + seed % 1000;
        let item = format!("10.1.{}", (seed >> 20) % 13);
        let cost = ((seed >> 40) % 4).to_string();
        let mut args: Vec<String> = [
            "RL.SKETCH",
            "k",
            &item,
            "6",
            "5s",
            "WIDTH",
            "5",
            "DEPTH",
            "3",
            "COST",
            &cost,
        ]
        .map(String::from)
        .to_vec();
        if (seed >> 50).is_multiple_of(10) {
            args.push("DRYRUN".into());
        }
        let words: Vec<&str> = args.iter().map(String::as_str).collect();
        let (policy, request): (_, Request) = api::parse("RL.SKETCH", &words[2..]).unwrap();
        let want = api::decide(&mut store, &[policy], Micros::new(now), &request).unwrap();
        let stored = store.values[0].clone();
        steps.push((now.to_string(), args, fields(&want.decisions[0]), stored));
    }
    let mut commands: Vec<Vec<&str>> = Vec::new();
    for (at, args, _, _) in &steps {
        commands.push(vec!["RL.CLOCK", "SET", at]);
        commands.push(args.iter().map(String::as_str).collect());
        commands.push(vec!["GET", "k"]);
    }
    let commands: Vec<&[&str]> = commands.iter().map(Vec::as_slice).collect();
    let replies = atomically(&mut c, &commands);
    for (i, (_, args, want, stored)) in steps.iter().enumerate() {
        assert_eq!(&five(&replies[3 * i + 1]), want, "{args:?}");
        let got: Option<Vec<u8>> = redis::from_redis_value(replies[3 * i + 2].clone()).unwrap();
        assert_eq!(&got, stored, "{args:?}");
    }
}

#[test]
fn a_sketch_beyond_the_operators_bound_is_refused_naming_the_setting() {
    let s = Server::start();
    let mut c = s.conn();
    at(&mut c, 0);
    let sketch = |key: &str, width: &str, depth: &str| -> Vec<Vec<u8>> {
        [
            "RL.SKETCH",
            key,
            "ip",
            "5",
            "1m",
            "WIDTH",
            width,
            "DEPTH",
            depth,
        ]
        .map(|a| a.as_bytes().to_vec())
        .to_vec()
    };
    fn args(v: &[Vec<u8>]) -> Vec<&[u8]> {
        v.iter().map(Vec::as_slice).collect()
    }
    let before = digest(&mut c);
    // 26 + 12 × 21845 × 4 bytes is more than 1 MiB, the default.
    let refused = "ERR WIDTH * DEPTH must be at most 87379 (ratelimit.max-sketch-bytes)";
    for (w, d) in [("21845", "4"), ("262144", "8"), ("87380", "1")] {
        let (_, msg) = error_of(&mut c, &args(&sketch("big", w, d)));
        assert_eq!(msg, refused, "{w} × {d}");
    }
    assert_eq!(digest(&mut c), before);
    // The largest sketch the default allows.
    let r = decide(
        &mut c,
        &[
            "RL.SKETCH",
            "ok",
            "ip",
            "5",
            "1m",
            "WIDTH",
            "21844",
            "DEPTH",
            "4",
        ],
    );
    assert_eq!(r[0], 1);
    let len: i64 = cmd(&["STRLEN", "ok"]).query(&mut c).unwrap();
    assert_eq!(len, 26 + 12 * 21844 * 4);
    // The operator raises (or lowers) the bound.
    let _: () = cmd(&["CONFIG", "SET", "ratelimit.max-sketch-bytes", "4096"])
        .query(&mut c)
        .unwrap();
    let (_, msg) = error_of(&mut c, &args(&sketch("small", "100", "4")));
    assert_eq!(
        msg,
        "ERR WIDTH * DEPTH must be at most 339 (ratelimit.max-sketch-bytes)"
    );
}
