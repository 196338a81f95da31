//! What waiting promises under the traffic callers send, on real servers
//! with the manual clock: anything given back wakes the line at once (an
//! admission taken back from a client killed or unblocked in its turn, a
//! release, a renewal), nobody goes ahead of a line (a request without
//! WAIT beside a concurrency line, waiters leaving mid-line), and the
//! `retry_after_ms` told behind a line against when it is really admitted.

mod common;
use common::blocking::*;
use common::*;
use redis::{Connection, Value};

const S: u64 = 1_000_000;
const MIN: u64 = 60 * S;

fn client_id(c: &mut Connection) -> i64 {
    redis::cmd("CLIENT").arg("ID").query(c).expect("CLIENT ID")
}

/// W1 then W2 waiting on `call`, in that order: W1's connection (kept open:
/// dropping it leaves the line), its client id, and W2's connection.
fn two_waiters(
    server: &Server,
    ctl: &mut Connection,
    call: &[&str],
) -> (Connection, i64, Connection) {
    let mut w1 = server.conn();
    let id1 = client_id(&mut w1);
    send(&mut w1, call);
    await_waiting(ctl, 1);
    let mut w2 = server.conn();
    send(&mut w2, call);
    await_waiting(ctl, 2);
    (w1, id1, w2)
}

/// An RL.ACQUIRE's six fields: the five integers and the lease.
fn acquire(c: &mut Connection, args: &[&str]) -> ([i64; 5], Option<String>) {
    reply6(redis::from_redis_value(call(c, args).unwrap()).unwrap())
}

fn reply6(v: Vec<Value>) -> ([i64; 5], Option<String>) {
    let ints: Vec<i64> = v[..5]
        .iter()
        .map(|x| redis::from_redis_value(x.clone()).unwrap())
        .collect();
    let lease = redis::from_redis_value(v[5].clone()).ok();
    (ints.try_into().unwrap(), lease)
}

fn recv6(c: &mut Connection) -> ([i64; 5], Option<String>) {
    reply6(redis::from_redis_value(c.recv_response().unwrap()).unwrap())
}

/// How a client gives up in the same event-loop turn as its admission.
#[derive(Debug, Clone, Copy)]
enum GivesUp {
    Killed,
    UnblockedWithError,
}

impl GivesUp {
    fn pipe(self, pipe: &mut redis::Pipeline, id: i64) {
        match self {
            GivesUp::Killed => pipe.cmd("CLIENT").arg("KILL").arg("ID").arg(id),
            GivesUp::UnblockedWithError => pipe.cmd("CLIENT").arg("UNBLOCK").arg(id).arg("ERROR"),
        };
    }
}

/// `RL.ACQUIRE c 1 1h` held; W1 and W2 wait for it; one write releases it
/// and takes W1 away, admitted in that same turn: its lease is taken back
/// and W2 is admitted at once, with no clock move (not when the taken-back
/// lease would have expired, an hour later).
#[test]
fn a_lease_taken_back_from_a_client_gone_in_its_turn_wakes_the_next_waiter() {
    for gives_up in [GivesUp::Killed, GivesUp::UnblockedWithError] {
        let server = Server::start();
        let mut ctl = server.conn();
        if matches!(gives_up, GivesUp::UnblockedWithError) && !client_unblock_allowed(&mut ctl) {
            continue;
        }
        clock_set(&mut ctl, T0);
        let (_, a) = acquire(&mut ctl, &["RL.ACQUIRE", "c", "1", "1h"]);
        let (_w1, id1, mut w2) = two_waiters(
            &server,
            &mut ctl,
            &["RL.ACQUIRE", "c", "1", "1h", "WAIT", "2h"],
        );
        let mut pipe = redis::pipe();
        pipe.cmd("RL.RELEASE").arg("c").arg(a.unwrap());
        gives_up.pipe(&mut pipe, id1);
        let _: Vec<Value> = pipe.query(&mut ctl).unwrap();
        await_waiting(&mut ctl, 0);
        let (r, lease) = recv6(&mut w2);
        assert_eq!(r[0], 1, "{gives_up:?}: {r:?}");
        assert!(lease.is_some());
        // W2 holds the one unit; W1's was given back.
        let peek = decide(&mut ctl, &["RL.PEEK", "c", "CONCURRENCY", "1", "1h"]);
        assert_eq!(peek[2], 0, "{gives_up:?}: {peek:?}");
        // INFO counts the same: a released, W1's granted and taken back,
        // W2's held.
        let info: String = redis::cmd("INFO").arg("ratelimit").query(&mut ctl).unwrap();
        let leases = "ratelimit_leases:held=1,granted=3,released=2,expired=0";
        assert!(info.contains(leases), "{gives_up:?}: {info}");
    }
}

