//! A seeded random workload over every decision command and mode, sent in
//! pipelines. Adding a command to every durability test is one entry in
//! `FAMILIES`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;

/// Which periods and windows the workload draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Windows {
    /// Minutes to hours: no key expires while a test runs, so a state can
    /// be compared across a restart or a reload.
    Long,
    /// A day to a week, each dividing the weeks since the epoch (so that
    /// aligned windows end a whole period after [`T0`](super::T0)): a key's
    /// TTL is at least its shortest interval (hours) less how far the test
    /// moved the manual clock, so no key expires on the wall clock while a
    /// test that moves it by seconds runs, however slow the machine.
    Days,
    /// Long ones plus sub-second and second-long ones, whose keys expire on
    /// Redis's real clock during the run (and are deleted by the primary).
    Mixed,
}

impl Windows {
    fn duration(self, rng: &mut StdRng) -> String {
        const LONG: &[&str] = &["2m", "7m", "90s", "1h", "36000s", "1d"];
        const SHORT: &[&str] = &["250ms", "1s", "3s", "700ms"];
        const DAYS: &[&str] = &["2d", "7d", "36h", "1d", "259200s", "2880m"];
        if self == Windows::Mixed && rng.gen_bool(0.3) {
            SHORT[rng.gen_range(0..SHORT.len())].to_string()
        } else if self == Windows::Days {
            DAYS[rng.gen_range(0..DAYS.len())].to_string()
        } else {
            LONG[rng.gen_range(0..LONG.len())].to_string()
        }
    }

    /// Whole seconds, for CL.THROTTLE.
    fn seconds(self, rng: &mut StdRng) -> String {
        if self == Windows::Mixed && rng.gen_bool(0.3) {
            rng.gen_range(1..4).to_string()
        } else if self == Windows::Days {
            rng.gen_range(86_400..604_800).to_string()
        } else {
            rng.gen_range(60..7200).to_string()
        }
    }
}

/// One command (or one mode of a command) in the workload.
pub struct Family {
    /// Key prefix, so that each family owns its keys.
    pub prefix: &'static str,
    /// The whole call for `key`, command name first.
    pub build: fn(&mut StdRng, &str, Windows) -> Vec<String>,
    /// Whether the reply admitted the request.
    pub admitted: fn(&Value) -> bool,
    /// A call on `key` that admits exactly `limit` requests while the clock
    /// stands still (an hour-long window).
    pub fixed: fn(&str, u64) -> Vec<String>,
    /// Appended to a `fixed` call: decide without writing.
    pub peek: &'static [&'static str],
}

fn fixed_gcra(key: &str, limit: u64) -> Vec<String> {
    vec![s("RL.GCRA"), s(key), s(limit), s("1h")]
}

fn fixed_bucket(key: &str, limit: u64) -> Vec<String> {
    vec![s("RL.BUCKET"), s(key), s(limit), s(1), s("1h")]
}

fn fixed_throttle(key: &str, limit: u64) -> Vec<String> {
    vec![s("CL.THROTTLE"), s(key), s(limit - 1), s(1), s(3600)]
}

fn first_int(v: &Value) -> i64 {
    match v {
        Value::Array(items) => match items.first() {
            Some(Value::Int(n)) => *n,
            other => panic!("not a decision reply: {other:?}"),
        },
        other => panic!("not a decision reply: {other:?}"),
    }
}

fn rl_admitted(v: &Value) -> bool {
    first_int(v) == 1
}

fn cell_admitted(v: &Value) -> bool {
    first_int(v) == 0
}

fn s(x: impl ToString) -> String {
    x.to_string()
}

/// `COST n` (0 to 3) and sometimes `DRYRUN`; now and then a forced or
/// partial charge, or a refund, instead; and now and then the same policy
/// looked at with RL.PEEK (the call is the decision command's, options
/// still to come).
fn common_options(rng: &mut StdRng, call: &mut Vec<String>) {
    options(rng, call, true);
}

