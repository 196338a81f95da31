//! The layer's per-request cost (plain and leased limits, the deny cache,
//! costs of 0 and above a block) and its error handler, against real
//! servers with the manual clock (no unit accrues, so every count is
//! exact), one request at a time and fifty in flight on tokio's
//! multi-threaded runtime.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use axum::http::HeaderName;
use axum::Router;
use common::*;
use http::request::Parts;
use redis_ratelimit_client::http::{
    Builder, HeaderKey, HttpLimit, Reason, RedisRateLimitLayer, Rejection,
};
use redis_ratelimit_client::{connect, Client, Command, Gcra, LeasePlan, Peek};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

const HOUR: Duration = Duration::from_secs(3600);
const IN_FLIGHT: usize = 50;

/// A layer whose requests cost what their `X-Cost` says (1 without one).
fn builder(client: Client) -> Builder<HeaderKey> {
    RedisRateLimitLayer::builder(client, HeaderKey::new(HeaderName::from_static("x-api-key"))).cost(
        |request: &Parts| {
            request
                .headers
                .get("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        },
    )
}

async fn send(app: &Router, key: &str, cost: u64) -> Reply {
    get_with(app, &[("x-api-key", key), ("x-cost", &cost.to_string())]).await
}

fn left(c: &mut redis::Connection, key: &str, policy: Gcra) -> u64 {
    Peek::new(key, policy).query(c).unwrap().remaining
}

/// Requests of `costs[i]` on `key`, `IN_FLIGHT` at once through each
/// app, for `rounds`: each request's cost and status.
async fn in_flight(apps: &[Router], key: &str, costs: &[u64], rounds: usize) -> Vec<(u64, u16)> {
    let mut answers = Vec::new();
    for _ in 0..rounds {
        let mut tasks = Vec::new();
        for app in apps {
            for i in 0..IN_FLIGHT {
                let (app, key, cost) = (app.clone(), key.to_string(), costs[i % costs.len()]);
                tasks.push(tokio::spawn(async move {
                    (cost, send(&app, &key, cost).await.status)
                }));
            }
        }
        for t in tasks {
            answers.push(t.await.unwrap());
        }
    }
    answers
}

fn admitted_units(answers: &[(u64, u16)]) -> u64 {
    assert!(
        answers.iter().all(|&(_, s)| s == 200 || s == 429),
        "{answers:?}"
    );
    answers
        .iter()
        .filter(|&&(_, s)| s == 200)
        .map(|&(c, _)| c)
        .sum()
}

#[test]
fn a_request_charges_its_cost_one_at_a_time_and_fifty_in_flight() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(100, HOUR);
    block_on_multi(async {
        let layer = builder(client(&s, Protocol::Resp2))
            .limit(HttpLimit::per_key(policy).name("per-key").prefix("rl:"))
            .deny_cache(100)
            .build()
            .unwrap();
        let app = router(layer.clone());
        // One at a time: fourteen of 7 fit in 100, the fifteenth does not,
        // and says that 2 are left.
        for _ in 0..14 {
            assert_eq!(send(&app, "a", 7).await.status, 200);
        }
        let denied = send(&app, "a", 7).await;
        assert_eq!(denied.status, 429);
        assert!(
            denied.headers["ratelimit"].starts_with("\"per-key\";r=2;"),
            "{:?}",
            denied.headers
        );
        // The deny cache holds that denial for a cost of 7 or more: a
        // smaller request still asks, and fits.
        let before = calls(&mut c, "rl.all");
        assert_eq!(send(&app, "a", 9).await.status, 429);
        assert_eq!(calls(&mut c, "rl.all") - before, 0, "denied locally");
        assert_eq!(send(&app, "a", 2).await.status, 200);
        assert_eq!(calls(&mut c, "rl.all") - before, 1);
        // Nothing is left: a cost of 0 is still admitted and charges nothing.
        let free = send(&app, "a", 0).await;
        assert_eq!(free.status, 200);
        assert!(free.headers["ratelimit"].starts_with("\"per-key\";r=0;"));
        assert_eq!(left(&mut c, "rl:a", policy), 0);
        assert_eq!(send(&app, "a", 1).await.status, 429);

        // Fifty in flight, cost 3: 33 fit in 100, one unit stays.
        let answers = in_flight(std::slice::from_ref(&app), "b", &[3], 2).await;
        assert_eq!(admitted_units(&answers), 99);
        assert_eq!(left(&mut c, "rl:b", policy), 1);
        // A cost above the limit is never admitted.
        let never = send(&app, "c", 101).await;
        assert_eq!(never.status, 429);
        assert_eq!(left(&mut c, "rl:c", policy), 100);
    });
}

#[test]
fn leased_limits_take_costs_from_blocks_and_lose_no_unit_at_fifty_in_flight() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(400, HOUR);
    block_on_multi(async {
        // Two processes, each with its own layer and connection.
        let layers = hot_leased_layers(&s, policy, 2, builder);
        let apps: Vec<_> = layers.iter().map(|l| router(l.clone())).collect();
        // Costs of 0, 1, 5 (from a block), 20 (a whole block) and 50 (above
        // a block: asked of the store directly), mixed, fifty in flight.
        let answers = in_flight(&apps, "anyone", &[1, 5, 0, 50, 1, 20], 6).await;
        let held: u64 = layers.iter().map(|l| l.leased_units()).sum();
        let used = admitted_units(&answers);
        assert_eq!(used + held + left(&mut c, "rl:hot", policy), 400);
        assert!(answers.iter().filter(|a| a.0 == 0).all(|a| a.1 == 200));
        // What is held goes back.
        for layer in &layers {
            layer.refund_all().await.unwrap();
        }
        assert_eq!(used + left(&mut c, "rl:hot", policy), 400);

        // A cost of 0 on a leased limit asks nothing of the store.
        let before = calls(&mut c, "rl.gcra");
        let free = in_flight(&apps[..1], "anyone", &[0], 1).await;
        assert!(free.iter().all(|&(_, s)| s == 200));
        assert_eq!(calls(&mut c, "rl.gcra") - before, 0);
    });
}

