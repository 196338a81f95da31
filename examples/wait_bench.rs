//! Retry versus `WAIT` under overload (issue 12's first benchmark): one key
//! limited to 50 per second, 200 concurrent clients for 20 s of real time.
//! (a) clients that sleep `retry_after_ms` and retry; (b) the same clients
//! with `WAIT 30s`. For each: commands per admitted request, admitted per
//! second, time from first attempt to admission (p50/p99/max), admissions
//! that overtook an earlier-arriving request, and server CPU per admission.
//!
//!   cargo build --release && cargo run --release --example wait_bench
//!   CLIENTS=200 SECONDS=20 cargo run --release --example wait_bench
//!
//! Starts its own redis-server (real clock) on a free port.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const LIMIT: u64 = 50;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let module = std::env::var("MODULE").unwrap_or_else(|_| {
        format!(
            "{}/target/release/libredis_ratelimit.so",
            env!("CARGO_MANIFEST_DIR")
        )
    });
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--maxclients", "10000", "--loadmodule", &module])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server");
    let url = format!("redis://127.0.0.1:{port}/?protocol=2");
    let deadline = Instant::now() + Duration::from_secs(10);
    while redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .is_err()
    {
        assert!(Instant::now() < deadline, "server did not start");
        thread::sleep(Duration::from_millis(20));
    }
    Server { child, port }
}

/// One admitted request: when it was first tried, when admitted, and how
/// many commands it took.
#[derive(Clone, Copy)]
struct Admission {
    first: Duration,
    admitted: Duration,
    commands: u64,
}

fn server_cpu(c: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(c).expect("INFO");
    info.lines()
        .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum()
}

fn run(wait: bool, clients: u64, seconds: u64) {
    let server = start();
    let url = format!("redis://127.0.0.1:{}/?protocol=2", server.port);
    let client = redis::Client::open(url.as_str()).expect("client");
    let mut ctl = client.get_connection().expect("connection");
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let cpu_before = server_cpu(&mut ctl);
    let admissions = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let client = client.clone();
            let admissions = Arc::clone(&admissions);
            thread::spawn(move || {
                let mut c = client.get_connection().expect("connection");
                let mut mine = Vec::new();
                while Instant::now() < end {
                    let first = start.elapsed();
                    let mut commands = 0;
                    loop {
                        let mut cmd = redis::cmd("RL.GCRA");
                        cmd.arg("k").arg(LIMIT).arg("1s");
                        if wait {
                            cmd.arg("WAIT").arg("30s");
                        }
                        commands += 1;
                        let r: Vec<i64> = cmd.query(&mut c).expect("RL.GCRA");
                        if r[0] == 1 {
                            mine.push(Admission {
                                first,
                                admitted: start.elapsed(),
                                commands,
                            });
                            break;
                        }
                        if Instant::now() >= end {
                            break;
                        }
                        let ms = r[3].max(1) as u64;
                        thread::sleep(Duration::from_millis(ms));
                    }
                }
                admissions.lock().expect("lock").extend(mine);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = server_cpu(&mut ctl) - cpu_before;
    let mut all = admissions.lock().expect("lock").clone();
    report(wait, &mut all, elapsed, cpu);
}

fn report(wait: bool, all: &mut [Admission], elapsed: f64, cpu: f64) {
    all.sort_by_key(|a| a.admitted);
    let n = all.len() as f64;
    let commands: u64 = all.iter().map(|a| a.commands).sum();
    let mut latency: Vec<Duration> = all.iter().map(|a| a.admitted - a.first).collect();
    latency.sort();
    let pct = |p: f64| latency[((latency.len() as f64 - 1.0) * p) as usize].as_secs_f64() * 1e3;
    // An admission overtook if someone admitted later had tried first;
    // the first attempt is timed by the client before it sends, so on a
    // loaded machine two sends can swap on the way: also counted with a
    // 10 ms margin.
    let (mut overtook, mut overtook_10ms) = (0, 0);
    let mut earliest_later_first = Duration::MAX;
    for a in all.iter().rev() {
        if a.first > earliest_later_first {
            overtook += 1;
        }
        if a.first > earliest_later_first.saturating_add(Duration::from_millis(10)) {
            overtook_10ms += 1;
        }
        earliest_later_first = earliest_later_first.min(a.first);
    }
    println!(
        "| {} | {:.2} | {:.1} | {:.0} | {:.0} | {:.0} | {} | {} | {:.1} |",
        if wait { "WAIT 30s" } else { "sleep and retry" },
        commands as f64 / n,
        n / elapsed,
        pct(0.5),
        pct(0.99),
        pct(1.0),
        overtook,
        overtook_10ms,
        cpu / n * 1e6,
    );
}

fn main() {
    let clients = env("CLIENTS", 200);
    let seconds = env("SECONDS", 20);
    println!("One key, RL.GCRA k {LIMIT} 1s, {clients} clients, {seconds} s each.\n");
    println!(
        "| clients | commands per admission | admitted/s | p50 ms | p99 ms | max ms | overtaking admissions | by > 10 ms | server CPU µs per admission |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    run(false, clients, seconds);
    run(true, clients, seconds);
}
