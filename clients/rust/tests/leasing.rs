//! Block leasing against a real server with the manual clock (no unit
//! accrues): however many processes lease blocks, together they admit at
//! most the limit, each holds at most its block, and what they give back
//! is the store's again.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use redis_ratelimit_client::http::HttpLimit;
use redis_ratelimit_client::{Charge, Command, Decide, Gcra, LeasePlan, LeasedLimit, Peek};
use std::time::Duration;
use support::*;

#[test]
fn leased_blocks_never_admit_beyond_the_limit_and_refunds_return_the_rest() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(100, Duration::from_secs(3600));
    block_on(async {
        let processes: Vec<_> = (0..3)
            .map(|_| {
                let lease = LeasePlan::fixed(20);
                LeasedLimit::new(client(&s, Protocol::Resp2), "hot", policy, lease)
            })
            .collect();
        let mut admitted = 0;
        // 1,000 requests for 100 units.
        for i in 0..1000 {
            let p = &processes[i % 3];
            admitted += u64::from(p.acquire().await.unwrap().allowed);
            assert!(p.held() < 20);
        }
        let held: u64 = processes.iter().map(|p| p.held()).sum();
        assert_eq!(admitted + held, 100);
        let commands: u64 = processes.iter().map(|p| p.commands()).sum();
        assert!(
            commands < 30,
            "{commands} commands for {admitted} admissions"
        );
        for p in &processes {
            p.refund_all().await.unwrap();
        }
        let left = Peek::new("hot", policy).query(&mut c).unwrap().remaining;
        assert_eq!(left, held);
    });
}

#[test]
fn an_adaptive_block_asks_for_one_unit_on_a_cold_key() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(100, Duration::from_secs(3600));
    block_on(async {
        let cold = LeasedLimit::new(
            client(&s, Protocol::Resp3),
            "cold",
            policy,
            LeasePlan::adaptive(20),
        );
        assert!(cold.acquire().await.unwrap().allowed);
        assert_eq!(cold.held(), 0, "one unit asked, one used");
        let left = Peek::new("cold", policy).query(&mut c).unwrap().remaining;
        assert_eq!(left, 99);
    });
}

#[test]
fn an_idle_key_gives_its_block_back_by_itself() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(100, Duration::from_secs(3600));
    block_on(async {
        let hot = std::sync::Arc::new(LeasedLimit::new(
            client(&s, Protocol::Resp2),
            "idle",
            policy,
            LeasePlan::fixed(20),
        ));
        let refunder = hot.refund_when_idle(Duration::from_millis(20));
        assert!(hot.acquire().await.unwrap().allowed);
        let left =
            |c: &mut redis::Connection| Peek::new("idle", policy).query(c).unwrap().remaining;
        assert_eq!(left(&mut c), 80);
        // Waits (bounded) for the background refund of the 19 unused units.
        let mut polls = 0;
        while left(&mut c) != 99 {
            polls += 1;
            assert!(polls < 5000, "never refunded");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(hot.held(), 0);
        refunder.abort();
    });
}

#[test]
fn a_queued_lease_waits_on_its_own_connection_and_shares_the_block_it_brings() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // One unit a second, bursts of 10.
    let policy = Gcra::new(10, Duration::from_secs(10));
    block_on(async {
        let shared = client(&s, Protocol::Resp2);
        let lease = LeasePlan::fixed(4).queued(Duration::from_secs(60));
        let hot = std::sync::Arc::new(
            LeasedLimit::new(shared.clone(), "q", policy, lease)
                .queue_on(client(&s, Protocol::Resp2)),
        );
        for _ in 0..4 {
            assert!(hot.acquire().await.unwrap().allowed);
        }
        // Someone else takes the other 6: the next block must accrue.
        let rest = Decide::new("q", policy).charge(Charge::Cost(6));
        assert!(shared.send(&rest).await.unwrap().allowed);
        let requests: Vec<_> = (0..2)
            .map(|_| {
                let hot = hot.clone();
                tokio::spawn(async move { hot.acquire().await.unwrap().allowed })
            })
            .collect();
        // One queued call for both requests (bounded wait for it to arrive).
        let mut polls = 0;
        while blocking::waiting(&mut c) != 1 {
            polls += 1;
            assert!(polls < 10_000, "the queued call never arrived");
            tokio::task::yield_now().await;
        }
        // The shared connection is not held by the waiting call.
        let peek = shared.send(&Peek::new("q", policy)).await.unwrap();
        assert_eq!(peek.remaining, 0);
        advance(&mut c, 4 * SECOND);
        for r in requests {
            assert!(r.await.unwrap(), "both admitted from the one block");
        }
        assert_eq!((hot.commands(), hot.held()), (2, 2));
        hot.refund_all().await.unwrap();
        assert_eq!(Peek::new("q", policy).query(&mut c).unwrap().remaining, 2);
    });
}

