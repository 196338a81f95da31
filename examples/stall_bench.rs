//! Does any command stall the server? Drives one scenario against a running
//! server loaded with `clock manual` (`scripts/bench_stall.sh` starts a
//! fresh server per scenario and size, and prints the tables).
//!
//! ```text
//! cargo run --release --example stall_bench -- CASE 127.0.0.1:PORT SIZE ROWS.tsv GUARD_SECONDS
//! cargo run --release --example stall_bench -- report ROWS.tsv
//! ```
//!
//! CASE is one of
//! - `gcra`, `fixed`, `sliding` (EXACT), `all` (RL.ALL over two keys),
//!   `acquire-short` (waits shorter than the held lease), `acquire-long`
//!   (waits longer): SIZE clients wait on one key, each on its own
//!   connection; then arrivals without `WAIT` and a few with it (SIZE / 4,
//!   1 to 10), a release (leases), SIZE / 4 (1 to 10) disconnects and as many
//!   `CLIENT UNBLOCK`s, and `RL.CLOCK ADVANCE` (one period, then past every
//!   timeout);
//! - `keys`: SIZE clients waiting on SIZE keys, one each;
//! - `leases`: SIZE leases held on one key (`RL.ACQUIRE` limit SIZE), then
//!   acquire, renew, release, peek, denial, and an acquire once all expired;
//! - `log`: an `RL.SLIDING EXACT` log of SIZE entries (window 2 h), then
//!   charge, `REFUND 1`, denial, a call with another limit;
//! - `sketch`: `RL.SKETCH` of WIDTH SIZE and DEPTH 8: creation, calls.
//!
//! Each step is measured on the server's main thread: `SLOWLOG` entries of
//! 1 ms or more (count, longest) and `INFO commandstats` (µs per call of each
//! command), while another connection sends `PING` every millisecond and
//! records the longest wait for `PONG`. One tab-separated row per step goes
//! to ROWS.tsv. A watchdog ends the process after GUARD_SECONDS, writing a
//! `stalled` row for the step under way. `report` prints one markdown table
//! per case and the time per arrival at the largest size against size 10.

use std::collections::BTreeMap;
use std::error::Error;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn Error>>;

/// Repeated steps stop after this many calls (ARRIVALS for arrivals on a
/// key with waiters, which change nothing: more calls, a steadier mean) or
/// this much time, whichever comes first, so that a size where each call is
/// slow still completes.
const REPEAT_CALLS: u64 = 100;
const ARRIVALS: u64 = 1000;
const REPEAT_BUDGET: Duration = Duration::from_secs(2);
const HOUR_US: u64 = 3_600_000_000;

/// The operator bounds a large scenario needs raised; a server without
/// them answers an error, which is ignored.
const BOUNDS: [(&str, &str); 5] = [
    ("ratelimit.max-waiters-per-key", "1000000"),
    ("ratelimit.max-waiters", "1000000"),
    ("ratelimit.max-sketch-bytes", "100000000"),
    ("ratelimit.max-log-entries", "10000000"),
    ("ratelimit.max-leases-per-key", "1000000"),
];

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [report, rows] if report == "report" => print_report(rows),
        [case, addr, size, rows, guard] => {
            let mut b = Bench::new(case, addr, size.parse()?, rows)?;
            b.watchdog(Duration::from_secs(guard.parse()?));
            b.run()
        }
        _ => {
            Err("usage: stall_bench CASE ADDR SIZE ROWS.tsv GUARD_SECONDS | report ROWS.tsv".into())
        }
    }
}

// ---------------------------------------------------------------- plumbing

fn resp(args: &[String]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).into_bytes());
        out.extend(a.as_bytes());
        out.extend(b"\r\n");
    }
    out
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn cmd(args: &[String]) -> redis::Cmd {
    let mut c = redis::cmd(&args[0]);
    for a in &args[1..] {
        c.arg(a);
    }
    c
}