/// The same on GCRA: W1 admitted by a clock move and killed in that turn;
/// its charge is refunded and W2 is admitted at once, not one emission
/// interval later. (One an hour: the key outlives the test on the wall
/// clock.)
#[test]
fn a_charge_taken_back_from_a_client_gone_in_its_turn_wakes_the_next_waiter() {
    for gives_up in [GivesUp::Killed, GivesUp::UnblockedWithError] {
        let server = Server::start();
        let mut ctl = server.conn();
        if matches!(gives_up, GivesUp::UnblockedWithError) && !client_unblock_allowed(&mut ctl) {
            continue;
        }
        clock_set(&mut ctl, T0);
        assert_eq!(decide(&mut ctl, &["RL.GCRA", "g", "1", "1h"])[0], 1);
        let (_w1, id1, mut w2) = two_waiters(
            &server,
            &mut ctl,
            &["RL.GCRA", "g", "1", "1h", "WAIT", "1d"],
        );
        let mut pipe = redis::pipe();
        pipe.cmd("RL.CLOCK").arg("ADVANCE").arg(60 * MIN);
        gives_up.pipe(&mut pipe, id1);
        let _: Vec<Value> = pipe.query(&mut ctl).unwrap();
        await_waiting(&mut ctl, 0);
        assert_eq!(recv5(&mut w2)[0], 1, "{gives_up:?}");
        // One admission in this hour: W2's.
        assert_eq!(decide(&mut ctl, &["RL.GCRA", "g", "1", "1h"])[0], 0);
    }
}

/// A renewal that ends a lease sooner wakes the line: the waiter is
/// admitted when the renewed lease ends, not when the old one would have.
#[test]
fn a_renewal_that_shortens_a_lease_moves_the_waiter_up() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    let (_, a) = acquire(&mut ctl, &["RL.ACQUIRE", "c", "1", "1h"]);
    let mut w = server.conn();
    send(&mut w, &["RL.ACQUIRE", "c", "1", "1h", "WAIT", "2h"]);
    await_waiting(&mut ctl, 1);
    let renewed = call(&mut ctl, &["RL.RENEW", "c", &a.unwrap(), "1m"]).unwrap();
    assert_eq!(renewed, Value::Int(1));
    advance(&mut ctl, MIN);
    assert_eq!(waiting(&mut ctl), 0);
    assert_eq!(recv6(&mut w).0[0], 1);
}

