//! What `WAIT timeout` buys, measured against a running server
//! (`scripts/bench_wait.sh` starts the servers and runs both parts).
//!
//! ```text
//! cargo run --release --example wait_bench -- contend 127.0.0.1:PORT retry [clients] [seconds]
//! cargo run --release --example wait_bench -- contend 127.0.0.1:PORT wait  [clients] [seconds]
//! cargo run --release --example wait_bench -- contend 127.0.0.1:PORT fair  [clients] [seconds]
//! cargo run --release --example wait_bench -- waiters 127.0.0.1:PORT [n] [seconds] [manual|real] [keys|one-key]
//! ```
//!
//! `contend` (real clock): `clients` closed-loop threads, each with its own
//! connection, want one admission after another on one key limited to 50
//! per second (`RL.GCRA bench:k 50 1s`). `retry` sleeps `retry_after_ms`
//! after a denial and tries again; `wait` sends `WAIT 30s`. The key's burst
//! is used up before the clock starts, so the run measures the sustained
//! rate. After `seconds`, each client finishes the request it has started
//! (so every request sent ends admitted) and stops. Every 11th client is
//! *light*, the others *heavy* (offered load 10:1); `fair` is `wait` with
//! `FLOW light` or `FLOW heavy`, and both `wait` and `fair` report each
//! group's share of the admissions and time to admission, against the
//! light group's ideal under fair waiting (its clients over its half of
//! the rate).
//!
//! `waiters` (module loaded with `clock manual`): `n` keys are exhausted
//! (`RL.GCRA k:i 1 60s`), then server CPU (INFO `used_cpu_user` +
//! `used_cpu_sys`) and `used_memory` are read over `seconds` three times: the
//! idle server, `n` idle connections, the same `n` connections each blocked
//! in `RL.GCRA k:i 1 60s WAIT 120s`. Then `RL.CLOCK ADVANCE 60000000` admits
//! them all, timed until the last connection has read its reply. With
//! `real` (a server on the real clock), the period is `3 × seconds + 20 s`
//! instead of 60 s, so that admission comes after the windows, and the tool
//! waits for it: replies are timed against the keys' due times. With
//! `one-key` (manual clock only), the `n` connections wait in one line on
//! `k:0` (timeout `(n + 2) × 60 s`), and `n` calls `RL.CLOCK ADVANCE
//! 60000000` admit them one at a time. Both print the server CPU per
//! admission and the memory per waiter (`used_memory` delta / waiters).
//!
//! Every run first raises the module's waiter bounds with `CONFIG SET`
//! (ignored by a server that has none).

use std::error::Error;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn Error>>;

const LIMIT: u64 = 50;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: u64| -> Res<u64> {
        Ok(args
            .get(i)
            .map(|s| s.parse())
            .transpose()?
            .unwrap_or(default))
    };
    match (args.first().map(String::as_str), args.get(1)) {
        (Some("contend"), Some(addr)) => {
            let mode = match args.get(2).map(String::as_str) {
                Some("wait") => Mode::Wait,
                Some("fair") => Mode::Fair,
                Some("retry") => Mode::Retry,
                _ => return Err("contend: mode is retry, wait or fair".into()),
            };
            contend(addr, mode, arg(3, 200)?, arg(4, 20)?)
        }
        (Some("waiters"), Some(addr)) => {
            let manual = match args.get(4).map(String::as_str) {
                None | Some("manual") => true,
                Some("real") => false,
                _ => return Err("waiters: clock is manual or real".into()),
            };
            let one_key = match args.get(5).map(String::as_str) {
                None | Some("keys") => false,
                Some("one-key") if manual => true,
                _ => return Err("waiters: keys, or one-key on the manual clock".into()),
            };
            waiters(addr, arg(2, 10_000)?, arg(3, 10)?, manual, one_key)
        }
        _ => Err("usage: wait_bench contend ADDR retry|wait|fair [clients] [seconds] | waiters ADDR [n] [seconds] [manual|real] [keys|one-key]".into()),
    }
}

