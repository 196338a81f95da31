//! The store down mid-run, with many requests in flight on a
//! multi-threaded runtime: decisions answer their fallback at once after
//! the first failure (the circuit), nothing is sent while it is open, the
//! store decides again soon after it returns, and degraded mode admits
//! each process's share of the limit. (`examples/outage.rs` measures the
//! same over longer runs, with separate processes.)

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use axum::Router;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit_client::http::HttpLimit;
use redis_ratelimit_client::{Command, Gcra, Peek};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

const HOUR: Duration = Duration::from_secs(3600);

/// How a request was answered: by the store (its `RateLimit` fields) or
/// locally; admitted or not.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Answer {
    store: bool,
    admitted: bool,
}

async fn ask(app: &Router, key: &str) -> Answer {
    let r = get(app, Some(key)).await;
    Answer {
        store: r.headers.contains_key("ratelimit"),
        admitted: r.status == 200,
    }
}

/// `limit` an hour per key, fail-closed, degraded mode on, through a
/// client of `server` that waits `timeout`.
fn app(server: &Server, limit: Gcra, timeout: Duration) -> Router {
    let client = client(server, Protocol::Resp2).timeout(timeout);
    router(
        by_api_key(client)
            .limit(HttpLimit::per_key(limit).name("plan").prefix("rl:"))
            .degraded(1000)
            .build()
            .unwrap(),
    )
}

/// Until `app` is answered by the store on `key`: how long that took.
async fn until_the_store_answers(app: &Router, key: &str) -> Duration {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if ask(app, key).await.store {
            return start.elapsed();
        }
        // Paces the loop: local answers come at once.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("the store never answered again");
}

