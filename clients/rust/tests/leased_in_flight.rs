//! A leased limit at 50 requests in flight on one key (closed loop: each
//! task sends its next request once the last is answered) on a
//! multi-threaded runtime denies only when the store denied: on a key with
//! room every request is admitted, at one store command per block, and on
//! a key that runs out exactly its limit is. Callers waiting for units are
//! served in the order they came. Against a real server with the manual
//! clock (nothing refills unless a test moves it), so the counts are exact.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use redis_ratelimit_client::http::HttpLimit;
use redis_ratelimit_client::{
    Charge, Command, Decide, Gcra, LeasePlan, LeasedLimit, Peek, MAX_DURATION,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

const IN_FLIGHT: u64 = 50;
/// The block a leased limit asks for.
const BLOCK: u64 = 20;
const HOUR: Duration = Duration::from_secs(3600);

/// A limit no run spends.
fn room() -> Gcra {
    Gcra::new(1_000_000, MAX_DURATION)
}

/// What the server says is left on `key`.
fn left(c: &mut redis::Connection, key: &str, policy: Gcra) -> u64 {
    Peek::new(key, policy).query(c).unwrap().remaining
}

/// `IN_FLIGHT` tasks, each sending `each` requests one after another
/// through `ask` (admitted or not): how many were admitted.
async fn closed_loop<F, Fut>(each: u64, ask: F) -> u64
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let admitted = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (ask, admitted) = (ask.clone(), admitted.clone());
            tokio::spawn(async move {
                for _ in 0..each {
                    if ask().await {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    admitted.load(Ordering::Relaxed)
}

/// What a leased run did: requests admitted, units the server charged once
/// the rest was refunded, and the store commands sent.
struct Run {
    admitted: u64,
    charged: u64,
    commands: u64,
}

/// A leased limit on `key` in blocks of 20, 50 in flight, `each` requests
/// per task.
fn leased_run(policy: Gcra, each: u64) -> Run {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let (admitted, commands) = block_on_multi(async {
        let client = client(&s, Protocol::Resp2);
        let hot = LeasedLimit::new(client, "hot", policy, LeasePlan::fixed(BLOCK));
        let admitted = closed_loop(each, {
            let hot = hot.clone();
            move || {
                let hot = hot.clone();
                async move { hot.acquire().await.unwrap().allowed }
            }
        })
        .await;
        hot.refund_all().await.unwrap();
        let commands = hot.commands();
        // Admitted from blocks: what landed less what went back; the rest
        // were decided by the store alone (`COST 1`).
        let from_blocks = hot.units_granted() - hot.units_refunded();
        let alone = admitted - from_blocks;
        let refunds = u64::from(hot.units_refunded() > 0);
        println!(
            "leased: {admitted} admitted, {commands} store commands ({} blocks, {refunds} \
             refunds, {alone} decided alone): {:.4} per admission",
            commands - refunds - alone,
            commands as f64 / admitted as f64
        );
        (admitted, commands)
    });
    let limit = policy.limit;
    Run {
        admitted,
        charged: limit - left(&mut c, "hot", policy),
        commands,
    }
}

/// The same through a layer whose per-key limit is leased: requests
/// answered 200, and what the server charged once the rest is refunded.
fn layer_run(policy: Gcra, each: u64) -> (u64, u64) {
    let run = layer_counted(policy, each);
    (run.admitted, run.charged)
}

/// [`layer_run`] with the store commands the layer sent (the server's
/// count of `RL.GCRA`, refunds included).
fn layer_counted(policy: Gcra, each: u64) -> Run {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let before = calls(&mut c, "rl.gcra");
    let (served, refunded) = block_on_multi(async {
        let client = client(&s, Protocol::Resp2);
        let limit = HttpLimit::per_key(policy)
            .name("hot")
            .prefix("rl:")
            .leased(LeasePlan::fixed(BLOCK));
        let layer = by_api_key(client).limit(limit).build().unwrap();
        let app = router(layer.clone());
        let served = closed_loop(each, move || {
            let app = app.clone();
            async move {
                let status = get(&app, Some("k")).await.status;
                assert!(status == 200 || status == 429, "{status}");
                status == 200
            }
        })
        .await;
        let refunded = layer.leased_units();
        layer.refund_all().await.unwrap();
        (served, refunded)
    });
    let commands = calls(&mut c, "rl.gcra") - before;
    let limit = policy.limit;
    let charged = limit - left(&mut c, "rl:k", policy);
    // On a key with room each block grants all 20: the blocks and the
    // requests decided alone (`COST 1`) follow from what was admitted and
    // refunded. (`served + refunded` units were charged, `BLOCK` a block
    // and one a request decided alone.)
    let refunds = u64::from(refunded > 0);
    let blocks = (served + refunded + refunds).saturating_sub(commands) / (BLOCK - 1);
    let alone = (commands - refunds).saturating_sub(blocks);
    println!(
        "layer: {served} admitted, {commands} store commands (about {blocks} blocks, {refunds} \
         refunds, {alone} decided alone): {:.4} per admission",
        commands as f64 / served.max(1) as f64
    );
    Run {
        admitted: served,
        charged,
        commands,
    }
}

#[test]
fn a_leased_limit_at_fifty_in_flight_admits_every_request_a_key_has_room_for() {
    let run = leased_run(room(), 200);
    assert_eq!(
        run.admitted,
        IN_FLIGHT * 200,
        "denied locally with room on the key"
    );
    assert_eq!(run.charged, run.admitted);
}

#[test]
fn at_fifty_in_flight_a_leased_limit_sends_about_one_command_per_block() {
    // One call out at a time, its units handed to the callers in line: a
    // block per 20 admissions, and a refund at the end.
    let run = leased_run(room(), 200);
    assert_eq!(run.admitted, IN_FLIGHT * 200);
    let bound = run.admitted * 105 / (100 * BLOCK) + 3;
    assert!(
        run.commands <= bound,
        "{} store commands for {} admissions in blocks of {BLOCK}: more than {bound}",
        run.commands,
        run.admitted
    );
}

#[test]
fn a_leased_layer_at_fifty_in_flight_answers_no_429_on_a_key_with_room() {
    let (served, charged) = layer_run(room(), 100);
    assert_eq!(served, IN_FLIGHT * 100, "429 with room on the key");
    assert_eq!(charged, served);
}

#[test]
fn at_fifty_in_flight_a_leased_layer_sends_about_one_command_per_block() {
    // As for a leased limit: one call out per key, its units handed to the
    // requests in line, a block per 20 admissions and a refund at the end.
    let run = layer_counted(room(), 100);
    assert_eq!(run.admitted, IN_FLIGHT * 100, "429 with room on the key");
    assert_eq!(run.charged, run.admitted);
    let bound = run.admitted * 105 / (100 * BLOCK) + 3;
    assert!(
        run.commands <= bound,
        "{} store commands for {} admissions in blocks of {BLOCK}: more than {bound}",
        run.commands,
        run.admitted
    );
}

#[test]
fn at_fifty_in_flight_a_key_that_runs_out_admits_exactly_its_limit() {
    let policy = Gcra::new(1000, HOUR);
    let run = leased_run(policy, 60);
    assert_eq!((run.admitted, run.charged), (1000, 1000));
    let (served, charged) = layer_run(policy, 60);
    assert_eq!((served, charged), (1000, 1000));
}

#[test]
fn callers_waiting_for_units_are_served_in_the_order_they_came() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // One unit a second, bursts of 10, spent: every unit is handed out as
    // the server's clock moves, in blocks of 2 queued for on the server.
    let policy = Gcra::new(10, Duration::from_secs(10));
    // The caller wanting 3 comes before those wanting 1: when a block of 2
    // lands it is not enough for it, and nobody behind it takes the units.
    let costs = [1, 3, 1, 1, 2, 1, 1, 1];
    let order = block_on(async {
        let shared = client(&s, Protocol::Resp2);
        let spend = Decide::new("fifo", policy).charge(Charge::Cost(10));
        assert!(shared.send(&spend).await.unwrap().allowed);
        let plan = LeasePlan::fixed(2).queued(Duration::from_secs(60));
        let hot =
            LeasedLimit::new(shared, "fifo", policy, plan).queue_on(client(&s, Protocol::Resp2));
        let order = Arc::new(Mutex::new(Vec::new()));
        let callers: Vec<_> = costs
            .iter()
            .enumerate()
            .map(|(i, &cost)| {
                let (hot, order) = (hot.clone(), order.clone());
                tokio::spawn(async move {
                    let admission = hot.acquire_cost(cost).await.unwrap();
                    order.lock().unwrap().push(i);
                    admission.allowed
                })
            })
            .collect();
        // (Spawned on a single thread, each caller runs up to its wait once
        // the test yields: they come in the order spawned.)
        let served = || order.lock().unwrap().len();
        let mut seconds = 0;
        while served() < costs.len() {
            // The call out has reached the server (or the last caller was
            // just served): a second of units, then the next.
            let mut polls = 0;
            while common::blocking::waiting(&mut c) == 0 && served() < costs.len() {
                polls += 1;
                assert!(polls < 10_000, "no call waits on the server");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            advance(&mut c, SECOND);
            seconds += 1;
            assert!(
                seconds <= 60,
                "served {:?} in a minute",
                order.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for caller in callers {
            assert!(caller.await.unwrap(), "admitted once its units came");
        }
        // One queued call per block of 2 (one of 3 for the caller of 3).
        assert_eq!((hot.commands(), hot.held()), (5, 0));
        let served = order.lock().unwrap().clone();
        served
    });
    println!("served in the order {order:?}");
    assert_eq!(order, (0..costs.len()).collect::<Vec<_>>());
}

#[test]
fn the_layers_requests_waiting_for_units_are_served_in_the_order_they_came() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Blocks of 3 on a key with room, each request costing what its
    // `x-cost` says. The request wanting 3 comes second: the 2 units left
    // of the first block are not enough for it, and nobody behind it
    // takes them.
    let costs = [1, 3, 1, 1, 2, 1, 1, 1];
    let order = block_on(async {
        let limit = HttpLimit::per_key(room())
            .name("fifo")
            .prefix("rl:")
            .leased(LeasePlan::fixed(3));
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(limit)
            .cost(|request| {
                let cost = request.headers.get("x-cost").and_then(|v| v.to_str().ok());
                cost.and_then(|v| v.parse().ok()).unwrap_or(1)
            })
            .build()
            .unwrap();
        let app = router(layer.clone());
        let order = Arc::new(Mutex::new(Vec::new()));
        // (Spawned on a single thread, each request runs up to its wait
        // before the first call is sent: they come in the order spawned.)
        let requests: Vec<_> = costs
            .iter()
            .enumerate()
            .map(|(i, &cost)| {
                let (app, order) = (app.clone(), order.clone());
                tokio::spawn(async move {
                    let cost = cost.to_string();
                    let reply = get_with(&app, &[("x-api-key", "k"), ("x-cost", &cost)]).await;
                    order.lock().unwrap().push(i);
                    reply.status
                })
            })
            .collect();
        for request in requests {
            assert_eq!(request.await.unwrap(), 200, "429 with room on the key");
        }
        layer.refund_all().await.unwrap();
        let served = order.lock().unwrap().clone();
        served
    });
    println!("served in the order {order:?}");
    assert_eq!(order, (0..costs.len()).collect::<Vec<_>>());
    // Every unit admitted is charged, the rest refunded.
    let charged = room().limit - left(&mut c, "rl:k", room());
    assert_eq!(charged, costs.iter().sum::<u64>());
}

/// Leases evicted while requests wait in their lines: a lease capacity of
/// one, five keys taken in turn by 50 requests in flight, so that each new
/// key's lease would evict the one others wait on. Every request is
/// answered (none hangs), each admitted unit was charged on the server,
/// and the requests send about one store command each.
#[test]
fn leases_evicted_while_requests_wait_in_line_admit_nothing_uncharged() {
    const KEYS: u64 = 5;
    const EACH: u64 = 40;
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = room();
    let before = calls(&mut c, "rl.gcra");
    let admitted: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let counts = admitted.clone();
    let server = &s;
    block_on_multi(async move {
        let limit = HttpLimit::per_key(policy)
            .name("hot")
            .prefix("rl:")
            .leased(LeasePlan::fixed(BLOCK));
        let layer = by_api_key(client(server, Protocol::Resp2))
            .limit(limit)
            .lease_capacity(1)
            .build()
            .unwrap();
        let app = router(layer.clone());
        let tasks: Vec<_> = (0..IN_FLIGHT)
            .map(|t| {
                let (app, counts) = (app.clone(), counts.clone());
                tokio::spawn(async move {
                    for i in 0..EACH {
                        let k = (t + i) % KEYS;
                        let status = get(&app, Some(&format!("k{k}"))).await.status;
                        assert_eq!(status, 200, "a key with room");
                        counts[k as usize].fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let all = async {
            for t in tasks {
                t.await.unwrap();
            }
        };
        tokio::time::timeout(Duration::from_secs(120), all)
            .await
            .expect("every request answered");
        layer.refund_all().await.unwrap();
    });
    let commands = calls(&mut c, "rl.gcra") - before;
    let (mut total, mut charged_all) = (0, 0);
    for k in 0..KEYS {
        let charged = policy.limit - left(&mut c, &format!("rl:k{k}"), policy);
        let got = admitted[k as usize].load(Ordering::Relaxed);
        assert!(
            charged >= got,
            "key k{k}: {got} admitted, {charged} charged"
        );
        total += got;
        charged_all += charged;
    }
    assert_eq!(total, IN_FLIGHT * EACH);
    println!(
        "evicted leases: {total} admitted, {commands} store commands, {} units charged \
         and not used (blocks given way with no room to refund them)",
        charged_all - total
    );
    // A lease in use is not given way for another key: that request is
    // decided by the store, so no request sends more than about one command.
    assert!(
        commands <= total * 6 / 5,
        "{commands} store commands for {total} admissions"
    );
}
