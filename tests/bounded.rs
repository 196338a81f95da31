//! Bounded work with many waiters: what one command, one timeout or one
//! clock move costs does not grow with what other clients accumulated. Each
//! scenario is built at scale on a real server with the manual clock, and
//! the work is read from `INFO ratelimit` (`ratelimit_work`: limits
//! decided, waiters touched), a count that does not depend on the machine.

mod common;
use common::blocking::*;
use common::topology::work;
use common::*;
use redis::Connection;

const S: u64 = 1_000_000;

/// The work `f` does on the server.
fn cost_of(c: &mut Connection, f: impl FnOnce(&mut Connection)) -> (u64, u64) {
    let before = work(c);
    f(c);
    let after = work(c);
    (after.0 - before.0, after.1 - before.1)
}

fn set_config(c: &mut Connection, name: &str, value: u64) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(format!("ratelimit.{name}"))
        .arg(value)
        .query(c)
        .expect("CONFIG SET");
}

/// `n` more clients, each sending `args` (a blocking call); returns their
/// connections once the server counts `total` waiting.
fn add_waiters(
    server: &Server,
    ctl: &mut Connection,
    n: usize,
    total: u64,
    args: impl Fn(usize) -> Vec<String>,
) -> Vec<Connection> {
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = server.conn();
        let a = args(i);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        send(&mut c, &a);
        conns.push(c);
    }
    await_waiting(ctl, total);
    conns
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// The command that froze the server: waiters on a lease key with waits
/// shorter than the lease. One acquire costs the same with 20 waiters as
/// with 2,000, and so does each of their timeouts.
#[test]
fn lease_waiters_cost_the_same_at_20_and_at_2000() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, 1_900_000_000 * S);
    set_config(&mut ctl, "max-waiters-per-key", 10_000);
    let held = call(&mut ctl, &["RL.ACQUIRE", "gpu", "1", "1h"]).unwrap();
    assert!(format!("{held:?}").contains("int(1)"), "{held:?}");
    let wait = |_| words("RL.ACQUIRE gpu 1 1h WAIT 30s");
    let mut small = add_waiters(&server, &mut ctl, 20, 20, wait);
    let acquire = |c: &mut Connection| {
        call(c, &["RL.ACQUIRE", "gpu", "1", "1h"]).unwrap();
    };
    let at_20 = cost_of(&mut ctl, acquire);
    let mut large = add_waiters(&server, &mut ctl, 1_980, 2_000, wait);
    let at_2000 = cost_of(&mut ctl, acquire);
    assert_eq!(at_20, at_2000);
    assert!(at_2000.0 <= 16 && at_2000.1 <= 4, "{at_2000:?}");
    // Every wait ends at its deadline, each with a bounded amount of work.
    let (_, touched) = cost_of(&mut ctl, |c| {
        advance(c, 30 * S);
        for w in small.iter_mut().chain(large.iter_mut()) {
            let reply: Vec<redis::Value> =
                redis::from_redis_value(w.recv_response().expect("reply")).unwrap();
            assert_eq!(reply[0], redis::Value::Int(0), "{reply:?}");
        }
    });
    assert!(touched <= 2_000 * 4, "{touched} waiters touched");
    assert_eq!(waiting(&mut ctl), 0);
}

/// A manual-clock server taking 10,000 waiters on a key, where `call_text`
/// has been sent once (spending the limits it names); its words.
fn spent(call_text: &str) -> (Server, Connection, Vec<String>) {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, 1_900_000_000 * S);
    set_config(&mut ctl, "max-waiters-per-key", 10_000);
    let args = words(call_text);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    call(&mut ctl, &a).unwrap();
    (server, ctl, args)
}

/// What a request without WAIT behind a line costs at most when it plays
/// the line out (the first such request after the line changed): the
/// plan's decisions, and at most 48 waiters played out, each taking a few
/// decisions, whatever the length of the line.
fn assert_played_out_within_bound(call_text: &str, (d, w): (u64, u64)) {
    let played = 48 + 1;
    assert!(
        d <= 24 + played * 20 && w <= 3 + played,
        "{call_text} played out: {d} {w}"
    );
}