#[test]
fn a_leased_limit_one_request_at_a_time_takes_a_cost_above_its_block_from_the_store() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(100, HOUR);
    block_on(async {
        let layer = builder(client(&s, Protocol::Resp3))
            .limit(
                HttpLimit::shared(policy)
                    .name("hot")
                    .key("rl:hot")
                    .leased(LeasePlan::fixed(10)),
            )
            .build()
            .unwrap();
        let app = router(layer.clone());
        // 4 from a block of 10: 6 held.
        assert_eq!(send(&app, "k", 4).await.status, 200);
        assert_eq!(layer.leased_units(), 6);
        assert_eq!(left(&mut c, "rl:hot", policy), 90);
        // 30 is above the block: the store charges it, the block stays.
        assert_eq!(send(&app, "k", 30).await.status, 200);
        assert_eq!(
            (layer.leased_units(), left(&mut c, "rl:hot", policy)),
            (6, 60)
        );
        // 61 does not fit in the store's 60: denied, nothing charged.
        assert_eq!(send(&app, "k", 61).await.status, 429);
        assert_eq!(
            (layer.leased_units(), left(&mut c, "rl:hot", policy)),
            (6, 60)
        );
        // 6 from what is held, without a call.
        let before = calls(&mut c, "rl.gcra");
        assert_eq!(send(&app, "k", 6).await.status, 200);
        assert_eq!(calls(&mut c, "rl.gcra") - before, 0);
        assert_eq!(layer.leased_units(), 0);
    });
}

/// What the error handler saw.
type Seen = Arc<Mutex<Vec<Reason>>>;

/// A handler that records each reason and answers `418` with a body of
/// its own for denials, keeping the default header fields.
fn teapot(seen: &Seen) -> impl Fn(Rejection) -> http::Response<String> + Send + Sync + 'static {
    let seen = seen.clone();
    move |rejection: Rejection| {
        seen.lock().unwrap().push(rejection.reason.clone());
        match rejection.reason {
            Reason::Denied(denial) => {
                let mut response = rejection.response;
                *response.status_mut() = http::StatusCode::IM_A_TEAPOT;
                *response.body_mut() = format!(
                    "{} {:?} {}",
                    denial.limit,
                    denial.retry_after.map(|w| w.as_millis()),
                    denial.remaining
                );
                response
            }
            Reason::MissingKey => http::Response::new("who are you?".into()),
            Reason::StoreError(_) => http::Response::builder()
                .status(http::StatusCode::BAD_GATEWAY)
                .body("store error".into())
                .unwrap(),
            Reason::Unavailable(_) => http::Response::builder()
                .status(http::StatusCode::GATEWAY_TIMEOUT)
                .body("store unavailable".into())
                .unwrap(),
            _ => rejection.response,
        }
    }
}

