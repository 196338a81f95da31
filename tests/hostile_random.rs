//! 100,000 random commands against one server (named policies on): RL.*
//! names (and CL.THROTTLE and RL.CLOCK) in any case, arguments that are mostly plausible and often
//! hostile or random bytes (non-UTF-8 included), on keys of every type.
//! Afterwards the server must answer, no foreign key may have changed (DUMP
//! and expiry), and every key the module wrote must have a TTL. Every reply
//! on the way must be a well-formed decision or an `ERR`/`WRONGTYPE` error,
//! never a caught panic. Seed: `HOSTILE_SEED` (printed on failure).

mod common;
mod hostile;

use common::Server;
use hostile::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

const COMMANDS: usize = 100_000;
const BATCH: usize = 1_000;

const NAMES: &[&str] = &[
    "RL.GCRA",
    "RL.BUCKET",
    "RL.SLIDING",
    "RL.FIXED",
    "RL.SKETCH",
    "RL.ALL",
    "RL.SHARE",
    "RL.SHARE.PEEK",
    "CL.THROTTLE",
    "RL.CHECK",
    "RL.POLICY",
    "RL.CLOCK",
];

/// Words any command might take, and policy words of RL.ALL.
const WORDS: &[&str] = &[
    "BURST", "COST", "DRYRUN", "EXACT", "APPROX", "BUCKETS", "ALIGNED", "GCRA", "BUCKET",
    "SLIDING", "FIXED", "cost", "dryrun", "burst", "WIDTH", "DEPTH", "SKETCH", "CEIL", "ceil",
];

const COUNTS: &[&str] = &[
    "1",
    "2",
    "3",
    "5",
    "10",
    "10",
    "100",
    "1000",
    "1000000",
    "0",
    "9223372036854775807",
];
/// RL.SKETCH items: few, so that they meet again.
const ITEMS: &[&str] = &["a", "b", "198.51.100.7", "", "\u{7f}x", "COST"];
const DURATIONS: &[&str] = &[
    "1s", "250ms", "1ms", "100ms", "7", "1s", "1m", "1h", "1d", "36500d",
];

const PLAUSIBLE: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "5",
    "10",
    "100",
    "1000",
    "1s",
    "250ms",
    "1m",
    "1h",
    "1d",
    "60",
    "36500d",
    "9223372036854775807",
    "9223372036854775806",
    "4611686018427387904",
    "1000000000",
];

struct Gen {
    rng: StdRng,
    keys: Vec<Vec<u8>>,
    /// Keys CL.THROTTLE must not get: strings that are valid redis-cell
    /// state, which it may legitimately overwrite.
    cell_valid: BTreeSet<Vec<u8>>,
}

impl Gen {
    fn bytes(&mut self) -> Vec<u8> {
        let len = self.rng.gen_range(0..12);
        (0..len).map(|_| self.rng.gen()).collect()
    }

