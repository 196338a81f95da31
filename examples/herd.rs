//! A retry herd on one key, measured against a running server
//! (`scripts/bench_herd.sh` starts a fresh real-clock server per mode).
//!
//! ```text
//! cargo run --release --example herd -- 127.0.0.1:PORT MODE [clients] [seconds]
//! ```
//!
//! `clients` (1,000) closed-loop clients want one admission after another
//! on one key, `RL.GCRA herd 100 1s`, for `seconds` (20) of real time,
//! each honouring what it is told. MODE:
//!
//! - `now`: a denied client asks again at once;
//! - `told`: it sleeps the `retry_after_ms` it was told, then asks again;
//! - `jitter`: it asks with `JITTER` and sleeps the (spread) wait it is told;
//! - `reserve`: it asks with `RESERVE 60s`, is admitted for a start
//!   `delay_ms` later and sleeps until then: one command per admission;
//! - `wait`: it asks with `WAIT 60s`; the server answers when it admits.
//!
//! Clients share one multiplexed connection per 50 (`wait`: a connection
//! each, since a blocked command holds its connection) on a single-threaded
//! runtime. The key's burst is used up before the clock starts. A client
//! sends no new command after `seconds`; an ask still unanswered then is
//! left out. Prints, as one Markdown row: admissions per second (those
//! admitted, or for `reserve` started, within the run), commands per
//! admission (commands of the asks that ended admitted ÷ those asks), the
//! mean and the most commands sent in any 10 ms (client-side, by send
//! time; over the whole run, and from the second second on, after the
//! start-up wave), p99 time from an ask's first command to its admission,
//! and for `reserve` the p50 / p99 start error: |actual start − told start|, the
//! told start being the reply's arrival plus `delay_ms`.

use std::error::Error;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;

type Res<T> = Result<T, Box<dyn Error>>;

const KEY: &str = "herd";
const PER_CONNECTION: usize = 50;
const BUCKET: Duration = Duration::from_millis(10);

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Now,
    Told,
    Jitter,
    Reserve,
    Wait,
}

#[derive(Default)]
struct Stats {
    /// Admissions (reserve: starts) within the run.
    admitted_in_run: u64,
    /// Asks that ended admitted, and the commands they took.
    asks: u64,
    ask_commands: u64,
    /// Time from an ask's first command to its admission, µs.
    to_admission: Vec<u64>,
    /// |actual start − told start|, µs (reserve).
    start_error: Vec<u64>,
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = args
        .first()
        .ok_or("usage: herd ADDR MODE [clients] [seconds]")?;
    let mode = match args.get(1).map(String::as_str) {
        Some("now") => Mode::Now,
        Some("told") => Mode::Told,
        Some("jitter") => Mode::Jitter,
        Some("reserve") => Mode::Reserve,
        Some("wait") => Mode::Wait,
        _ => return Err("MODE is now, told, jitter, reserve or wait".into()),
    };
    let clients: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(1000);
    let seconds: u64 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(20);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(addr, args[1].as_str(), mode, clients, seconds))
}