fn options(rng: &mut StdRng, call: &mut Vec<String>, peekable: bool) {
    match rng.gen_range(0..100) {
        0..=4 if peekable => {
            // RL.PEEK key POLICY args...: the name without `RL.`.
            let keyword = call[0].trim_start_matches("RL.").to_string();
            let key = call[1].clone();
            let mut peek = vec![s("RL.PEEK"), key, keyword];
            peek.extend(call.drain(2..));
            *call = peek;
            return;
        }
        5..=12 => call.extend([s("FORCE"), s("COST"), s(rng.gen_range(1..6))]),
        13..=22 => call.extend([s("COST"), s(rng.gen_range(1..6)), s("PARTIAL")]),
        23..=32 => call.extend([s("REFUND"), s(rng.gen_range(1..5))]),
        _ => {
            if rng.gen_bool(0.7) {
                call.extend([s("COST"), s(rng.gen_range(0..4))]);
            }
        }
    }
    let refund = call.iter().any(|w| w == "REFUND");
    if !refund && rng.gen_bool(0.1) {
        call.push(s("DRYRUN"));
    }
}

/// RL.ALL's options: those of one key, or one cost per key (`COSTS`),
/// plain, forced or given back.
fn all_options(rng: &mut StdRng, n: usize, call: &mut Vec<String>) {
    if rng.gen_bool(0.8) {
        options(rng, call, false);
        return;
    }
    match rng.gen_range(0..3) {
        0 => {}
        1 => call.push(s("FORCE")),
        _ => call.push(s("REFUND")),
    }
    call.push(s("COSTS"));
    let force = call.iter().any(|w| w == "FORCE");
    for _ in 0..n {
        call.push(s(rng.gen_range(usize::from(force)..5)));
    }
}

fn gcra(rng: &mut StdRng, key: &str, w: Windows) -> Vec<String> {
    let mut call = vec![
        s("RL.GCRA"),
        s(key),
        s(rng.gen_range(1..8)),
        w.duration(rng),
    ];
    if rng.gen_bool(0.3) {
        call.extend([s("BURST"), s(rng.gen_range(1..12))]);
    }
    common_options(rng, &mut call);
    call
}

fn bucket(rng: &mut StdRng, key: &str, w: Windows) -> Vec<String> {
    let mut call = vec![
        s("RL.BUCKET"),
        s(key),
        s(rng.gen_range(1..8)),
        s(rng.gen_range(1..5)),
        w.duration(rng),
    ];
    common_options(rng, &mut call);
    call
}

fn throttle(rng: &mut StdRng, key: &str, w: Windows) -> Vec<String> {
    let mut call = vec![
        s("CL.THROTTLE"),
        s(key),
        s(rng.gen_range(0..6)),
        s(rng.gen_range(1..10)),
        w.seconds(rng),
    ];
    if rng.gen_bool(0.7) {
        call.push(s(rng.gen_range(0..4)));
    }
    call
}

fn sliding(rng: &mut StdRng, key: &str, w: Windows, mode: &[&str]) -> Vec<String> {
    let mut call = vec![
        s("RL.SLIDING"),
        s(key),
        s(rng.gen_range(1..8)),
        w.duration(rng),
    ];
    call.extend(mode.iter().map(|m| m.to_string()));
    common_options(rng, &mut call);
    call
}

fn fixed_window(rng: &mut StdRng, key: &str, w: Windows, mode: &[&str]) -> Vec<String> {
    let mut call = vec![
        s("RL.FIXED"),
        s(key),
        s(rng.gen_range(1..8)),
        w.duration(rng),
    ];
    call.extend(mode.iter().map(|m| m.to_string()));
    common_options(rng, &mut call);
    call
}

/// A sketch's WIDTH, DEPTH and window, which a key keeps for life (any
/// other is an error): derived from the key. One key in four is a single
/// cell, where every item collides; under `Mixed`, one in three has a
/// window of a second.
fn sketch_shape(key: &str, w: Windows) -> [String; 5] {
    let h = key
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    let (width, depth) = if h % 4 == 0 { (1, 1) } else { (16, 2) };
    let window = if w == Windows::Mixed && h % 3 == 0 {
        "1s"
    } else {
        "1h"
    };
    [s(window), s("WIDTH"), s(width), s("DEPTH"), s(depth)]
}

fn sketch(rng: &mut StdRng, key: &str, w: Windows) -> Vec<String> {
    let item = format!("10.0.0.{}", rng.gen_range(0..40));
    let [window, rest @ ..] = sketch_shape(key, w);
    let mut call = vec![s("RL.SKETCH"), s(key), item, s(rng.gen_range(1..8)), window];
    call.extend(rest);
    sketch_options(rng, &mut call);
    call
}

