//! Leased limits while the store is down: once a call found it
//! unavailable, the requests their blocks cannot serve fail at once
//! (`Error::StoreDown`, the fallback) instead of waiting their timeout,
//! and decisions are back to normal within a second of the server's
//! return. The server frozen (`SIGSTOP`) and stopped, the async limit at
//! 10 requests in flight on a multi-threaded runtime, the blocking one on
//! its thread.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use redis_ratelimit_client::{
    BlockingLeasedLimit, Error, Gcra, LeasePlan, LeasedLimit, Peek, MAX_DURATION,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

const TIMEOUT: Duration = Duration::from_millis(100);
const OUTAGE: Duration = Duration::from_millis(1500);

fn room() -> Gcra {
    Gcra::new(1_000_000, MAX_DURATION)
}

/// One decision: when it started, how long it took, whether it failed.
type Sample = (Instant, Duration, bool);

/// The p99 decision time of the decisions that started once the first
/// failure was answered, and how many there were.
fn p99_after_first_failure(samples: &[Sample]) -> (Duration, usize) {
    let first = samples
        .iter()
        .filter(|s| s.2)
        .map(|(start, took, _)| *start + *took)
        .min()
        .expect("no decision failed during the outage");
    let mut after: Vec<Duration> = samples
        .iter()
        .filter(|s| s.0 >= first)
        .map(|s| s.1)
        .collect();
    after.sort();
    assert!(after.len() > 100, "only {} decisions", after.len());
    (after[after.len() * 99 / 100], after.len())
}