fn info_field(info: &str, name: &str) -> Option<f64> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// Reads one line-terminated simple reply (`+PONG`, `:12`).
fn read_line(s: &mut TcpStream) -> Res<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n") {
        if s.read(&mut byte)? == 0 {
            return Err("connection closed".into());
        }
        buf.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&buf).trim().to_string())
}

/// Sends `PING` every millisecond on its own connection; the longest wait.
struct Probe {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<Vec<Duration>>,
}

impl Probe {
    fn start(addr: &str) -> Res<Probe> {
        let mut s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::spawn(move || {
            let mut waits = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() || read_line(&mut s).is_err() {
                    break;
                }
                waits.push(t.elapsed());
                thread::sleep(Duration::from_millis(1));
            }
            waits
        });
        Ok(Probe { stop, handle })
    }

    /// The longest wait, the 99th percentile and the number of probes.
    fn finish(self) -> (Duration, Duration, usize) {
        self.stop.store(true, Ordering::Relaxed);
        let mut waits = self.handle.join().unwrap_or_default();
        waits.sort_unstable();
        let p99 = waits
            .get((waits.len().saturating_sub(1)) * 99 / 100)
            .copied()
            .unwrap_or_default();
        (waits.last().copied().unwrap_or_default(), p99, waits.len())
    }
}

/// Clients waiting, each on its own raw connection (replies left unread).
struct Waiters {
    socks: Vec<Option<TcpStream>>,
    ids: BTreeMap<usize, i64>,
}

impl Waiters {
    /// Opens `n` connections and makes sure the server has accepted them;
    /// reads the client id of those at `id_of`.
    fn connect(addr: &str, n: usize, id_of: &[usize]) -> Res<Waiters> {
        let mut socks = Vec::with_capacity(n);
        for _ in 0..n {
            socks.push(TcpStream::connect(addr)?);
        }
        for s in &mut socks {
            s.write_all(&resp(&words("PING")))?;
        }
        for s in &mut socks {
            read_line(s)?;
        }
        let mut ids = BTreeMap::new();
        for &i in id_of {
            socks[i].write_all(&resp(&words("CLIENT ID")))?;
            let id = read_line(&mut socks[i])?;
            ids.insert(i, id.trim_start_matches(':').parse()?);
        }
        Ok(Waiters {
            socks: socks.into_iter().map(Some).collect(),
            ids,
        })
    }