/// RL.SKETCH's options: it takes neither FORCE nor REFUND, and RL.PEEK and
/// RL.ALL have no sketch policy.
fn sketch_options(rng: &mut StdRng, call: &mut Vec<String>) {
    if rng.gen_bool(0.1) {
        call.extend([s("COST"), s(rng.gen_range(1..6)), s("PARTIAL")]);
    } else if rng.gen_bool(0.7) {
        call.extend([s("COST"), s(rng.gen_range(0..4))]);
    }
    if rng.gen_bool(0.1) {
        call.push(s("DRYRUN"));
    }
}

fn fixed_sketch(key: &str, limit: u64) -> Vec<String> {
    let [window, rest @ ..] = sketch_shape(key, Windows::Long);
    let mut call = vec![s("RL.SKETCH"), s(key), s("probe"), s(limit), window];
    call.extend(rest);
    call
}

/// RL.ALL's keys: `base` with an index, in one hash slot.
fn all_keys(base: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            if base.contains('{') {
                format!("{base}:{i}")
            } else {
                format!("{{{base}}}:{i}")
            }
        })
        .collect()
}

/// RL.ALL's policies by key position (a key always gets the same kind of
/// state): each is the policy's words for a random limit.
const ALL_POLICIES: &[fn(&mut StdRng, Windows) -> Vec<String>] = &[
    |rng, w| vec![s("GCRA"), s(rng.gen_range(1..8)), w.duration(rng)],
    |rng, w| {
        let (c, r) = (rng.gen_range(1..8), rng.gen_range(1..5));
        vec![s("BUCKET"), s(c), s(r), w.duration(rng)]
    },
    |rng, w| {
        let mut p = vec![s("GCRA"), s(rng.gen_range(2..12)), w.duration(rng)];
        p.extend([s("BURST"), s(rng.gen_range(1..12))]);
        p
    },
    |rng, w| {
        vec![
            s("SLIDING"),
            s(rng.gen_range(1..8)),
            w.duration(rng),
            s("EXACT"),
        ]
    },
    |rng, w| {
        vec![
            s("SLIDING"),
            s(rng.gen_range(1..8)),
            w.duration(rng),
            s("APPROX"),
        ]
    },
    |rng, w| {
        let (l, d) = (rng.gen_range(1..8), w.duration(rng));
        vec![s("SLIDING"), s(l), d, s("BUCKETS"), s(8)]
    },
    |rng, w| vec![s("FIXED"), s(rng.gen_range(1..8)), w.duration(rng)],
    |rng, w| {
        vec![
            s("FIXED"),
            s(rng.gen_range(1..8)),
            w.duration(rng),
            s("ALIGNED"),
        ]
    },
    |rng, w| vec![s("CONCURRENCY"), s(rng.gen_range(1..8)), w.duration(rng)],
];

fn all(rng: &mut StdRng, key: &str, w: Windows) -> Vec<String> {
    let n = rng.gen_range(1..=ALL_POLICIES.len());
    let mut call = vec![s("RL.ALL"), s(n)];
    call.extend(all_keys(key, n));
    for policy in &ALL_POLICIES[..n] {
        call.extend(policy(rng, w));
    }
    // CONCURRENCY (the last policy) takes no FORCE, PARTIAL or REFUND.
    if n == ALL_POLICIES.len() {
        plain_options(rng, &mut call);
    } else {
        all_options(rng, n, &mut call);
    }
    call
}

/// RL.SHARE's keys: `n - 1` inner nodes (leaf first) as RL.ALL's keys,
/// then the root, in the same hash slot; a key is always the same kind of
/// node (the root's state has no assured rate).
fn share_keys(base: &str, n: usize) -> Vec<String> {
    let mut keys = all_keys(base, n);
    if let Some(root) = keys.last_mut() {
        let at = root.rfind(':').unwrap_or(root.len());
        root.replace_range(at.., ":root");
    }
    keys
}

/// A path of one to three nodes, each inner node's ceiling at least its
/// limit. A node's limits are drawn from its key alone: a key has one
/// definition, whatever path names it.
fn share(rng: &mut StdRng, key: &str, w: Windows) -> Vec<String> {
    let n = rng.gen_range(1..=3);
    let mut call = vec![s("RL.SHARE"), s(n)];
    let keys = share_keys(key, n);
    call.extend(keys.iter().cloned());
    for (i, node) in keys.iter().enumerate() {
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(node, &mut hasher);
        let mut own = StdRng::seed_from_u64(std::hash::Hasher::finish(&hasher));
        let limit = own.gen_range(1..8);
        call.extend([s(limit), w.duration(&mut own)]);
        if own.gen_bool(0.3) {
            call.extend([s("BURST"), s(own.gen_range(1..12))]);
        }
        if i + 1 < n {
            call.extend([s("CEIL"), s(limit + own.gen_range(0..8))]);
        }
    }
    plain_options(rng, &mut call);
    call
}