async fn run(addr: &str, name: &str, mode: Mode, clients: usize, seconds: u64) -> Res<()> {
    let client = redis::Client::open(format!("redis://{addr}/"))?;
    // Every call has a deadline: WAIT's timeout and a margin, else 10 s.
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(Some(Duration::from_secs(if mode == Mode::Wait {
            90
        } else {
            10
        })));
    let connections = if mode == Mode::Wait {
        clients
    } else {
        clients.div_ceil(PER_CONNECTION)
    };
    let mut conns = Vec::with_capacity(connections);
    for _ in 0..connections {
        conns.push(
            client
                .get_multiplexed_async_connection_with_config(&config)
                .await?,
        );
    }
    // Use up the burst, so the run measures the sustained rate.
    let _: Vec<i64> = redis::cmd("RL.GCRA")
        .arg(&[KEY, "100", "1s", "COST", "100"])
        .query_async(&mut conns[0])
        .await?;

    let run = Duration::from_secs(seconds);
    let buckets: Arc<Vec<AtomicU32>> = Arc::new(
        (0..(seconds as usize + 1) * 100)
            .map(|_| AtomicU32::new(0))
            .collect(),
    );
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(clients);
    for i in 0..clients {
        let conn = conns[i % connections].clone();
        let buckets = buckets.clone();
        tasks.push(tokio::spawn(async move {
            client_loop(conn, mode, start, run, &buckets).await
        }));
    }
    let mut all = Stats::default();
    for task in tasks {
        let s = task.await??;
        all.admitted_in_run += s.admitted_in_run;
        all.asks += s.asks;
        all.ask_commands += s.ask_commands;
        all.to_admission.extend(s.to_admission);
        all.start_error.extend(s.start_error);
    }

    let counts: Vec<u32> = buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
    let in_run = &counts[..seconds as usize * 100];
    let total: u64 = in_run.iter().map(|&c| u64::from(c)).sum();
    let mean = total as f64 / in_run.len() as f64;
    let busiest = in_run.iter().copied().max().unwrap_or(0);
    let busiest_steady = in_run.get(100..).and_then(|b| b.iter().copied().max());
    // The q-th percentile of sorted µs, in ms.
    let pct = |v: &[u64], q: usize| -> f64 {
        if v.is_empty() {
            return f64::NAN;
        }
        v[(v.len() * q).div_ceil(100).saturating_sub(1)] as f64 / 1000.0
    };
    all.to_admission.sort_unstable();
    all.start_error.sort_unstable();
    let wait_p99 = pct(&all.to_admission, 99);
    let start_p99 = if mode == Mode::Reserve {
        let e = &all.start_error;
        format!("{:.2} / {:.2} ms", pct(e, 50), pct(e, 99))
    } else {
        "—".into()
    };
    println!(
        "| {name} | {:.1} | {:.2} | {mean:.2} | {busiest} | {} | {:.0} | {start_p99} |",
        all.admitted_in_run as f64 / seconds as f64,
        all.ask_commands as f64 / all.asks.max(1) as f64,
        busiest_steady.map_or("—".into(), |b| b.to_string()),
        wait_p99,
    );
    Ok(())
}

/// One closed-loop client until `run` has passed since `start`.
async fn client_loop(
    mut conn: MultiplexedConnection,
    mode: Mode,
    start: Instant,
    run: Duration,
    buckets: &[AtomicU32],
) -> redis::RedisResult<Stats> {
    let mut stats = Stats::default();
    let mut cmd = redis::cmd("RL.GCRA");
    cmd.arg(&[KEY, "100", "1s"]);
    match mode {
        Mode::Now | Mode::Told => {}
        Mode::Jitter => {
            cmd.arg("JITTER");
        }
        Mode::Reserve => {
            cmd.arg(&["RESERVE", "60s"]);
        }
        Mode::Wait => {
            cmd.arg(&["WAIT", "60s"]);
        }
    }
    let end = start + run;
    'asks: while Instant::now() < end {
        let first = Instant::now();
        let mut commands = 0u64;
        loop {
            let sent = Instant::now();
            if sent >= end {
                break 'asks;
            }
            let bucket = (sent - start).as_nanos() / BUCKET.as_nanos();
            if let Some(b) = buckets.get(bucket as usize) {
                b.fetch_add(1, Ordering::Relaxed);
            }
            commands += 1;
            let reply: Vec<i64> = cmd.query_async(&mut conn).await?;
            let got = Instant::now();
            if reply.first() == Some(&1) {
                let admitted = if mode == Mode::Reserve {
                    let delay = reply.get(5).copied().unwrap_or(0).max(0) as u64;
                    let told = got + Duration::from_millis(delay);
                    // The timer wakes on whole milliseconds, late: sleep to
                    // 2 ms before the start, then yield until it.
                    tokio::time::sleep_until((told - Duration::from_millis(2)).into()).await;
                    while Instant::now() < told {
                        tokio::task::yield_now().await;
                    }
                    let actual = Instant::now();
                    stats
                        .start_error
                        .push(actual.saturating_duration_since(told).as_micros() as u64);
                    actual
                } else {
                    got
                };
                if admitted < end {
                    stats.admitted_in_run += 1;
                }
                stats.asks += 1;
                stats.ask_commands += commands;
                stats
                    .to_admission
                    .push((admitted - first).as_micros() as u64);
                continue 'asks;
            }
            let retry_after = reply.get(3).copied().unwrap_or(0).max(0) as u64;
            if mode != Mode::Now {
                tokio::time::sleep(Duration::from_millis(retry_after)).await;
            }
        }
    }
    Ok(stats)
}
