//! Issue 12's second benchmark: 10,000 clients waiting on 10,000 keys, each
//! admission 20 s away. Server CPU over 10 s of waiting (against the same
//! server idle with the same connections), memory per waiter, and the time
//! to admit them all when the (manual) clock reaches their slot.
//!
//!   cargo build --release && ./target/release/examples/wait_idle
//!   WAITERS=10000 ./target/release/examples/wait_idle
//!
//! Needs `ulimit -n` above WAITERS + 100. Starts its own redis-servers.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

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

fn start(manual: bool, waiters: usize) -> Server {
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
    let mut cmd = Command::new("redis-server");
    cmd.args([
        "--port",
        &port.to_string(),
        "--save",
        "",
        "--appendonly",
        "no",
    ])
    .args(["--maxclients", &(waiters + 100).to_string()])
    .args(["--loadmodule", &module]);
    if manual {
        cmd.args(["clock", "manual"]);
    }
    let child = cmd.stdout(Stdio::null()).spawn().expect("redis-server");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        thread::sleep(Duration::from_millis(20));
    }
    Server { child, port }
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
    }
    out
}

/// A plain connection (one descriptor): send, read whole replies.
struct Conn {
    r: BufReader<TcpStream>,
}

impl Conn {
    fn new(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        Conn {
            r: BufReader::new(stream),
        }
    }

    fn send(&mut self, args: &[&str]) {
        self.r.get_mut().write_all(&resp(args)).expect("send");
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.r.read_line(&mut line).expect("read");
        line.trim_end().to_string()
    }

    /// One reply, flattened to its lines (arrays of scalars only).
    fn reply(&mut self) -> Vec<String> {
        let first = self.line();
        let mut lines = vec![first.clone()];
        if let Some(n) = first.strip_prefix('*') {
            for _ in 0..n.parse::<usize>().unwrap_or(0) {
                lines.push(self.line());
            }
        } else if let Some(n) = first.strip_prefix('$') {
            if n != "-1" {
                lines.push(self.line());
            }
        }
        lines
    }

    fn call(&mut self, args: &[&str]) -> Vec<String> {
        self.send(args);
        self.reply()
    }

    /// A bulk reply (INFO) read whole.
    fn info(&mut self, section: &str) -> String {
        self.send(&["INFO", section]);
        let len: usize = self.line()[1..].parse().expect("bulk length");
        let mut buf = vec![0u8; len + 2];
        std::io::Read::read_exact(&mut self.r, &mut buf).expect("bulk");
        String::from_utf8_lossy(&buf).into_owned()
    }

    fn field(&mut self, section: &str, name: &str) -> f64 {
        let prefix = format!("{name}:");
        self.info(section)
            .lines()
            .find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name}"))
    }

    fn cpu(&mut self) -> f64 {
        self.field("cpu", "used_cpu_sys") + self.field("cpu", "used_cpu_user")
    }
}

/// Takes every key's slot: the next admission is 20 s away.
fn fill(ctl: &mut Conn, n: usize) {
    for i in 0..n {
        ctl.send(&["RL.GCRA", &format!("w:{i}"), "1", "20s"]);
    }
    for _ in 0..n {
        ctl.reply();
    }
}

fn connect(ctl: &mut Conn, port: u16, n: usize) -> Vec<Conn> {
    let clients = (0..n).map(|_| Conn::new(port)).collect();
    ctl.call(&["PING"]);
    clients
}

/// Each client waits on its own key (60 s timeout): with WAIT, or, for
/// the baseline, in Redis's own BLPOP.
fn block(ctl: &mut Conn, clients: &mut [Conn], blpop: bool) {
    for (i, c) in clients.iter_mut().enumerate() {
        if blpop {
            c.send(&["BLPOP", &format!("l:{i}"), "60"]);
        } else {
            c.send(&["RL.GCRA", &format!("w:{i}"), "1", "20s", "WAIT", "60s"]);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while ctl.field("clients", "blocked_clients") < clients.len() as f64 {
        assert!(Instant::now() < deadline, "clients did not block");
        thread::sleep(Duration::from_millis(50));
    }
}

fn main() {
    let n: usize = std::env::var("WAITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    println!("{n} clients, each waiting on its own key, admission 20 s away.\n");

    // Real clock: CPU and memory, idle, blocked in BLPOP, waiting.
    println!("| measure | idle, connected | BLPOP (Redis's own blocking) | WAIT |");
    println!("|---|---|---|---|");
    let mut rows: Vec<[f64; 5]> = Vec::new();
    for blpop in [true, false] {
        let server = start(false, n);
        let mut ctl = Conn::new(server.port);
        fill(&mut ctl, n);
        let mut clients = connect(&mut ctl, server.port, n);
        let cpu0 = ctl.cpu();
        thread::sleep(Duration::from_secs(10));
        let idle_cpu = ctl.cpu() - cpu0;
        let mem = ctl.field("memory", "used_memory");
        let rss = ctl.field("memory", "used_memory_rss");
        block(&mut ctl, &mut clients, blpop);
        let mem_blocked = ctl.field("memory", "used_memory");
        let rss_blocked = ctl.field("memory", "used_memory_rss");
        let cpu0 = ctl.cpu();
        thread::sleep(Duration::from_secs(10));
        let blocked_cpu = ctl.cpu() - cpu0;
        rows.push([
            idle_cpu,
            blocked_cpu,
            (mem_blocked - mem) / n as f64,
            (rss_blocked - rss) / n as f64,
            0.0,
        ]);
        drop(clients);
    }
    let (b, w) = (rows[0], rows[1]);
    println!(
        "| server CPU over 10 s, {n} clients | {:.3} s / {:.3} s | {:.3} s | {:.3} s |",
        b[0], w[0], b[1], w[1]
    );
    println!(
        "| used_memory per blocked client | | {:.0} B | {:.0} B |",
        b[2], w[2]
    );
    println!(
        "| RSS per blocked client (module allocations included) | | {:.0} B | {:.0} B |\n",
        b[3], w[3]
    );

    // Manual clock: the time to admit them all.
    let server = start(true, n);
    let mut ctl = Conn::new(server.port);
    fill(&mut ctl, n);
    let mut clients = connect(&mut ctl, server.port, n);
    block(&mut ctl, &mut clients, false);
    let t = Instant::now();
    ctl.call(&["RL.CLOCK", "ADVANCE", "20000000"]);
    let clock_call = t.elapsed();
    for c in &mut clients {
        let r = c.reply();
        assert_eq!(r.get(1).map(String::as_str), Some(":1"), "{r:?}");
    }
    let all_replies = t.elapsed();

    println!("| manual clock | time |\n|---|---|");
    println!(
        "| RL.CLOCK ADVANCE admitting all {n} (manual clock) | {:.1} ms |",
        clock_call.as_secs_f64() * 1e3
    );
    println!(
        "| until every client has its reply | {:.1} ms |",
        all_replies.as_secs_f64() * 1e3
    );
}
