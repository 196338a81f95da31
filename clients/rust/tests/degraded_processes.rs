//! Degraded mode across real OS processes: three processes (this test
//! binary run again as children, each with its own client, connection and
//! layer) offer uneven paced rates on one key of `GCRA 100 1s`,
//! fail-closed with degraded mode; after `BEFORE` the server is frozen
//! (`SIGSTOP`) for `OUTAGE`. Each process's local admissions during the
//! outage are compared with `min(offered, share × 100)` a second, its share
//! being its part of the store's admissions before the outage, each
//! weighted `exp(-age / 10 s)` as the documented estimate weighs them:
//! within ±20 %.
//!
//! Real time, as processes have: the module's real clock, the children's
//! `Instant`. Arrivals are paced (one every `1 / rate`), not random, so
//! the counts vary only with scheduling: a process that cannot offer its
//! rate on a loaded machine is compared with what it offered.

#[path = "../../../tests/common/mod.rs"]
mod common;

use axum::routing::get;
use axum::Router;
use common::{Config, Server};
use redis_ratelimit_client::http::{HeaderKey, HttpLimit, RedisRateLimitLayer};
use redis_ratelimit_client::{connect, Client, Gcra};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tower_service::Service;

/// The child's settings: `url rate start_epoch_ms secs`.
const CHILD: &str = "RL_DEGRADED_CHILD";
/// The store's answers before the outage; the outage.
const BEFORE: Duration = Duration::from_secs(4);
const OUTAGE: Duration = Duration::from_secs(10);
/// Counted from this far into the outage: each process first waits out
/// its requests' timeout (300 ms) and spends what its bucket held.
const SETTLE: Duration = Duration::from_millis(500);
/// The share's memory: its estimate decays by `exp(-age / MEMORY)`.
const MEMORY: Duration = Duration::from_secs(10);
const SLOT_MS: u64 = 100;

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64
}

/// Per slot of `SLOT_MS` since the start: offered, admitted by the store,
/// admitted locally.
type Slots = Arc<Mutex<Vec<[u64; 3]>>>;

/// One process: `rate` requests a second on the key `shared`, paced, each
/// its own task, from `at` (epoch ms) for `secs`; prints its slots.
fn child(spec: &str) {
    let f: Vec<&str> = spec.split(' ').collect();
    let (url, rate, at, secs): (&str, f64, u64, u64) = (
        f[0],
        f[1].parse().expect("rate"),
        f[2].parse().expect("start"),
        f[3].parse().expect("secs"),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let slots: Slots = Arc::new(Mutex::new(vec![[0; 3]; (secs * 1000 / SLOT_MS) as usize]));
    rt.block_on(async {
        let client = Client::new(connect(url).expect("connect"));
        let layer = RedisRateLimitLayer::builder(
            client,
            HeaderKey::new(axum::http::HeaderName::from_static("x-api-key")),
        )
        .limit(
            HttpLimit::per_key(Gcra::new(100, Duration::from_secs(1)))
                .name("per-key")
                .prefix("")
                .fail_closed(),
        )
        .degraded(100)
        .build()
        .expect("layer");
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer);
        let wait = at.saturating_sub(epoch_ms());
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let start = Instant::now();
        let gap = Duration::from_secs_f64(1.0 / rate);
        let mut tasks = Vec::new();
        for i in 0.. {
            let next = start + gap * i;
            if next >= start + Duration::from_secs(secs) {
                break;
            }
            tokio::time::sleep_until(next.into()).await;
            let (mut app, slots) = (app.clone(), Arc::clone(&slots));
            tasks.push(tokio::spawn(async move {
                let request = axum::http::Request::get("/")
                    .header("x-api-key", "shared")
                    .body(axum::body::Body::empty())
                    .expect("request");
                let response = app.call(request).await.expect("infallible");
                let admitted = response.status() == 200;
                let store = response.headers().contains_key("ratelimit");
                let slot = (start.elapsed().as_millis() as u64 / SLOT_MS) as usize;
                if let Some(s) = slots.lock().expect("slots").get_mut(slot) {
                    s[0] += 1;
                    s[1] += u64::from(admitted && store);
                    s[2] += u64::from(admitted && !store);
                }
            }));
        }
        for t in tasks {
            t.await.expect("request task");
        }
    });
    for s in slots.lock().expect("slots").iter() {
        println!("slot {} {} {}", s[0], s[1], s[2]);
    }
}