/// The cut-in: a lease of one of two units held for an hour, a waiter for
/// both; a request without WAIT for the other unit (a lease of 10 minutes)
/// is denied, so that releasing the first lease a minute later admits the
/// waiter at once.
#[test]
fn a_request_without_wait_never_cuts_into_a_concurrency_line() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    let (_, a) = acquire(&mut ctl, &["RL.ACQUIRE", "c", "2", "1h"]);
    let mut w = server.conn();
    send(
        &mut w,
        &["RL.ACQUIRE", "c", "2", "1h", "COST", "2", "WAIT", "2h"],
    );
    await_waiting(&mut ctl, 1);
    let (plain, lease) = acquire(&mut ctl, &["RL.ACQUIRE", "c", "2", "10m"]);
    assert_eq!(plain[0], 0, "{plain:?}");
    assert_eq!(lease, None);
    // The same through RL.ALL with a rate limit beside it.
    let all = call(
        &mut ctl,
        &[
            "RL.ALL",
            "2",
            "r",
            "c",
            "GCRA",
            "10",
            "1s",
            "CONCURRENCY",
            "2",
            "10m",
        ],
    );
    let Ok(Value::Array(all)) = all else {
        panic!("{all:?}");
    };
    assert_eq!(all[0], Value::Int(0), "{all:?}");
    advance(&mut ctl, MIN);
    assert_eq!(
        call(&mut ctl, &["RL.RELEASE", "c", &a.unwrap()]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(waiting(&mut ctl), 0);
    assert_eq!(recv6(&mut w).0[0], 1);
}

/// The first instant (probed every `step` µs of the manual clock) at which
/// `probe` (a DRYRUN) is admitted, in µs from now.
fn truth(ctl: &mut Connection, probe: &[&str], step: u64) -> u64 {
    let mut waited = 0;
    let allowed = |c: &mut Connection| match call(c, probe) {
        Ok(Value::Array(v)) => v.first() == Some(&Value::Int(1)),
        other => panic!("{other:?}"),
    };
    while !allowed(ctl) {
        advance(ctl, step);
        waited += step;
        assert!(waited < 100 * 3_600 * S, "never admitted");
    }
    waited
}

/// Ten waiters on GCRA one an hour; five leave mid-line (three
/// disconnect, two by CLIENT UNBLOCK): those behind move up, and a request
/// without WAIT is told the wait it really has, to the emission interval.
/// (An hour, not a second: the key outlives the test on the wall clock; a
/// key expiring would wake the line.)
#[test]
fn told_behind_a_line_that_shrinks_is_when_it_is_admitted() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    assert_eq!(decide(&mut ctl, &["RL.GCRA", "g", "1", "1h"])[0], 1);
    let mut waiters = Vec::new();
    for i in 0..10 {
        let mut w = server.conn();
        let id = client_id(&mut w);
        send(&mut w, &["RL.GCRA", "g", "1", "1h", "WAIT", "1d"]);
        await_waiting(&mut ctl, i + 1);
        waiters.push((w, id));
    }
    for (i, (_, id)) in waiters.iter().enumerate() {
        match i {
            1 | 4 | 8 => {
                let _: i64 = cmd(&["CLIENT", "KILL", "ID", &id.to_string()])
                    .query(&mut ctl)
                    .unwrap();
            }
            2 | 6 => {
                unblock_or_kill(&mut ctl, *id);
            }
            _ => {}
        }
    }
    await_waiting(&mut ctl, 5);
    let told = decide(&mut ctl, &["RL.GCRA", "g", "1", "1h"]);
    assert_eq!(told[0], 0);
    let probe = ["RL.GCRA", "g", "1", "1h", "DRYRUN"];
    let truth_ms = truth(&mut ctl, &probe, 6 * MIN) / 1_000;
    // Five ahead of it: 6 h (the line's first slot in 1 h, then four more,
    // then its own).
    assert_eq!(truth_ms, 6 * 3_600_000);
    assert_eq!(told[3] as u64, truth_ms, "{told:?}");
}

/// On a concurrency key, what a request without WAIT is told behind a
/// line is the instant by which capacity is certain: every lease held and
/// every waiter's held to its ttl. With a release, it is admitted sooner.
#[test]
fn told_on_a_concurrency_key_is_when_capacity_is_certain() {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    let (_, a) = acquire(&mut ctl, &["RL.ACQUIRE", "c", "1", "1h"]);
    let mut w = server.conn();
    send(&mut w, &["RL.ACQUIRE", "c", "1", "1h", "WAIT", "2h"]);
    await_waiting(&mut ctl, 1);
    let (told, _) = acquire(&mut ctl, &["RL.ACQUIRE", "c", "1", "1h"]);
    assert_eq!(told[..2], [0, 1]);
    // A's hour, then the waiter's.
    assert_eq!(told[3], 7_200_000);
    // Nobody releases: admitted exactly then.
    let probe = ["RL.ACQUIRE", "c", "1", "1h", "DRYRUN"];
    assert_eq!(truth(&mut ctl, &probe, MIN), 120 * MIN);
    assert_eq!(recv6(&mut w).0[0], 1);
    drop(a);
}

