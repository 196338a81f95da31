//! Many requests in flight per key on a multi-threaded runtime, callers
//! that give up, and the layer's answers when the store errs: against
//! real servers with the manual clock (no unit accrues), so every count is
//! exact.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use axum::Router;
use common::*;
use redis_ratelimit_client::http::HttpLimit;
use redis_ratelimit_client::{
    acquire, Command, Concurrency, Error, Gcra, LeasePlan, LeasedLimit, Peek,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::*;

const HOUR: Duration = Duration::from_secs(3600);
const IN_FLIGHT: usize = 50;

fn left(c: &mut redis::Connection, key: &str, policy: Gcra) -> u64 {
    Peek::new(key, policy).query(c).unwrap().remaining
}

/// `rounds` of `IN_FLIGHT` concurrent acquires on each of `processes`:
/// what they admitted.
async fn hammer(processes: &[LeasedLimit], rounds: usize) -> u64 {
    let admitted = Arc::new(AtomicU64::new(0));
    for _ in 0..rounds {
        let mut tasks = Vec::new();
        for p in processes {
            for _ in 0..IN_FLIGHT {
                let (p, admitted) = (p.clone(), admitted.clone());
                tasks.push(tokio::spawn(async move {
                    if p.acquire().await.unwrap().allowed {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
    }
    admitted.load(Ordering::Relaxed)
}

#[test]
fn fifty_requests_in_flight_per_key_send_one_call_at_a_time_and_lose_no_unit() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(200, HOUR);
    block_on_multi(async {
        // Three processes, each with its own connection.
        let processes: Vec<_> = (0..3)
            .map(|_| {
                let client = client(&s, Protocol::Resp2);
                LeasedLimit::new(client, "hot", policy, LeasePlan::fixed(20))
            })
            .collect();
        let before = calls(&mut c, "rl.gcra");
        // 20 rounds of 150 requests in flight for 200 units.
        let admitted = hammer(&processes, 20).await;
        let held: u64 = processes.iter().map(|p| p.held()).sum();
        assert_eq!(admitted + held, 200, "every unit granted is used or held");
        assert!(admitted >= 200 - 3 * 20, "{admitted}");
        assert!(processes.iter().all(|p| p.held() <= 20));
        // Ten blocks, then one denial per process and round at most.
        let commands = calls(&mut c, "rl.gcra") - before;
        assert!(commands <= 10 + 3 * 20, "{commands}");
        let sent: u64 = processes.iter().map(|p| p.commands()).sum();
        assert_eq!(sent, commands);
        for p in &processes {
            p.refund_all().await.unwrap();
        }
        assert_eq!(left(&mut c, "hot", policy), held);
    });
}

#[test]
fn callers_that_give_up_lose_nothing_the_server_granted() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(100, HOUR);
    block_on_multi(async {
        let hot = LeasedLimit::new(
            client(&s, Protocol::Resp3),
            "gave-up",
            policy,
            LeasePlan::fixed(20),
        );
        // Each request is dropped as soon as it has started (its call, if
        // it sent one, is out); some finish in the meantime.
        let mut admitted = 0;
        for _ in 0..200 {
            if matches!(tokio::time::timeout(Duration::ZERO, hot.acquire()).await, Ok(Ok(a)) if a.allowed)
            {
                admitted += 1;
            }
        }
        // The calls out land in the lease; refund_all waits for them and
        // gives back what is held: the server has every unit not admitted.
        hot.refund_all().await.unwrap();
        assert_eq!(admitted + left(&mut c, "gave-up", policy), 100);
        assert_eq!(hot.held(), 0);
    });
}

#[test]
fn a_dropped_lease_refunds_what_lands_after_it() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(100, HOUR);
    block_on_multi(async {
        let hot = LeasedLimit::new(
            client(&s, Protocol::Resp2),
            "dropped",
            policy,
            LeasePlan::fixed(20),
        );
        // The idle-refund task holds the lease weakly: it ends with it.
        let refunder = hot.refund_when_idle(Duration::from_millis(2));
        // A call out, its caller gone, then the lease dropped. (On a loaded
        // machine the call may land before the caller gives up: then it is
        // admitted, and that unit is used.)
        let answer = tokio::time::timeout(Duration::ZERO, hot.acquire()).await;
        let used = u64::from(matches!(answer, Ok(Ok(a)) if a.allowed));
        drop(hot);
        refunder.await.unwrap();
        // Whatever was granted and not used goes back (bounded wait for the
        // background refund).
        let mut polls = 0;
        while left(&mut c, "dropped", policy) != 100 - used {
            polls += 1;
            let now = left(&mut c, "dropped", policy);
            assert!(polls < 5000, "never refunded: {now} left");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
}

/// `rounds` of `IN_FLIGHT` concurrent requests on `key` through each app:
/// the statuses.
async fn requests(apps: &[Router], key: &'static str, rounds: usize) -> Vec<u16> {
    let mut statuses = Vec::new();
    for _ in 0..rounds {
        let mut tasks = Vec::new();
        for app in apps {
            for _ in 0..IN_FLIGHT {
                let app = app.clone();
                tasks.push(tokio::spawn(
                    async move { get(&app, Some(key)).await.status },
                ));
            }
        }
        for t in tasks {
            statuses.push(t.await.unwrap());
        }
    }
    statuses
}

#[test]
fn the_layer_at_fifty_in_flight_admits_the_limit_from_leased_blocks() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(200, HOUR);
    block_on_multi(async {
        let layers = hot_leased_layers(&s, policy, 2, by_api_key);
        let apps: Vec<_> = layers.iter().map(|l| router(l.clone())).collect();
        let before = calls(&mut c, "rl.gcra");
        let statuses = requests(&apps, "anyone", 10).await;
        let admitted = statuses.iter().filter(|&&s| s == 200).count() as u64;
        assert!(statuses.iter().all(|&s| s == 200 || s == 429));
        let held: u64 = layers.iter().map(|l| l.leased_units()).sum();
        assert_eq!(admitted + held, 200);
        assert!(admitted >= 200 - 2 * 20, "{admitted}");
        let commands = calls(&mut c, "rl.gcra") - before;
        assert!(commands <= 10 + 2 * 10, "{commands}");
    });
}

#[test]
fn the_deny_cache_sends_one_request_for_fifty_on_a_key_it_denied_lately() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // One unit an hour of the server's clock (the key outlives the test
    // on the wall clock).
    let policy = Gcra::new(1000, 1000 * HOUR).burst(1);
    block_on_multi(async {
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(HttpLimit::per_key(policy).name("per-key").prefix("rl:"))
            .deny_cache(100)
            .build()
            .unwrap();
        let app = router(layer.clone());
        assert_eq!(get(&app, Some("alice")).await.status, 200);
        // The next unit is 1 ms away: denied, remembered for 1 ms.
        advance(&mut c, 3_599_999_000);
        assert_eq!(get(&app, Some("alice")).await.status, 429);
        // The remembered denial ends (the wait is the point of the test).
        tokio::time::sleep(Duration::from_millis(5)).await;
        advance(&mut c, 1_000);
        // Fifty at once: one asks the store and is admitted; the denial
        // moves on a unit's time, and the others wait for that answer and
        // are denied locally.
        let before = calls(&mut c, "rl.all");
        let statuses = requests(std::slice::from_ref(&app), "alice", 1).await;
        assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 1);
        assert_eq!(calls(&mut c, "rl.all") - before, 1);
    });
}

#[test]
fn store_errors_other_than_an_outage_are_500_even_for_a_fail_open_limit() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on(async {
        let errors = Arc::new(AtomicU64::new(0));
        let seen = errors.clone();
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(
                HttpLimit::per_key(Gcra::new(10, HOUR))
                    .name("safety")
                    .prefix("rl:")
                    .fail_open(),
            )
            .on_error(move |_| {
                seen.fetch_add(1, Ordering::Relaxed);
            })
            .build()
            .unwrap();
        let app = router(layer);
        let _: () = redis::cmd("SET")
            .arg("rl:wrong")
            .arg("x")
            .query(&mut c)
            .unwrap();
        let r = get(&app, Some("wrong")).await;
        assert_eq!(r.status, 500);
        assert!(
            !r.body.contains("WRONGTYPE"),
            "the store's words stay in the log"
        );
        assert_eq!(errors.load(Ordering::Relaxed), 1);
        assert_eq!(get(&app, Some("right")).await.status, 200);
    });
}

#[test]
fn a_layer_refuses_what_the_server_would_refuse_when_it_is_built() {
    let s = Server::start();
    block_on(async {
        let bad = [
            HttpLimit::per_key(Gcra::new(0, HOUR)),
            HttpLimit::per_key(Gcra::new(10, Duration::ZERO)),
            HttpLimit::per_key(Gcra::new(10, HOUR).burst(0)),
            HttpLimit::per_key(Concurrency::new(10, HOUR)),
            HttpLimit::per_key(Gcra::new(10, HOUR)).name("a \"quoted\" name"),
            HttpLimit::per_key(Gcra::new(10, HOUR)).name(""),
        ];
        for limit in bad {
            let built = by_api_key(client(&s, Protocol::Resp2)).limit(limit).build();
            assert!(matches!(built, Err(Error::Config(_))));
        }
        assert!(matches!(
            by_api_key(client(&s, Protocol::Resp2)).build(),
            Err(Error::Config(_))
        ));
    });
}

#[test]
fn a_lease_guard_run_dropped_stops_renewing_and_releases() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on_multi(async {
        let client = client(&s, Protocol::Resp2);
        let metrics = tokio::runtime::Handle::current().metrics();
        let guard = client
            .acquire(&acquire("conc", 1, Duration::from_millis(30)))
            .await
            .unwrap()
            .expect("admitted");
        let tasks = metrics.num_alive_tasks();
        // The work never ends; the caller gives up on it.
        let run = guard.run(std::future::pending::<()>());
        let _ = tokio::time::timeout(Duration::from_millis(25), run).await;
        // The renewal task is gone; the lease goes back in the background
        // (bounded wait).
        let mut polls = 0;
        loop {
            let held = Peek::new("conc", Concurrency::new(1, Duration::from_millis(30)))
                .query(&mut c)
                .unwrap()
                .remaining;
            if held == 1 && metrics.num_alive_tasks() <= tasks {
                break;
            }
            polls += 1;
            assert!(polls < 5000, "renewing or held still");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // `acquire` on a rate policy sends nothing.
        let before = calls(&mut c, "rl.gcra");
        let e = client
            .acquire(&redis_ratelimit_client::Decide::new(
                "x",
                Gcra::new(1, HOUR),
            ))
            .await;
        assert!(matches!(e, Err(Error::Config(_))));
        assert_eq!(calls(&mut c, "rl.gcra"), before);
    });
}
