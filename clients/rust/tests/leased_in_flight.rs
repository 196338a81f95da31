//! A leased limit at 50 requests in flight on one key (closed loop: each
//! task sends its next request once the last is answered) on a
//! multi-threaded runtime denies only when the store denied: on a key with
//! room every request is admitted, and on a key that runs out exactly its
//! limit is. Against a real server with the manual clock (nothing
//! refills), so the counts are exact.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use redis_ratelimit_client::http::HttpLimit;
use redis_ratelimit_client::{Command, Gcra, LeasePlan, LeasedLimit, Peek, MAX_DURATION};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::*;

const IN_FLIGHT: u64 = 50;
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

/// A leased limit on `key` in blocks of 20, 50 in flight: admitted, and
/// what the server charged once the rest is refunded.
fn leased_run(policy: Gcra, each: u64) -> (u64, u64) {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let admitted = block_on_multi(async {
        let client = client(&s, Protocol::Resp2);
        let hot = LeasedLimit::new(client, "hot", policy, LeasePlan::fixed(20));
        let admitted = closed_loop(each, {
            let hot = hot.clone();
            move || {
                let hot = hot.clone();
                async move { hot.acquire().await.unwrap().allowed }
            }
        })
        .await;
        hot.refund_all().await.unwrap();
        println!(
            "leased: {admitted} admitted, {} store commands",
            hot.commands()
        );
        admitted
    });
    let limit = policy.limit;
    (admitted, limit - left(&mut c, "hot", policy))
}

/// The same through a layer whose per-key limit is leased: requests
/// answered 200, and what the server charged once the rest is refunded.
fn layer_run(policy: Gcra, each: u64) -> (u64, u64) {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let served = block_on_multi(async {
        let client = client(&s, Protocol::Resp2);
        let limit = HttpLimit::per_key(policy)
            .name("hot")
            .prefix("rl:")
            .leased(LeasePlan::fixed(20));
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
        layer.refund_all().await.unwrap();
        served
    });
    let limit = policy.limit;
    (served, limit - left(&mut c, "rl:k", policy))
}

#[test]
fn a_leased_limit_at_fifty_in_flight_admits_every_request_a_key_has_room_for() {
    let (admitted, charged) = leased_run(room(), 200);
    assert_eq!(
        admitted,
        IN_FLIGHT * 200,
        "denied locally with room on the key"
    );
    assert_eq!(charged, admitted);
}

#[test]
fn a_leased_layer_at_fifty_in_flight_answers_no_429_on_a_key_with_room() {
    let (served, charged) = layer_run(room(), 100);
    assert_eq!(served, IN_FLIGHT * 100, "429 with room on the key");
    assert_eq!(charged, served);
}

#[test]
fn at_fifty_in_flight_a_key_that_runs_out_admits_exactly_its_limit() {
    let policy = Gcra::new(1000, HOUR);
    let (admitted, charged) = leased_run(policy, 60);
    assert_eq!((admitted, charged), (1000, 1000));
    let (served, charged) = layer_run(policy, 60);
    assert_eq!((served, charged), (1000, 1000));
}
