//! The public items as callers use them, against real servers: a leased
//! limit's answers and costs (50 in flight on a multi-threaded runtime,
//! then the server's own count), and timeouts that say how long was
//! waited when the connection's own timeout fires.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use rand::Rng;
use redis_ratelimit_client::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis_ratelimit_client::{Client, Command, Decide, Error, Gcra, LeasePlan, LeasedLimit, Peek};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::*;

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn a_leased_limit_takes_costs_and_the_server_charges_exactly_what_was_admitted() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(300, HOUR);
    block_on_multi(async {
        let hot = LeasedLimit::new(
            client(&s, Protocol::Resp2),
            "rl:hot",
            policy,
            LeasePlan::fixed(8),
        );
        let admitted = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let (hot, admitted) = (hot.clone(), admitted.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..20 {
                    let cost = rand::thread_rng().gen_range(0..=3);
                    let answer = hot.acquire_cost(cost).await.unwrap();
                    if answer.allowed {
                        assert_eq!(answer.retry_after, None);
                        admitted.fetch_add(cost, Ordering::Relaxed);
                    } else {
                        // A local denial says when the lease asks again.
                        assert!(
                            answer
                                .retry_after
                                .is_none_or(|d| d <= Duration::from_secs(1)),
                            "{answer:?}"
                        );
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        hot.refund_all().await.unwrap();
        let left = Peek::new("rl:hot", policy).query(&mut c).unwrap().remaining;
        let admitted = admitted.load(Ordering::Relaxed);
        assert!(admitted > 0);
        assert_eq!(300 - left, admitted, "the server charged what was admitted");
        assert_eq!(hot.held(), 0);
        // A cost above the limit is never admitted; a cost of 0 always is.
        assert!(!hot.acquire_cost(301).await.unwrap().allowed);
        assert!(hot.acquire_cost(0).await.unwrap().allowed);
    });
}

#[test]
fn a_connection_timeout_reports_the_time_waited_not_zero() {
    let s = Server::start();
    let call = Decide::new("rl:t", Gcra::new(10, HOUR));
    // Every client's commands held back for a second (the connection that
    // pauses is made first: a new one would wait too).
    let pause = |admin: &mut redis::Connection| {
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(1_000)
            .arg("ALL")
            .query(admin)
            .unwrap();
    };
    let (mut admin, mut blocking) = (s.conn(), s.conn());
    // A blocking connection with a read timeout of its own.
    blocking
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    pause(&mut admin);
    match call.query(&mut blocking) {
        Err(Error::Timeout(d)) => assert!(
            d >= Duration::from_millis(200) && d < Duration::from_secs(1),
            "{d:?}"
        ),
        other => panic!("{other:?}"),
    }
    // An async connection with a response timeout, under a client whose
    // own timeout is longer.
    block_on_multi(async {
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_millis(200)))
            .set_number_of_retries(0);
        let conn =
            ConnectionManager::new_with_config(redis::Client::open(s.url()).unwrap(), config)
                .await
                .unwrap();
        let client = Client::new(conn).timeout(Duration::from_secs(10));
        pause(&mut admin);
        match client.send(&call).await {
            Err(Error::Timeout(d)) => assert!(
                d >= Duration::from_millis(200) && d < Duration::from_secs(1),
                "{d:?}"
            ),
            other => panic!("{other:?}"),
        }
    });
}