    /// One argument: mostly plausible, often hostile, sometimes random.
    fn arg(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0..=5 => PLAUSIBLE[self.rng.gen_range(0..PLAUSIBLE.len())]
                .as_bytes()
                .to_vec(),
            6 | 7 => HOSTILE[self.rng.gen_range(0..HOSTILE.len())].to_vec(),
            8 => self.rng.gen_range(0..u64::MAX).to_string().into_bytes(),
            _ => self.bytes(),
        }
    }

    fn word(&mut self) -> Vec<u8> {
        if self.rng.gen_ratio(1, 10) {
            return self.bytes();
        }
        WORDS[self.rng.gen_range(0..WORDS.len())]
            .as_bytes()
            .to_vec()
    }

    /// Mostly a key of the command's own (`name:i`); else any key of the
    /// pool: foreign, shared between commands, or oddly named.
    fn key(&mut self, name: &str) -> Vec<u8> {
        if self.rng.gen_ratio(2, 3) {
            let i = self.rng.gen_range(0..32);
            return format!("{}:{i}", name.to_ascii_lowercase()).into_bytes();
        }
        loop {
            let k = self.keys[self.rng.gen_range(0..self.keys.len())].clone();
            if !(name == "CL.THROTTLE" && self.cell_valid.contains(&k)) {
                return k;
            }
        }
    }

    /// A value for `parse`: nearly always one it accepts.
    fn value(&mut self, parse: Parse) -> Vec<u8> {
        if self.rng.gen_ratio(1, 12) {
            return self.arg();
        }
        let pool = match parse {
            Parse::Count { .. }
            | Parse::CellCount { .. }
            | Parse::CellSigned { .. }
            | Parse::Bounded { .. } => COUNTS,
            Parse::Duration { .. } => DURATIONS,
            Parse::Item { .. } => ITEMS,
        };
        pool[self.rng.gen_range(0..pool.len())].as_bytes().to_vec()
    }

    /// Arguments in the shape of `shape`'s, with its options, now and then
    /// one too few or too many, or a stray word.
    fn shaped(&mut self, shape: &Shape, cmd: &mut Vec<Vec<u8>>) {
        // RL.CHECK's policy name (now and then an undefined one first, or
        // alone), RL.POLICY SET's keyword.
        if shape.name == "RL.CHECK" && self.rng.gen_ratio(1, 8) {
            cmd.push(b"nope".to_vec());
            if self.rng.gen_ratio(1, 2) {
                cmd.push(b"OR".to_vec());
                cmd.extend(shape.infix.iter().map(|w| w.as_bytes().to_vec()));
            }
        } else {
            cmd.extend(shape.infix.iter().map(|w| w.as_bytes().to_vec()));
        }
        let mut n = shape.required + self.rng.gen_range(0..=shape.fixed.len() - shape.required);
        match self.rng.gen_range(0..40) {
            0 => n = n.saturating_sub(1),
            1 => n += 1,
            _ => {}
        }
        for i in 0..n {
            let v = match shape.fixed.get(i) {
                Some((_, parse)) => self.value(*parse),
                None => self.arg(),
            };
            cmd.push(v);
        }
        cmd.extend(shape.tail.iter().map(|w| w.as_bytes().to_vec()));
        for opt in shape.options {
            // A valid WAIT may block this one connection until the manual
            // clock moves: tests/wait.rs covers it, hostile_errors its
            // bad values.
            if opt.word == "WAIT" {
                continue;
            }
            if self.rng.gen_ratio(1, 4) {
                cmd.push(opt.word.as_bytes().to_vec());
                if let Some((parse, _)) = opt.value {
                    cmd.push(self.value(parse));
                }
            }
        }
        if self.rng.gen_ratio(1, 30) {
            cmd.push(self.word());
        }
    }

    /// `RL.ALL numkeys key... policy... [COST n] [DRYRUN]`, mostly well
    /// formed: each policy's key in its own namespace, now and then a key
    /// repeated, a foreign key, or a count that does not match.
    fn all(&mut self, cmd: &mut Vec<Vec<u8>>) {
        let n = self.rng.gen_range(1..=3usize);
        let mut numkeys = n.to_string().into_bytes();
        if self.rng.gen_ratio(1, 20) {
            numkeys = self.arg();
        }
        cmd.push(numkeys);
        // The policy of each key: GCRA, BUCKET, or a window in some mode.
        const POLICIES: &[&[&str]] = &[
            &["GCRA"],
            &["GCRA", "BURST"],
            &["BUCKET"],
            &["SLIDING"],
            &["SLIDING", "APPROX"],
            &["SLIDING", "BUCKETS"],
            &["FIXED"],
            &["FIXED", "ALIGNED"],
        ];
        let policies: Vec<&[&str]> = (0..n)
            .map(|_| POLICIES[self.rng.gen_range(0..POLICIES.len())])
            .collect();
        for p in &policies {
            let key = if self.rng.gen_ratio(1, 6) {
                self.key("RL.ALL")
            } else {
                let space = p.join("").replace("BURST", "");
                format!("all:{space}:{}", self.rng.gen_range(0..16)).into_bytes()
            };
            cmd.push(key);
        }
        let count = Parse::Count {
            name: "",
            min: 0,
            max: 0,
        };
        let duration = Parse::Duration { name: "" };
        for p in &policies {
            cmd.push(p[0].as_bytes().to_vec());
            cmd.push(self.value(count));
            if p[0] == "BUCKET" {
                cmd.push(self.value(count));
            }
            cmd.push(self.value(duration));
            if let Some(word) = p.get(1) {
                cmd.push(word.as_bytes().to_vec());
                if matches!(*word, "BURST" | "BUCKETS") {
                    cmd.push(self.value(count));
                }
            }
        }
        if self.rng.gen_ratio(1, 4) {
            cmd.push(b"COST".to_vec());
            cmd.push(self.value(count));
        }
        // A kind of charge, and one cost per key (now and then one too
        // few or too many).
        match self.rng.gen_range(0..12) {
            0 => cmd.push(b"FORCE".to_vec()),
            1 => cmd.push(b"PARTIAL".to_vec()),
            2 => {
                cmd.push(b"REFUND".to_vec());
                cmd.push(self.value(count));
            }
            3 => cmd.push(b"REFUND".to_vec()),
            _ => {}
        }
        if self.rng.gen_ratio(1, 5) {
            cmd.push(b"COSTS".to_vec());
            let given = match self.rng.gen_range(0..20) {
                0 => n.saturating_sub(1),
                1 => n + 1,
                _ => n,
            };
            for _ in 0..given {
                cmd.push(self.value(count));
            }
        }
        if self.rng.gen_ratio(1, 8) {
            cmd.push(b"DRYRUN".to_vec());
        }
        if self.rng.gen_ratio(1, 30) {
            cmd.push(self.word());
        }
    }

    /// `RL.SHARE numkeys key... node... [COST n] [DRYRUN]` (or its look,
    /// RL.SHARE.PEEK, nothing after the nodes), mostly well formed: a path
    /// of up to three nodes over keys of its own, now and then a ceiling
    /// missing, below the limit or on the root, a node too few or too
    /// many, a key repeated or foreign, or an option a path refuses.
    fn share(&mut self, look: bool, cmd: &mut Vec<Vec<u8>>) {
        let n = self.rng.gen_range(1..=3usize);
        let mut numkeys = n.to_string().into_bytes();
        if self.rng.gen_ratio(1, 20) {
            numkeys = self.arg();
        }
        cmd.push(numkeys);
        for _ in 0..n {
            let key = if self.rng.gen_ratio(1, 6) {
                self.key("RL.SHARE")
            } else {
                format!("share:{}", self.rng.gen_range(0..12)).into_bytes()
            };
            cmd.push(key);
        }
        let count = Parse::Count {
            name: "",
            min: 0,
            max: 0,
        };
        let duration = Parse::Duration { name: "" };
        let nodes = match self.rng.gen_range(0..30) {
            0 => n.saturating_sub(1),
            1 => n + 1,
            _ => n,
        };
        for i in 0..nodes {
            cmd.push(self.value(count));
            cmd.push(self.value(duration));
            if self.rng.gen_ratio(1, 4) {
                cmd.push(b"BURST".to_vec());
                cmd.push(self.value(count));
            }
            let root = i + 1 == nodes;
            if root != self.rng.gen_ratio(1, 25) {
                continue;
            }
            cmd.push(b"CEIL".to_vec());
            // Mostly at least any limit given.
            if self.rng.gen_ratio(2, 3) {
                cmd.push(b"1000000".to_vec());
            } else {
                cmd.push(self.value(count));
            }
        }
        if !look || self.rng.gen_ratio(1, 10) {
            if self.rng.gen_ratio(1, 4) {
                cmd.push(b"COST".to_vec());
                cmd.push(self.value(count));
            }
            match self.rng.gen_range(0..30) {
                0 => cmd.push(b"FORCE".to_vec()),
                1 => cmd.push(b"PARTIAL".to_vec()),
                2 => {
                    cmd.push(b"REFUND".to_vec());
                    cmd.push(self.value(count));
                }
                _ => {}
            }
            if self.rng.gen_ratio(1, 8) {
                cmd.push(b"DRYRUN".to_vec());
            }
        }
        if self.rng.gen_ratio(1, 30) {
            cmd.push(self.word());
        }
    }

    fn name(&mut self) -> &'static str {
        // RL.CLOCK rarely: it moves time for everything else.
        if self.rng.gen_ratio(1, 50) {
            return "RL.CLOCK";
        }
        NAMES[self.rng.gen_range(0..NAMES.len() - 1)]
    }

    fn command(&mut self) -> Vec<Vec<u8>> {
        let name = self.name();
        let mut name_bytes = name.as_bytes().to_vec();
        if self.rng.gen_ratio(1, 4) {
            name_bytes.make_ascii_lowercase();
        }
        let mut cmd = vec![name_bytes];
        match name {
            "RL.CLOCK" => match self.rng.gen_range(0..10) {
                0..=3 => {}
                4..=7 => {
                    cmd.push(b"ADVANCE".to_vec());
                    cmd.push(
                        self.rng
                            .gen_range(0..60_000_000u64)
                            .to_string()
                            .into_bytes(),
                    );
                }
                8 => {
                    cmd.push(b"SET".to_vec());
                    // Near the end of time now and then, then back.
                    let t = if self.rng.gen_ratio(1, 4) {
                        i64::MAX as u64 - self.rng.gen_range(0..1_000_000_000u64)
                    } else {
                        T0 + self.rng.gen_range(0..86_400_000_000u64)
                    };
                    cmd.push(t.to_string().into_bytes());
                }
                _ => {
                    for _ in 0..self.rng.gen_range(0..4) {
                        cmd.push(self.arg());
                    }
                }
            },
            "RL.ALL" if self.rng.gen_ratio(1, 10) => {
                // Anything at all after the name.
                for _ in 0..self.rng.gen_range(0..10) {
                    let w = if self.rng.gen_ratio(1, 3) {
                        self.word()
                    } else {
                        self.arg()
                    };
                    cmd.push(w);
                }
            }
            "RL.ALL" => self.all(&mut cmd),
            "RL.SHARE" => self.share(false, &mut cmd),
            "RL.SHARE.PEEK" => self.share(true, &mut cmd),
            "RL.POLICY" => {
                // One of its subcommands, shaped.
                let shapes: Vec<&Shape> = SHAPES.iter().filter(|s| s.name == name).collect();
                let shape = shapes[self.rng.gen_range(0..shapes.len())];
                cmd.extend(shape.prefix.iter().map(|w| w.as_bytes().to_vec()));
                self.shaped(shape, &mut cmd);
            }
            _ => {
                // One of the command's shapes (its modes), each mode's keys
                // apart from the others'.
                let shapes: Vec<&Shape> = SHAPES
                    .iter()
                    .filter(|s| s.name == name && s.keyed())
                    .collect();
                let shape =
                    (!shapes.is_empty()).then(|| shapes[self.rng.gen_range(0..shapes.len())]);
                let space = format!("{name}{}", shape.map_or(String::new(), |s| s.tail.join("")));
                cmd.push(self.key(&space));
                match shape {
                    Some(shape) => self.shaped(shape, &mut cmd),
                    None => {
                        for _ in 0..self.rng.gen_range(1..5) {
                            cmd.push(self.arg());
                        }
                        for _ in 0..self.rng.gen_range(0..3) {
                            cmd.push(self.word());
                        }
                    }
                }
            }
        }
        cmd
    }
}