/// Arrivals on a key with a line of 2,000 waiters cost what they cost
/// behind 10, for every limit that can wait, and RL.ALL over two keys.
#[test]
fn arrivals_cost_the_same_behind_10_and_2000_waiters() {
    let cases: [(&str, &str); 4] = [
        ("RL.GCRA {k}a 1 1h", ""),
        ("RL.FIXED {k}a 1 1h", ""),
        ("RL.SLIDING {k}a 1 1h EXACT", ""),
        ("RL.ALL 2 {k}a {k}b GCRA 1 1h GCRA 1000 1h", ""),
    ];
    for (call_text, _) in cases {
        let (server, mut ctl, args) = spent(call_text);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let waiting_call = |_| {
            let mut v = args.clone();
            v.extend(words("WAIT 100d"));
            v
        };
        let measure = |c: &mut Connection| {
            // A request without WAIT, a dry run, a peek-free look, and a
            // WAIT that does not fit: each answered behind the line. The
            // first request without WAIT behind a line that changed plays
            // the line out (bounded below); asked again of the same line,
            // it costs the plan's decisions alone.
            let first = cost_of(c, |c| {
                call(c, &a).unwrap();
            });
            assert_played_out_within_bound(call_text, first);
            let plain = cost_of(c, |c| {
                call(c, &a).unwrap();
            });
            let mut short = a.clone();
            short.extend(["WAIT", "1ms"]);
            let too_short = cost_of(c, |c| {
                call(c, &short).unwrap();
            });
            (plain, too_short)
        };
        let _ten = add_waiters(&server, &mut ctl, 10, 10, waiting_call);
        let at_10 = measure(&mut ctl);
        let mut joined = Vec::new();
        let joining_at_10 = cost_of(&mut ctl, |c| {
            joined.extend(add_waiters(&server, c, 1, 11, waiting_call));
        });
        let _rest = add_waiters(&server, &mut ctl, 1_989, 2_000, waiting_call);
        let at_2000 = measure(&mut ctl);
        let joining_at_2000 = cost_of(&mut ctl, |c| {
            joined.extend(add_waiters(&server, c, 1, 2_001, waiting_call));
        });
        // The same bounded work, whatever the length of the line: a plan
        // takes at most a few decisions per limit (RL.ALL's two limits
        // may take one more attempt to agree on an instant).
        let bound = (24, 3);
        for (what, (d, w)) in [
            ("plain", at_2000.0),
            ("too short", at_2000.1),
            ("joining", joining_at_2000),
        ] {
            assert!(d <= bound.0 && w <= bound.1, "{call_text} {what}: {d} {w}");
        }
        if !call_text.starts_with("RL.ALL") {
            assert_eq!(at_10, at_2000, "{call_text}");
            assert_eq!(joining_at_10, joining_at_2000, "{call_text}");
        }
    }
}

/// A look behind a line of 2,000 waiters (RL.PEEK on a key, RL.SHARE.PEEK
/// on a path) costs what it costs behind 10: it is answered on the plans.
#[test]
fn looks_cost_the_same_behind_10_and_2000_waiters() {
    let cases: [(&str, &str); 2] = [
        ("RL.GCRA {k}a 1 1h", "RL.PEEK {k}a GCRA 1 1h"),
        (
            "RL.SHARE 2 {k}a {k}b 1 1h CEIL 1 1 1h",
            "RL.SHARE.PEEK 2 {k}a {k}b 1 1h CEIL 1 1 1h",
        ),
    ];
    for (decide_text, look_text) in cases {
        let (server, mut ctl, decide) = spent(decide_text);
        let waiting_call = |_| {
            let mut v = decide.clone();
            v.extend(words("WAIT 100d"));
            v
        };
        let look = words(look_text);
        let l: Vec<&str> = look.iter().map(String::as_str).collect();
        // The first look behind a line that changed plays the line out
        // (bounded); asked again of the same line, the plan's cost alone.
        let look_twice = |c: &mut Connection| {
            let first = cost_of(c, |c| {
                call(c, &l).unwrap();
            });
            assert_played_out_within_bound(look_text, first);
            cost_of(c, |c| {
                call(c, &l).unwrap();
            })
        };
        let _ten = add_waiters(&server, &mut ctl, 10, 10, waiting_call);
        let at_10 = look_twice(&mut ctl);
        let _rest = add_waiters(&server, &mut ctl, 1_990, 2_000, waiting_call);
        let at_2000 = look_twice(&mut ctl);
        assert_eq!(at_10, at_2000, "{look_text}");
        assert!(
            at_2000.0 <= 24 && at_2000.1 <= 3,
            "{look_text}: {at_2000:?}"
        );
    }
}