/// `n` clients wait in turn with `call` (given `WAIT 1h`); then those at
/// `leaving` leave the line, even positions disconnected, odd ones by
/// CLIENT UNBLOCK. The connections of those left (open: dropping one
/// leaves the line).
fn line_that_shrinks(
    server: &Server,
    ctl: &mut Connection,
    call: &[&str],
    n: u64,
    leaving: &[u64],
) -> Vec<Connection> {
    let calls = vec![call.to_vec(); n as usize];
    mixed_line_that_shrinks(server, ctl, &calls, leaving)
}

/// The same with one call per client, in turn.
fn mixed_line_that_shrinks(
    server: &Server,
    ctl: &mut Connection,
    calls: &[Vec<&str>],
    leaving: &[u64],
) -> Vec<Connection> {
    let n = calls.len() as u64;
    let mut waiters = Vec::new();
    for (i, call) in (0..n).zip(calls) {
        let waiting_call: Vec<&str> = call.iter().copied().chain(["WAIT", "1h"]).collect();
        let mut w = server.conn();
        let id = client_id(&mut w);
        send(&mut w, &waiting_call);
        await_waiting(ctl, i + 1);
        waiters.push((i, w, id));
    }
    for (i, _, id) in &waiters {
        match (leaving.contains(i), i % 2) {
            (true, 0) => {
                let _: i64 = cmd(&["CLIENT", "KILL", "ID", &id.to_string()])
                    .query(ctl)
                    .unwrap();
            }
            (true, _) => {
                unblock_or_kill(ctl, *id);
            }
            _ => {}
        }
    }
    await_waiting(ctl, n - leaving.len() as u64);
    waiters
        .into_iter()
        .filter(|(i, _, _)| !leaving.contains(i))
        .map(|(_, w, _)| w)
        .collect()
}

/// On limits whose room comes in windows (FIXED, SLIDING), the key used
/// up at a window's start (5 a 10 s window): twelve waiters are planned in
/// three windows (5, 5, 2); six leave, none of them the first of its
/// window, so the six left take the next window and one more. A request
/// without WAIT is told the second window, 20 s, and is admitted exactly
/// then (not a window later, as counting the time those six took in the
/// plan would say: none).
#[test]
fn told_behind_a_windowed_line_that_shrinks_is_when_it_is_admitted() {
    // With BUCKETS the key's own arithmetic admits later (its counts move
    // by 2 s subwindows); told and truth still agree.
    let windowed: [(&[&str], u64); 4] = [
        (&["RL.FIXED", "w", "5", "10s", "ALIGNED"], 20_000),
        (&["RL.FIXED", "w", "5", "10s"], 20_000),
        (&["RL.SLIDING", "w", "5", "10s", "EXACT"], 20_000),
        (&["RL.SLIDING", "w", "5", "10s", "BUCKETS", "5"], 24_000),
    ];
    for (call, admitted_ms) in windowed {
        let (server, mut ctl) = used_up(call);
        let _left = line_that_shrinks(&server, &mut ctl, call, 12, &[1, 2, 3, 6, 8, 11]);
        let told = decide(&mut ctl, call);
        assert_eq!(told[0], 0, "{call:?}");
        let probe: Vec<&str> = call.iter().copied().chain(["DRYRUN"]).collect();
        let truth_ms = truth(&mut ctl, &probe, S) / 1_000;
        assert_eq!(truth_ms, admitted_ms, "{call:?}");
        assert_eq!(told[3] as u64, truth_ms, "{call:?}: {told:?}");
        assert_eq!(decide(&mut ctl, call)[0], 1, "{call:?}");
    }
}