/// What a reply must look like; counts decisions by outcome.
fn check_reply(cmd: &[Vec<u8>], reply: &Reply, tally: &mut Tally) {
    let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
    // With RESERVE the sixth field is `delay_ms`, not PARTIAL's `granted`.
    let reserving = cmd.iter().any(|w| w.eq_ignore_ascii_case(b"RESERVE"));
    match reply {
        Reply::Error(e) => {
            tally.errors += 1;
            if std::env::var("HOSTILE_DEBUG").is_ok() {
                let head: String = e.split(' ').take(4).collect::<Vec<_>>().join(" ");
                eprintln!("E {name} {head}");
            }
            assert!(
                !e.contains("internal error"),
                "caught panic: {} -> {e}",
                show(cmd)
            );
            assert!(
                e.starts_with("ERR ") || e.starts_with("WRONGTYPE "),
                "{} -> {e}",
                show(cmd)
            );
        }
        Reply::Int(_) if name == "RL.CLOCK" => {}
        // RL.POLICY: OK, a definition or digest, the names, the counts.
        Reply::Status(_) | Reply::Bulk(_) | Reply::Array(_) if name == "RL.POLICY" => {}
        Reply::Array(Some(items))
            if matches!(name.as_str(), "RL.ALL" | "RL.SHARE" | "RL.SHARE.PEEK") =>
        {
            // [allowed, blocked_by, retry_after_ms, reply_1, ..., reply_n]
            let bad = || format!("{} -> {reply:?}", show(cmd));
            assert!(items.len() >= 4, "{}", bad());
            let (allowed, blocked_by, retry) = (items[0].int(), items[1].int(), items[2].int());
            let limits = &items[3..];
            assert!(allowed == 0 || allowed == 1, "{}", bad());
            assert!(
                blocked_by >= -1 && blocked_by < limits.len() as i64,
                "{}",
                bad()
            );
            assert_eq!(allowed == 1, blocked_by == -1, "{}", bad());
            assert!(retry >= -1 && (allowed == 0 || retry == -1), "{}", bad());
            for one in limits {
                let f = one.ints();
                check_decision(&f, false, reserving, &bad);
                match f.get(5) {
                    // RESERVE: every limit says the call's delay, -1 when
                    // the call is denied.
                    Some(&delay) if reserving => assert_eq!(delay >= 0, allowed == 1, "{}", bad()),
                    // PARTIAL: the call is admitted exactly when it grants.
                    Some(&granted) => assert_eq!(granted >= 1, allowed == 1, "{}", bad()),
                    None => {}
                }
            }
            // RL.ALL admits when every limit does; a path when its leaf
            // does (a node may admit on its assured rate below a spent
            // parent).
            let deciding = if name == "RL.ALL" {
                limits
            } else {
                &limits[..1]
            };
            if allowed == 1 {
                assert!(deciding.iter().all(|l| l.ints()[0] == 1), "{}", bad());
            } else {
                let blocking = limits[blocked_by as usize].ints();
                assert_eq!(blocking[0], 0, "{}", bad());
                // The blocking limit is the one that decides the wait.
                assert_eq!(blocking[3], retry, "{}", bad());
            }
            tally.allowed += usize::from(allowed == 1);
            tally.denied += usize::from(allowed == 0);
        }
        Reply::Array(Some(_)) if name != "RL.CLOCK" => {
            let f = reply.ints();
            let cell = name == "CL.THROTTLE";
            check_decision(&f, cell, reserving, &|| format!("{} -> {f:?}", show(cmd)));
            match f.get(5) {
                Some(&delay) if reserving => {
                    assert_eq!(delay >= 0, f[0] == 1, "{} -> {f:?}", show(cmd))
                }
                Some(&granted) => assert_eq!(granted >= 1, f[0] == 1, "{} -> {f:?}", show(cmd)),
                None => {}
            }
            let admitted = if cell { f[0] == 0 } else { f[0] == 1 };
            tally.allowed += usize::from(admitted);
            tally.denied += usize::from(!admitted);
        }
        other => panic!("{} -> unexpected {other:?}", show(cmd)),
    }
}