    fn send(&mut self, i: usize, args: &[String]) -> Res<()> {
        if let Some(s) = &mut self.socks[i] {
            s.write_all(&resp(args))?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- the bench

struct Bench {
    case: String,
    addr: String,
    size: u64,
    ctl: redis::Connection,
    rows: Arc<Mutex<std::fs::File>>,
    current: Arc<Mutex<String>>,
}

/// What one step did: calls sent and the command whose µs per call is the
/// step's headline (commandstats name, e.g. `rl.gcra`).
struct Done {
    ops: u64,
    main: &'static str,
}

impl Bench {
    fn new(case: &str, addr: &str, size: u64, rows: &str) -> Res<Bench> {
        let mut ctl = redis::Client::open(format!("redis://{addr}"))?.get_connection()?;
        for (name, value) in BOUNDS {
            let _ = redis::cmd("CONFIG")
                .arg("SET")
                .arg(name)
                .arg(value)
                .query::<redis::Value>(&mut ctl);
        }
        for (name, value) in [
            ("slowlog-log-slower-than", "1000"),
            ("slowlog-max-len", "100000"),
        ] {
            redis::cmd("CONFIG")
                .arg("SET")
                .arg(name)
                .arg(value)
                .query::<()>(&mut ctl)?;
        }
        let rows = OpenOptions::new().create(true).append(true).open(rows)?;
        Ok(Bench {
            case: case.into(),
            addr: addr.into(),
            size,
            ctl,
            rows: Arc::new(Mutex::new(rows)),
            current: Arc::new(Mutex::new("setup".into())),
        })
    }

    /// Ends the process after `guard`, with a `stalled` row for the step
    /// under way (the script then kills the server).
    fn watchdog(&self, guard: Duration) {
        let (rows, current) = (self.rows.clone(), self.current.clone());
        let (case, size) = (self.case.clone(), self.size);
        thread::spawn(move || {
            thread::sleep(guard);
            let step = current.lock().map(|s| s.clone()).unwrap_or_default();
            if let Ok(mut f) = rows.lock() {
                let _ = writeln!(
                    f,
                    "{case}\t{size}\t{step}\t\t\t\t\t\t\t\t\tstalled (> {} s)",
                    guard.as_secs()
                );
            }
            eprintln!(
                "stall_bench {case} {size}: stalled in {step} (> {} s)",
                guard.as_secs()
            );
            std::process::exit(3);
        });
    }

    fn run(&mut self) -> Res<()> {
        match self.case.as_str() {
            "keys" => self.many_keys(),
            "leases" => self.leases(),
            "log" => self.log(),
            "sketch" => self.sketch(),
            _ => self.one_key(),
        }
    }

    fn waiting(&mut self) -> Res<u64> {
        let info: String = redis::cmd("INFO").arg("ratelimit").query(&mut self.ctl)?;
        Ok(info_field(&info, "ratelimit_waiting").unwrap_or(0.0) as u64)
    }

    /// Polls until `ratelimit_waiting` is `want` (at most `limit`).
    fn await_waiting(&mut self, want: u64, limit: Duration) -> Res<u64> {
        let t = Instant::now();
        loop {
            let w = self.waiting()?;
            if w == want || t.elapsed() > limit {
                return Ok(w);
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    fn advance(&mut self, us: u64) -> Res<()> {
        redis::cmd("RL.CLOCK")
            .arg("ADVANCE")
            .arg(us)
            .query::<i64>(&mut self.ctl)?;
        Ok(())
    }

    /// Runs one measured step and writes its row.
    fn step(&mut self, name: &str, f: impl FnOnce(&mut Bench) -> Res<Done>) -> Res<()> {
        *self.current.lock().map_err(|_| "poisoned")? = name.into();
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query::<()>(&mut self.ctl)?;
        redis::cmd("SLOWLOG")
            .arg("RESET")
            .query::<()>(&mut self.ctl)?;
        let probe = Probe::start(&self.addr)?;
        let t = Instant::now();
        let done = f(self)?;
        let wall = t.elapsed();
        let (ping_max, ping_p99, pings) = probe.finish();
        let (slow_n, slow_max, slow_cmd) = self.slowlog()?;
        let stats = self.commandstats()?;
        let main_us = stats
            .iter()
            .find(|(c, _, _)| c == done.main)
            .map(|(_, _, us)| format!("{us:.1}"))
            .unwrap_or_default();
        let listed: Vec<String> = stats
            .iter()
            .map(|(c, calls, us)| format!("{c} {us:.1} ×{calls}"))
            .collect();
        let row = format!(
            "{}\t{}\t{name}\t{}\t{:.1}\t{}\t{main_us}\t{}\t{slow_n}\t{}\t{:.2} / {:.2} ({pings})\t",
            self.case,
            self.size,
            done.ops,
            wall.as_secs_f64() * 1e3,
            done.main,
            listed.join(", "),
            if slow_n > 0 {
                format!("{:.1} {slow_cmd}", slow_max as f64 / 1e3)
            } else {
                String::new()
            },
            ping_max.as_secs_f64() * 1e3,
            ping_p99.as_secs_f64() * 1e3,
        );
        writeln!(self.rows.lock().map_err(|_| "poisoned")?, "{row}")?;
        eprintln!("{}", row.replace('\t', " | "));
        Ok(())
    }

    /// Entries of 1 ms or more since the reset: count, longest (µs) and its
    /// command.
    fn slowlog(&mut self) -> Res<(u64, i64, String)> {
        let v: redis::Value = redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(-1)
            .query(&mut self.ctl)?;
        let (mut n, mut max, mut which) = (0, 0, String::new());
        if let redis::Value::Array(entries) = v {
            for e in entries {
                let redis::Value::Array(f) = e else { continue };
                let (Some(redis::Value::Int(us)), Some(redis::Value::Array(argv))) =
                    (f.get(2), f.get(3))
                else {
                    continue;
                };
                n += 1;
                if *us > max {
                    max = *us;
                    which = match argv.first() {
                        Some(redis::Value::BulkString(b)) => {
                            String::from_utf8_lossy(b).to_lowercase()
                        }
                        _ => String::new(),
                    };
                }
            }
        }
        Ok((n, max, which))
    }

    /// (command, calls, usec_per_call) of every command but the bench's own
    /// bookkeeping.
    fn commandstats(&mut self) -> Res<Vec<(String, u64, f64)>> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.ctl)?;
        let mut out = Vec::new();
        for line in info.lines() {
            let Some((name, rest)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let family = name.split('|').next().unwrap_or(name);
            if ["ping", "info", "slowlog", "config"].contains(&family) || name == "client|id" {
                continue;
            }
            let field = |f: &str| {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(f))
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            if field("calls=") > 0.0 {
                out.push((
                    name.to_string(),
                    field("calls=") as u64,
                    field("usec_per_call="),
                ));
            }
        }
        Ok(out)
    }

    /// Sends `args` up to REPEAT_CALLS times (within REPEAT_BUDGET), one
    /// round trip each.
    fn repeat(&mut self, args: impl FnMut(u64) -> Vec<String>) -> Res<u64> {
        self.repeat_up_to(REPEAT_CALLS, args)
    }

    fn repeat_up_to(&mut self, calls: u64, mut args: impl FnMut(u64) -> Vec<String>) -> Res<u64> {
        let t = Instant::now();
        let mut n = 0;
        while n < calls && (n == 0 || t.elapsed() < REPEAT_BUDGET) {
            cmd(&args(n)).query::<redis::Value>(&mut self.ctl)?;
            n += 1;
        }
        Ok(n)
    }

    // ------------------------------------------------------------ waiters

    /// SIZE waiters on one key, then the events that move a line.
    fn one_key(&mut self) -> Res<()> {
        let n = self.size as usize;
        let line_h = 2 * (self.size + 200);
        // (the command without WAIT, the WAIT timeout, the commandstats name,
        // the step `advance 1 period` in µs, whether a lease is held to
        // release)
        let (base, timeout, main, period_us, release) = match self.case.as_str() {
            "gcra" => (
                "RL.GCRA q 1 1h",
                format!("{line_h}h"),
                "rl.gcra",
                HOUR_US,
                false,
            ),
            "fixed" => (
                "RL.FIXED q 1 1h",
                format!("{line_h}h"),
                "rl.fixed",
                HOUR_US,
                false,
            ),
            "sliding" => (
                "RL.SLIDING q 1 1h EXACT",
                format!("{line_h}h"),
                "rl.sliding",
                HOUR_US,
                false,
            ),
            "all" => (
                "RL.ALL 2 {q}a {q}b GCRA 1 1h FIXED 1 1h",
                format!("{line_h}h"),
                "rl.all",
                HOUR_US,
                false,
            ),
            "acquire-short" => (
                "RL.ACQUIRE q 1 1h",
                "30s".into(),
                "rl.acquire",
                1_000_000,
                true,
            ),
            "acquire-long" => (
                "RL.ACQUIRE q 1 1h",
                "2h".into(),
                "rl.acquire",
                1_000_000,
                true,
            ),
            other => return Err(format!("unknown case {other}").into()),
        };
        let base = words(base);
        let mut waiting_cmd = base.clone();
        waiting_cmd.extend(["WAIT".into(), timeout.clone()]);
        let held: redis::Value = cmd(&base).query(&mut self.ctl)?;
        let lease = match &held {
            redis::Value::Array(f) => match f.get(5) {
                Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            },
            _ => String::new(),
        };
        let k = (n / 4).clamp(1, 10);
        let unblock: Vec<usize> = (n / 2..(n / 2 + k).min(n)).collect();
        let mut w = Waiters::connect(&self.addr, n, &unblock)?;
        self.fill(&mut w, main, |_| waiting_cmd.clone())?;
        self.step("arrive", |b| {
            Ok(Done {
                ops: b.repeat_up_to(ARRIVALS, |_| base.clone())?,
                main,
            })
        })?;
        self.step("arrive WAIT", |b| {
            let before = b.waiting()?;
            let mut extra = Waiters::connect(&b.addr, k, &[])?;
            for i in 0..k {
                extra.send(i, &waiting_cmd)?;
            }
            b.await_waiting(before + k as u64, Duration::from_secs(3600))?;
            w.socks.extend(extra.socks);
            Ok(Done {
                ops: k as u64,
                main,
            })
        })?;
        if release {
            self.step("release", |b| {
                let args = ["RL.RELEASE".to_string(), "q".into(), lease.clone()];
                cmd(&args).query::<i64>(&mut b.ctl)?;
                Ok(Done {
                    ops: 1,
                    main: "rl.release",
                })
            })?;
        }
        self.disconnect_unblock(&mut w, k, &unblock)?;
        self.step("advance 1 period", |b| {
            b.advance(period_us)?;
            Ok(Done {
                ops: 1,
                main: "rl.clock",
            })
        })?;
        self.step("advance past all", |b| {
            b.advance((line_h + 2) * HOUR_US)?;
            b.await_waiting(0, Duration::from_secs(30))?;
            Ok(Done {
                ops: 1,
                main: "rl.clock",
            })
        })?;
        Ok(())
    }

    /// Sends the waiting command on every connection of `w`; the step ends
    /// when all wait.
    fn fill(
        &mut self,
        w: &mut Waiters,
        main: &'static str,
        args: impl Fn(usize) -> Vec<String>,
    ) -> Res<()> {
        let n = w.socks.len();
        self.step("fill (waiting arrivals)", |b| {
            for i in 0..n {
                w.send(i, &args(i))?;
            }
            let got = b.await_waiting(n as u64, Duration::from_secs(3600))?;
            if got != n as u64 {
                return Err(format!("only {got} of {n} waiting").into());
            }
            Ok(Done {
                ops: n as u64,
                main,
            })
        })
    }

    /// Closes `k` waiters' connections near the head, then unblocks those
    /// at `unblock` with `CLIENT UNBLOCK`.
    fn disconnect_unblock(&mut self, w: &mut Waiters, k: usize, unblock: &[usize]) -> Res<()> {
        self.step("disconnect", |b| {
            let before = b.waiting()?;
            for s in w.socks.iter_mut().skip(1).take(k) {
                *s = None;
            }
            b.await_waiting(before.saturating_sub(k as u64), Duration::from_secs(10))?;
            Ok(Done {
                ops: k as u64,
                main: "",
            })
        })?;
        self.step("CLIENT UNBLOCK", |b| {
            for i in unblock {
                redis::cmd("CLIENT")
                    .arg("UNBLOCK")
                    .arg(w.ids[i])
                    .query::<i64>(&mut b.ctl)?;
            }
            Ok(Done {
                ops: unblock.len() as u64,
                main: "client|unblock",
            })
        })
    }

    fn many_keys(&mut self) -> Res<()> {
        let n = self.size as usize;
        let key = |i: usize| format!("q:{i}");
        let mut pipe = redis::pipe();
        for i in 0..n {
            pipe.cmd("RL.GCRA").arg(key(i)).arg(1).arg("1h").ignore();
        }
        pipe.query::<()>(&mut self.ctl)?;
        let wait = |i: usize| words(&format!("RL.GCRA {} 1 1h WAIT 3h", key(i)));
        let k = (n / 4).clamp(1, 10);
        let unblock: Vec<usize> = (n / 2..(n / 2 + k).min(n)).collect();
        let mut w = Waiters::connect(&self.addr, n, &unblock)?;
        self.fill(&mut w, "rl.gcra", wait)?;
        self.step("arrive", |b| {
            Ok(Done {
                ops: b.repeat_up_to(ARRIVALS, |j| {
                    words(&format!("RL.GCRA {} 1 1h", key(j as usize % n)))
                })?,
                main: "rl.gcra",
            })
        })?;
        self.disconnect_unblock(&mut w, k, &unblock)?;
        self.step("advance 1 period (admits all)", |b| {
            b.advance(HOUR_US)?;
            b.await_waiting(0, Duration::from_secs(30))?;
            Ok(Done {
                ops: 1,
                main: "rl.clock",
            })
        })
    }

    // ------------------------------------------------------------ leases

    fn leases(&mut self) -> Res<()> {
        let n = self.size;
        let acquire = words(&format!("RL.ACQUIRE q {n} 1h"));
        let lease_of = |v: &redis::Value| match v {
            redis::Value::Array(f) => match f.get(5) {
                Some(redis::Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            },
            _ => None,
        };
        let fill = |b: &mut Bench, count: u64| -> Res<u64> {
            let mut done = 0;
            while done < count {
                let batch = (count - done).min(1000);
                let mut pipe = redis::pipe();
                for _ in 0..batch {
                    pipe.add_command(cmd(&acquire)).ignore();
                }
                pipe.query::<()>(&mut b.ctl)?;
                done += batch;
            }
            Ok(done)
        };
        self.step("fill to SIZE - 100 (pipelined by 1000)", |b| {
            Ok(Done {
                ops: fill(b, n.saturating_sub(100))?,
                main: "rl.acquire",
            })
        })?;
        let mut leases = Vec::new();
        self.step("acquire", |b| {
            for _ in 0..n.min(100) {
                let v: redis::Value = cmd(&acquire).query(&mut b.ctl)?;
                leases.extend(lease_of(&v));
            }
            Ok(Done {
                ops: n.min(100),
                main: "rl.acquire",
            })
        })?;
        self.step("renew", |b| {
            for l in &leases {
                cmd(&words(&format!("RL.RENEW q {l} 1h"))).query::<i64>(&mut b.ctl)?;
            }
            Ok(Done {
                ops: leases.len() as u64,
                main: "rl.renew",
            })
        })?;
        self.step("release", |b| {
            for l in &leases {
                cmd(&words(&format!("RL.RELEASE q {l}"))).query::<i64>(&mut b.ctl)?;
            }
            Ok(Done {
                ops: leases.len() as u64,
                main: "rl.release",
            })
        })?;
        self.step("peek", |b| {
            let peek = words(&format!("RL.PEEK q CONCURRENCY {n} 1h"));
            Ok(Done {
                ops: b.repeat(|_| peek.clone())?,
                main: "rl.peek",
            })
        })?;
        fill(self, n.min(100))?;
        self.step("acquire denied (full)", |b| {
            Ok(Done {
                ops: b.repeat(|_| acquire.clone())?,
                main: "rl.acquire",
            })
        })?;
        self.advance(2 * HOUR_US)?;
        self.step("acquire after all expired", |b| {
            Ok(Done {
                ops: b.repeat(|_| acquire.clone())?,
                main: "rl.acquire",
            })
        })
    }

    // ------------------------------------------------------------ log, sketch

    fn log(&mut self) -> Res<()> {
        let n = self.size;
        let chunk = 10_000.min(n);
        let sliding = |rest: &str| words(&format!("RL.SLIDING q {n} 2h EXACT {rest}"));
        self.step("fill to SIZE - 100 (COST 10000 calls)", |b| {
            let mut filled = 0;
            let mut calls = 0;
            while filled + chunk <= n.saturating_sub(100) {
                cmd(&sliding(&format!("COST {chunk}"))).query::<redis::Value>(&mut b.ctl)?;
                filled += chunk;
                calls += 1;
            }
            let rest = n.saturating_sub(100) - filled;
            if rest > 0 {
                cmd(&sliding(&format!("COST {rest}"))).query::<redis::Value>(&mut b.ctl)?;
                calls += 1;
            }
            Ok(Done {
                ops: calls,
                main: "rl.sliding",
            })
        })?;
        self.step("charge COST 1", |b| {
            Ok(Done {
                ops: b.repeat(|_| sliding("COST 1"))?,
                main: "rl.sliding",
            })
        })?;
        self.step("REFUND 1", |b| {
            Ok(Done {
                ops: b.repeat(|_| sliding("REFUND 1"))?,
                main: "rl.sliding",
            })
        })?;
        cmd(&sliding("COST 100")).query::<redis::Value>(&mut self.ctl)?;
        cmd(&sliding("COST 100")).query::<redis::Value>(&mut self.ctl)?;
        self.step("denied (full)", |b| {
            Ok(Done {
                ops: b.repeat(|_| sliding(""))?,
                main: "rl.sliding",
            })
        })?;
        self.step("another limit (SIZE - 1)", |b| {
            let other = words(&format!("RL.SLIDING q {} 2h EXACT", n - 1));
            Ok(Done {
                ops: b.repeat(|_| other.clone())?,
                main: "rl.sliding",
            })
        })
    }

    fn sketch(&mut self) -> Res<()> {
        let width = self.size;
        let sketch = |key: &str, item: u64| {
            words(&format!(
                "RL.SKETCH {key} i{item} 100 1m WIDTH {width} DEPTH 8"
            ))
        };
        self.step("create (3 keys)", |b| {
            for key in ["s1", "s2", "s3"] {
                cmd(&sketch(key, 0)).query::<redis::Value>(&mut b.ctl)?;
            }
            Ok(Done {
                ops: 3,
                main: "rl.sketch",
            })
        })?;
        self.step("call", |b| {
            Ok(Done {
                ops: b.repeat(|j| sketch("s1", j))?,
                main: "rl.sketch",
            })
        })
    }
}

// ---------------------------------------------------------------- report

const COLUMNS: [&str; 11] = [
    "size",
    "step",
    "calls",
    "wall ms",
    "headline command",
    "µs/call",
    "commandstats µs/call ×calls",
    "slowlog ≥ 1 ms",
    "slowlog max ms",
    "PING max / p99 ms (probes)",
    "note",
];

fn print_report(path: &str) -> Res<()> {
    let text = std::fs::read_to_string(path)?;
    let mut cases: Vec<(String, Vec<Vec<String>>)> = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut f: Vec<String> = line.split('\t').map(String::from).collect();
        f.resize(12, String::new());
        let case = f.remove(0);
        match cases.iter_mut().find(|(c, _)| *c == case) {
            Some((_, rows)) => rows.push(f),
            None => cases.push((case, vec![f])),
        }
    }
    for (case, rows) in &cases {
        println!("\n### {case}\n");
        println!("| {} |", COLUMNS.join(" | "));
        println!("|{}", "---|".repeat(COLUMNS.len()));
        for r in rows {
            let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
            println!("| {} |", cells.join(" | "));
        }
    }
    println!("\n### Time per arrival (step `arrive`, µs per call) against size 10\n");
    println!(
        "| case | at 10 | largest size completed | µs there | ratio (goal ≤ 2) | larger sizes |"
    );
    println!("|---|---|---|---|---|---|");
    let size = |r: &&Vec<String>| r[0].parse::<u64>().unwrap_or(0);
    for (case, rows) in &cases {
        let arrivals: Vec<&Vec<String>> = rows.iter().filter(|r| r[1] == "arrive").collect();
        let at10 = arrivals.iter().find(|r| r[0] == "10");
        let largest = arrivals.iter().max_by_key(|r| size(r));
        let (Some(a), Some(b)) = (at10, largest) else {
            continue;
        };
        let us = |r: &Vec<String>| r[5].parse::<f64>().ok();
        let ratio = match (us(a), us(b)) {
            (Some(x), Some(y)) if x > 0.0 => format!("{:.1}", y / x),
            _ => String::new(),
        };
        let beyond: Vec<String> = rows
            .iter()
            .filter(|r| !r[10].is_empty() && size(r) > size(b))
            .map(|r| format!("{}: {} in {}", r[0], r[10], r[1]))
            .collect();
        println!(
            "| {case} | {} | {} | {} | {ratio} | {} |",
            a[5],
            b[0],
            b[5],
            beyond.join("; ")
        );
    }
    Ok(())
}
