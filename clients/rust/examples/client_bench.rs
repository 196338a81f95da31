//! Store commands per admitted request, counted by the server
//! (`INFO commandstats`), for two client-side savings, on tokio's
//! multi-threaded runtime with `INFLIGHT` requests in flight per key and
//! process:
//!
//! - **leasing**: `P` processes (each its own `LeasedLimit` and
//!   connections, as separate processes would have) with `INFLIGHT`
//!   closed-loop workers each (a worker re-sends at once; denied locally,
//!   it waits until the next call is due) against
//!   `RL.GCRA 2000 1s BURST 100`, in blocks of k = 20 that queue on the
//!   server once the key is contended (`LeasePlan::queued`, up to
//!   [`QUEUE_TIMEOUT`]); `polling` instead of `leasing` runs the same with
//!   blocks that only poll (`PARTIAL`). At the end each process leaves the
//!   line (`CLIENT UNBLOCK`, as a process that stops leaves it: its last
//!   call is counted and admits nothing) and refunds what it holds;
//! - **the deny cache**: one key offered 10× its limit (1,000 requests a
//!   second against 100 a second) through the tower layer, with and
//!   without the cache, `INFLIGHT` requests arriving at once every
//!   `INFLIGHT` ms;
//! - **the layer's hot path** (`hot`): the tower layer with a leased
//!   per-key limit (blocks of 100 of `GCRA 1000000 1s`), the deny cache and
//!   degraded mode on, `INFLIGHT` closed-loop workers over 100 keys;
//!   reports requests a second and this process's CPU time per request
//!   (most requests are admitted from a block: the layer's own maps and
//!   locks are most of the work).
//!
//! ```sh
//! redis-server --port 16400 --save "" --loadmodule target/release/libredis_ratelimit.so &
//! cargo run --release -p redis-ratelimit-client --example client_bench -- 5
//! ```
//!
//! Arguments: the seconds per run (default 5); `leasing`, `polling`,
//! `deny`, `degraded` or `hot` to run one part only (`hot` runs only when
//! named); the numbers of processes
//! for leasing (`1,10,50`, default all); the requests in flight per key
//! and process (default 1). `REDIS_URL` (default
//! `redis://127.0.0.1:6379/`) names the server.

use axum::routing::get;
use axum::Router;
use redis_ratelimit_client::http::{HeaderKey, HttpLimit, RedisRateLimitLayer};
use redis_ratelimit_client::{connect, Client, Gcra, LeasePlan, LeasedLimit};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower_service::Service;

