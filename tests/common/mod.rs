//! Test support: real `redis-server` processes with the module loaded, on
//! free loopback ports, each in its own temporary directory, stopped (and
//! the directory removed) on drop.
#![allow(dead_code)]

pub mod blocking;
pub mod flows;
pub mod named;
pub mod topology;
pub mod workload;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The module built by `cargo test` (`RL_MODULE` overrides it).
pub fn module_path() -> PathBuf {
    if let Ok(p) = std::env::var("RL_MODULE") {
        return PathBuf::from(p);
    }
    // Tests run from target/<profile>/deps/<test-binary>. `cargo test`
    // rebuilds the cdylib in deps/ but copies it up to target/<profile>/ only
    // on `cargo build`, so the copy in deps/ is the fresh one.
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps dir");
    let so = deps.join("libredis_ratelimit.so");
    if so.exists() {
        return so;
    }
    let so = deps
        .parent()
        .expect("profile dir")
        .join("libredis_ratelimit.so");
    assert!(so.exists(), "module not built at {}", so.display());
    so
}

/// The server binary: `redis-server`, or `RL_SERVER` (e.g. `valkey-server`).
pub fn server_binary() -> String {
    std::env::var("RL_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// How a test server is started.
#[derive(Clone, Debug)]
pub struct Config {
    /// Load the module with `clock manual`.
    pub manual_clock: bool,
    /// Load the module at all.
    pub module: bool,
    /// Loads the module with `policies on` (named policies, saved in RDB).
    pub policies: bool,
    /// Extra `--name value` arguments for redis-server.
    pub extra: Vec<String>,
    /// A config file to start from. Its `enable-module-command` holds
    /// (the harness enables MODULE only without a file).
    pub conf_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            manual_clock: true,
            module: true,
            policies: false,
            extra: Vec::new(),
            conf_file: None,
        }
    }
}

impl Config {
    pub fn real_clock() -> Config {
        Config {
            manual_clock: false,
            ..Config::default()
        }
    }

    pub fn without_module() -> Config {
        Config {
            module: false,
            ..Config::default()
        }
    }

    /// With named policies on.
    pub fn with_policies(mut self) -> Config {
        self.policies = true;
        self
    }

    pub fn conf_file(mut self, path: PathBuf) -> Config {
        self.conf_file = Some(path);
        self
    }

    /// Adds `--name value...` (the value split on spaces).
    pub fn arg(mut self, name: &str, value: &str) -> Config {
        self.extra.push(format!("--{name}"));
        self.extra.extend(value.split(' ').map(str::to_string));
        self
    }
}

pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    pub config: Config,
    child: Option<Child>,
    keep_dir: bool,
    /// Stopped with SIGSTOP ([`Server::freeze`]).
    frozen: bool,
}

static NEXT_DIR: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub fn new_dir() -> PathBuf {
    let n = NEXT_DIR.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("rl-test-{}-{}", std::process::id(), n));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

impl Server {
    pub fn start() -> Server {
        Server::with(Config::default())
    }

    pub fn with(config: Config) -> Server {
        Server::start_in(config, new_dir())
    }

    /// Starts a server in `dir`, on the data already there.
    pub fn start_in(config: Config, dir: PathBuf) -> Server {
        for _ in 0..5 {
            if let Some(server) = Server::spawn(&config, &dir, free_port()) {
                return server;
            }
        }
        panic!(
            "redis-server did not start; its log:\n{}",
            std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default()
        );
    }

    /// Starts a server on `port`, e.g. one that a stopped server held, so
    /// that clients see the same server come back.
    pub fn start_on(config: Config, dir: PathBuf, port: u16) -> Server {
        Server::spawn(&config, &dir, port).unwrap_or_else(|| {
            panic!(
                "redis-server did not start on port {port}; its log:\n{}",
                std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default()
            )
        })
    }