/// The invariants of one decision reply: five fields, and a sixth,
/// `granted`, after PARTIAL (at least 1 when admitted, 0 when denied), or
/// `delay_ms` with RESERVE (-1 when denied).
fn check_decision(f: &[i64], cell: bool, reserving: bool, context: &dyn Fn() -> String) {
    assert!(f.len() == 5 || (f.len() == 6 && !cell), "{}", context());
    if let (Some(&delay), true) = (f.get(5), reserving) {
        assert!(delay >= -1, "{}", context());
    } else if let Some(&granted) = f.get(5) {
        // (In RL.ALL a limit may admit the unit that another denies.)
        assert!(granted >= 0 && (granted == 0 || f[0] == 1), "{}", context());
    }
    // [allowed, limit, remaining, retry_after_ms, reset_after_ms], or for
    // CL.THROTTLE [limited, limit, remaining, retry_s, reset_s]. redis-cell
    // divides whole microseconds, truncated, so an interval of 1.999 µs
    // counts as 1 µs: its remaining stays below 2 × limit.
    let most = if cell { 2 * f[1] - 1 } else { f[1] };
    let ok = (f[0] == 0 || f[0] == 1)
        && f[1] >= 1
        && f[2] >= 0
        && f[2] <= most
        && f[3] >= -1
        && f[4] >= 0;
    assert!(ok, "{}", context());
    let admitted = if cell { f[0] == 0 } else { f[0] == 1 };
    assert!(!admitted || f[3] == -1, "{}", context());
}