/// A path of two admitting exactly `limit` in an hour. Its keys are its
/// own (the path's with `:fixed` before their last part, in the same hash
/// slot): a key has one definition, and the random paths draw theirs from
/// the key.
fn fixed_share(key: &str, limit: u64) -> Vec<String> {
    let mut call = vec![s("RL.SHARE"), s(2)];
    call.extend(share_keys(key, 2).into_iter().map(|mut k| {
        let at = k.rfind(':').unwrap_or(k.len());
        k.insert_str(at, ":fixed");
        k
    }));
    call.extend([s(limit), s("1h"), s("CEIL"), s(limit), s(limit), s("1h")]);
    call
}

fn acquire(rng: &mut StdRng, key: &str, w: Windows) -> Vec<String> {
    let mut call = vec![
        s("RL.ACQUIRE"),
        s(key),
        s(rng.gen_range(1..5)),
        w.duration(rng),
    ];
    plain_options(rng, &mut call);
    call
}

/// `COST n` and sometimes `DRYRUN`: what RL.ACQUIRE and CONCURRENCY take
/// (no FORCE, PARTIAL or REFUND; RL.PEEK has no ACQUIRE).
fn plain_options(rng: &mut StdRng, call: &mut Vec<String>) {
    if rng.gen_bool(0.7) {
        call.extend([s("COST"), s(rng.gen_range(0..4))]);
    }
    if rng.gen_bool(0.1) {
        call.push(s("DRYRUN"));
    }
}

/// The lease of an admitted RL.ACQUIRE reply.
fn lease_of(v: &Value) -> Option<String> {
    match v {
        Value::Array(items) if items.len() == 6 => match &items[5] {
            Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
            _ => None,
        },
        _ => None,
    }
}

fn fixed_all(key: &str, limit: u64) -> Vec<String> {
    let mut call = vec![s("RL.ALL"), s(4)];
    call.extend(all_keys(key, 4));
    call.extend([s("GCRA"), s(limit), s("1h")]);
    call.extend([s("BUCKET"), s(limit), s(1), s("1h")]);
    call.extend([s("SLIDING"), s(limit), s("1h"), s("APPROX")]);
    call.extend([s("FIXED"), s(limit), s("1h")]);
    call
}

/// Every command and mode the durability tests exercise.
pub const FAMILIES: &[Family] = &[
    Family {
        prefix: "gcra",
        build: gcra,
        admitted: rl_admitted,
        fixed: fixed_gcra,
        peek: &["DRYRUN"],
    },
    Family {
        prefix: "bucket",
        build: bucket,
        admitted: rl_admitted,
        fixed: fixed_bucket,
        peek: &["DRYRUN"],
    },
    Family {
        prefix: "cell",
        build: throttle,
        admitted: cell_admitted,
        fixed: fixed_throttle,
        peek: &["0"],
    },
    Family {
        prefix: "exact",
        build: |rng, key, w| sliding(rng, key, w, &["EXACT"]),
        admitted: rl_admitted,
        fixed: |key, limit| vec![s("RL.SLIDING"), s(key), s(limit), s("1h")],
        peek: &["DRYRUN"],
    },
    Family {
        prefix: "approx",
        build: |rng, key, w| sliding(rng, key, w, &["APPROX"]),
        admitted: rl_admitted,
        fixed: |key, limit| vec![s("RL.SLIDING"), s(key), s(limit), s("1h"), s("APPROX")],
        peek: &["DRYRUN"],
    },
    Family {
        prefix: "buckets",
        build: |rng, key, w| sliding(rng, key, w, &["BUCKETS", "8"]),
        admitted: rl_admitted,
        fixed: |key, limit| {
            vec![
                s("RL.SLIDING"),
                s(key),
                s(limit),
                s("1h"),
                s("BUCKETS"),
                s(8),
            ]
        },
        peek: &["DRYRUN"],
    },
    Family {
        prefix: "fixed",
        build: |rng, key, w| fixed_window(rng, key, w, &[]),
        admitted: rl_admitted,
        fixed: |key, limit| vec![s("RL.FIXED"), s(key), s(limit), s("1h")],
        peek: &["DRYRUN"],
    },
    Family {
        prefix: "aligned",
        build: |rng, key, w| fixed_window(rng, key, w, &["ALIGNED"]),
        admitted: rl_admitted,
        fixed: |key, limit| vec![s("RL.FIXED"), s(key), s(limit), s("1h"), s("ALIGNED")],
        peek: &["DRYRUN"],
    },
    Family {
        prefix: "sketch",
        build: sketch,
        admitted: rl_admitted,
        fixed: fixed_sketch,
        peek: &["DRYRUN"],
    },
    Family {
        prefix: "lease",
        build: acquire,
        admitted: rl_admitted,
        fixed: |key, limit| vec![s("RL.ACQUIRE"), s(key), s(limit), s("1h")],
        peek: &["DRYRUN"],
    },
    Family {
        prefix: "all",
        build: all,
        admitted: rl_admitted,
        fixed: fixed_all,
        peek: &["DRYRUN"],
    },
    Family {
        prefix: "share",
        build: share,
        admitted: rl_admitted,
        fixed: fixed_share,
        peek: &["DRYRUN"],
    },
];