/// 2,000 waiters over 2,000 keys: an arrival on one more key costs what
/// it costs with one waiter in the server.
#[test]
fn waiters_over_many_keys_do_not_slow_an_arrival() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, 1_900_000_000 * S);
    let fill = |c: &mut Connection, key: &str| {
        call(c, &["RL.GCRA", key, "1", "1h"]).unwrap();
    };
    let wait = |i: usize| words(&format!("RL.GCRA k{i} 1 1h WAIT 100d"));
    fill(&mut ctl, "k0");
    let _one = add_waiters(&server, &mut ctl, 1, 1, wait);
    let lone = cost_of(&mut ctl, |c| fill(c, "k0"));
    for i in 1..2_000 {
        fill(&mut ctl, &format!("k{i}"));
    }
    let _many: Vec<Connection> = (1..2_000)
        .map(|i| {
            let mut c = server.conn();
            let a = wait(i);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            send(&mut c, &a);
            c
        })
        .collect();
    await_waiting(&mut ctl, 2_000);
    let crowded = cost_of(&mut ctl, |c| fill(c, "k0"));
    assert_eq!(lone, crowded);
}

/// A clock move that makes 2,000 admissions due ends at most
/// `ratelimit.wait-events-per-tick` of them before RL.CLOCK replies; the
/// rest follow in the next event-loop iterations, in order, each exact.
#[test]
fn a_clock_move_admits_in_slices_and_in_order() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, 1_900_000_000 * S);
    set_config(&mut ctl, "max-waiters-per-key", 10_000);
    set_config(&mut ctl, "wait-events-per-tick", 100);
    // 2,000 per hour, all spent: one slot every 1.8 s.
    call(&mut ctl, &["RL.GCRA", "k", "2000", "1h", "COST", "2000"]).unwrap();
    let mut waiters = add_waiters(&server, &mut ctl, 2_000, 2_000, |_| {
        words("RL.GCRA k 2000 1h WAIT 100d")
    });
    // The clock move and a look at the line in one transaction: nothing
    // runs between them.
    let (_, info): (u64, String) = redis::pipe()
        .atomic()
        .cmd("RL.CLOCK")
        .arg("ADVANCE")
        .arg(3_600 * S)
        .cmd("INFO")
        .arg("ratelimit")
        .query(&mut ctl)
        .unwrap();
    assert!(info.contains("ratelimit_waiting:1900"), "{info}");
    for (i, w) in waiters.iter_mut().enumerate() {
        let d = recv5(w);
        assert_eq!(d[0], 1, "waiter {i}: {d:?}");
    }
    assert_eq!(waiting(&mut ctl), 0);
    // Nothing left over: the key is spent again.
    assert_eq!(
        decide(&mut ctl, &["RL.GCRA", "k", "2000", "1h", "DRYRUN"])[0],
        0
    );
}