#[test]
fn the_error_handler_answers_denials_missing_keys_and_store_errors() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let seen: Seen = Arc::default();
    block_on_multi(async {
        let layer = builder(client(&s, Protocol::Resp2))
            .limit(
                HttpLimit::per_key(Gcra::new(10, HOUR))
                    .name("per-key")
                    .prefix("rl:"),
            )
            .limit(
                HttpLimit::shared(Gcra::new(1000, HOUR))
                    .name("global")
                    .key("rl:global"),
            )
            .error_handler(teapot(&seen))
            .build()
            .unwrap();
        let app = router(layer);
        // Fifty in flight on a limit of 10: forty answered by the handler.
        let answers = in_flight(std::slice::from_ref(&app), "alice", &[1], 1).await;
        let teapots = answers.iter().filter(|a| a.1 == 418).count();
        assert_eq!((answers.len() - teapots, teapots), (10, 40));
        assert_eq!(seen.lock().unwrap().len(), 40);
        // One at a time: the denial's limit, wait, what is left, and the
        // default header fields kept.
        let r = send(&app, "alice", 1).await;
        assert_eq!(r.status, 418);
        assert_eq!(r.body, "per-key Some(360000) 0");
        assert_eq!(r.headers["retry-after"], "360");
        match seen.lock().unwrap().last() {
            Some(Reason::Denied(denial)) => {
                assert_eq!(denial.violated, ["per-key"]);
                let decision = denial.decision.as_ref().unwrap();
                assert_eq!((decision.allowed, decision.blocked_by), (false, Some(0)));
            }
            other => panic!("{other:?}"),
        }
        // A cost above the limit: never admitted, no wait.
        let r = send(&app, "bob", 11).await;
        assert_eq!((r.status, r.body.as_str()), (418, "per-key None 10"));
        // No key.
        let r = get(&app, None).await;
        assert_eq!((r.status, r.body.as_str()), (200, "who are you?"));
        assert!(matches!(
            seen.lock().unwrap().last(),
            Some(Reason::MissingKey)
        ));
        // A store error.
        let _: () = redis::cmd("SET")
            .arg("rl:wrong")
            .arg("x")
            .query(&mut c)
            .unwrap();
        let r = send(&app, "wrong", 1).await;
        assert_eq!((r.status, r.body.as_str()), (502, "store error"));
        assert!(matches!(
            seen.lock().unwrap().last(),
            Some(Reason::StoreError(e)) if !e.is_unavailable()
        ));
    });
}

#[test]
fn the_error_handler_answers_an_unavailable_store_and_the_default_stays_503() {
    let seen: Seen = Arc::default();
    block_on_multi(async {
        // Nothing listens on port 1: every call fails to connect.
        let unreachable = || {
            Client::new(connect("redis://127.0.0.1:1/").unwrap())
                .timeout(Duration::from_millis(200))
        };
        let limit = || HttpLimit::per_key(Gcra::new(10, HOUR)).name("per-key");
        let handled = router(
            builder(unreachable())
                .limit(limit())
                .error_handler(teapot(&seen))
                .build()
                .unwrap(),
        );
        let answers = in_flight(std::slice::from_ref(&handled), "alice", &[1], 1).await;
        assert!(answers.iter().all(|a| a.1 == 504), "{answers:?}");
        assert!(seen
            .lock()
            .unwrap()
            .iter()
            .all(|r| matches!(r, Reason::Unavailable(e) if e.is_unavailable())));
        let default = router(builder(unreachable()).limit(limit()).build().unwrap());
        let r = send(&default, "alice", 1).await;
        assert_eq!((r.status, r.headers["retry-after"].as_str()), (503, "1"));
    });
}
