//! The tower layer in an axum router against real servers: the deny cache
//! (round trips saved, never an admission the store would refuse), WAIT,
//! and an outage in both failure modes with degraded mode, ended by the
//! server's return on the same port.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use axum::Router;
use common::blocking::waiting;
use common::*;
use redis_ratelimit_client::http::HttpLimit;
use redis_ratelimit_client::{Command, Gcra, LeasePlan, Peek};
use std::time::Duration;
use support::*;

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn the_deny_cache_saves_round_trips_and_never_admits_what_the_store_denies() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Five an hour: the key outlives the test on the wall clock.
    let policy = Gcra::new(5, Duration::from_secs(3_600));
    block_on(async {
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(HttpLimit::per_key(policy).name("per-key").prefix("rl:"))
            .deny_cache(1000)
            .build()
            .unwrap();
        let app = router(layer.clone());
        let before = calls(&mut c, "rl.all");
        // One key offered 10 times its limit.
        let mut statuses = Vec::new();
        for _ in 0..50 {
            let r = get(&app, Some("alice")).await;
            if r.status == 429 {
                // Whatever the cache answers, the store refuses too.
                let peek = Peek::new("rl:alice", policy).query(&mut c).unwrap();
                assert!(!peek.allowed, "{peek:?}");
                let retry: u64 = r.headers["retry-after"].parse().unwrap();
                assert!((1..=720).contains(&retry), "{retry}");
                assert!(r.headers["ratelimit"].starts_with("\"per-key\";r=0;t="));
                assert!(r.body.contains("\"violated-policies\":[\"per-key\"]"));
            }
            statuses.push(r.status);
        }
        assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 5);
        // Five admitted and one denied by the store; the rest were local.
        assert_eq!(calls(&mut c, "rl.all") - before, 6);
        assert_eq!(layer.deny_cache().unwrap().round_trips_saved(), 44);
        // Another key is not affected.
        assert_eq!(get(&app, Some("bob")).await.status, 200);
    });
}

#[test]
fn wait_queues_on_the_server_instead_of_denying() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on(async {
        let layer = by_api_key(client(&s, Protocol::Resp3))
            .limit(
                HttpLimit::per_key(Gcra::new(1, HOUR))
                    .name("per-key")
                    .prefix("rl:"),
            )
            .wait(2 * HOUR)
            .build()
            .unwrap();
        let app = router(layer);
        assert_eq!(get(&app, Some("alice")).await.status, 200);
        let waiter = tokio::spawn({
            let app = app.clone();
            async move { get(&app, Some("alice")).await }
        });
        let mut polls = 0;
        while waiting(&mut c) != 1 {
            polls += 1;
            assert!(polls < 10_000, "the request never queued");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        advance(&mut c, 3600 * SECOND);
        let r = waiter.await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.headers["ratelimit"], "\"per-key\";r=0;t=3600");
        // Beyond the bound: denied at once.
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(
                HttpLimit::per_key(Gcra::new(1, HOUR))
                    .name("per-key")
                    .prefix("rl:"),
            )
            .wait(Duration::from_secs(1))
            .build()
            .unwrap();
        let r = get(&router(layer), Some("alice")).await;
        assert_eq!((r.status, r.headers["retry-after"].as_str()), (429, "3600"));
    });
}