// ---------------------------------------------------------------- INFO

fn info_field(info: &str, name: &str) -> Option<f64> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// Server CPU (user + sys, seconds), `used_memory` (Redis's allocator:
/// clients, blocked-client handles) and `used_memory_rss` (the process,
/// which also holds the module's own heap: the wait queues).
fn server_stats(con: &mut redis::Connection) -> Res<(f64, f64, f64)> {
    let info: String = redis::cmd("INFO").arg("all").query(con)?;
    let get = |n: &str| info_field(&info, n).ok_or(format!("INFO has no {n}"));
    Ok((
        get("used_cpu_user")? + get("used_cpu_sys")?,
        get("used_memory")?,
        get("used_memory_rss")?,
    ))
}

/// `RL.GCRA` calls and the server CPU inside them (µs), from commandstats.
fn gcra_calls(con: &mut redis::Connection) -> Res<(u64, u64)> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con)?;
    let stat = info
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_rl.gcra:"));
    let field = |name: &str| -> u64 {
        stat.and_then(|s| {
            s.split(',')
                .find_map(|f| f.strip_prefix(name)?.parse().ok())
        })
        .unwrap_or(0)
    };
    Ok((field("calls="), field("usec=")))
}

/// Sends `RL.GCRA bench:k` until denied; returns the calls sent.
fn exhaust(con: &mut redis::Connection) -> Res<u64> {
    let mut calls = 0;
    loop {
        let r: Vec<i64> = redis::cmd("RL.GCRA")
            .arg("bench:k")
            .arg(LIMIT)
            .arg("1s")
            .query(con)?;
        calls += 1;
        if r[0] == 0 {
            return Ok(calls);
        }
    }
}

fn connect(addr: &str) -> Res<redis::Connection> {
    Ok(redis::Client::open(format!("redis://{addr}"))?.get_connection()?)
}

/// Raises the module's waiter bounds so that every run is allowed; a
/// server without them answers an error, which is ignored.
fn raise_bounds(con: &mut redis::Connection) {
    for name in [
        "ratelimit.max-waiters-per-key",
        "ratelimit.max-waiters-per-flow",
        "ratelimit.max-waiters",
    ] {
        let _ = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(1_000_000)
            .query::<redis::Value>(con);
    }
}

// ---------------------------------------------------------------- contend

/// How a denied client goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Sleeps `retry_after_ms` and tries again.
    Retry,
    /// `WAIT 30s`.
    Wait,
    /// `WAIT 30s FLOW light|heavy`.
    Fair,
}

/// Every 11th client is light: offered load 10:1.
fn is_light(client: u64) -> bool {
    client.is_multiple_of(11)
}

/// One admitted request, times in µs since the common start.
struct Admission {
    /// Client clock: just before the first attempt was sent.
    arrival: u64,
    /// Server order of the first attempts (an `INCR` sent with it).
    seq: u64,
    /// Client clock: just after the admitting reply was read.
    admitted: u64,
    attempts: u64,
    light: bool,
}