/// The operator's bounds on waiters: past them a WAIT is denied at once,
/// with a wait, and blocks nobody.
#[test]
fn past_the_bounds_on_waiters_a_wait_is_denied_at_once() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, 1_900_000_000 * S);
    set_config(&mut ctl, "max-waiters-per-key", 3);
    set_config(&mut ctl, "max-waiters", 5);
    // The keys' state must outlive adding the waiters, however slowly:
    // without a TTL (the module never reads one; nothing here writes them
    // again).
    atomically(
        &mut ctl,
        &[
            &["RL.GCRA", "a", "1", "1s"],
            &["RL.GCRA", "b", "1", "1s"],
            &["PERSIST", "a"],
            &["PERSIST", "b"],
        ],
    );
    let on = |key: &'static str| move |_| words(&format!("RL.GCRA {key} 1 1s WAIT 1h"));
    let _a = add_waiters(&server, &mut ctl, 3, 3, on("a"));
    let d = decide(&mut ctl, &["RL.GCRA", "a", "1", "1s", "WAIT", "1h"]);
    assert_eq!((d[0], d[3]), (0, 4000), "behind three waiters: {d:?}");
    let _b = add_waiters(&server, &mut ctl, 2, 5, on("b"));
    let d = decide(&mut ctl, &["RL.GCRA", "b", "1", "1s", "WAIT", "1h"]);
    assert_eq!((d[0], d[3]), (0, 3000), "five wait in all: {d:?}");
    assert_eq!(waiting(&mut ctl), 5);
    let bounds: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("ratelimit.max-waiters*")
        .query(&mut ctl)
        .unwrap();
    // max-waiters-per-key, max-waiters-per-flow and max-waiters.
    assert_eq!(bounds.len(), 6, "{bounds:?}");
}

/// The work (decisions, waiters) of a waiter joining flow `flows` (a new
/// one), one joining flow 0 (its own), one of `conns` leaving, and an
/// admission (the clock moved an hour), with `in_flow(i)` the waiting call
/// in flow `i`.
fn flow_costs(
    server: &Server,
    ctl: &mut Connection,
    conns: &mut Vec<Connection>,
    in_flow: &dyn Fn(usize) -> Vec<String>,
    flows: usize,
) -> [(u64, u64); 4] {
    let n = waiting(ctl);
    let new_flow = cost_of(ctl, |c| {
        conns.extend(add_waiters(server, c, 1, n + 1, |_| in_flow(flows)));
    });
    let same_flow = cost_of(ctl, |c| {
        conns.extend(add_waiters(server, c, 1, n + 2, |_| in_flow(0)));
    });
    let leaver = conns.pop().unwrap();
    let leaving = cost_of(ctl, |c| {
        drop(leaver);
        await_waiting(c, n + 1);
    });
    let admission = cost_of(ctl, |c| {
        advance(c, 3_600 * S);
        await_waiting(c, n);
    });
    [new_flow, same_flow, leaving, admission]
}

/// Fair waiting with 1,000 flows on one key: a waiter joining a new flow
/// or its own, one leaving, and an admission cost what they cost with 2
/// flows (the turns are kept by virtual time, O(log flows)).
#[test]
fn fair_waiting_costs_the_same_with_2_and_1000_flows() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, 1_900_000_000 * S);
    set_config(&mut ctl, "max-waiters-per-key", 10_000);
    call(&mut ctl, &["RL.GCRA", "k", "1", "1h"]).unwrap();
    let in_flow = |i: usize| words(&format!("RL.GCRA k 1 1h WAIT 100d FLOW f{i} WEIGHT 3"));
    let mut conns = add_waiters(&server, &mut ctl, 2, 2, in_flow);
    let at_2 = flow_costs(&server, &mut ctl, &mut conns, &in_flow, 2);
    let n = waiting(&mut ctl);
    conns.extend(add_waiters(&server, &mut ctl, 998, n + 998, |i| {
        in_flow(3 + i)
    }));
    let at_1000 = flow_costs(&server, &mut ctl, &mut conns, &in_flow, 1_001);
    assert_eq!(at_2, at_1000);
    assert!(at_1000[3].1 <= 6, "{at_1000:?}");
}