#[test]
fn a_leased_limit_tells_the_wait_the_store_tells() {
    // 10 a minute leased in blocks of 5: after both blocks the next unit
    // is 6 s away, and every 429 says so, like the plain limit's.
    let s = Server::start();
    clock_set(&mut s.conn(), T0);
    let policy = Gcra::new(10, Duration::from_secs(60));
    block_on(async {
        for leased in [false, true] {
            let mut limit = HttpLimit::per_key(policy).name("per-key");
            if leased {
                limit = limit.prefix("leased:").leased(LeasePlan::fixed(5));
            }
            let app = router(
                by_api_key(client(&s, Protocol::Resp2))
                    .limit(limit)
                    .build()
                    .unwrap(),
            );
            for _ in 0..10 {
                assert_eq!(get(&app, Some("k")).await.status, 200);
            }
            for _ in 0..5 {
                let r = get(&app, Some("k")).await;
                assert_eq!(r.status, 429);
                assert_eq!(r.headers["retry-after"], "6", "leased: {leased}");
            }
        }
    });
}

/// `n` requests on `key` through `app`, `in_flight` at a time: the
/// admissions.
async fn hammer(app: axum::Router, key: String, n: usize, in_flight: usize) -> u64 {
    let tasks: Vec<_> = (0..in_flight)
        .map(|t| {
            let (app, key) = (app.clone(), key.clone());
            let share = n / in_flight + usize::from(t < n % in_flight);
            tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..share {
                    admitted += u64::from(get(&app, Some(&key)).await.status == 200);
                }
                admitted
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    admitted
}

#[test]
fn only_the_keys_the_server_names_hot_are_leased_and_given_back_when_they_cool() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    redis::cmd("CONFIG")
        .arg(&["SET", "ratelimit.hot-key-counters", "320"])
        .query::<()>(&mut c)
        .unwrap();
    let limit = 100_000;
    // A unit every 8.76 h: the clock moved by seconds accrues none.
    let policy = Gcra::new(limit, Duration::from_secs(36_500 * 86_400));
    let left = |c: &mut redis::Connection| Peek::new("rl:hot", policy).query(c).unwrap().remaining;
    block_on_multi(async {
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(
                HttpLimit::per_key(policy)
                    .name("per-key")
                    .leased_when_hot(LeasePlan::fixed(20)),
            )
            .hot_keys(10, 100)
            .build()
            .unwrap();
        let app = router(layer.clone());
        let cold: Vec<String> = (0..20).map(|k| format!("cold{k}")).collect();
        // Before any poll every key is asked per request: 500 on the hot
        // key (50 in flight), 5 on each cold one.
        let mut admitted = hammer(app.clone(), "hot".into(), 500, 50).await;
        for k in &cold {
            assert_eq!(hammer(app.clone(), k.clone(), 5, 1).await, 5);
        }
        assert_eq!(admitted, 500);
        assert_eq!(layer.leased_units(), 0);
        // The server lists all 21 keys; only the one above 100 a second
        // turns hot.
        // Their rates over that second.
        advance(&mut c, 1_000_000);
        layer.refresh_hot_keys().await.unwrap();
        assert_eq!(layer.hot_keys(), vec!["rl:hot".to_string()]);
        let (all, gcra) = (calls(&mut c, "rl.all"), calls(&mut c, "rl.gcra"));
        // 4,000 requests on the hot key, 50 in flight, beside 10 on each
        // cold key (one in flight per key).
        let hot = tokio::spawn(hammer(app.clone(), "hot".into(), 4000, 50));
        let colds: Vec<_> = cold
            .iter()
            .map(|k| tokio::spawn(hammer(app.clone(), k.clone(), 10, 1)))
            .collect();
        let hot_admitted = hot.await.unwrap();
        for t in colds {
            assert_eq!(t.await.unwrap(), 10);
        }
        // A request that waited for 64 blocks in a row, each taken by
        // others, is denied: a few at 50 in flight on blocks of 20.
        assert!(hot_admitted >= 3800, "{hot_admitted} of 4000 admitted");
        admitted += hot_admitted;
        let blocks = calls(&mut c, "rl.gcra") - gcra;
        // Cold keys: one command per request; the hot key: one a block.
        assert_eq!(calls(&mut c, "rl.all") - all, 200);
        let per_admission = blocks as f64 / hot_admitted as f64;
        assert!(
            per_admission <= 0.06,
            "{blocks} commands for {hot_admitted}"
        );
        println!("hot key: {blocks} commands for {hot_admitted} admissions ({per_admission:.4})");
        // The store charged what was admitted and what the layer holds
        // (at most a block).
        let held = layer.leased_units();
        assert!(held < 20);
        assert_eq!(left(&mut c), limit - admitted - held);
        // Two periods later the server lists nothing. The first poll
        // keeps the key (this process asked it for blocks since the poll
        // before); the next, with no request between, lets it cool: its
        // units go back and its requests are asked one by one again.
        advance(&mut c, 3_000_000);
        layer.refresh_hot_keys().await.unwrap();
        assert_eq!(layer.hot_keys(), vec!["rl:hot".to_string()]);
        layer.refresh_hot_keys().await.unwrap();
        assert!(layer.hot_keys().is_empty());
        assert_eq!(layer.leased_units(), 0);
        assert_eq!(left(&mut c), limit - admitted);
        let all = calls(&mut c, "rl.all");
        assert_eq!(hammer(app.clone(), "hot".into(), 50, 5).await, 50);
        assert_eq!(calls(&mut c, "rl.all") - all, 50);
        assert_eq!(left(&mut c), limit - admitted - 50);
    });
}

#[test]
fn a_leased_hot_key_stays_hot_below_the_keys_it_outranked_and_cools_once_unused() {
    // Counting is on by default.
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(100_000, Duration::from_secs(36_500 * 86_400));
    block_on_multi(async {
        // Only the hottest listed key may turn hot.
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(HttpLimit::per_key(policy).leased_when_hot(LeasePlan::fixed(20)))
            .hot_keys(1, 100)
            .build()
            .unwrap();
        let app = router(layer.clone());
        assert_eq!(hammer(app.clone(), "hot".into(), 400, 10).await, 400);
        advance(&mut c, 1_000_000);
        layer.refresh_hot_keys().await.unwrap();
        assert_eq!(layer.hot_keys(), vec!["rl:hot".to_string()]);
        // Leased, 400 requests make about 20 decisions on the server, fewer
        // than 3 warm keys' 60 each, asked one by one: the key leaves the
        // top of the list but stays hot; the warm keys (60 a second) do
        // not turn hot.
        let gcra = calls(&mut c, "rl.gcra");
        assert_eq!(hammer(app.clone(), "hot".into(), 400, 10).await, 400);
        assert!(calls(&mut c, "rl.gcra") - gcra <= 25);
        for k in ["warm1", "warm2", "warm3"] {
            assert_eq!(hammer(app.clone(), k.into(), 60, 1).await, 60);
        }
        advance(&mut c, 1_000_000);
        let listed: Vec<(String, u64, u64)> = redis::cmd("RL.HOTKEYS")
            .arg("COUNT")
            .arg(20)
            .query(&mut c)
            .unwrap();
        let rank = listed.iter().position(|k| k.0 == "rl:hot");
        assert!(rank.is_some_and(|r| r > 0), "{listed:?}");
        layer.refresh_hot_keys().await.unwrap();
        assert_eq!(layer.hot_keys(), vec!["rl:hot".to_string()]);
        // Unlisted two periods on, and not asked since the last poll, it
        // cools.
        advance(&mut c, 2_000_000);
        layer.refresh_hot_keys().await.unwrap();
        assert!(layer.hot_keys().is_empty());
        assert_eq!(layer.leased_units(), 0);
    });
}

#[test]
fn the_poll_of_hot_keys_follows_the_server_and_ends_with_the_layer() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    redis::cmd("CONFIG")
        .arg(&["SET", "ratelimit.hot-key-counters", "320"])
        .query::<()>(&mut c)
        .unwrap();
    let policy = Gcra::new(100_000, Duration::from_secs(36_500 * 86_400));
    block_on_multi(async {
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(HttpLimit::per_key(policy).leased_when_hot(LeasePlan::fixed(20)))
            .build()
            .unwrap();
        let poll = layer.follow_hot_keys(Duration::from_millis(5)).unwrap();
        let app = router(layer.clone());
        assert_eq!(hammer(app.clone(), "hot".into(), 300, 10).await, 300);
        advance(&mut c, 1_000_000);
        // The next polls name it (bounded wait for them).
        let named = tokio::time::timeout(Duration::from_secs(10), async {
            while layer.hot_keys().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        named.await.expect("named hot within 10 s");
        assert_eq!(layer.hot_keys(), vec!["rl:hot".to_string()]);
        let gcra = calls(&mut c, "rl.gcra");
        assert_eq!(hammer(app.clone(), "hot".into(), 100, 1).await, 100);
        assert_eq!(calls(&mut c, "rl.gcra") - gcra, 5);
        // Without a layer the task ends.
        drop((app, layer));
        tokio::time::timeout(Duration::from_secs(10), poll)
            .await
            .expect("the poll ends with the layer")
            .unwrap();
    });
}

#[test]
fn a_layer_without_limits_leased_while_hot_polls_nothing() {
    let s = Server::start();
    block_on(async {
        let layer = by_api_key(client(&s, Protocol::Resp2))
            .limit(HttpLimit::per_key(Gcra::new(10, Duration::from_secs(1))))
            .build()
            .unwrap();
        assert!(layer.follow_hot_keys(Duration::from_secs(1)).is_none());
        layer.refresh_hot_keys().await.unwrap();
        assert!(layer.hot_keys().is_empty());
    });
    let mut c = s.conn();
    assert_eq!(calls(&mut c, "rl.hotkeys"), 0);
}