fn contend(addr: &str, mode: Mode, clients: u64, seconds: u64) -> Res<()> {
    let mut ctl = connect(addr)?;
    raise_bounds(&mut ctl);
    let cons = (0..clients)
        .map(|_| connect(addr))
        .collect::<Res<Vec<_>>>()?;
    let barrier = Arc::new(Barrier::new(clients as usize + 1));
    let start = Arc::new(OnceLock::new());
    let handles: Vec<_> = cons
        .into_iter()
        .enumerate()
        .map(|(i, mut con)| {
            let (barrier, start) = (barrier.clone(), start.clone());
            thread::spawn(move || -> Result<Vec<Admission>, String> {
                barrier.wait();
                let origin = *start.get().ok_or("no start")?;
                client(
                    &mut con,
                    mode,
                    is_light(i as u64),
                    origin,
                    origin + Duration::from_secs(seconds),
                )
                .map_err(|e| e.to_string())
            })
        })
        .collect();
    let (cpu0, _, _) = server_stats(&mut ctl)?;
    let (calls0, usec0) = gcra_calls(&mut ctl)?;
    // Use up the burst at the start, so that the run measures the sustained rate.
    let burst_calls = exhaust(&mut ctl)?;
    let origin = Instant::now();
    start.set(origin).map_err(|_| "start set twice")?;
    barrier.wait();
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.join().map_err(|_| "client thread panicked")??);
    }
    let drained = origin.elapsed();
    let (cpu1, _, _) = server_stats(&mut ctl)?;
    let (calls1, usec1) = gcra_calls(&mut ctl)?;
    let server = Server {
        cpu: cpu1 - cpu0,
        calls: calls1 - calls0 - burst_calls,
        usec: usec1 - usec0,
    };
    report_contend(mode, clients, seconds, &all, &server, drained);
    if mode != Mode::Retry {
        report_groups(clients, seconds, &all);
    }
    Ok(())
}

/// What the server spent over a run (CPU and usec: the burst used up at the
/// start included).
struct Server {
    cpu: f64,
    calls: u64,
    usec: u64,
}