#[test]
fn after_the_first_timeout_decisions_answer_at_once_and_none_is_sent() {
    let mut s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let policy = Gcra::new(1000, HOUR);
    let timeout = Duration::from_millis(500);
    block_on_multi(async {
        let app = app(&s, policy, timeout);
        assert!(ask(&app, "alice").await.store);
        s.freeze();
        // The first request waits out the timeout, then degraded mode
        // answers: alice's key is this process's alone.
        let first = Instant::now();
        let a = ask(&app, "alice").await;
        assert!(first.elapsed() >= timeout && !a.store && a.admitted);
        // Then 50 in flight, 20 requests each: none is sent, every one
        // answered at once.
        let took = Arc::new(Mutex::new(Vec::new()));
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let (app, took) = (app.clone(), Arc::clone(&took));
                tokio::spawn(async move {
                    for _ in 0..20 {
                        let t = Instant::now();
                        let a = ask(&app, "alice").await;
                        took.lock().unwrap().push(t.elapsed());
                        assert!(!a.store);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let mut took = took.lock().unwrap().clone();
        took.sort();
        let p99 = took[took.len() * 99 / 100];
        assert!(p99 <= Duration::from_millis(5), "p99 {p99:?}");
        s.resume();
        let back = until_the_store_answers(&app, "alice").await;
        println!(
            "layer, frozen: p99 {p99:?} over {} decisions after the first timeout; back in {back:?}",
            took.len()
        );
        assert!(back < Duration::from_secs(1), "{back:?}");
        // On the server: the first request and the last; none of the
        // 1,000. The one that timed out ran when the server continued (it
        // was in the stopped server's socket), and its late admission is
        // given back by the call's landing, in the background.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = Peek::new("rl:alice", policy).query(&mut c).unwrap();
            if left.remaining == 1000 - 2 || Instant::now() > deadline {
                assert_eq!(left.remaining, 1000 - 2);
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await; // polling a state, bounded
        }
    });
}

#[test]
fn a_stopped_server_fails_decisions_at_once_and_its_successor_decides_within_a_second() {
    let mut s = Server::start();
    clock_set(&mut s.conn(), T0);
    let (config, port) = (s.config.clone(), s.port);
    block_on_multi(async {
        let app = app(&s, Gcra::new(1000, HOUR), Duration::from_millis(500));
        assert!(ask(&app, "alice").await.store);
        s.stop();
        // The refused connection opens the circuit: no request waits.
        let a = ask(&app, "alice").await;
        assert!(!a.store && a.admitted);
        let mut took = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            assert!(!ask(&app, "alice").await.store);
            took.push(t.elapsed());
        }
        took.sort();
        let p99 = took[took.len() * 99 / 100];
        assert!(p99 <= Duration::from_millis(5), "p99 {p99:?}");
        let s = Server::start_on(config, new_dir(), port);
        clock_set(&mut s.conn(), T0);
        let back = until_the_store_answers(&app, "alice").await;
        println!("layer, stopped: p99 {p99:?} over 200 decisions after the first failure; back in {back:?}");
        assert!(back < Duration::from_secs(1), "{back:?}");
    });
}

/// Layers (processes, each its own connection) offering `rates` a second
/// on one key (Poisson arrivals, each request its own task) for `secs`;
/// the store is frozen after `before` until `secs`. Returns per layer: the
/// store's admissions before the outage, and the local requests and
/// admissions from 200 ms into the outage on.
fn processes(
    s: &mut Server,
    key: &'static str,
    rates: &[f64],
    before: Duration,
    secs: Duration,
) -> Vec<(u64, u64, u64)> {
    let policy = Gcra::new(100, Duration::from_secs(1));
    let counts = Arc::new(Mutex::new(vec![(0, 0, 0); rates.len()]));
    let start = Instant::now();
    let outage = start + before;
    let freezer = {
        let pid: u32 = topology::info_field(&mut s.conn(), "server", "process_id")
            .and_then(|p| p.parse().ok())
            .expect("process_id");
        std::thread::spawn(move || {
            std::thread::sleep(outage.saturating_duration_since(Instant::now()));
            signal(pid, "STOP");
        })
    };
    block_on_multi(async {
        let tasks: Vec<_> = rates
            .iter()
            .enumerate()
            .map(|(p, &rate)| {
                let app = app(&*s, policy, Duration::from_millis(100));
                let counts = Arc::clone(&counts);
                tokio::spawn(async move {
                    let mut rng = StdRng::seed_from_u64(p as u64);
                    let mut next = start;
                    let mut requests = Vec::new();
                    while next < start + secs {
                        next += Duration::from_secs_f64(-(1.0 - rng.gen::<f64>()).ln() / rate);
                        tokio::time::sleep_until(next.into()).await;
                        let (app, counts) = (app.clone(), Arc::clone(&counts));
                        requests.push(tokio::spawn(async move {
                            let asked = Instant::now();
                            let a = ask(&app, key).await;
                            let mut counts = counts.lock().unwrap();
                            let c: &mut (u64, u64, u64) = &mut counts[p];
                            if a.store && a.admitted && asked < outage {
                                c.0 += 1;
                            }
                            if !a.store && asked >= outage + Duration::from_millis(200) {
                                c.1 += 1;
                                c.2 += u64::from(a.admitted);
                            }
                        }));
                    }
                    for r in requests {
                        r.await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    freezer.join().unwrap();
    s.resume();
    let counts = counts.lock().unwrap().clone();
    counts
}

fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Degraded mode over a 10 s outage of `GCRA 100 1s`, 4 s of the store's
/// answers before it: each process offering `rates[p]` a second admits
/// within ±20 % of `min(its demand, its share × 100)` a second (its share:
/// its part of the store's admissions before the outage). Prints a row per
/// process.
fn degraded_shares(key: &'static str, rates: &[f64]) {
    let (before, secs) = (Duration::from_secs(4), Duration::from_secs(14));
    let outage = (secs - before).as_secs_f64() - 0.2;
    let mut s = Server::with(Config::real_clock());
    let counts = processes(&mut s, key, rates, before, secs);
    let whole: u64 = counts.iter().map(|c| c.0).sum();
    let mut wrong = Vec::new();
    for (p, &(store, asked, local)) in counts.iter().enumerate() {
        let share = store as f64 / whole as f64;
        let expected = (asked as f64).min(share * 100.0 * outage);
        let ratio = local as f64 / expected;
        println!(
            "degraded {key}: {} processes, process {p} offers {:.0}/s, share {share:.2}: \
             {:.1}/s admitted for {:.1}/s expected ({ratio:.2})",
            rates.len(),
            rates[p],
            local as f64 / outage,
            expected / outage,
        );
        if !(0.8..=1.2).contains(&ratio) {
            wrong.push(format!("{p}: {local} for {expected:.1}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:?} ({counts:?})");
}

#[test]
fn degraded_alone_admits_its_demand_below_the_limit_and_the_limit_above_it() {
    degraded_shares("alone-below", &[60.0]);
    degraded_shares("alone-above", &[300.0]);
}

#[test]
fn degraded_three_processes_at_uneven_rates_admit_their_shares_below_and_above_the_limit() {
    degraded_shares("three-below", &[10.0, 20.0, 30.0]);
    degraded_shares("three-above", &[100.0, 200.0, 300.0]);
}

#[test]
fn degraded_alone_with_20_in_flight_admits_the_whole_rate() {
    let mut s = Server::with(Config::real_clock());
    let policy = Gcra::new(100, Duration::from_secs(1));
    let (before, secs) = (Duration::from_secs(3), Duration::from_secs(5));
    let start = Instant::now();
    let outage = start + before;
    let local = Arc::new(Mutex::new(0u64));
    block_on_multi(async {
        let app = app(&s, policy, Duration::from_millis(100));
        // Closed loop: each worker asks again 1 ms after its answer.
        let workers: Vec<_> = (0..20)
            .map(|_| {
                let (app, local) = (app.clone(), Arc::clone(&local));
                tokio::spawn(async move {
                    while start.elapsed() < secs {
                        let asked = Instant::now();
                        let a = ask(&app, "alone").await;
                        if a.admitted && !a.store && asked >= outage + Duration::from_millis(200) {
                            *local.lock().unwrap() += 1;
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                })
            })
            .collect();
        tokio::time::sleep_until(outage.into()).await;
        s.freeze();
        for w in workers {
            w.await.unwrap();
        }
    });
    s.resume();
    let expected = 100.0 * ((secs - before).as_secs_f64() - 0.2);
    let local = *local.lock().unwrap() as f64;
    assert!(
        (0.8..=1.2).contains(&(local / expected)),
        "{local} for {expected}"
    );
}