#[derive(Default, Debug)]
struct Tally {
    errors: usize,
    allowed: usize,
    denied: usize,
}

#[test]
fn random_commands_never_crash_corrupt_or_leak() {
    let seed: u64 = std::env::var("HOSTILE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0007);
    eprintln!("HOSTILE_SEED={seed}");
    let mut server = Server::with(common::Config::default().with_policies());
    let mut c = Raw::connect(server.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    define_named(&mut c);

    // Foreign keys: those no command may write (not valid state for any).
    let mut foreign = Vec::new();
    let mut cell_valid = BTreeSet::new();
    for key in create_foreign(&mut c) {
        let value = match c.ok(&[&b"TYPE"[..], &key]) {
            Reply::Status(t) if t == "string" => c.ok(&[&b"GET"[..], &key]).bulk(),
            _ => None,
        };
        let valid_for = |state| {
            value
                .as_ref()
                .is_some_and(|v| expected_state_error(state, v).is_none())
        };
        let tagged_valid = SHAPES
            .iter()
            .any(|s| matches!(s.state, State::Tagged { .. }) && valid_for(s.state));
        if tagged_valid {
            c.ok(&[&b"DEL"[..], &key]);
            continue;
        }
        if valid_for(State::Cell) {
            cell_valid.insert(key.clone());
        }
        foreign.push(key);
    }
    // Limiter keys, some not UTF-8, one empty.
    let mut keys = foreign.clone();
    for i in 0..16 {
        keys.push(format!("rl:{i}").into_bytes());
    }
    keys.extend([b"\xff\xfe".to_vec(), b"".to_vec(), b"k\r\n\x00".to_vec()]);
    let foreign_set: BTreeSet<Vec<u8>> = foreign.iter().cloned().collect();
    let foreign_before: BTreeMap<_, _> = snapshot(&mut c)
        .into_iter()
        .filter(|(k, _)| foreign_set.contains(k))
        .collect();

    let mut gen = Gen {
        rng: StdRng::seed_from_u64(seed),
        keys,
        cell_valid,
    };
    let mut tally = Tally::default();
    let started = std::time::Instant::now();
    for _ in 0..COMMANDS / BATCH {
        let batch: Vec<Vec<Vec<u8>>> = (0..BATCH).map(|_| gen.command()).collect();
        for cmd in &batch {
            c.send(cmd);
        }
        for cmd in &batch {
            let reply = c.read();
            check_reply(cmd, &reply, &mut tally);
        }
    }
    eprintln!("{COMMANDS} commands in {:?}: {tally:?}", started.elapsed());

    assert!(c.ping() && server.alive(), "server died");
    let after = snapshot(&mut c);
    let foreign_after: BTreeMap<_, _> = after
        .iter()
        .filter(|(k, _)| foreign_set.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(
        changed(&foreign_before, &foreign_after),
        Vec::<String>::new(),
        "foreign keys changed (seed {seed})"
    );
    // Every other key was written by the module: a string with a TTL.
    let mut limiter_keys = 0;
    for key in after.keys().filter(|k| !foreign_set.contains(*k)) {
        // PTTL and TYPE in one transaction: the key cannot expire between
        // the two (it could between two separate commands).
        let replies = c.atomically(&[&[&b"PTTL"[..], key], &[&b"TYPE"[..], key]]);
        let [ttl, kind] = &replies[..] else {
            panic!("EXEC: {replies:?}");
        };
        // -1 is a key without a TTL; 0 one that expires this millisecond,
        // -2 one that expired since the snapshot.
        let ttl = ttl.int();
        assert!(ttl != -1, "{} has no TTL", key.escape_ascii());
        if ttl >= 0 {
            assert_eq!(*kind, Reply::Status("string".into()));
            limiter_keys += 1;
        } else {
            assert_eq!(*kind, Reply::Status("none".into()));
        }
    }
    eprintln!("{limiter_keys} limiter keys, all with a TTL");
    // Enough of each answer that the run exercised both paths.
    assert!(tally.errors > COMMANDS / 10, "{tally:?}");
    assert!(tally.allowed > 2_500, "{tally:?}");
    assert!(tally.denied > 2_500, "{tally:?}");
}