fn client(
    con: &mut redis::Connection,
    mode: Mode,
    light: bool,
    origin: Instant,
    end: Instant,
) -> Res<Vec<Admission>> {
    let us = |t: Instant| t.duration_since(origin).as_micros() as u64;
    let mut out = Vec::new();
    while Instant::now() < end {
        let first = Instant::now();
        let mut attempts = 0;
        let mut seq = 0;
        loop {
            let mut cmd = redis::cmd("RL.GCRA");
            cmd.arg("bench:k").arg(LIMIT).arg("1s");
            if mode != Mode::Retry {
                cmd.arg("WAIT").arg("30s");
            }
            if mode == Mode::Fair {
                cmd.arg("FLOW").arg(if light { "light" } else { "heavy" });
            }
            attempts += 1;
            // The first attempt goes with an INCR in the same write: Redis
            // runs both back to back, so its reply is the arrival order.
            let r: Vec<i64> = if attempts == 1 {
                let (n, r): (u64, Vec<i64>) = redis::pipe()
                    .cmd("INCR")
                    .arg("bench:seq")
                    .add_command(cmd)
                    .query(con)?;
                seq = n;
                r
            } else {
                cmd.query(con)?
            };
            if r[0] == 1 {
                out.push(Admission {
                    arrival: us(first),
                    seq,
                    admitted: us(Instant::now()),
                    attempts,
                    light,
                });
                break;
            }
            if mode == Mode::Retry {
                thread::sleep(Duration::from_millis(r[3].max(0) as u64));
            }
        }
    }
    Ok(out)
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Admissions that came more than `admit_tol` µs before that of a request
/// which arrived earlier (`arrival`, with more than `arrival_tol` to spare).
fn overtakes(
    all: &[Admission],
    arrival: fn(&Admission) -> u64,
    arrival_tol: u64,
    admit_tol: u64,
) -> usize {
    let mut by_arrival: Vec<&Admission> = all.iter().collect();
    by_arrival.sort_by_key(|a| arrival(a));
    let (mut j, mut latest_admit) = (0, 0);
    let mut n = 0;
    for b in &by_arrival {
        while j < by_arrival.len() && arrival(by_arrival[j]) + arrival_tol < arrival(b) {
            latest_admit = latest_admit.max(by_arrival[j].admitted);
            j += 1;
        }
        if latest_admit > b.admitted + admit_tol {
            n += 1;
        }
    }
    n
}

fn report_contend(
    mode: Mode,
    clients: u64,
    seconds: u64,
    all: &[Admission],
    server: &Server,
    drained: Duration,
) {
    let admitted = all.len() as u64;
    let attempts: u64 = all.iter().map(|a| a.attempts).sum();
    let in_run = all
        .iter()
        .filter(|a| a.admitted < seconds * 1_000_000)
        .count();
    let after_1s = all
        .iter()
        .filter(|a| (1_000_000..seconds * 1_000_000).contains(&a.admitted))
        .count();
    let mut lat: Vec<u64> = all.iter().map(|a| a.admitted - a.arrival).collect();
    lat.sort_unstable();
    let ms = |us: u64| us as f64 / 1000.0;
    println!(
        "mode: {}",
        match mode {
            Mode::Wait => "WAIT 30s",
            Mode::Fair => "WAIT 30s FLOW light|heavy",
            Mode::Retry => "sleep retry_after_ms and retry",
        }
    );
    println!(
        "clients: {clients}, run: {seconds} s, then {:.2} s to finish the started requests",
        drained.as_secs_f64() - seconds as f64
    );
    println!("admitted: {admitted} in all, {in_run} within the {seconds} s");
    println!(
        "admitted per second within the run: {:.2}; from 1 s to the end: {:.2}",
        in_run as f64 / seconds as f64,
        after_1s as f64 / (seconds - 1) as f64
    );
    println!("commands sent per admitted request: {:.3} (client count), {:.3} (server: {} RL.GCRA calls)",
        attempts as f64 / admitted as f64, server.calls as f64 / admitted as f64, server.calls);
    println!(
        "first attempt to admission ms: p50 {:.1}, p99 {:.1}, max {:.1}",
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
        ms(*lat.last().unwrap_or(&0))
    );
    println!("overtaking admissions (of {admitted}), by client send time: {} raw, {} with 1 ms to spare on both times, {} with 5 ms",
        overtakes(all, |a| a.arrival, 0, 0), overtakes(all, |a| a.arrival, 1_000, 1_000), overtakes(all, |a| a.arrival, 5_000, 5_000));
    println!("overtaking admissions, by server arrival order: {} raw, {} admitted more than 10 ms earlier",
        overtakes(all, |a| a.seq, 0, 0), overtakes(all, |a| a.seq, 0, 10_000));
    println!("server CPU: {:.3} s in all, {:.1} us per admitted request; inside RL.GCRA: {:.1} us per admitted request, {:.2} us per call",
        server.cpu, server.cpu * 1e6 / admitted as f64, server.usec as f64 / admitted as f64, server.usec as f64 / server.calls as f64);
}

/// Each group's share of the admissions between 2 s and the end of the
/// run (both backlogged) and its time to admission, with the light group's
/// ideal under fair waiting: its clients over half the rate.
fn report_groups(clients: u64, seconds: u64, all: &[Admission]) {
    let steady = |a: &&Admission| (2_000_000..seconds * 1_000_000).contains(&a.arrival);
    let total = all.iter().filter(steady).count().max(1);
    let light_clients = (0..clients).filter(|&i| is_light(i)).count();
    let ideal_ms = light_clients as f64 * 1000.0 / (LIMIT as f64 / 2.0);
    for (name, light) in [("light", true), ("heavy", false)] {
        let group: Vec<&Admission> = all
            .iter()
            .filter(steady)
            .filter(|a| a.light == light)
            .collect();
        let mut lat: Vec<u64> = group.iter().map(|a| a.admitted - a.arrival).collect();
        lat.sort_unstable();
        if lat.is_empty() {
            println!("{name}: no admissions after 2 s");
            continue;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        println!(
            "{name} ({} clients): {:.1} % of the admissions arriving from 2 s on; first attempt to admission ms: p50 {:.1}, p99 {:.1}",
            if light { light_clients } else { clients as usize - light_clients },
            group.len() as f64 * 100.0 / total as f64,
            ms(percentile(&lat, 0.5)),
            ms(percentile(&lat, 0.99)),
        );
    }
    println!("light ideal under fair waiting: 50 % of the admissions, {ideal_ms:.0} ms each ({light_clients} clients at {} per second)", LIMIT / 2);
}

// ---------------------------------------------------------------- waiters

fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
    }
    out
}