/// How long a queued block may wait in line on the server.
const QUEUE_TIMEOUT: Duration = Duration::from_secs(2);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// How many times the server has run `command` (lower case).
fn server_calls(url: &str, command: &str) -> u64 {
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// What a leasing run measured.
struct Leasing {
    admitted: u64,
    /// The server's RL.GCRA calls (blocks and refunds).
    calls: u64,
    /// The most admitted in any one-second window.
    most_in_a_second: u64,
    /// Units granted that were neither admitted (at any time, the end
    /// included) nor refunded.
    unused: i64,
}

/// The most of sorted `times` within any span of one second.
fn most_in_a_second(times: &[Instant]) -> u64 {
    let mut most = 0;
    let mut start = 0;
    for (end, t) in times.iter().enumerate() {
        while t.duration_since(times[start]) >= Duration::from_secs(1) {
            start += 1;
        }
        most = most.max(end + 1 - start);
    }
    most as u64
}

/// Leasing: `processes` leased limits (each with its own connections),
/// `inflight` closed-loop workers each, admitting as fast as they can.
fn leasing(
    url: &str,
    processes: usize,
    inflight: usize,
    k: u64,
    queued: bool,
    secs: u64,
) -> Leasing {
    let key = format!(
        "bench:lease:{processes}:{inflight}:{k}:{}",
        std::process::id()
    );
    let policy = Gcra::new(2000, Duration::from_secs(1)).burst(100);
    let before = server_calls(url, "rl.gcra");
    let times = runtime().block_on(async {
        let mut ids = Vec::new();
        let mut limits = Vec::new();
        for _ in 0..processes {
            let mut block = LeasePlan::fixed(k);
            // A block of one is no block: the row to compare with.
            if queued && k > 1 {
                block = block.queued(QUEUE_TIMEOUT);
            }
            let client = Client::new(connect(url).unwrap()).timeout(Duration::from_secs(1));
            let mut queue = connect(url).unwrap();
            let id: u64 = redis::cmd("CLIENT")
                .arg("ID")
                .query_async(&mut queue)
                .await
                .unwrap();
            ids.push(id);
            let queue = Client::new(queue).timeout(Duration::from_secs(1));
            limits.push(LeasedLimit::new(client, key.clone(), policy, block).queue_on(queue));
        }
        let end = Instant::now() + Duration::from_secs(secs);
        let mut workers = Vec::new();
        for limit in &limits {
            for _ in 0..inflight {
                let limit = limit.clone();
                workers.push(tokio::spawn(async move {
                    let (mut admitted, mut all) = (Vec::new(), 0u64);
                    while Instant::now() < end {
                        match limit.acquire().await {
                            Ok(a) if a.allowed => {
                                all += 1;
                                // A queued block may come after the end:
                                // the run counts what came within it.
                                let now = Instant::now();
                                if now < end {
                                    admitted.push(now);
                                }
                            }
                            _ => {
                                let due = limit.lease().blocked_until().unwrap_or(Instant::now());
                                let due = due
                                    .min(end)
                                    .max(Instant::now() + Duration::from_micros(100));
                                tokio::time::sleep_until(due.into()).await;
                            }
                        }
                    }
                    (admitted, all)
                }));
            }
        }
        // At the end each process leaves the line, as a process that stops
        // does (its queued call is denied; it holds nothing while it
        // waits), and refunds what it holds.
        tokio::time::sleep_until(end.into()).await;
        let mut c = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        while !workers.iter().all(|w| w.is_finished()) {
            for id in &ids {
                let _: redis::Value = redis::cmd("CLIENT")
                    .arg("UNBLOCK")
                    .arg(id)
                    .query_async(&mut c)
                    .await
                    .unwrap();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (mut times, mut all) = (Vec::new(), 0u64);
        for w in workers {
            let (admitted, n) = w.await.unwrap();
            times.extend(admitted);
            all += n;
        }
        let mut unused = -(all as i64);
        for limit in &limits {
            let _ = limit.refund_all().await;
            unused += limit.units_granted() as i64 - limit.units_refunded() as i64;
        }
        (times, unused)
    });
    let (mut times, unused) = times;
    times.sort();
    Leasing {
        admitted: times.len() as u64,
        calls: server_calls(url, "rl.gcra") - before,
        most_in_a_second: most_in_a_second(&times),
        unused,
    }
}

/// The deny cache: (requests offered, admitted, the server's RL.ALL calls,
/// round trips the cache saved), `inflight` requests arriving at once
/// every `inflight` ms.
fn deny_cache(url: &str, cache: bool, inflight: usize, secs: u64) -> (u64, u64, u64, u64) {
    runtime().block_on(async {
        let client = Client::new(connect(url).unwrap()).timeout(Duration::from_secs(1));
        let key = format!("bench-{cache}-{inflight}-{}", std::process::id());
        let mut layer = RedisRateLimitLayer::builder(client, api_key()).limit(
            HttpLimit::per_key(Gcra::new(100, Duration::from_secs(1)))
                .name("per-key")
                .prefix("bench:deny:"),
        );
        if cache {
            layer = layer.deny_cache(1000);
        }
        let layer = layer.build().unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer.clone());
        let before = server_calls(url, "rl.all");
        let (mut offered, mut admitted) = (0u64, 0u64);
        let start = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(inflight as u64));
        while start.elapsed() < Duration::from_secs(secs) {
            tick.tick().await;
            let mut wave = Vec::new();
            for _ in 0..inflight {
                let mut app = app.clone();
                let request = axum::http::Request::get("/")
                    .header("x-api-key", key.as_str())
                    .body(axum::body::Body::empty())
                    .unwrap();
                wave.push(tokio::spawn(async move {
                    app.call(request).await.unwrap().status()
                }));
            }
            for r in wave {
                offered += 1;
                admitted += u64::from(r.await.unwrap() == 200);
            }
        }
        let saved = layer.deny_cache().map_or(0, |c| c.round_trips_saved());
        (
            offered,
            admitted,
            server_calls(url, "rl.all") - before,
            saved,
        )
    })
}

/// This process's CPU time so far (user and system), from `/proc`.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's name, which ends with the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime, fields 14 and 15 (11 and 12 after the name), in
    // clock ticks of 10 ms.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// The layer's hot path: (requests, requests a second, CPU µs a request).
fn hot(url: &str, inflight: usize, secs: u64) -> (u64, f64, f64) {
    runtime().block_on(async {
        let client = Client::new(connect(url).unwrap()).timeout(Duration::from_secs(1));
        let layer = RedisRateLimitLayer::builder(client, api_key())
            .limit(
                HttpLimit::per_key(Gcra::new(1_000_000, Duration::from_secs(1)))
                    .name("per-key")
                    .prefix(format!("bench:hot:{}:", std::process::id()))
                    .leased(LeasePlan::fixed(100)),
            )
            .deny_cache(1000)
            .degraded(1000)
            .build()
            .unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer.clone());
        let (start, cpu) = (Instant::now(), cpu_time());
        let end = start + Duration::from_secs(secs);
        let workers: Vec<_> = (0..inflight)
            .map(|w| {
                let app = app.clone();
                tokio::spawn(async move {
                    let (mut sent, mut served) = (0usize, 0u64);
                    while Instant::now() < end {
                        let key = format!("k{}", (sent * inflight + w) % 100);
                        sent += 1;
                        let request = axum::http::Request::get("/")
                            .header("x-api-key", key)
                            .body(axum::body::Body::empty())
                            .unwrap();
                        let status = app.clone().call(request).await.unwrap().status();
                        served += u64::from(status == 200);
                    }
                    served
                })
            })
            .collect();
        let mut served = 0;
        for w in workers {
            served += w.await.unwrap();
        }
        let (wall, cpu) = (start.elapsed(), cpu_time() - cpu);
        let _ = layer.refund_all().await;
        (
            served,
            served as f64 / wall.as_secs_f64(),
            cpu.as_secs_f64() * 1e6 / served.max(1) as f64,
        )
    })
}

