//! Leasing exactly the hot keys the server names, measured against a
//! running server (`scripts/bench_hot_leasing.sh` starts a fresh
//! real-clock one).
//!
//! ```text
//! cargo run --release -p redis-ratelimit-client --example hot_leasing -- URL [processes] [seconds] [limit]
//! ```
//!
//! `processes` (3) processes, each a tower layer of its own (its own
//! connection) with one per-key limit `GCRA limit 1s` (`limit` 1,000)
//! leased in blocks of 20 only while the server names the key hot
//! (`leased_when_hot(LeasePlan::fixed(20))`, `.hot_keys(10, 100)`), the
//! list followed by a poll a second (`follow_hot_keys`). Each process
//! runs 50 closed-loop workers (50 requests in flight) on a multi-threaded
//! runtime, each drawing keys from 100,000 at Zipf s = 1.1 (seeded per
//! worker). Halfway through the run the ranks move by 50,000: a key cold
//! until then (`u50001`) becomes the hottest, and the first half's hot keys
//! (`u1`...) turn cold.
//!
//! Each process counts the store commands it sends per key (a counting
//! wrapper around its connection) and each request's answer, by 100 ms of
//! the run; the first process prints the Markdown tables of their sums:
//! the hottest key's commands per admission second by second, the same
//! over the parts of the run, and its admissions against the leasing
//! bound (the limit's burst + rate × window + the blocks the processes
//! can hold).

use axum::routing::get;
use axum::Router;
use rand::{Rng, SeedableRng};
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use redis_ratelimit_client::http::{HeaderKey, HttpLimit, RedisRateLimitLayer};
use redis_ratelimit_client::{connect, Client, Gcra, LeasePlan};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tower_service::Service;

const KEYS: usize = 100_000;
const ZIPF_S: f64 = 1.1;
const IN_FLIGHT: usize = 50;
const BLOCK: u64 = 20;
const PREFIX: &str = "hl:";
/// The ranks' move halfway: rank r is key u(r + SHIFT) after it.
const SHIFT: usize = 50_000;
const BUCKET_MS: u64 = 100;
/// Per bucket: requests admitted, denied, failed, and store commands.
type Counts = [u64; 4];

/// The keys followed one by one: the top 20 of each half; ranks 21 to
/// 100 of either half are summed as `warm`, every other key (at most a
/// 1,200th of the requests each) as `cold`.
fn class(key: &str) -> String {
    let n: usize = key
        .strip_prefix('u')
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let rank = if n > SHIFT { n - SHIFT } else { n };
    match rank {
        1..=20 => key.to_string(),
        21..=100 => "warm".to_string(),
        _ => "cold".to_string(),
    }
}

/// The key of rank `rank` in the first half or the second.
fn key_of(rank: usize, second_half: bool) -> String {
    let rank = if second_half {
        (rank - 1 + SHIFT) % KEYS + 1
    } else {
        rank
    };
    format!("u{rank}")
}

struct Recorder {
    start: Instant,
    counts: Mutex<BTreeMap<(String, u64), Counts>>,
}

impl Recorder {
    fn bucket(&self) -> u64 {
        self.start.elapsed().as_millis() as u64 / BUCKET_MS
    }

    fn add(&self, class: String, at: usize) {
        let bucket = self.bucket();
        let mut counts = self.counts.lock().unwrap();
        counts.entry((class, bucket)).or_default()[at] += 1;
    }

    /// A store command: counted for its (first) key.
    fn command(&self, cmd: &Cmd) {
        let args: Vec<&[u8]> = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => b,
                _ => &b""[..],
            })
            .collect();
        let name = args.first().map(|n| n.to_ascii_uppercase());
        let key = match name.as_deref() {
            Some(b"RL.ALL") => args.get(2),
            Some(b"RL.HOTKEYS") => return self.add("poll".into(), 3),
            Some(n) if n.starts_with(b"RL.") => args.get(1),
            _ => return self.add("other".into(), 3),
        };
        let key = key.map(|k| String::from_utf8_lossy(k).into_owned());
        let key = key.as_deref().and_then(|k| k.strip_prefix(PREFIX));
        let mut class = key.map_or("other".into(), class);
        if class == "cold" && name.as_deref() != Some(b"RL.ALL") {
            // A cold key's commands other than the per-request call.
            class = "cold-blocks".into();
        }
        self.add(class, 3);
    }
}

/// The client's connection, counting the commands sent through it.
#[derive(Clone)]
struct Counted {
    inner: ConnectionManager,
    recorder: Arc<Recorder>,
}

impl ConnectionLike for Counted {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.recorder.command(cmd);
        self.inner.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        for cmd in pipeline.cmd_iter() {
            self.recorder.command(cmd);
        }
        self.inner.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }
}

/// Ranks 1..=n drawn with probability proportional to rank^-s.
struct Zipf {
    cumulative: Arc<Vec<f64>>,
    rng: rand::rngs::StdRng,
}