/// Requests until one is limited by the store again (a `RateLimit`
/// field); bounded by attempts, each bounded by the client's timeout.
async fn until_answered_by_the_store(app: &Router, key: &str) -> Reply {
    for _ in 0..2000 {
        let r = get(app, Some(key)).await;
        if r.headers.contains_key("ratelimit") {
            return r;
        }
        // Paces the loop while a refused connection fails at once.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the store never answered again");
}

#[test]
fn an_outage_admits_fail_open_limits_and_enforces_fail_closed_ones_at_their_share() {
    let mut s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(30, HOUR);
    block_on(async {
        let client = client(&s, Protocol::Resp2).timeout(Duration::from_millis(300));
        let closed = router(
            by_api_key(client.clone())
                .limit(
                    HttpLimit::per_key(policy)
                        .name("plan")
                        .prefix("rl:plan:")
                        .fail_closed(),
                )
                .degraded(100)
                .build()
                .unwrap(),
        );
        let open = router(
            by_api_key(client)
                .limit(
                    HttpLimit::per_key(policy)
                        .name("safety")
                        .prefix("rl:safety:")
                        .fail_open(),
                )
                .build()
                .unwrap(),
        );
        // This process sends 1 of every 3 requests on alice's key; another
        // process (this connection) the other 2, before each of ours.
        for _ in 0..5 {
            for _ in 0..2 {
                let other = cmd(&["RL.ALL", "1", "rl:plan:alice", "GCRA", "30", "1h"]);
                let _: redis::Value = other.query(&mut c).unwrap();
            }
            assert_eq!(get(&closed, Some("alice")).await.status, 200);
        }
        assert_eq!(get(&open, Some("alice")).await.status, 200);

        // Redis goes away.
        let (config, port) = (s.config.clone(), s.port);
        s.stop();
        // The safety limit admits, saying nothing about limits.
        for _ in 0..3 {
            let r = get(&open, Some("alice")).await;
            assert_eq!(r.status, 200);
            assert!(!r.headers.contains_key("ratelimit"));
        }
        // The plan: 15 units were left, a third of them this process's.
        let mut admitted = 0;
        for _ in 0..20 {
            let r = get(&closed, Some("alice")).await;
            match r.status {
                200 => admitted += 1,
                429 => {
                    // A unit accrues at a third of 30 an hour. The share is
                    // estimated over the real time between replies (here
                    // 4.99999 of 15.00003 units), so a fifth unit can fall
                    // short by a hair and come a moment later.
                    let retry: u64 = r.headers["retry-after"].parse().unwrap();
                    assert!(
                        retry > 60 || (admitted == 4 && retry <= 2),
                        "{admitted} admitted, then told {retry} s"
                    );
                    assert!(r.body.contains("[\"plan\"]"), "{}", r.body);
                }
                other => panic!("{other}"),
            }
        }
        assert!((4..=5).contains(&admitted), "{admitted}");
        // A key never answered has no share: refused.
        assert_eq!(get(&closed, Some("bob")).await.status, 429);

        // A new server on the same port, without the old state: the store
        // decides again.
        let s = Server::start_on(config, new_dir(), port);
        clock_set(&mut s.conn(), T0);
        let r = until_answered_by_the_store(&closed, "carol").await;
        assert_eq!(r.status, 200);
        assert_eq!(
            until_answered_by_the_store(&closed, "alice").await.status,
            200
        );
        let r = until_answered_by_the_store(&open, "alice").await;
        assert!(r.headers["ratelimit"].starts_with("\"safety\";r="));
    });
}

#[test]
fn a_server_that_does_not_answer_in_time_is_an_outage_too() {
    let mut s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on(async {
        let client = client(&s, Protocol::Resp2).timeout(Duration::from_millis(200));
        let closed = router(
            by_api_key(client)
                .limit(
                    HttpLimit::per_key(Gcra::new(30, HOUR))
                        .name("plan")
                        .prefix("rl:plan:"),
                )
                .degraded(100)
                .build()
                .unwrap(),
        );
        let r = get(&closed, Some("alice")).await;
        assert!(r.headers["ratelimit"].starts_with("\"plan\";r=29;"));
        // The server stops answering until told (its process stopped, its
        // connections open): each request waits 200 ms, then alice's share
        // (all of it) is enforced locally.
        s.freeze();
        for _ in 0..3 {
            let r = get(&closed, Some("alice")).await;
            assert_eq!(r.status, 200);
            assert!(!r.headers.contains_key("ratelimit"), "{:?}", r.headers);
        }
        assert_eq!(get(&closed, Some("bob")).await.status, 429);
        // Once it answers again, the store decides again.
        s.resume();
        let r = until_answered_by_the_store(&closed, "alice").await;
        assert_eq!(r.status, 200);
    });
}

#[test]
fn a_leased_limit_admits_from_blocks_and_gives_back_what_is_left() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(100, HOUR);
    let left = |c: &mut redis::Connection| Peek::new("rl:hot", policy).query(c).unwrap().remaining;
    block_on(async {
        // Three processes, each with its own layer and connection.
        let layers = hot_leased_layers(&s, policy, 3, by_api_key);
        let apps: Vec<_> = layers.iter().map(|l| router(l.clone())).collect();
        let before = calls(&mut c, "rl.gcra");
        let mut admitted = 0u64;
        // 1,000 requests for 100 units (no unit accrues on the manual clock).
        for i in 0..1000 {
            let r = get(&apps[i % 3], Some("anyone")).await;
            if r.status == 200 {
                admitted += 1;
                assert!(r.headers["ratelimit"].starts_with("\"hot\";r="));
            } else {
                assert_eq!(r.status, 429);
                assert!(r.headers.contains_key("retry-after"));
            }
        }
        let held: u64 = layers.iter().map(|l| l.leased_units()).sum();
        assert_eq!(admitted + held, 100, "never beyond the limit");
        let commands = calls(&mut c, "rl.gcra") - before;
        assert!(
            commands < 40,
            "{commands} commands for {admitted} admissions"
        );
        // An idle key's units go back; at shutdown, everything.
        layers[0].refund_idle(Duration::ZERO).await.unwrap();
        assert_eq!(layers[0].leased_units(), 0);
        layers[1].refund_all().await.unwrap();
        assert_eq!(left(&mut c), held - layers[2].leased_units());
        // Dropping the last layer refunds in the background.
        drop(apps);
        drop(layers);
        let mut polls = 0;
        while left(&mut c) != held {
            polls += 1;
            assert!(polls < 5000, "never refunded");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
}

#[test]
fn a_leased_limit_with_an_asked_one_puts_its_unit_back_when_the_other_denies() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let shared = Gcra::new(100, HOUR);
    block_on(async {
        let layer = by_api_key(client(&s, Protocol::Resp3))
            .limit(
                HttpLimit::per_key(Gcra::new(2, HOUR))
                    .name("per-key")
                    .prefix("rl:k:"),
            )
            .limit(
                HttpLimit::shared(shared)
                    .name("global")
                    .key("rl:global")
                    .leased(LeasePlan::fixed(10)),
            )
            .build()
            .unwrap();
        let app = router(layer.clone());
        let statuses: Vec<u16> = {
            let mut v = Vec::new();
            for _ in 0..5 {
                v.push(get(&app, Some("alice")).await.status);
            }
            v
        };
        assert_eq!(statuses, [200, 200, 429, 429, 429]);
        // One block of 10 taken, 2 used: 8 held, the denials gave theirs back.
        assert_eq!(layer.leased_units(), 8);
        layer.refund_all().await.unwrap();
        let left = Peek::new("rl:global", shared).query(&mut c).unwrap();
        assert_eq!(left.remaining, 98);
    });
}

#[test]
fn leases_of_a_thousand_times_more_keys_than_the_capacity_stay_bounded() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(100, HOUR);
    block_on(async {
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(
                HttpLimit::per_key(policy)
                    .name("per-key")
                    .prefix("rl:many:")
                    .leased(LeasePlan::fixed(5)),
            )
            .lease_capacity(2)
            .build()
            .unwrap();
        let app = router(layer.clone());
        let before = calls(&mut c, "rl.gcra");
        for i in 0..2_000 {
            assert_eq!(get(&app, Some(&format!("k{i}"))).await.status, 200);
            // Two keys' blocks at most, the least recently used giving way.
            assert!(layer.leased_units() <= 2 * 4);
        }
        assert_eq!(layer.leased_units(), 2 * 4);
        // One block call per key; then the refunds: the two keys held and
        // the first two that gave way (the others' units stay charged
        // until they refill).
        assert_eq!(calls(&mut c, "rl.gcra") - before, 2_000);
        layer.refund_idle(Duration::ZERO).await.unwrap();
        assert_eq!(calls(&mut c, "rl.gcra") - before, 2_000 + 4);
        assert_eq!(layer.leased_units(), 0);
        let mut left = |key: &str| Peek::new(key, policy).query(&mut c).unwrap().remaining;
        assert_eq!(left("rl:many:k0"), 99);
        assert_eq!(left("rl:many:k1999"), 99);
        assert_eq!(left("rl:many:k1000"), 95);
    });
}

/// `.jitter()`: clients denied together are told different `Retry-After`
/// values, none earlier than the true wait (the manual clock does not
/// move: one instant, one true wait).
#[test]
fn jittered_denials_spread_their_retry_after() {
    let s = Server::start();
    clock_set(&mut s.conn(), T0);
    block_on(async {
        // One a second, bursts of one: after the first, the true wait
        // is 1 s and each denial spreads the herd by another second.
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(
                HttpLimit::per_key(Gcra::new(3_600, HOUR).burst(1))
                    .name("per-key")
                    .prefix("rl:"),
            )
            .jitter()
            .build()
            .unwrap();
        let app = router(layer);
        assert_eq!(get(&app, Some("alice")).await.status, 200);
        let mut told = Vec::new();
        for _ in 0..20 {
            let r = get(&app, Some("alice")).await;
            assert_eq!(r.status, 429);
            told.push(r.headers["retry-after"].parse::<u64>().unwrap());
        }
        // The true wait is 1 s; twenty denials spread over 20 s.
        assert!(told.iter().all(|t| *t >= 1), "{told:?}");
        assert!(told.iter().any(|t| *t > 2), "{told:?}");
    });
}
