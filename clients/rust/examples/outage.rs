//! The tower layer through an outage, against a real `redis-server` with
//! the module that this example starts itself (the module built next to
//! it, or `RL_MODULE`), on tokio's multi-threaded runtime:
//!
//! - **fail fast** (`failfast`): `INFLIGHT` closed-loop workers (each
//!   pausing `PAUSE` ms between its requests) over 100 keys of
//!   `GCRA 100 1s`, fail-closed with degraded mode, the client's default
//!   300 ms timeout. After 2 s the server is killed (`kill`: SIGKILL, then
//!   started again on the same port) or frozen (`freeze`: SIGSTOP, then
//!   SIGCONT) for 3 s. Reports the decision times from the first failure
//!   to the server's return (p50, p99, max, and how many waited the
//!   timeout), and how long after the return the store answered again
//!   (the first answer, and the last request still answered locally).
//! - **degraded shares** (`degraded`): processes (this example run as
//!   child processes, each its own connection) offering the given rates on
//!   one key of `GCRA 100 1s`, fail-closed with degraded mode, open loop
//!   (Poisson arrivals, each request in its own task); after 8 s the
//!   server is frozen for `OUTAGE` s. Reports per process its share of
//!   the store's admissions from 2 s to 8 s, its admissions per second
//!   during the outage (from 0.5 s in), and the expected rate
//!   (`min(offered, share × 100)`, both per second of the outage).
//!
//! ```sh
//! cargo build --release -p redis-ratelimit
//! cargo run --release -p redis-ratelimit-client --example outage -- failfast kill 100 20
//! cargo run --release -p redis-ratelimit-client --example outage -- failfast freeze 100 20
//! cargo run --release -p redis-ratelimit-client --example outage -- degraded 10 60
//! cargo run --release -p redis-ratelimit-client --example outage -- degraded 10 50,100,150
//! cargo run --release -p redis-ratelimit-client --example outage -- degraded 10 c100
//! ```

#[path = "../../../tests/common/mod.rs"]
mod common;

use axum::routing::get;
use axum::Router;
use common::{Config, Server};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit_client::http::{HeaderKey, HttpLimit, RedisRateLimitLayer};
use redis_ratelimit_client::{connect, Client, Error, Gcra};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tower_service::Service;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

/// How a request was answered.
#[derive(Clone, Copy, PartialEq, Debug)]
enum By {
    /// By the store (the response carries its `RateLimit` fields),
    /// admitted or not.
    Store(bool),
    /// Locally (degraded mode or the fallback), admitted or not.
    Local(bool),
}