impl Zipf {
    fn draw(&mut self) -> usize {
        let total = *self.cumulative.last().unwrap();
        let u = self.rng.gen::<f64>() * total;
        self.cumulative.partition_point(|&c| c < u).min(KEYS - 1) + 1
    }
}

fn cumulative() -> Vec<f64> {
    let mut total = 0.0;
    (1..=KEYS)
        .map(|rank| {
            total += (rank as f64).powf(-ZIPF_S);
            total
        })
        .collect()
}

/// One process: its layer, 50 workers, until `seconds` after `start_ms`;
/// prints `class bucket admitted denied failed commands` lines.
fn worker(url: &str, index: u64, start_ms: u64, seconds: u64, limit: u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let counts = runtime.block_on(async move {
        let inner = connect(url).unwrap();
        // Wait for the common start (the processes start apart).
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        tokio::time::sleep(Duration::from_millis(start_ms.saturating_sub(now_ms))).await;
        let recorder = Arc::new(Recorder {
            start: Instant::now(),
            counts: Mutex::new(BTreeMap::new()),
        });
        let conn = Counted {
            inner,
            recorder: recorder.clone(),
        };
        let client = Client::new(conn).timeout(Duration::from_secs(1));
        let layer = RedisRateLimitLayer::builder(
            client,
            HeaderKey::new(axum::http::HeaderName::from_static("x-api-key")),
        )
        .limit(
            HttpLimit::per_key(Gcra::new(limit, Duration::from_secs(1)))
                .name("per-key")
                .prefix(PREFIX)
                .leased_when_hot(LeasePlan::fixed(BLOCK)),
        )
        .hot_keys(10, 100)
        .build()
        .unwrap();
        let poll = layer.follow_hot_keys(Duration::from_secs(1));
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer.clone());
        let table = Arc::new(cumulative());
        let (start, half) = (recorder.start, Duration::from_secs(seconds) / 2);
        let end = start + Duration::from_secs(seconds);
        let workers: Vec<_> = (0..IN_FLIGHT)
            .map(|w| {
                let (app, recorder) = (app.clone(), recorder.clone());
                let mut zipf = Zipf {
                    cumulative: table.clone(),
                    rng: rand::rngs::StdRng::seed_from_u64(index * 1_000 + w as u64),
                };
                tokio::spawn(async move {
                    while Instant::now() < end {
                        let key = key_of(zipf.draw(), start.elapsed() >= half);
                        let request = axum::http::Request::get("/")
                            .header("x-api-key", &key)
                            .body(axum::body::Body::empty())
                            .unwrap();
                        let status = app.clone().call(request).await.unwrap().status();
                        let at = match status.as_u16() {
                            200 => 0,
                            429 => 1,
                            _ => 2,
                        };
                        recorder.add(class(&key), at);
                    }
                })
            })
            .collect();
        for w in workers {
            w.await.unwrap();
        }
        if let Some(poll) = poll {
            poll.abort();
        }
        let _ = layer.refund_all().await;
        let counts = recorder.counts.lock().unwrap().clone();
        drop(recorder);
        counts
    });
    for ((class, bucket), c) in counts {
        println!("{class} {bucket} {} {} {} {}", c[0], c[1], c[2], c[3]);
    }
}

/// The sums over the processes, by class and bucket.
type Sums = BTreeMap<String, BTreeMap<u64, Counts>>;

fn add(to: &mut Counts, c: &Counts) {
    for (t, n) in to.iter_mut().zip(c) {
        *t += n;
    }
}

fn sum(sums: &Sums, class: &str, from: u64, to: u64) -> Counts {
    let mut out = [0; 4];
    if let Some(buckets) = sums.get(class) {
        for (_, c) in buckets.range(from..to) {
            add(&mut out, c);
        }
    }
    out
}

fn sum_of(sums: &Sums, classes: &[String], from: u64, to: u64) -> Counts {
    classes.iter().fold([0; 4], |mut acc, class| {
        let c = sum(sums, class, from, to);
        add(&mut acc, &c);
        acc
    })
}

fn per_admission(c: &Counts) -> String {
    if c[0] == 0 {
        "–".into()
    } else {
        format!("{:.3}", c[3] as f64 / c[0] as f64)
    }
}