/// RL.FIXED, 5 a 10 s window used up: three waiters of cost 2 take 4 of
/// the next window's 5 and the third waits a window more. A request of
/// cost 1 without WAIT fits into the unit they leave: it is told the next
/// window, 10 s (not the one after the line), and admitted exactly then,
/// beside the two waiters.
#[test]
fn told_on_fixed_the_room_a_line_leaves_in_its_first_window() {
    let call = ["RL.FIXED", "w", "5", "10s", "ALIGNED"];
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    for _ in 0..5 {
        assert_eq!(decide(&mut ctl, &call)[0], 1);
    }
    let dear: Vec<&str> = call.iter().copied().chain(["COST", "2"]).collect();
    let _line = line_that_shrinks(&server, &mut ctl, &dear, 3, &[]);
    let told = decide(&mut ctl, &call);
    assert_eq!(told[..2], [0, 5]);
    let probe: Vec<&str> = call.iter().copied().chain(["DRYRUN"]).collect();
    let truth_ms = truth(&mut ctl, &probe, S) / 1_000;
    assert_eq!(truth_ms, 10_000);
    assert_eq!(told[3] as u64, truth_ms, "{told:?}");
    assert_eq!(waiting(&mut ctl), 1);
    assert_eq!(decide(&mut ctl, &call)[0], 1);
}

/// The call with `COST cost`.
/// A server whose key of `call` (a limit of 5) is used up at `T0`, and a
/// connection to it.
fn used_up(call: &[&str]) -> (Server, Connection) {
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    for _ in 0..5 {
        assert_eq!(decide(&mut ctl, call)[0], 1, "{call:?}");
    }
    (server, ctl)
}

fn costing<'a>(call: &[&'a str], cost: &'a str) -> Vec<&'a str> {
    call.iter().copied().chain(["COST", cost]).collect()
}

/// On windowed limits, where the room a later window leaves depends on
/// the order of the costs still in the line: the key used up (5 a 10 s
/// window), waiters of cost 2, 2, 1, 1, 1, 2, 2, 2; the fourth and fifth
/// leave (CLIENT UNBLOCK, killed). Those left take 2+2+1 of the next
/// window and 2+2 of the one after, where the unit left fits no waiter: a
/// request of cost 1 without WAIT is told that window, 20 s, and admitted
/// exactly then (the line's plan, packed with those who left, ends a
/// window later).
#[test]
fn told_behind_a_windowed_line_of_mixed_costs_is_when_it_is_admitted() {
    let windowed: [(&[&str], Option<u64>); 3] = [
        (&["RL.FIXED", "w", "5", "10s", "ALIGNED"], Some(20_000)),
        (&["RL.SLIDING", "w", "5", "10s", "EXACT"], Some(20_000)),
        // Its counts move by 2 s subwindows: told and truth agree.
        (&["RL.SLIDING", "w", "5", "10s", "BUCKETS", "5"], None),
    ];
    for (call, admitted_ms) in windowed {
        let (server, mut ctl) = used_up(call);
        let costs = ["2", "2", "1", "1", "1", "2", "2", "2"];
        let calls: Vec<Vec<&str>> = costs.iter().map(|c| costing(call, c)).collect();
        let _left = mixed_line_that_shrinks(&server, &mut ctl, &calls, &[3, 4]);
        let told = decide(&mut ctl, call);
        assert_eq!(told[0], 0, "{call:?}");
        // Asked again, the same (the figure is kept).
        assert_eq!(decide(&mut ctl, call), told, "{call:?}");
        let probe: Vec<&str> = call.iter().copied().chain(["DRYRUN"]).collect();
        let truth_ms = truth(&mut ctl, &probe, S) / 1_000;
        if let Some(ms) = admitted_ms {
            assert_eq!(truth_ms, ms, "{call:?}");
        }
        assert_eq!(told[3] as u64, truth_ms, "{call:?}: {told:?}");
        // Beside the last waiter, whom the unit does not fit.
        assert_eq!(waiting(&mut ctl), 1, "{call:?}");
        assert_eq!(decide(&mut ctl, call)[0], 1, "{call:?}");
    }
}