fn api_key() -> HeaderKey {
    HeaderKey::new(axum::http::HeaderName::from_static("x-api-key"))
}

/// Degraded mode: `processes` layers (each its own connection, as
/// separate processes would have), each offering `rate` requests a second
/// on one key (`GCRA limit 1s`, fail-closed) for `secs`; the server is
/// paused (`CLIENT PAUSE ... ALL`) for the middle third. Returns the
/// admissions per second before and during the outage.
fn degraded(url: &str, processes: usize, limit: u64, rate: u64, secs: u64) -> (f64, f64) {
    runtime().block_on(async {
        let key = format!("bench-degraded-{}", std::process::id());
        let policy = Gcra::new(limit, Duration::from_secs(1));
        let timeout = Duration::from_millis(50);
        let apps: Vec<Router> = (0..processes)
            .map(|_| {
                let client = Client::new(connect(url).unwrap()).timeout(timeout);
                let layer = RedisRateLimitLayer::builder(client, api_key())
                    .limit(
                        HttpLimit::per_key(policy)
                            .name("per-key")
                            .prefix("bench:degraded:")
                            .fail_closed(),
                    )
                    .degraded(1000)
                    .build()
                    .unwrap();
                Router::new()
                    .route("/", get(|| async { "ok" }))
                    .layer(layer)
            })
            .collect();
        let start = Instant::now();
        let third = Duration::from_secs(secs) / 3;
        let (pause_from, pause_to) = (start + third, start + 2 * third);
        let pauser = {
            let url = url.to_string();
            tokio::task::spawn_blocking(move || {
                std::thread::sleep(pause_from.saturating_duration_since(Instant::now()));
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                let _: () = redis::cmd("CLIENT")
                    .arg("PAUSE")
                    .arg(third.as_millis() as u64)
                    .arg("ALL")
                    .query(&mut c)
                    .unwrap();
            })
        };
        let done = Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
        let mut tick = tokio::time::interval(Duration::from_secs(1) / rate as u32);
        let mut tasks = Vec::new();
        while start.elapsed() < Duration::from_secs(secs) {
            tick.tick().await;
            for app in &apps {
                let (mut app, done) = (app.clone(), done.clone());
                let key = key.clone();
                tasks.push(tokio::spawn(async move {
                    let request = axum::http::Request::get("/")
                        .header("x-api-key", key.as_str())
                        .body(axum::body::Body::empty())
                        .unwrap();
                    let response = app.call(request).await.unwrap();
                    if response.status() == 200 {
                        done.lock().unwrap().push(Instant::now());
                    }
                }));
            }
        }
        for t in tasks {
            let _ = t.await;
        }
        pauser.await.unwrap();
        let (mut before, mut during) = (0u64, 0u64);
        // Answers in the outage come after the first timeouts.
        let outage = (pause_from + timeout, pause_to);
        for &t in done.lock().unwrap().iter() {
            if t < pause_from && t >= start + third / 2 {
                before += 1;
            } else if t >= outage.0 && t < outage.1 {
                during += 1;
            }
        }
        let per_second = |n: u64, span: Duration| n as f64 / span.as_secs_f64();
        (
            per_second(before, third / 2),
            per_second(during, outage.1 - outage.0),
        )
    })
}