fn row(label: &str, c: &Counts) {
    println!(
        "| {label} | {} | {} | {} | {} | {} | {} |",
        c[0] + c[1] + c[2],
        c[0],
        c[1],
        c[2],
        c[3],
        per_admission(c)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        let n = |i: usize| args[i].parse::<u64>().unwrap();
        worker(&args[2], n(3), n(4), n(5), n(6));
        return;
    }
    let url = args
        .get(1)
        .cloned()
        .unwrap_or("redis://127.0.0.1:6379/".into());
    let arg = |i: usize, d: u64| args.get(i).map_or(d, |a| a.parse().unwrap());
    let (processes, seconds, limit) = (arg(2, 3), arg(3, 12), arg(4, 1_000));
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let start_ms = now_ms + 2_000;
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..processes)
        .map(|i| {
            std::process::Command::new(&exe)
                .args(["worker", &url, &i.to_string(), &start_ms.to_string()])
                .args([seconds.to_string(), limit.to_string()])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut sums = Sums::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a process failed");
        for line in out.stdout.lines() {
            let line = line.unwrap();
            let f: Vec<&str> = line.split(' ').collect();
            let n = |i: usize| f[i].parse::<u64>().unwrap();
            let c = sums
                .entry(f[0].to_string())
                .or_default()
                .entry(n(1))
                .or_default();
            add(c, &[n(2), n(3), n(4), n(5)]);
        }
    }
    let per_second = 1_000 / BUCKET_MS;
    let half = seconds * per_second / 2;
    // The whole run, the answers that came after its end included (their
    // commands were sent within it).
    let end = u64::MAX;
    let hottest = format!("u{}", SHIFT + 1);
    println!(
        "{processes} processes × {IN_FLIGHT} in flight, {KEYS} keys at Zipf s = {ZIPF_S}, \
         `GCRA {limit} 1s` per key leased in blocks of {BLOCK} while hot (`.hot_keys(10, 100)`, \
         a poll a second), {seconds} s; the ranks move by {SHIFT} at {} s",
        seconds / 2
    );
    println!();
    println!(
        "**`{hottest}`, cold until {} s, then the hottest key, second by second**",
        seconds / 2
    );
    println!();
    println!("| second | requests | admitted | denied | failed | store commands | commands / admission |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for s in (half / per_second).saturating_sub(1)..seconds {
        let c = sum(&sums, &hottest, s * per_second, (s + 1) * per_second);
        row(&format!("{s}–{}", s + 1), &c);
    }
    println!();
    println!("**Each part of the run**");
    println!();
    println!("| keys, time | requests | admitted | denied | failed | store commands | commands / admission |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let two = 2 * per_second;
    let three = 3 * per_second;
    row(
        &format!("`{hottest}`, its first 2 s hot"),
        &sum(&sums, &hottest, half, half + two),
    );
    row(
        &format!("`{hottest}`, from 2 s hot on"),
        &sum(&sums, &hottest, half + two, end),
    );
    row(
        "`u1` (hottest of the first half), from 2 s on",
        &sum(&sums, "u1", two, half),
    );
    let second_top: Vec<String> = (2..=10).map(|r| format!("u{}", SHIFT + r)).collect();
    row(
        "the second half's ranks 2–10, from 2 s hot on",
        &sum_of(&sums, &second_top, half + two, end),
    );
    let first_top: Vec<String> = (1..=10).map(|r| format!("u{r}")).collect();
    row(
        "the first half's top 10 once cooled (from 3 s after the move)",
        &sum_of(&sums, &first_top, half + three, end),
    );
    row(
        "cold keys (ranks past 100 in both halves), whole run",
        &sum(&sums, "cold", 0, end),
    );
    row(
        "ranks 21–100 of either half, whole run",
        &sum(&sums, "warm", 0, end),
    );
    row(
        "cold keys' block calls and refunds",
        &sum(&sums, "cold-blocks", 0, end),
    );
    row(
        "commands for no key of these (other)",
        &sum(&sums, "other", 0, end),
    );
    println!();
    println!("**The second half's top 10, each from 2 s after the move** (leased once its rate less its error is 100 a second)");
    println!();
    println!("| rank | key | requests a second | commands / admission |");
    println!("|---:|---|---:|---:|");
    let after = (seconds - seconds / 2).saturating_sub(2).max(1);
    for rank in 1..=10 {
        let key = format!("u{}", SHIFT + rank);
        let c = sum(&sums, &key, half + two, end);
        println!(
            "| {rank} | `{key}` | {} | {} |",
            (c[0] + c[1] + c[2]) / after,
            per_admission(&c)
        );
    }
    let polls = sum(&sums, "poll", 0, end)[3];
    println!();
    println!(
        "`RL.HOTKEYS` polls: {polls} in {seconds} s over {processes} processes ({:.2} a second per process).",
        polls as f64 / seconds as f64 / processes as f64
    );
    // The leasing bound: what the store admits (its burst, then the rate)
    // plus what the processes can hold (a block each).
    let held = BLOCK * processes;
    let mut worst = (0u64, 0u64);
    for from in half..=seconds * per_second {
        let admitted = sum(&sums, &hottest, from, from + per_second)[0];
        worst = worst.max((admitted, from));
    }
    let hot_total = sum(&sums, &hottest, half, end)[0];
    let hot_seconds = seconds - seconds / 2;
    println!();
    println!("**The leasing bound on `{hottest}`** (`GCRA {limit} 1s`: a burst of {limit}, {limit} a second; blocks of {BLOCK} × {processes} processes held at most)");
    println!();
    println!("| window | admitted | bound: burst + rate × window + {held} |");
    println!("|---|---:|---:|");
    println!(
        "| busiest 1 s (from {:.1} s) | {} | {} |",
        worst.1 as f64 / per_second as f64,
        worst.0,
        limit + limit + held
    );
    println!(
        "| its {hot_seconds} s in the second half | {hot_total} | {} |",
        limit + limit * hot_seconds + held
    );
}
