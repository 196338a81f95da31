//! What a waiting client costs the server, beside Redis's own blocked
//! `BLPOP` clients (`scripts/bench_waiters.sh` starts the servers):
//!
//! ```text
//! waiters_bench memory ADDR n rl|blpop keys|one-key|keys-flows|one-key-flows
//! waiters_bench role   ADDR n rl|blpop replicaof|failover [REPLICA_ADDR]
//! ```
//!
//! Both open `n` connections, answer a `PING` on each, then block each:
//! `rl` sends `RL.GCRA k:i 1 1h WAIT 100000h` on an exhausted key (`one-key`:
//! all on `k:0`; `…-flows`: each in a flow of its own, `FLOW tenant:i`),
//! `blpop` sends `BLPOP k:i 0` (`one-key`: `k:0`), and they wait until
//! `INFO clients` counts `n` blocked clients.
//!
//! `memory` prints, per blocked client, the growth of `used_memory`
//! (Redis's allocator) from no connection to the `n` blocked ones (the
//! whole client) and from the `n` connections idle to blocked (the
//! blocking alone), and of `ratelimit_heap_bytes` (the module's own heap,
//! outside `used_memory`; 0 without the module) from idle to blocked.
//!
//! `role` then makes the server a replica, which ends every blocked
//! client: `replicaof` sends `REPLICAOF` to an address where nothing
//! listens and prints the command's round trip; `failover` (the server has
//! the replica `REPLICA_ADDR`) sends `FAILOVER` and prints the longest
//! gap a `PING` probe saw from then until the server is a replica. Both
//! also print the module's `ratelimit_work` counters moved meanwhile. With
//! `CALLGRIND_PID` set (the server runs under callgrind), its counts are
//! zeroed just before and dumped (`callgrind_control -d role`) once the
//! server has freed every client it unblocked.
//! Output: `key=value` lines.

use std::error::Error;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn Error>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: waiters_bench memory|role ADDR n rl|blpop keys|one-key|keys-flows|one-key-flows|replicaof|failover [REPLICA_ADDR]";
    let [mode, addr, n, kind, what, ..] = args.as_slice() else {
        return Err(usage.into());
    };
    let n: usize = n.parse()?;
    let rl = match kind.as_str() {
        "rl" => true,
        "blpop" => false,
        _ => return Err(usage.into()),
    };
    match (mode.as_str(), what.as_str()) {
        ("memory", "keys" | "one-key" | "keys-flows" | "one-key-flows") => {
            let one_key = what.starts_with("one-key");
            memory(addr, n, rl, one_key, what.ends_with("-flows"))
        }
        ("role", "replicaof") => role(addr, n, rl, None),
        ("role", "failover") => {
            let replica = args.get(5).ok_or(usage)?;
            role(addr, n, rl, Some(replica))
        }
        _ => Err(usage.into()),
    }
}

fn connect(addr: &str) -> Res<redis::Connection> {
    Ok(redis::Client::open(format!("redis://{addr}"))?.get_connection()?)
}

fn info_field(info: &str, name: &str) -> Option<i64> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

fn info(con: &mut redis::Connection, section: &str, field: &str) -> Res<i64> {
    let text: String = redis::cmd("INFO").arg(section).query(con)?;
    Ok(info_field(&text, field).unwrap_or(0))
}

/// `ratelimit_work` as (name, count) pairs (empty without the module).
fn work(con: &mut redis::Connection) -> Res<Vec<(String, i64)>> {
    let text: String = redis::cmd("INFO").arg("ratelimit").query(con)?;
    let Some(line) = text.lines().find_map(|l| l.strip_prefix("ratelimit_work:")) else {
        return Ok(Vec::new());
    };
    Ok(line
        .trim()
        .split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect())
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
    }
    out
}

/// Reads until a CRLF (one line reply).
fn read_line(s: &mut TcpStream) -> Res<()> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 64];
    while !buf.ends_with(b"\r\n") {
        let got = s.read(&mut byte)?;
        if got == 0 {
            return Err("connection closed".into());
        }
        buf.extend_from_slice(&byte[..got]);
    }
    Ok(())
}

/// `n` connections, each answered a PING.
fn open(addr: &str, n: usize) -> Res<Vec<TcpStream>> {
    let mut socks = (0..n)
        .map(|_| Ok(TcpStream::connect(addr)?))
        .collect::<Res<Vec<_>>>()?;
    for s in &mut socks {
        s.write_all(&resp(&["PING"]))?;
    }
    for s in &mut socks {
        read_line(s)?;
    }
    Ok(socks)
}