/// Reads one reply made of `lines` CRLF-terminated lines.
fn read_lines(s: &mut TcpStream, lines: usize) -> Res<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 512];
    while buf.windows(2).filter(|w| w == b"\r\n").count() < lines {
        let n = s.read(&mut byte)?;
        if n == 0 {
            return Err("connection closed".into());
        }
        buf.extend_from_slice(&byte[..n]);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// One window of `seconds` doing nothing: server CPU (s) over it and the
/// memory (`used_memory`, `used_memory_rss`) at its start and end.
struct Window {
    cpu: f64,
    mem: (f64, f64),
    rss: (f64, f64),
}

fn idle_window(ctl: &mut redis::Connection, seconds: u64) -> Res<Window> {
    let (c0, m0, r0) = server_stats(ctl)?;
    thread::sleep(Duration::from_secs(seconds));
    let (c1, m1, r1) = server_stats(ctl)?;
    Ok(Window {
        cpu: c1 - c0,
        mem: (m0, m1),
        rss: (r0, r1),
    })
}

fn waiters(addr: &str, n: u64, seconds: u64, manual: bool, one_key: bool) -> Res<()> {
    let period_s = if manual { 60 } else { 3 * seconds + 20 };
    let period = format!("{period_s}s");
    let key = |i: u64| {
        if one_key {
            "k:0".to_string()
        } else {
            format!("k:{i}")
        }
    };
    // One line on one key: the last waiter is due n periods from now.
    let timeout = if one_key {
        format!("{}s", (n + 2) * period_s)
    } else {
        "120s".to_string()
    };
    let mut ctl = connect(addr)?;
    raise_bounds(&mut ctl);
    let mut pipe = redis::pipe();
    for i in 0..if one_key { 1 } else { n } {
        pipe.cmd("RL.GCRA")
            .arg(format!("k:{i}"))
            .arg(1)
            .arg(&period)
            .ignore();
    }
    let exhaust_start = Instant::now();
    pipe.query::<()>(&mut ctl)?;
    let exhaust_end = Instant::now();
    let idle = idle_window(&mut ctl, seconds)?;

    let mut socks = (0..n)
        .map(|_| Ok(TcpStream::connect(addr)?))
        .collect::<Res<Vec<_>>>()?;
    for s in &mut socks {
        s.write_all(&resp(&["PING"]))?;
    }
    for s in &mut socks {
        read_lines(s, 1)?;
    }
    let conns = idle_window(&mut ctl, seconds)?;

    for (i, s) in socks.iter_mut().enumerate() {
        s.write_all(&resp(&[
            "RL.GCRA",
            &key(i as u64),
            "1",
            &period,
            "WAIT",
            &timeout,
        ]))?;
    }
    let blocked = Instant::now();
    loop {
        let info: String = redis::cmd("INFO").arg("ratelimit").query(&mut ctl)?;
        if info_field(&info, "ratelimit_waiting") == Some(n as f64) {
            break;
        }
        if blocked.elapsed() > Duration::from_secs(60) {
            return Err(format!("waiters: not all blocked: {info}").into());
        }
        thread::sleep(Duration::from_millis(50));
    }
    let waits = idle_window(&mut ctl, seconds)?;

    let (cpu_before, _, _) = server_stats(&mut ctl)?;
    let t0 = Instant::now();
    // On one key each period admits the next in line.
    let advances = match (manual, one_key) {
        (false, _) => 0,
        (true, false) => 1,
        (true, true) => n,
    };
    for _ in 0..advances {
        redis::cmd("RL.CLOCK")
            .arg("ADVANCE")
            .arg(60_000_000u64)
            .query::<i64>(&mut ctl)?;
    }
    let t_advance = t0.elapsed();
    let mut admitted = 0;
    let mut first = None;
    for s in &mut socks {
        if read_lines(s, 6)?.starts_with("*5\r\n:1\r\n") {
            admitted += 1;
        }
        first.get_or_insert_with(Instant::now);
    }
    let t_all = t0.elapsed();
    let last = Instant::now();
    let (cpu_after, _, _) = server_stats(&mut ctl)?;

    let kb = |a: f64, b: f64| (a - b) / n as f64 / 1024.0;
    if one_key {
        println!("waiters: one key, {n} connections in its line, windows of {seconds} s");
    } else {
        println!("waiters: {n} keys, {n} connections, windows of {seconds} s");
    }
    println!("server CPU over {seconds} s: idle server {:.3} s, {n} idle connections {:.3} s, {n} waiters {:.3} s",
        idle.cpu, conns.cpu, waits.cpu);
    for (name, w) in [
        ("idle server", &idle),
        ("idle connections", &conns),
        ("waiters", &waits),
    ] {
        println!("{name}: used_memory {:.0} -> {:.0}, used_memory_rss {:.0} -> {:.0} (start -> end of window)",
            w.mem.0, w.mem.1, w.rss.0, w.rss.1);
    }
    println!(
        "KiB per idle connection (used_memory, rss): start {:.2}, {:.2}; end {:.2}, {:.2}",
        kb(conns.mem.0, idle.mem.1),
        kb(conns.rss.0, idle.rss.1),
        kb(conns.mem.1, idle.mem.1),
        kb(conns.rss.1, idle.rss.1)
    );
    println!("KiB per waiter beyond its connection (used_memory, rss): start {:.2}, {:.2}; end {:.2}, {:.2}",
        kb(waits.mem.0, conns.mem.1), kb(waits.rss.0, conns.rss.1), kb(waits.mem.1, conns.mem.1), kb(waits.rss.1, conns.rss.1));
    // At the ends of the windows, once Redis has shrunk the connections'
    // buffers: what a waiter keeps beyond an idle connection.
    println!(
        "memory per waiter (used_memory delta / waiters, ends of the windows): {:.0} bytes; rss: {:.0} bytes",
        (waits.mem.1 - conns.mem.1) / n as f64,
        (waits.rss.1 - conns.rss.1) / n as f64
    );
    if one_key {
        println!("{n} × RL.CLOCK ADVANCE 60000000 (one admission each): replied after {:.1} ms; all {admitted} admitted replies read after {:.1} ms",
            t_advance.as_secs_f64() * 1e3, t_all.as_secs_f64() * 1e3);
    } else if manual {
        println!("RL.CLOCK ADVANCE 60000000: replied after {:.1} ms; all {admitted} admitted replies read after {:.1} ms",
            t_advance.as_secs_f64() * 1e3, t_all.as_secs_f64() * 1e3);
    } else {
        // Key i is due `period` after its exhausting call, which ran
        // between exhaust_start and exhaust_end.
        let due = |t: Instant| t + Duration::from_secs(period_s);
        // a − b in ms, signed.
        let ms = |a: Instant, b: Instant| {
            (a.saturating_duration_since(b).as_secs_f64()
                - b.saturating_duration_since(a).as_secs_f64())
                * 1e3
        };
        let first = first.unwrap_or(last);
        println!("real clock, period {period}: the {n} keys fell due over {:.1} ms; first reply read {:.1} ms after the first due time, last {:.1} ms after the last; {admitted} admitted",
            (exhaust_end - exhaust_start).as_secs_f64() * 1e3, ms(first, due(exhaust_start)), ms(last, due(exhaust_end)));
    }
    println!(
        "server CPU from the end of the waiters' window to the last reply: {:.3} s over {:.1} s; {:.1} us per admission",
        cpu_after - cpu_before,
        t_all.as_secs_f64(),
        (cpu_after - cpu_before) * 1e6 / admitted.max(1) as f64
    );
    Ok(())
}