    /// One start on `port`; `None` if it did not come up.
    fn spawn(config: &Config, dir: &Path, port: u16) -> Option<Server> {
        let mut cmd = Command::new(server_binary());
        if let Some(conf) = &config.conf_file {
            cmd.arg(conf);
        } else {
            cmd.arg("--enable-module-command").arg("yes");
        }
        cmd.arg("--port")
            .arg(port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(dir)
            .arg("--save")
            .arg("")
            .arg("--logfile")
            .arg("redis.log")
            .arg("--enable-debug-command")
            .arg("yes")
            // A replica's first sync starts at once (not after 5 s).
            .arg("--repl-diskless-sync-delay")
            .arg("0");
        if config.module {
            cmd.arg("--loadmodule").arg(module_path());
            if config.manual_clock {
                cmd.arg("clock").arg("manual");
            }
            if config.policies {
                cmd.arg("policies").arg("on");
            }
        }
        cmd.args(&config.extra);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let child = cmd.spawn().expect("the server binary is installed");
        let mut server = Server {
            port,
            dir: dir.to_path_buf(),
            config: config.clone(),
            child: Some(child),
            keep_dir: true,
            frozen: false,
        };
        if server.wait_ready() {
            server.keep_dir = false;
            return Some(server);
        }
        server.stop();
        None
    }

    /// Waits (bounded) until the server answers PING; false if it exited.
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    return false;
                }
            }
            if let Ok(mut c) = self.try_conn() {
                let pong: redis::RedisResult<String> = redis::cmd("PING").query(&mut c);
                if pong.is_ok() {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        client.get_connection_with_timeout(Duration::from_secs(5))
    }

    pub fn conn(&self) -> redis::Connection {
        self.try_conn().expect("connect to test server")
    }

    /// A connection that speaks RESP3.
    pub fn conn_resp3(&self) -> redis::Connection {
        let client = redis::Client::open(format!("{}?protocol=resp3", self.url())).expect("client");
        client.get_connection().expect("connect")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// Stops the process where it is (SIGSTOP): its connections stay open
    /// and it answers nothing until [`Server::resume`]. A server that does
    /// not answer for exactly as long as the test says.
    pub fn freeze(&mut self) {
        self.signal("STOP");
        self.frozen = true;
    }

    pub fn resume(&mut self) {
        self.signal("CONT");
        self.frozen = false;
    }

    fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("a running server").id();
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{name} {pid}");
    }

    /// Stops the server (SHUTDOWN NOSAVE, then kill), keeping its directory.
    pub fn stop(&mut self) {
        if self.frozen {
            self.resume();
        }
        if let Some(mut child) = self.child.take() {
            if let Ok(mut c) = self.try_conn() {
                let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut c);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server and starts it again on the same directory and data.
    pub fn restart(mut self) -> Server {
        self.keep_dir = true;
        self.stop();
        let (config, dir) = (self.config.clone(), self.dir.clone());
        drop(self);
        Server::start_in(config, dir)
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if !self.keep_dir && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Builds a command from string arguments.
pub fn cmd(args: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd
}

/// Sends a command and returns the raw reply.
pub fn call(c: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<redis::Value> {
    cmd(args).query(c)
}

/// A decision reply as the five integers of RESP2.
pub fn decide(c: &mut redis::Connection, args: &[&str]) -> [i64; 5] {
    let v: Vec<i64> = cmd(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    v.try_into().expect("five fields")
}

/// A combined reply (RL.ALL, RL.SHARE) in RESP2: (allowed, blocked_by,
/// retry_after_ms, one five-field reply per key).
pub fn combined(c: &mut redis::Connection, args: &[&str]) -> (i64, i64, i64, Vec<[i64; 5]>) {
    combined_reply(call(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}")))
}

/// [`combined`]'s reading of a reply already received.
pub fn combined_reply(v: redis::Value) -> (i64, i64, i64, Vec<[i64; 5]>) {
    let redis::Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    let int = |v: &redis::Value| match v {
        redis::Value::Int(n) => *n,
        other => panic!("not an int: {other:?}"),
    };
    let replies = items[3..]
        .iter()
        .map(|r| {
            let fields: Vec<i64> = redis::from_redis_value(r.clone()).unwrap();
            fields.try_into().unwrap()
        })
        .collect();
    (int(&items[0]), int(&items[1]), int(&items[2]), replies)
}

/// The incremental AOF files of `server`, once they hold `marker` (the key
/// of its last write): some servers (Valkey 8) write the AOF after the
/// reply, so they are read again until then, for at most 10 s.
pub fn aof_through(server: &Server, marker: &str) -> String {
    let dir = server.dir.join("appendonlydir");
    let read = || {
        let mut text = String::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().ends_with(".incr.aof") {
                text.push_str(&String::from_utf8_lossy(&std::fs::read(path).unwrap()));
            }
        }
        text
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut text = read();
    while !text.contains(marker) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        text = read();
    }
    text
}

/// The error a command answers, as (code, "CODE message").
pub fn error_of(c: &mut redis::Connection, args: &[&[u8]]) -> (String, String) {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("ascii name"));
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(v) => panic!("{args:?} succeeded with {v:?}"),
        Err(e) => {
            let code = e.code().unwrap_or("").to_string();
            let detail = e.detail().unwrap_or("").to_string();
            (code.clone(), format!("{code} {detail}"))
        }
    }
}

/// The manual clock, in microseconds.
pub fn clock(c: &mut redis::Connection) -> u64 {
    redis::cmd("RL.CLOCK").query(c).expect("RL.CLOCK")
}

pub fn clock_set(c: &mut redis::Connection, us: u64) {
    let _: u64 = redis::cmd("RL.CLOCK")
        .arg("SET")
        .arg(us)
        .query(c)
        .expect("RL.CLOCK SET");
}

pub fn advance(c: &mut redis::Connection, us: u64) {
    let _: u64 = redis::cmd("RL.CLOCK")
        .arg("ADVANCE")
        .arg(us)
        .query(c)
        .expect("RL.CLOCK ADVANCE");
}

pub fn pttl(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(c).expect("PTTL")
}

pub fn get_bytes(c: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

pub fn pexpiretime(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(c)
        .expect("PEXPIRETIME")
}

pub fn digest(c: &mut redis::Connection) -> String {
    redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(c)
        .expect("DEBUG DIGEST")
}

/// A fixed manual-clock origin for timelines: 2026-01-01T00:00:00Z.
pub const T0: u64 = 1_767_225_600_000_000;
pub const SECOND: u64 = 1_000_000;
pub const MS: u64 = 1_000;

/// The names of a decision's fields, in reply order.
pub const DECISION_FIELDS: [&str; 5] = [
    "allowed",
    "limit",
    "remaining",
    "retry_after_ms",
    "reset_after_ms",
];

/// A RESP3 map reply as (name, value) pairs, in order.
pub fn resp3_map(v: redis::Value) -> Vec<(String, redis::Value)> {
    let redis::Value::Map(fields) = v else {
        panic!("not a map: {v:?}")
    };
    fields
        .into_iter()
        .map(|(k, v)| (redis::from_redis_value(k).expect("a field name"), v))
        .collect()
}

/// The names of a RESP3 map's fields.
pub fn names(fields: &[(String, redis::Value)]) -> Vec<&str> {
    fields.iter().map(|(k, _)| k.as_str()).collect()
}

/// The commands in one MULTI/EXEC, their replies in order. While EXEC runs
/// the server judges key expiry at one fixed time: no key expires on the
/// wall clock between two of them (a key whose state lives a few
/// milliseconds could between two separate calls on a loaded machine).
pub fn atomically(c: &mut redis::Connection, commands: &[&[&str]]) -> Vec<redis::Value> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for args in commands {
        pipe.add_command(cmd(args));
    }
    pipe.query(c)
        .unwrap_or_else(|e| panic!("{commands:?}: {e}"))
}

/// A decision reply read as its five integers.
pub fn five(v: &redis::Value) -> [i64; 5] {
    let v: Vec<i64> = redis::from_redis_value(v.clone()).expect("a decision");
    v.try_into().expect("five fields")
}

/// The server's wall clock (what key expiry runs on), in milliseconds.
pub fn server_ms(c: &mut redis::Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(c).expect("TIME");
    s * 1000 + us / 1000
}

/// A decision, with the server's wall clock read just before and just
/// after it: a key it wrote got its expiry at a time in between.
pub fn decide_timed(c: &mut redis::Connection, args: &[&str]) -> ([i64; 5], (i64, i64)) {
    let before = server_ms(c);
    let reply = decide(c, args);
    (reply, (before, server_ms(c)))
}

/// `key` expires `ttl_ms` after a time within `written` (from
/// [`decide_timed`]): exact, however long the calls took.
pub fn assert_expires_after(
    c: &mut redis::Connection,
    key: &str,
    ttl_ms: i64,
    written: (i64, i64),
) {
    let at = pexpiretime(c, key);
    assert!(
        (written.0..=written.1).contains(&(at - ttl_ms)),
        "{key}: expires at {at}, want {ttl_ms} ms after a time within {written:?}"
    );
}