/// Blocks every connection (see the module docs) and waits until the
/// server counts them.
fn block(
    ctl: &mut redis::Connection,
    socks: &mut [TcpStream],
    rl: bool,
    one_key: bool,
    flows: bool,
) -> Res<()> {
    let n = socks.len();
    let key = |i: usize| {
        if one_key {
            "k:0".to_string()
        } else {
            format!("k:{i}")
        }
    };
    if rl {
        for name in [
            "ratelimit.max-waiters-per-key",
            "ratelimit.max-waiters-per-flow",
            "ratelimit.max-waiters",
        ] {
            let _ = redis::cmd("CONFIG")
                .arg("SET")
                .arg(name)
                .arg(1_000_000)
                .query::<redis::Value>(ctl);
        }
        let mut pipe = redis::pipe();
        for i in 0..if one_key { 1 } else { n } {
            pipe.cmd("RL.GCRA").arg(key(i)).arg(1).arg("1h").ignore();
        }
        pipe.query::<()>(ctl)?;
    }
    for (i, s) in socks.iter_mut().enumerate() {
        let k = key(i);
        let flow = format!("tenant:{i}");
        let command = if rl && flows {
            resp(&["RL.GCRA", &k, "1", "1h", "WAIT", "100000h", "FLOW", &flow])
        } else if rl {
            // On one key the last is due n hours from now.
            resp(&["RL.GCRA", &k, "1", "1h", "WAIT", "100000h"])
        } else {
            resp(&["BLPOP", &k, "0"])
        };
        s.write_all(&command)?;
    }
    let start = Instant::now();
    while info(ctl, "clients", "blocked_clients")? != n as i64 {
        if start.elapsed() > Duration::from_secs(120) {
            return Err("not every client blocked".into());
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn memory(addr: &str, n: usize, rl: bool, one_key: bool, flows: bool) -> Res<()> {
    let mut ctl = connect(addr)?;
    let used_alone = info(&mut ctl, "memory", "used_memory")?;
    let mut socks = open(addr, n)?;
    let used_before = info(&mut ctl, "memory", "used_memory")?;
    let heap_before = info(&mut ctl, "ratelimit", "ratelimit_heap_bytes")?;
    block(&mut ctl, &mut socks, rl, one_key, flows)?;
    let used_after = info(&mut ctl, "memory", "used_memory")?;
    let heap_after = info(&mut ctl, "ratelimit", "ratelimit_heap_bytes")?;
    let per = |a: i64, b: i64| (a - b) as f64 / n as f64;
    println!("used_memory_per_client={:.0}", per(used_after, used_alone));
    println!("used_memory_per_block={:.0}", per(used_after, used_before));
    println!("module_heap_per_client={:.0}", per(heap_after, heap_before));
    drop(socks);
    Ok(())
}

fn role(addr: &str, n: usize, rl: bool, replica: Option<&str>) -> Res<()> {
    let mut ctl = connect(addr)?;
    let mut socks = open(addr, n)?;
    block(&mut ctl, &mut socks, rl, false, false)?;
    let before = work(&mut ctl)?;
    let callgrind = std::env::var("CALLGRIND_PID").ok();
    if let Some(pid) = &callgrind {
        callgrind_control(&["-z", pid])?;
    }
    let stall = match replica {
        None => {
            // Nothing listens on port 1: the server stays a replica that
            // tries to connect, which costs nothing here.
            let t = Instant::now();
            redis::cmd("REPLICAOF")
                .arg("127.0.0.1")
                .arg(1)
                .query::<()>(&mut ctl)?;
            t.elapsed()
        }
        Some(_) => {
            let mut probe = connect(addr)?;
            redis::cmd("FAILOVER").query::<()>(&mut ctl)?;
            let mut longest = Duration::ZERO;
            let start = Instant::now();
            loop {
                let t = Instant::now();
                let role: String = redis::cmd("ROLE")
                    .query::<Vec<redis::Value>>(&mut probe)
                    .ok()
                    .and_then(|v| redis::from_redis_value(v.first()?.clone()).ok())
                    .unwrap_or_default();
                longest = longest.max(t.elapsed());
                if role == "slave" {
                    break;
                }
                if start.elapsed() > Duration::from_secs(60) {
                    return Err("the failover did not happen".into());
                }
            }
            longest
        }
    };
    let after = work(&mut ctl)?;
    let start = Instant::now();
    // Every blocked client is answered and closed by the server: wait
    // until it has freed them (only this tool's own connections are left).
    while info(&mut ctl, "clients", "blocked_clients")? != 0
        || info(&mut ctl, "clients", "connected_clients")? > 3
    {
        if start.elapsed() > Duration::from_secs(60) {
            return Err("clients still blocked or connected".into());
        }
        thread::sleep(Duration::from_millis(20));
    }
    if let Some(pid) = &callgrind {
        callgrind_control(&["-d", "role", pid])?;
    }
    println!("stall_ms={:.2}", stall.as_secs_f64() * 1000.0);
    for ((name, a), (_, b)) in after.iter().zip(&before) {
        println!("work_{name}={}", a - b);
    }
    drop(socks);
    Ok(())
}

fn callgrind_control(args: &[&str]) -> Res<()> {
    let status = std::process::Command::new("callgrind_control")
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()?;
    if !status.success() {
        return Err(format!("callgrind_control {args:?} failed").into());
    }
    Ok(())
}