/// Run as a child by the test below (`RL_DEGRADED_CHILD` set); nothing
/// otherwise.
#[test]
fn degraded_process() {
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec);
    }
}

/// Runs the three processes at `rates` through an outage; per process:
/// (offered a second, share, admitted a second, expected a second).
fn run(rates: &[f64]) -> Vec<(f64, f64, f64, f64)> {
    let mut server = Server::with(Config::real_clock());
    let after = Duration::from_millis(500);
    let secs = (BEFORE + OUTAGE + after).as_secs_f64().ceil() as u64;
    let at = epoch_ms() + 1500;
    let children: Vec<_> = rates
        .iter()
        .map(|rate| {
            Command::new(std::env::current_exe().expect("the test binary"))
                .args([
                    "degraded_process",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, format!("{} {rate} {at} {secs}", server.url()))
                .stdout(Stdio::piped())
                .spawn()
                .expect("a child")
        })
        .collect();
    let freeze_at = at + BEFORE.as_millis() as u64;
    std::thread::sleep(Duration::from_millis(freeze_at.saturating_sub(epoch_ms())));
    server.freeze();
    std::thread::sleep(OUTAGE);
    server.resume();
    let slots: Vec<Vec<[u64; 3]>> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().expect("the child's output");
            assert!(out.status.success(), "a child failed");
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.strip_prefix("slot "))
                .map(|l| {
                    let v: Vec<u64> = l.split(' ').map(|x| x.parse().expect("a count")).collect();
                    [v[0], v[1], v[2]]
                })
                .collect()
        })
        .collect();
    let slot = |d: Duration| (d.as_millis() as u64 / SLOT_MS) as usize;
    // The store's admissions before the outage, each weighted as the
    // share's estimate weighs it: `exp(-age / 10 s)` at the outage.
    let weight = |i: usize| {
        let age = BEFORE.as_secs_f64() - (i as f64 + 0.5) * SLOT_MS as f64 / 1000.0;
        (-age / MEMORY.as_secs_f64()).exp()
    };
    let before: Vec<f64> = slots
        .iter()
        .map(|s| {
            s[..slot(BEFORE)]
                .iter()
                .enumerate()
                .map(|(i, c)| c[1] as f64 * weight(i))
                .sum()
        })
        .collect();
    let whole: f64 = before.iter().sum();
    let (from, to) = (slot(BEFORE + SETTLE), slot(BEFORE + OUTAGE));
    let span = (to - from) as f64 * SLOT_MS as f64 / 1000.0;
    slots
        .iter()
        .zip(&before)
        .map(|(s, own)| {
            let share = own / whole.max(1.0);
            let offered = s[from..to].iter().map(|c| c[0]).sum::<u64>() as f64 / span;
            let admitted = s[from..to].iter().map(|c| c[2]).sum::<u64>() as f64 / span;
            (offered, share, admitted, offered.min(share * 100.0))
        })
        .collect()
}

/// Runs `rates` through the outage, prints each process's figures and
/// asserts each within ±20 % of what its share documents.
fn check(rates: &[f64]) {
    let results = run(rates);
    let mut failed = Vec::new();
    for (p, (offered, share, admitted, expected)) in results.iter().enumerate() {
        let ratio = admitted / expected;
        println!(
            "process {p}: demand {}/s, offered {offered:.1}/s in the outage, share {share:.3}, \
             admitted {admitted:.1}/s, expected {expected:.1}/s, ratio {ratio:.2}",
            rates[p]
        );
        if !(0.8..=1.2).contains(&ratio) {
            failed.push(format!("process {p}: ratio {ratio:.2}"));
        }
    }
    let sum: f64 = results.iter().map(|r| r.2).sum();
    println!("together: {sum:.1}/s (limit 100/s)");
    assert!(failed.is_empty(), "{}", failed.join("; "));
}

#[test]
fn three_processes_above_the_limit_each_admit_their_share_while_the_server_is_frozen() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    // 210 a second offered on 100: each above its share of it.
    check(&[30.0, 60.0, 120.0]);
}

#[test]
fn three_processes_below_the_limit_each_admit_their_demand_while_the_server_is_frozen() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    // 70 a second offered on 100: each below its share of it.
    check(&[10.0, 20.0, 40.0]);
}