/// Admitted and denied decisions of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub allowed: usize,
    pub denied: usize,
}

impl Tally {
    fn count(&mut self, admitted: bool) {
        if admitted {
            self.allowed += 1;
        } else {
            self.denied += 1;
        }
    }
}

/// A reproducible stream of calls.
pub struct Workload {
    rng: StdRng,
    pub windows: Windows,
    /// Cold keys per family (plus a few hot ones that get denied).
    pub keys: usize,
    /// Chance that the manual clock moves before a call.
    pub advance_chance: f64,
    /// Largest clock step, µs.
    pub max_step_us: u64,
    /// `{tag}` inserted in every key when set (one cluster slot).
    pub hash_tag: Option<String>,
    /// Outcomes so far, by family prefix.
    pub by_family: std::collections::BTreeMap<&'static str, Tally>,
    /// Leases handed out (key, lease), some of which later calls release
    /// or renew.
    pub leases: Vec<(String, String)>,
}

impl Workload {
    pub fn new(seed: u64, windows: Windows) -> Workload {
        Workload {
            rng: StdRng::seed_from_u64(seed),
            windows,
            keys: 1000,
            advance_chance: 0.03,
            max_step_us: 3_000_000,
            hash_tag: None,
            by_family: Default::default(),
            leases: Vec::new(),
        }
    }

    /// Half the calls go to 20 hot keys per family, so that many are denied.
    pub fn key(&mut self, family: &Family) -> String {
        let n = if self.rng.gen_bool(0.5) {
            format!("h{}", self.rng.gen_range(0..20))
        } else {
            format!("c{}", self.rng.gen_range(0..self.keys))
        };
        match &self.hash_tag {
            Some(tag) => format!("{{{tag}}}:{}:{n}", family.prefix),
            None => format!("{}:{n}", family.prefix),
        }
    }

    /// The next call and its family.
    pub fn next_call(&mut self) -> (Vec<String>, &'static Family) {
        let family = &FAMILIES[self.rng.gen_range(0..FAMILIES.len())];
        let key = self.key(family);
        ((family.build)(&mut self.rng, &key, self.windows), family)
    }

    /// Sends `calls` decisions (and clock steps) in pipelines of 500.
    pub fn run(&mut self, c: &mut impl redis::ConnectionLike, calls: usize) -> Tally {
        let mut tally = Tally::default();
        let mut left = calls;
        while left > 0 {
            let n = left.min(500);
            left -= n;
            let mut pipe = redis::pipe();
            let mut families = Vec::with_capacity(n);
            for _ in 0..n {
                if self.rng.gen_bool(self.advance_chance) {
                    let step = self.rng.gen_range(0..self.max_step_us);
                    pipe.cmd("RL.CLOCK").arg("ADVANCE").arg(step);
                    families.push(None);
                }
                if let Some(call) = self.lease_call() {
                    pipe.cmd(&call[0]).arg(&call[1..]);
                    families.push(None);
                }
                let (call, family) = self.next_call();
                pipe.cmd(&call[0]).arg(&call[1..]);
                families.push(Some((family, call[1].clone())));
            }
            let replies: Vec<Value> = pipe.query(c).expect("workload pipeline");
            for (reply, family) in replies.iter().zip(families) {
                if let Some((family, key)) = family {
                    if let Some(lease) = lease_of(reply) {
                        self.leases.push((key, lease));
                    }
                    let admitted = (family.admitted)(reply);
                    tally.count(admitted);
                    self.by_family
                        .entry(family.prefix)
                        .or_default()
                        .count(admitted);
                }
            }
        }
        tally
    }
}