/// Fair waiting over two keys (RL.SHARE's path, RL.ALL's tenant and org
/// limits) with 1,000 flows: joining a new flow or one's own, leaving and
/// an admission cost what they cost with 2 flows (one turn per waiter,
/// O(log) in every line).
#[test]
fn fair_waiting_over_two_keys_costs_the_same_with_2_and_1000_flows() {
    let share = "RL.SHARE 2 {org}:team {org} 1 100d CEIL 100000 1 1h";
    let all = "RL.ALL 2 {org}:team {org} GCRA 1000 1h GCRA 1 1h";
    for command in [share, all] {
        let server = Server::start();
        let mut ctl = server.conn();
        clock_set(&mut ctl, 1_900_000_000 * S);
        set_config(&mut ctl, "max-waiters-per-key", 10_000);
        // The team's assured unit and the org's hour are used.
        call(
            &mut ctl,
            &words(command)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let in_flow = |i: usize| words(&format!("{command} WAIT 100d FLOW f{i} WEIGHT 3"));
        let mut conns = add_waiters(&server, &mut ctl, 2, 2, in_flow);
        let at_2 = flow_costs(&server, &mut ctl, &mut conns, &in_flow, 2);
        let n = waiting(&mut ctl);
        conns.extend(add_waiters(&server, &mut ctl, 998, n + 998, |i| {
            in_flow(3 + i)
        }));
        let at_1000 = flow_costs(&server, &mut ctl, &mut conns, &in_flow, 1_001);
        assert_eq!(at_2, at_1000, "{command}");
        assert!(at_1000[3].1 <= 6, "{command}: {at_1000:?}");
    }
}

/// Flows remembered after their admission (a client re-sending at once
/// gains no turn): 1,000 one-shot flows, each admitted ahead of a
/// backlogged one and remembered, against 1. Joining and the next
/// admission cost the same work with 1 and 1,000 remembered.
#[test]
fn remembered_flows_cost_the_same_at_1_and_1000() {
    let costs = |one_shots: usize| {
        let server = Server::start();
        let mut ctl = server.conn();
        clock_set(&mut ctl, 1_900_000_000 * S);
        call(&mut ctl, &["RL.GCRA", "k", "1", "1h"]).unwrap();
        let backlog = |_| words("RL.GCRA k 1 1h WAIT 100d FLOW a");
        let mut conns = add_waiters(&server, &mut ctl, 2, 2, backlog);
        // The first of a's has its turn; each one-shot flow (weight 1000)
        // starts at the virtual time and goes first, then is remembered.
        for i in 0..one_shots {
            let one = |_| words(&format!("RL.GCRA k 1 1h WAIT 100d FLOW o{i} WEIGHT 1000"));
            conns.extend(add_waiters(&server, &mut ctl, 1, 3, one));
            advance(&mut ctl, 3_600 * S);
            await_waiting(&mut ctl, 2);
        }
        let join = cost_of(&mut ctl, |c| {
            let one = |_| words("RL.GCRA k 1 1h WAIT 100d FLOW new WEIGHT 1000");
            conns.extend(add_waiters(&server, c, 1, 3, one));
        });
        let admission = cost_of(&mut ctl, |c| {
            advance(c, 3_600 * S);
            await_waiting(c, 2);
        });
        (join, admission)
    };
    assert_eq!(costs(1), costs(1_000));
}

fn client_id(c: &mut Connection) -> i64 {
    redis::cmd("CLIENT").arg("ID").query(c).expect("CLIENT ID")
}

/// On a lease key with a line: a disconnect, a `CLIENT UNBLOCK` and a
/// release each cost the same with 20 waiters as with 2,000; a role change
/// ends all 2,000 waits with a bounded amount of work for each.
#[test]
fn leaving_and_releasing_cost_the_same_at_20_and_at_2000() {
    let server = Server::start();
    let mut ctl = server.conn();
    if !client_unblock_allowed(&mut ctl) {
        eprintln!("skipped: this server refuses CLIENT UNBLOCK of a waiter (INFO ratelimit_client_unblock:no)");
        return;
    }
    clock_set(&mut ctl, 1_900_000_000 * S);
    set_config(&mut ctl, "max-waiters-per-key", 10_000);
    let lease_of = |c: &mut Connection| -> String {
        let v: Vec<redis::Value> = cmd(&["RL.ACQUIRE", "gpu", "1", "1h"]).query(c).unwrap();
        redis::from_redis_value(v[5].clone()).expect("a lease")
    };
    let held = lease_of(&mut ctl);
    // CLIENT UNBLOCK needs the id of a blocked client: ask before it blocks.
    let mut small = Vec::new();
    let mut ids = Vec::new();
    // In a known order: the first is the one a release admits.
    for i in 0..20 {
        let mut c = server.conn();
        ids.push(client_id(&mut c));
        send(&mut c, &["RL.ACQUIRE", "gpu", "1", "1h", "WAIT", "100d"]);
        small.push(c);
        await_waiting(&mut ctl, i + 1);
    }
    let costs = |ctl: &mut Connection, conns: &mut Vec<Connection>, ids: &mut Vec<i64>, n: u64| {
        let leaver = conns.pop().unwrap();
        ids.pop();
        let leaving = cost_of(ctl, |c| {
            drop(leaver);
            await_waiting(c, n - 1);
        });
        let id = ids.pop().unwrap();
        let unblocking = cost_of(ctl, |c| {
            let _: i64 = redis::cmd("CLIENT")
                .arg("UNBLOCK")
                .arg(id)
                .query(c)
                .unwrap();
        });
        (leaving, unblocking)
    };
    let at_20 = costs(&mut ctl, &mut small, &mut ids, 20);
    let release_at_20 = cost_of(&mut ctl, |c| {
        let _: i64 = cmd(&["RL.RELEASE", "gpu", &held]).query(c).unwrap();
    });
    // The first waiter holds the lease now: read it from its reply.
    let v: Vec<redis::Value> = redis::from_redis_value(small[0].recv_response().unwrap()).unwrap();
    let held: String = redis::from_redis_value(v[5].clone()).unwrap();
    let mut large = small.split_off(1);
    for _ in 0..1_983 {
        let mut c = server.conn();
        ids.push(client_id(&mut c));
        send(&mut c, &["RL.ACQUIRE", "gpu", "1", "1h", "WAIT", "100d"]);
        large.push(c);
    }
    await_waiting(&mut ctl, 2_000);
    let at_2000 = costs(&mut ctl, &mut large, &mut ids, 2_000);
    let release_at_2000 = cost_of(&mut ctl, |c| {
        let _: i64 = cmd(&["RL.RELEASE", "gpu", &held]).query(c).unwrap();
    });
    assert_eq!(at_20, at_2000);
    assert_eq!(release_at_20, release_at_2000);
    // A role change ends every wait: bounded work for each.
    let (_, touched) = cost_of(&mut ctl, |c| {
        let _: () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(free_port())
            .query(c)
            .unwrap();
        await_waiting(c, 0);
    });
    assert!(touched <= 1_998 * 4, "{touched} waiters touched");
}

#[test]
fn a_shared_parent_costs_the_same_behind_1_and_1000_children() {
    // RL.SHARE: a decision touches its own path only, whatever number of
    // children share the parent.
    let server = Server::start();
    let mut c = server.conn();
    clock_set(&mut c, 1_900_000_000 * S);
    let child = |i: usize| format!("{{org}}:u{i}");
    let share = |c: &mut Connection, i: usize| {
        let key = child(i);
        let args = [
            "RL.SHARE", "2", &key, "{org}", "10", "1h", "CEIL", "50", "100000", "1h",
        ];
        call(c, &args).unwrap();
    };
    share(&mut c, 0);
    let behind_1 = cost_of(&mut c, |c| share(c, 0));
    let mut pipe = redis::pipe();
    for i in 1..=1_000 {
        let key = child(i);
        pipe.cmd("RL.SHARE")
            .arg(&["2", &key, "{org}", "10", "1h", "CEIL", "50", "100000", "1h"])
            .ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    let behind_1000 = cost_of(&mut c, |c| share(c, 0));
    assert_eq!(behind_1, behind_1000);
    assert_eq!(behind_1000, (2, 0), "one decision per node of the path");
}