/// An app of `GCRA 100 1s` per key, fail-closed with degraded mode;
/// `failures` records when the store failed.
fn app(url: &str, failures: Arc<Mutex<Vec<(Instant, Error)>>>) -> Router {
    let client = Client::new(connect(url).unwrap());
    let layer = RedisRateLimitLayer::builder(
        client,
        HeaderKey::new(axum::http::HeaderName::from_static("x-api-key")),
    )
    .limit(
        HttpLimit::per_key(Gcra::new(100, Duration::from_secs(1)))
            .name("per-key")
            .prefix("outage:")
            .fail_closed(),
    )
    .degraded(10_000)
    .on_error(move |e| failures.lock().unwrap().push((Instant::now(), e.clone())))
    .build()
    .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

async fn ask(app: &Router, key: &str) -> By {
    let request = axum::http::Request::get("/")
        .header("x-api-key", key)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = app.clone().call(request).await.unwrap();
    let admitted = response.status() == 200;
    if response.headers().contains_key("ratelimit") {
        By::Store(admitted)
    } else {
        By::Local(admitted)
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn failfast(mode: &str, inflight: usize, pause: Duration) {
    let mut server = Server::with(Config::real_clock());
    let url = server.url();
    let failures = Arc::new(Mutex::new(Vec::new()));
    let app = runtime().block_on(async { app(&url, Arc::clone(&failures)) });
    let rt = runtime();
    let start = Instant::now();
    let end = start + Duration::from_secs(9);
    // (started, took, how answered)
    let log = Arc::new(Mutex::new(Vec::<(Instant, Duration, By)>::with_capacity(
        1 << 20,
    )));
    let workers: Vec<_> = (0..inflight)
        .map(|w| {
            let (app, log) = (app.clone(), Arc::clone(&log));
            rt.spawn(async move {
                let mut n = 0usize;
                while Instant::now() < end {
                    let key = format!("k{}", (n * inflight + w) % 100);
                    n += 1;
                    let t = Instant::now();
                    let by = ask(&app, &key).await;
                    log.lock().unwrap().push((t, t.elapsed(), by));
                    tokio::time::sleep(pause).await;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let down = Instant::now();
    let (config, port) = (server.config.clone(), server.port);
    match mode {
        "kill" => {
            common::topology::kill9(&mut server);
            // Reaped now: dropped later it would shut down its successor.
            server.stop();
        }
        _ => server.freeze(),
    }
    std::thread::sleep(Duration::from_secs(3));
    let back = match mode {
        "kill" => {
            let s = Server::start_on(config, common::new_dir(), port);
            let back = Instant::now();
            server = s;
            back
        }
        _ => {
            server.resume();
            Instant::now()
        }
    };
    rt.block_on(async {
        for w in workers {
            w.await.unwrap();
        }
    });
    let log = log.lock().unwrap().clone();
    let first_failure = failures
        .lock()
        .unwrap()
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| *t >= down)
        .min()
        .expect("a failure");
    let mut during: Vec<Duration> = log
        .iter()
        .filter(|(t, _, _)| *t >= first_failure && *t < back)
        .map(|(_, took, _)| *took)
        .collect();
    during.sort();
    let waited = during
        .iter()
        .filter(|d| **d >= Duration::from_millis(250))
        .count();
    let first_store = log
        .iter()
        .filter(|(t, took, by)| *t + *took >= back && matches!(by, By::Store(_)))
        .map(|(t, took, _)| *t + *took)
        .min();
    let last_local = log
        .iter()
        .filter(|(t, _, by)| *t >= back && matches!(by, By::Local(_)))
        .map(|(t, took, _)| *t + *took)
        .max();
    let after =
        |t: Option<Instant>| t.map_or("-".into(), |t| ms(t.saturating_duration_since(back)));
    println!(
        "mode={mode} inflight={inflight} pause={}ms decisions={} first_failure_after={}ms \
         outage_decisions={} p50={}ms p99={}ms max={}ms waited_timeout={waited} \
         first_store_answer_after_return={}ms last_local_answer_after_return={}ms",
        pause.as_millis(),
        log.len(),
        ms(first_failure - down),
        during.len(),
        ms(percentile(&during, 0.5)),
        ms(percentile(&during, 0.99)),
        ms(percentile(&during, 1.0)),
        after(first_store),
        after(last_local),
    );
    drop(server);
}

/// Milliseconds since the epoch: the moment every child starts from.
fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Counts per 100 ms slot since `start`: requests, the store's
/// admissions, local admissions.
type Slots = Arc<Mutex<Vec<(u64, u64, u64)>>>;

async fn ask_and_count(app: &Router, start: Instant, counts: &Slots) {
    let by = ask(app, "shared").await;
    let slot = (start.elapsed().as_millis() / 100) as usize;
    let mut counts = counts.lock().unwrap();
    if let Some(c) = counts.get_mut(slot) {
        c.0 += 1;
        match by {
            By::Store(true) => c.1 += 1,
            By::Local(true) => c.2 += 1,
            _ => {}
        }
    }
}

/// One process of the degraded run: offers `rate` a second on one key
/// (Poisson arrivals; `cN`: N closed-loop workers, each asking again 1 ms
/// after its answer) from `at` (epoch ms) for `secs`; prints per 100 ms
/// slot its requests, the store's admissions and the local ones, as
/// `slot offered store local`.
fn degraded_child(url: &str, rate: &str, at: u64, secs: u64) {
    let rt = runtime();
    let app = rt.block_on(async { app(url, Arc::default()) });
    let counts: Slots = Arc::new(Mutex::new(vec![(0, 0, 0); (secs * 10) as usize]));
    rt.block_on(async {
        let wait = at.saturating_sub(epoch_ms());
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let start = Instant::now();
        let end = start + Duration::from_secs(secs);
        let mut tasks = Vec::new();
        if let Some(workers) = rate.strip_prefix('c') {
            for _ in 0..workers.parse::<usize>().unwrap() {
                let (app, counts) = (app.clone(), Arc::clone(&counts));
                tasks.push(tokio::spawn(async move {
                    while Instant::now() < end {
                        ask_and_count(&app, start, &counts).await;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }));
            }
        } else {
            // Poisson arrivals: exponential gaps of mean 1/rate.
            let rate: f64 = rate.parse().unwrap();
            let mut rng = StdRng::seed_from_u64(rate.to_bits());
            let mut next = start;
            while Instant::now() < end {
                next += Duration::from_secs_f64(-(1.0 - rng.gen::<f64>()).ln() / rate);
                tokio::time::sleep_until(next.into()).await;
                let (app, counts) = (app.clone(), Arc::clone(&counts));
                tasks.push(tokio::spawn(async move {
                    ask_and_count(&app, start, &counts).await;
                }));
            }
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    for (slot, (offered, store, local)) in counts.lock().unwrap().iter().enumerate() {
        println!("{slot} {offered} {store} {local}");
    }
}

fn degraded(outage: u64, rates: &[String]) {
    let mut server = Server::with(Config::real_clock());
    let url = server.url();
    let (before, after) = (8u64, 2u64);
    let secs = before + outage + after;
    let at = epoch_ms() + 1000;
    let children: Vec<_> = rates
        .iter()
        .map(|rate| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "degraded-child",
                    &url,
                    rate,
                    &at.to_string(),
                    &secs.to_string(),
                ])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(at + before * 1000 - epoch_ms()));
    server.freeze();
    std::thread::sleep(Duration::from_secs(outage));
    server.resume();
    let outputs: Vec<Vec<(u64, u64, u64)>> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| {
                    let f: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
                    (f[1], f[2], f[3])
                })
                .collect()
        })
        .collect();
    // The store's admissions before the outage, its first 2 s left out
    // (slots are 100 ms).
    let b = (before * 10) as usize;
    let admitted_before: Vec<u64> = outputs
        .iter()
        .map(|o| o[20..b].iter().map(|c| c.1).sum())
        .collect();
    let whole: u64 = admitted_before.iter().sum();
    // The outage, from its first 500 ms on (each process first waits out
    // its requests' timeouts).
    let (from, to) = (b + 5, b + (outage * 10) as usize);
    let span = (to - from) as f64 / 10.0;
    let mut sum_rate = 0.0;
    for (p, o) in outputs.iter().enumerate() {
        let share = admitted_before[p] as f64 / whole.max(1) as f64;
        let local: u64 = o[from..to].iter().map(|c| c.2).sum();
        let store: u64 = o[from..to].iter().map(|c| c.1).sum();
        let offered: u64 = o[from..to].iter().map(|c| c.0).sum();
        let rate = local as f64 / span;
        let expected = (share * 100.0).min(offered as f64 / span);
        sum_rate += rate;
        println!(
            "process={p} offered={}/s share={:.3} outage_admitted={:.1}/s expected={:.1}/s \
             ratio={:.2} (store-answered during outage: {store}, offered {offered})",
            rates[p],
            share,
            rate,
            expected,
            rate / expected,
        );
    }
    println!("all: outage_admitted={sum_rate:.1}/s over {span:.1} s (limit 100/s)");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    match arg(0, "failfast").as_str() {
        "failfast" => failfast(
            &arg(1, "freeze"),
            arg(2, "100").parse().unwrap(),
            Duration::from_millis(arg(3, "20").parse().unwrap()),
        ),
        "degraded" => {
            let rates: Vec<String> = arg(2, "60").split(',').map(String::from).collect();
            degraded(arg(1, "10").parse().unwrap(), &rates);
        }
        "degraded-child" => degraded_child(
            &args[1],
            &args[2],
            args[3].parse().unwrap(),
            args[4].parse().unwrap(),
        ),
        other => panic!("unknown part {other}"),
    }
}