/// 10 tasks, each asking `hot` once a millisecond for `span`.
async fn in_flight(hot: &LeasedLimit, span: Duration) -> Vec<Sample> {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let end = Instant::now() + span;
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (hot, samples) = (hot.clone(), samples.clone());
            tokio::spawn(async move {
                while Instant::now() < end {
                    let start = Instant::now();
                    let failed = match hot.acquire().await {
                        Ok(_) => false,
                        Err(e) => {
                            assert!(e.is_unavailable(), "{e}");
                            true
                        }
                    };
                    samples
                        .lock()
                        .unwrap()
                        .push((start, start.elapsed(), failed));
                    tokio::time::sleep(Duration::from_millis(1)).await; // the next request's arrival
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let samples = samples.lock().unwrap().clone();
    samples
}

/// From now, how long until `hot` decides again: then 100 requests in a
/// row are decided.
async fn until_normal(hot: &LeasedLimit) -> Duration {
    let start = Instant::now();
    while hot.acquire().await.is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "never back");
        tokio::time::sleep(Duration::from_millis(1)).await; // the next request's arrival
    }
    let back = start.elapsed();
    for _ in 0..100 {
        hot.acquire().await.unwrap();
    }
    back
}

#[test]
fn a_leased_limit_fails_fast_while_the_store_is_down_and_is_back_within_a_second() {
    let mut s = Server::start();
    clock_set(&mut s.conn(), T0);
    let (config, port) = (s.config.clone(), s.port);
    block_on_multi(async {
        let client = client(&s, Protocol::Resp2).timeout(TIMEOUT);
        let hot = LeasedLimit::new(client.clone(), "hot", room(), LeasePlan::fixed(20));
        assert!(hot.acquire().await.unwrap().allowed);

        s.freeze();
        let samples = in_flight(&hot, OUTAGE).await;
        let (p99, n) = p99_after_first_failure(&samples);
        s.resume();
        let back = until_normal(&hot).await;
        println!("leased, frozen: p99 {p99:?} over {n} decisions after the first failure; back in {back:?}");
        assert!(p99 <= Duration::from_millis(5), "p99 {p99:?}");
        assert!(back < Duration::from_secs(1), "back after {back:?}");

        // A refund while the store is known down is not sent: its units
        // stay in the lease, and go back once it is up.
        let held = hot.held();
        assert!(held > 0);
        s.freeze();
        let peek = client.send(&Peek::new("hot", room())).await;
        assert!(peek.is_err_and(|e| e.is_unavailable()));
        let refund = hot.refund_all().await;
        assert!(matches!(refund, Err(Error::StoreDown)), "{refund:?}");
        assert_eq!(hot.held(), held);
        s.resume();
        let start = Instant::now();
        while hot.refund_all().await.is_err() {
            assert!(start.elapsed() < Duration::from_secs(10), "never back");
            tokio::time::sleep(Duration::from_millis(1)).await; // polling a state, bounded
        }
        assert_eq!(hot.held(), 0);
        let left = client.send(&Peek::new("hot", room())).await.unwrap();
        assert_eq!(hot.units_refunded(), held);
        assert_eq!(left.remaining, room().limit - hot.units_granted() + held);

        s.stop();
        let samples = in_flight(&hot, OUTAGE).await;
        let (p99, n) = p99_after_first_failure(&samples);
        let s = Server::start_on(config, new_dir(), port);
        clock_set(&mut s.conn(), T0);
        let back = until_normal(&hot).await;
        println!("leased, stopped: p99 {p99:?} over {n} decisions after the first failure; back in {back:?}");
        assert!(p99 <= Duration::from_millis(5), "p99 {p99:?}");
        assert!(back < Duration::from_secs(1), "back after {back:?}");
    });
}

/// `hot` asked every quarter millisecond for `span` on this thread (a
/// blocking probe waits the timeout once each `PROBE_INTERVAL`: the p99
/// holds while more than 100 requests come between two probes).
fn blocking_run<C: redis::ConnectionLike>(
    hot: &mut BlockingLeasedLimit<C>,
    span: Duration,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    let end = Instant::now() + span;
    while Instant::now() < end {
        let start = Instant::now();
        let failed = match hot.acquire() {
            Ok(_) => false,
            Err(e) => {
                assert!(e.is_unavailable(), "{e}");
                true
            }
        };
        samples.push((start, start.elapsed(), failed));
        std::thread::sleep(Duration::from_micros(250)); // the next request's arrival
    }
    samples
}

fn blocking_until_normal<C: redis::ConnectionLike>(hot: &mut BlockingLeasedLimit<C>) -> Duration {
    let start = Instant::now();
    loop {
        match hot.acquire() {
            Ok(_) => break,
            Err(e) => assert!(e.is_unavailable(), "{e}"),
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never back");
        std::thread::sleep(Duration::from_millis(1)); // the next request's arrival
    }
    let back = start.elapsed();
    for _ in 0..100 {
        hot.acquire().unwrap();
    }
    back
}

#[test]
fn a_blocking_leased_limit_fails_fast_while_the_store_is_frozen_and_is_back_within_a_second() {
    let mut s = Server::start();
    clock_set(&mut s.conn(), T0);
    let conn = s.conn();
    conn.set_read_timeout(Some(TIMEOUT)).unwrap();
    conn.set_write_timeout(Some(TIMEOUT)).unwrap();
    let mut hot = BlockingLeasedLimit::new(conn, "hot", room(), LeasePlan::fixed(20));
    assert!(hot.acquire().unwrap().allowed);
    s.freeze();
    let samples = blocking_run(&mut hot, OUTAGE);
    let (p99, n) = p99_after_first_failure(&samples);
    let slow = samples.iter().filter(|s| s.1 >= TIMEOUT).count();
    s.resume();
    let back = blocking_until_normal(&mut hot);
    println!("blocking, frozen: p99 {p99:?} over {n} decisions after the first failure, {slow} waited the timeout; back in {back:?}");
    assert!(p99 <= Duration::from_millis(5), "p99 {p99:?}");
    assert!(back < Duration::from_secs(1), "back after {back:?}");
}

#[test]
fn a_blocking_leased_limit_on_a_reconnecting_connection_fails_fast_while_the_store_is_stopped() {
    let mut s = Server::start();
    clock_set(&mut s.conn(), T0);
    let (config, port) = (s.config.clone(), s.port);
    // `redis::Client` connects for each command: it reconnects by itself.
    let conn = redis::Client::open(s.url()).unwrap();
    let mut hot = BlockingLeasedLimit::new(conn, "hot", room(), LeasePlan::fixed(20));
    assert!(hot.acquire().unwrap().allowed);
    s.stop();
    let samples = blocking_run(&mut hot, OUTAGE);
    let (p99, n) = p99_after_first_failure(&samples);
    let s = Server::start_on(config, new_dir(), port);
    clock_set(&mut s.conn(), T0);
    let back = blocking_until_normal(&mut hot);
    println!("blocking, stopped: p99 {p99:?} over {n} decisions after the first failure; back in {back:?}");
    assert!(p99 <= Duration::from_millis(5), "p99 {p99:?}");
    assert!(back < Duration::from_secs(1), "back after {back:?}");
}