fn main() {
    let url = std::env::var("REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let arg = |i: usize| std::env::args().nth(i).unwrap_or_default();
    let secs: u64 = arg(1).parse().unwrap_or(5);
    let only = arg(2);
    let only_p: Vec<usize> = arg(3).split(',').filter_map(|p| p.parse().ok()).collect();
    let inflight: usize = arg(4).parse().unwrap_or(1).max(1);
    if only.is_empty() || only == "leasing" {
        leasing_rows(&url, secs, true, &only_p, inflight);
    }
    if only == "polling" {
        leasing_rows(&url, secs, false, &only_p, inflight);
    }
    if only.is_empty() || only == "deny" {
        deny_rows(&url, secs, inflight);
    }
    if only == "hot" {
        println!("the layer's hot path: leased per-key limit (k = 100), deny cache and degraded mode on, 100 keys, {inflight} in flight, {secs} s");
        let (served, rate, cpu) = hot(&url, inflight, secs);
        println!("served {served}, {rate:.0} requests/s, {cpu:.2} CPU µs per request");
    }
    if only.is_empty() || only == "degraded" {
        println!();
        println!("degraded mode, 4 processes offering 100/s each on GCRA 100 1s, {secs} s, paused for the middle third");
        let (before, during) = degraded(&url, 4, 100, 100, secs.max(3));
        println!("admitted/s before the outage {before:.1}, during it {during:.1} (limit 100)");
    }
}

fn leasing_rows(url: &str, secs: u64, queued: bool, only_p: &[usize], inflight: usize) {
    let how = if queued {
        "queued when contended"
    } else {
        "polling"
    };
    println!("leasing ({how}), RL.GCRA 2000 1s BURST 100, {inflight} in flight per process, {secs} s per row (server-side counts)");
    println!(
        "{:>3} {:>3} | {:>9} {:>9} {:>12} {:>8} {:>14} {:>9} {:>7}",
        "P", "k", "admitted", "RL.GCRA", "per admitted", "÷ limit", "most in 1 s", "over", "unused"
    );
    // What the limit admits over the run: the burst, then the rate.
    let limit = 100 + 2000 * secs;
    for (processes, k) in [(1usize, 1u64), (1, 20), (10, 20), (50, 20)] {
        if !only_p.is_empty() && !only_p.contains(&processes) {
            continue;
        }
        let run = leasing(url, processes, inflight, k, queued, secs);
        println!(
            "{processes:>3} {k:>3} | {:>9} {:>9} {:>12.4} {:>8.3} {:>14} {:>9} {:>7}",
            run.admitted,
            run.calls,
            run.calls as f64 / run.admitted.max(1) as f64,
            run.admitted as f64 / limit as f64,
            run.most_in_a_second,
            run.most_in_a_second as i64 - 2100,
            run.unused,
        );
    }
}

fn deny_rows(url: &str, secs: u64, inflight: usize) {
    println!();
    println!("deny cache, one key offered 10x its limit (GCRA 100 1s), {inflight} at once every {inflight} ms, {secs} s per row");
    println!(
        "{:>5} | {:>7} {:>8} {:>7} {:>11} {:>12}",
        "cache", "offered", "admitted", "RL.ALL", "per request", "saved"
    );
    for cache in [false, true] {
        let (offered, admitted, calls, saved) = deny_cache(url, cache, inflight, secs);
        println!(
            "{:>5} | {offered:>7} {admitted:>8} {calls:>7} {:>11.4} {saved:>12}",
            if cache { "on" } else { "off" },
            calls as f64 / offered.max(1) as f64
        );
    }
}