impl Workload {
    /// Sometimes an RL.RELEASE or RL.RENEW of a lease handed out earlier
    /// (held, expired or already released).
    fn lease_call(&mut self) -> Option<Vec<String>> {
        if self.leases.is_empty() || !self.rng.gen_bool(0.1) {
            return None;
        }
        let i = self.rng.gen_range(0..self.leases.len());
        let (key, lease) = if self.rng.gen_bool(0.7) {
            self.leases.swap_remove(i)
        } else {
            self.leases[i].clone()
        };
        Some(if self.rng.gen_bool(0.6) {
            vec![s("RL.RELEASE"), key, lease]
        } else {
            let ttl = self.windows.duration(&mut self.rng);
            vec![s("RL.RENEW"), key, lease, ttl]
        })
    }

    /// Asserts that every family has had admitted and denied requests.
    pub fn assert_both_outcomes(&self) {
        for f in FAMILIES {
            let t = self.by_family.get(f.prefix).copied().unwrap_or_default();
            assert!(t.allowed > 0 && t.denied > 0, "{}: {t:?}", f.prefix);
        }
    }

    /// Sends `calls` decisions one by one and never moves the clock (for
    /// the cluster client, which routes each call to its key's node).
    pub fn run_singly(&mut self, c: &mut impl redis::ConnectionLike, calls: usize) -> Tally {
        let mut tally = Tally::default();
        for _ in 0..calls {
            let (call, family) = self.next_call();
            let admitted = (family.admitted)(&call_ok(c, &call));
            tally.count(admitted);
            self.by_family
                .entry(family.prefix)
                .or_default()
                .count(admitted);
        }
        tally
    }
}

/// Every key with its value and absolute expiry (ms), sorted by key.
pub fn snapshot(c: &mut redis::Connection) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    keys.sort();
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("GET").arg(k).cmd("PEXPIRETIME").arg(k);
    }
    let replies: Vec<(Vec<u8>, i64)> = pipe.query(c).expect("snapshot");
    keys.into_iter()
        .zip(replies)
        .map(|(k, (v, t))| (k, v, t))
        // Listed, then expired on the wall clock before it was read.
        .filter(|(_, _, t)| *t != -2)
        .collect()
}

/// Asserts that two snapshots hold the same keys, values and expiry times,
/// leaving out the keys that expire on the real clock within seconds of
/// now (or already did, between `KEYS` and `GET`): an aligned window can
/// end just as the test runs, and a key that expires during a restart is
/// not a lost one.
pub fn assert_same_state(
    before: &[(Vec<u8>, Vec<u8>, i64)],
    after: &[(Vec<u8>, Vec<u8>, i64)],
    what: &str,
) {
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as i64
        + 10_000;
    let lasting = |snapshot: &[(Vec<u8>, Vec<u8>, i64)]| -> Vec<(Vec<u8>, Vec<u8>, i64)> {
        snapshot
            .iter()
            .filter(|(_, _, expiry)| *expiry == -1 || *expiry > soon)
            .cloned()
            .collect()
    };
    let (before, after) = (&lasting(before)[..], &lasting(after)[..]);
    if before.len() != after.len() {
        let a: std::collections::BTreeSet<_> = after.iter().map(|k| k.0.clone()).collect();
        for b in before.iter().filter(|b| !a.contains(&b.0)) {
            eprintln!(
                "MISSING {:?} {:?} {}",
                String::from_utf8_lossy(&b.0),
                b.1,
                b.2
            );
        }
    }
    assert_eq!(before.len(), after.len(), "{what}: key count");
    for (b, a) in before.iter().zip(after) {
        assert_eq!(b, a, "{what}: key {}", String::from_utf8_lossy(&b.0));
    }
}

/// Sends `args` and returns the reply, panicking on an error.
pub fn call_ok<S: AsRef<str>>(c: &mut impl redis::ConnectionLike, args: &[S]) -> Value {
    let mut cmd = redis::cmd(args[0].as_ref());
    for a in &args[1..] {
        cmd.arg(a.as_ref());
    }
    let names: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    cmd.query(c).unwrap_or_else(|e| panic!("{names:?}: {e}"))
}

/// `call` with `peek` appended.
pub fn peeking(call: &[String], peek: &[&str]) -> Vec<String> {
    let mut call = call.to_vec();
    call.extend(peek.iter().map(|p| p.to_string()));
    call
}