/// RL.ALL over a fixed window `u` (5 a 10 s) and a sliding log `o` (10 a
/// 10 s), both used up; waiters over both and over `o` alone, of costs 1
/// and 2, three leaving (CLIENT UNBLOCK, killed). Those left all fit the
/// next window of each: a request over both without WAIT is told 10 s and
/// admitted exactly then (the latest of the lines' plans, packed with those
/// who left, says 20 s).
#[test]
fn told_over_rl_all_behind_a_line_that_shrinks_is_when_it_is_admitted() {
    let both = [
        "RL.ALL", "2", "u", "o", "FIXED", "5", "10s", "ALIGNED", "SLIDING", "10", "10s", "EXACT",
    ];
    let o = ["RL.SLIDING", "o", "10", "10s", "EXACT"];
    let server = Server::start();
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    for _ in 0..5 {
        assert_eq!(combined(&mut ctl, &both).0, 1);
        assert_eq!(decide(&mut ctl, &o)[0], 1);
    }
    let calls = [
        costing(&both, "1"),
        costing(&both, "2"),
        costing(&o, "2"),
        costing(&both, "2"),
        costing(&both, "1"),
        costing(&o, "1"),
        costing(&both, "2"),
        costing(&both, "2"),
    ];
    let _left = mixed_line_that_shrinks(&server, &mut ctl, &calls, &[1, 3, 6]);
    let (allowed, _, told_ms, _) = combined(&mut ctl, &both);
    assert_eq!(allowed, 0);
    let probe: Vec<&str> = both.iter().copied().chain(["DRYRUN"]).collect();
    let truth_ms = truth(&mut ctl, &probe, S) / 1_000;
    assert_eq!(truth_ms, 10_000);
    assert_eq!(told_ms as u64, truth_ms);
    assert_eq!(waiting(&mut ctl), 0);
}

/// RL.SHARE: leaves `a` and `b` (1 per 2 min assured, up to 1 a minute)
/// under a root of 1 a minute, both used up; waiters on either leaf in
/// turn, some leaving (killed, CLIENT UNBLOCK): a request on `a` without
/// WAIT is told when the line, each waiter admitted as its path allows,
/// lets it in, and is admitted exactly then (the latest of the lines'
/// plans, packed with those who left, says 8 min for the first line and
/// 5 min for the second).
#[test]
fn told_over_rl_share_behind_a_line_that_shrinks_is_when_it_is_admitted() {
    let path = |leaf: &'static str| {
        vec![
            "RL.SHARE", "2", leaf, "r", "1", "2m", "CEIL", "2", "CBURST", "2", "1", "1m",
        ]
    };
    let (a, b) = (path("a"), path("b"));
    // The leaf of each waiter, those leaving, when the request is admitted.
    let lines: [(&str, &[u64], u64); 2] = [
        ("bbbaaba", &[0, 2, 4, 5], 5 * MIN),
        ("aabbaab", &[1, 2, 5], 6 * MIN),
    ];
    for (leaves, leaving, admitted) in lines {
        let server = Server::start();
        let mut ctl = server.conn();
        clock_set(&mut ctl, T0);
        while combined(&mut ctl, &a).0 == 1 {}
        while combined(&mut ctl, &b).0 == 1 {}
        let calls: Vec<Vec<&str>> = (leaves.chars())
            .map(|leaf| if leaf == 'a' { a.clone() } else { b.clone() })
            .collect();
        let _left = mixed_line_that_shrinks(&server, &mut ctl, &calls, leaving);
        let (allowed, _, told_ms, _) = combined(&mut ctl, &a);
        assert_eq!(allowed, 0);
        let probe: Vec<&str> = a.iter().copied().chain(["DRYRUN"]).collect();
        let truth_ms = truth(&mut ctl, &probe, S) / 1_000;
        assert_eq!(truth_ms, admitted / 1_000, "{leaving:?}");
        assert_eq!(told_ms as u64, truth_ms, "{leaving:?}");
    }
}
