//! Shared by the hostile-input tests: a raw RESP client (arguments and
//! command names are arbitrary bytes), database snapshots, and the table of
//! command shapes that every hostile test derives its cases from. Covering a
//! new command is one more entry in [`SHAPES`].
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::TcpStream;
use std::time::Duration;

/// i64::MAX: the largest count any command takes.
pub const MAX: u64 = i64::MAX as u64;

/// A fixed manual-clock time the hostile tests start from (2026-01-01).
pub const T0: u64 = 1_767_225_600_000_000;

// ---------------------------------------------------------------- RESP client

/// One RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    pub fn error(&self) -> Option<&str> {
        match self {
            Reply::Error(e) => Some(e),
            _ => None,
        }
    }

    pub fn int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            other => panic!("expected an integer, got {other:?}"),
        }
    }

    /// The integers of a decision (a concurrency limit's lease, a bulk
    /// string or nil after them, is left out).
    pub fn ints(&self) -> Vec<i64> {
        match self {
            Reply::Array(Some(items)) => items
                .iter()
                .filter(|r| !matches!(r, Reply::Bulk(_)))
                .map(Reply::int)
                .collect(),
            other => panic!("expected an array of integers, got {other:?}"),
        }
    }

    pub fn bulk(&self) -> Option<Vec<u8>> {
        match self {
            Reply::Bulk(b) => b.clone(),
            other => panic!("expected a bulk string, got {other:?}"),
        }
    }
}

/// A connection that sends commands as raw bytes and reads RESP2 replies.
pub struct Raw {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Raw {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: BufWriter::with_capacity(1 << 16, stream),
        }
    }

    /// Queues one command (sent on the next flush or read).
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        let w = &mut self.writer;
        write!(w, "*{}\r\n", args.len()).expect("write");
        for a in args {
            let a = a.as_ref();
            write!(w, "${}\r\n", a.len()).expect("write");
            w.write_all(a).expect("write");
            w.write_all(b"\r\n").expect("write");
        }
    }

    pub fn flush(&mut self) {
        self.writer.flush().expect("flush");
    }

    pub fn read(&mut self) -> Reply {
        self.flush();
        read_reply(&mut self.reader)
    }

    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        self.send(args);
        self.read()
    }

    /// A command that must succeed.
    pub fn ok<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        let r = self.call(args);
        if let Reply::Error(e) = &r {
            panic!("{:?}: {e}", show(args));
        }
        r
    }

    /// The commands in one MULTI/EXEC, their replies in order. While EXEC
    /// runs the server judges key expiry at one fixed time, so no key
    /// expires on the wall clock between two of the commands.
    pub fn atomically<A: AsRef<[u8]>>(&mut self, commands: &[&[A]]) -> Vec<Reply> {
        self.send(&["MULTI"]);
        for args in commands {
            self.send(args);
        }
        self.send(&["EXEC"]);
        assert_eq!(self.read(), Reply::Status("OK".into()), "MULTI");
        for args in commands {
            let queued = self.read();
            assert_eq!(queued, Reply::Status("QUEUED".into()), "{}", show(args));
        }
        match self.read() {
            Reply::Array(Some(replies)) => replies,
            other => panic!("EXEC: {other:?}"),
        }
    }

    /// The server's wall clock (what key expiry runs on), in milliseconds.
    pub fn server_ms(&mut self) -> i64 {
        match self.ok(&["TIME"]) {
            Reply::Array(Some(t)) => {
                let part = |r: &Reply| -> i64 {
                    let digits = r.bulk().expect("TIME");
                    String::from_utf8_lossy(&digits).parse().expect("TIME")
                };
                part(&t[0]) * 1000 + part(&t[1]) / 1000
            }
            other => panic!("TIME: {other:?}"),
        }
    }

    pub fn ping(&mut self) -> bool {
        self.call(&["PING"]) == Reply::Status("PONG".into())
    }
}

fn read_line(r: &mut impl BufRead) -> Vec<u8> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).expect("read reply");
    assert!(line.ends_with(b"\r\n"), "truncated reply line {line:?}");
    line.truncate(line.len() - 2);
    line
}

fn read_reply(r: &mut impl BufRead) -> Reply {
    let line = read_line(r);
    let (kind, rest) = line.split_first().expect("empty reply line");
    let text = String::from_utf8_lossy(rest).into_owned();
    let int = || text.parse::<i64>().expect("integer in reply");
    match kind {
        b'+' => Reply::Status(text),
        b'-' => Reply::Error(text),
        b':' => Reply::Int(int()),
        b'$' if int() < 0 => Reply::Bulk(None),
        b'$' => {
            let mut buf = vec![0; int() as usize + 2];
            r.read_exact(&mut buf).expect("bulk");
            buf.truncate(buf.len() - 2);
            Reply::Bulk(Some(buf))
        }
        b'*' if int() < 0 => Reply::Array(None),
        b'*' => Reply::Array(Some((0..int()).map(|_| read_reply(r)).collect())),
        _ => panic!("unexpected reply line {line:?}"),
    }
}

/// Arguments for messages: UTF-8 where they are, escaped bytes where not.
pub fn show<A: AsRef<[u8]>>(args: &[A]) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().escape_ascii().to_string())
        .collect();
    words.join(" ")
}

// ------------------------------------------------------------------ snapshots

/// Every key with its `DUMP` (type and value, exactly) and `PEXPIRETIME`
/// (absolute, so it does not move while the test runs).
pub type Snapshot = BTreeMap<Vec<u8>, (Option<Vec<u8>>, i64)>;

pub fn snapshot(c: &mut Raw) -> Snapshot {
    let keys = match c.ok(&["KEYS", "*"]) {
        Reply::Array(Some(keys)) => keys,
        other => panic!("KEYS: {other:?}"),
    };
    let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.bulk().expect("key")).collect();
    for k in &keys {
        c.send(&[&b"DUMP"[..], k]);
        c.send(&[&b"PEXPIRETIME"[..], k]);
    }
    keys.into_iter()
        .map(|k| {
            let dump = c.read().bulk();
            let at = c.read().int();
            (k, (dump, at))
        })
        .collect()
}

/// The keys whose type, value or expiry differ between two snapshots.
pub fn changed(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut keys: Vec<&Vec<u8>> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| k.escape_ascii().to_string())
        .collect()
}

// ------------------------------------------------------------- command shapes

/// How one argument is parsed, which decides what a hostile value gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parse {
    /// Decimal digits only, in `min..=max`.
    Count {
        name: &'static str,
        min: u64,
        max: u64,
    },
    /// As `Count` from `min` to `i64::MAX`, and at most `max`, the default
    /// of the operator bound `ratelimit.SETTING`.
    Bounded {
        name: &'static str,
        min: u64,
        max: u64,
        setting: &'static str,
    },
    /// As `Count`, read as redis-cell reads it (CL.THROTTLE): optionally
    /// after one `+`, or `-` and zeros.
    CellCount {
        name: &'static str,
        min: u64,
        max: u64,
    },
    /// From `-max` to `max`, read as redis-cell reads it (CL.THROTTLE's
    /// `quantity`): `CellCount`'s forms, or `-` before digits.
    CellSigned { name: &'static str, max: u64 },
    /// A positive integer with an optional unit ms, s, m, h or d.
    Duration { name: &'static str },
    /// Any bytes at all, the empty string included (RL.SKETCH's item).
    Item { name: &'static str },
}

/// An option: a keyword with a value, or a flag.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    pub word: &'static str,
    /// How its value parses and a valid value; `None` for a flag.
    pub value: Option<(Parse, &'static str)>,
    /// A mode keyword: at most one of a command's modes in a call.
    pub mode: bool,
}

/// What a command does with words after its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// `ERR syntax error: unknown option '<word>'`
    UnknownOption,
    /// `ERR wrong number of arguments ...`
    Arity,
}

/// The state a command keeps in its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// A tagged value (first byte `tag`), named `name` in errors, with
    /// values under its tag that are not its layout.
    Tagged {
        tag: u8,
        name: &'static str,
        corrupt: &'static [&'static [u8]],
    },
    /// A named policy's: read as the `Tagged` state of its algorithm,
    /// but another algorithm's state restarts (no error), and GCRA and
    /// BUCKET read each other's (corrupt ones are corrupt).
    Named {
        tag: u8,
        name: &'static str,
        corrupt: &'static [&'static [u8]],
    },
    /// CL.THROTTLE's decimal nanoseconds.
    Cell,
    /// No key.
    NoKey,
}

/// One way of calling a command: its valid arguments and how each parses.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// The command as sent.
    pub name: &'static str,
    /// How Redis and the module name it in arity errors.
    pub arity_name: &'static str,
    /// Words right after the name (RL.CLOCK's subcommand, RL.ALL's numkeys).
    pub prefix: &'static [&'static str],
    /// Words between the key and the fixed arguments (RL.ALL's policy name).
    pub infix: &'static [&'static str],
    /// Valid fixed arguments after the key (or prefix), each with its parse.
    pub fixed: &'static [(&'static str, Parse)],
    /// How many of `fixed` must be given.
    pub required: usize,
    /// Redis's minimum argument count (name included): shorter calls get
    /// Redis's own arity error.
    pub min_arity: usize,
    /// What the module answers when enough arguments for Redis are still
    /// too few for the command.
    pub short: Option<&'static str>,
    /// Valid words after the fixed arguments (a mode keyword).
    pub tail: &'static [&'static str],
    pub options: &'static [Opt],
    pub extra: Extra,
    pub state: State,
}

pub const fn count(name: &'static str, min: u64, max: u64) -> Parse {
    Parse::Count { name, min, max }
}

const fn bounded(name: &'static str, min: u64, max: u64, setting: &'static str) -> Parse {
    Parse::Bounded {
        name,
        min,
        max,
        setting,
    }
}

const fn cell_count(name: &'static str, min: u64, max: u64) -> Parse {
    Parse::CellCount { name, min, max }
}

const fn duration(name: &'static str) -> Parse {
    Parse::Duration { name }
}

const fn item(name: &'static str) -> Parse {
    Parse::Item { name }
}

const fn flag(word: &'static str) -> Opt {
    Opt {
        word,
        value: None,
        mode: false,
    }
}

const fn valued(word: &'static str, parse: Parse, valid: &'static str) -> Opt {
    Opt {
        word,
        value: Some((parse, valid)),
        mode: false,
    }
}

const fn mode(opt: Opt) -> Opt {
    Opt { mode: true, ..opt }
}

/// RL.SLIDING's modes, as options of a call that names none.
const SLIDING_MODES: [Opt; 3] = [
    mode(flag("EXACT")),
    mode(flag("APPROX")),
    mode(valued("BUCKETS", count("BUCKETS", 2, 1024), "4")),
];

const COST: Opt = valued("COST", count("COST", 0, MAX), "1");
const DRYRUN: Opt = flag("DRYRUN");
/// What kind of charge: one of them at most (their own mode group).
const CHARGES: [Opt; 3] = [
    mode(flag("FORCE")),
    mode(flag("PARTIAL")),
    mode(valued("REFUND", count("REFUND", 1, MAX), "1")),
];

/// `WAIT`'s valid value is the shortest: a denied call in a hostile test
/// almost never fits its wait in 1 ms, so it is denied at once.
const WAIT: Opt = valued("WAIT", duration("WAIT"), "1ms");
/// The flow a `WAIT` waits in (any name), and its weight.
const FLOW: Opt = valued("FLOW", item("FLOW"), "tenant");
const WEIGHT: Opt = valued("WEIGHT", count("WEIGHT", 1, 1_000), "1");
/// A reservation's longest delay, and a denial's wait spread.
const RESERVE: Opt = valued("RESERVE", duration("RESERVE"), "1ms");
const JITTER: Opt = flag("JITTER");
/// The penalty box's two forms (one or the other), at their shortest.
const PENALTY: [Opt; 2] = [
    mode(valued("BLOCK", duration("BLOCK"), "1ms")),
    mode(valued("COUNTDENIALS", duration("COUNTDENIALS"), "1ms")),
];

/// Values under a schedule tag that are not the TAT layout: too short, an
/// improper or zero fraction, a truncated or overlong varint, trailing bytes.
macro_rules! tat_corrupt {
    ($t:expr) => {
        &[
            &[$t],
            &[$t, 1, 2, 3],
            &[$t, 0, 0, 0, 0, 0, 0, 0],
            &[$t, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3],
            &[$t, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3],
            &[$t, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            &[$t, 0, 0, 0, 0, 0, 0, 0, 0, 0x81],
            &[$t, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 9],
            &[
                $t, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                0x7f, 2,
            ],
        ]
    };
}

/// Values under RL.SHARE's tag that are not its layout: no TAT, a short
/// one, a fraction missing, improper or zero, a second TAT cut short, and
/// three TATs.
const SHARE_CORRUPT: &[&[u8]] = &[
    &[0xAD],
    &[0xAD, 1, 2, 3],
    &[0xAD, 0, 0, 0, 0, 0, 0, 0, 0],
    &[0xAD, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3],
    &[0xAD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3],
    &[0xAD, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    &[0xAD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0],
    &[
        0xAD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 1,
    ],
];

// Values under each window tag that are not its layout: short headers,
// impossible widths, counts and positions, missing or extra bytes. The
// sliding log's are under its first layout's tag (0xA3), read as its
// current one's (0xAB), and under the current one.
const EXACT_CORRUPT: &[&[u8]] = &[
    &[0xAB],
    &[
        0xAB, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[0xA3],
    &[
        0xA3, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA3, 0x03, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA3, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA3, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA3, 0x04, 0x80, 0x84, 0x1E, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA3, 0x04, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA3, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA3, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA3, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03,
    ],
    &[
        0xA3, 0x04, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
];

const APPROX_CORRUPT: &[&[u8]] = &[
    &[0xA4],
    &[0xA4, 0x01, 0x02],
    &[0xA4, 0x01, 0x02, 0x03, 0x04],
    &[0xA4, 0x01, 0x02, 0x80],
    &[
        0xA4, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x01, 0x01,
    ],
];

const BUCKETS_CORRUPT: &[&[u8]] = &[
    &[0xA5],
    &[
        0xA5, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA5, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA5, 0x01, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA5, 0x02, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA5, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
    &[
        0xA5, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00,
    ],
    &[
        0xA5, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ],
];

const FIXED_CORRUPT: &[&[u8]] = &[
    &[0xA6],
    &[0xA6, 0x01],
    &[0xA6, 0x01, 0x02, 0x03],
    &[0xA6, 0x01, 0x80],
    &[
        0xA6, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x01,
    ],
];

const FIXED_ALIGNED_CORRUPT: &[&[u8]] = &[
    &[0xA7],
    &[0xA7, 0x01],
    &[0xA7, 0x01, 0x02, 0x03],
    &[0xA7, 0x01, 0x80],
    &[
        0xA7, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x01,
    ],
];

/// An RL.SKETCH value of `N` bytes: the header (as far as it fits), then
/// zeros.
const fn sketch_value<const N: usize>(depth: u8, width: u32, window: u64, sweep: u32) -> [u8; N] {
    let mut head = [0u8; 26];
    head[0] = 0xA8;
    head[1] = depth;
    let (w, t, s) = (
        width.to_le_bytes(),
        window.to_le_bytes(),
        sweep.to_le_bytes(),
    );
    let mut i = 0;
    while i < 8 {
        if i < 4 {
            head[2 + i] = w[i];
            head[22 + i] = s[i];
        }
        head[6 + i] = t[i];
        i += 1;
    }
    let mut v = [0u8; N];
    let mut i = 0;
    while i < N && i < 26 {
        v[i] = head[i];
        i += 1;
    }
    v
}

/// Values under the sketch tag that are not its layout: a short header,
/// depth, width, window or sweep out of range, a byte missing or extra.
const SKETCH_CORRUPT: &[&[u8]] = &[
    &[0xA8],
    &sketch_value::<25>(1, 1, 1_000_000, 0),
    &sketch_value::<38>(0, 1, 1_000_000, 0),
    &sketch_value::<134>(9, 1, 1_000_000, 0),
    &sketch_value::<26>(1, 0, 1_000_000, 0),
    &sketch_value::<38>(1, 1, 0, 0),
    &sketch_value::<38>(1, 1, 1_000_000, 1),
    &sketch_value::<37>(1, 1, 1_000_000, 0),
    &sketch_value::<39>(1, 1, 1_000_000, 0),
    &sketch_value::<26>(1, 262_145, 1_000_000, 0),
];

/// Values under the lease tag that are not its layout: a short header, a
/// zero counter, a partial slot, more slots than any limit allows.
const LEASES_CORRUPT: &[&[u8]] = &[
    &[0xA9],
    &[0xA9, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0],
    &[0xA9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    &[
        0xA9, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3,
    ],
    &[0xAA],
    // Layout v2: lease counter 0; then a root beyond the slots; then a
    // header and part of a slot.
    &[
        0xAA, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0,
    ],
    &[
        0xAA, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
        0, 0, 0, 0,
    ],
    &[
        0xAA, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 1, 2, 3,
    ],
];

/// RL.ACQUIRE's state, directly or through RL.ALL.
const LEASES: State = State::Tagged {
    tag: 0xAA,
    name: "RL.ACQUIRE",
    corrupt: LEASES_CORRUPT,
};

/// The named policies the shapes name (the module loaded with `policies
/// on`): `h:gcra` decides as RL.GCRA's shape; `h:set` is the one RL.POLICY
/// SET's shape redefines.
pub const NAMED: &[(&str, &[&str])] = &[
    ("h:gcra", &["GCRA", "10", "1d"]),
    ("h:set", &["GCRA", "10", "1d"]),
];

/// Defines [`NAMED`] on a server loaded with `policies on`.
pub fn define_named(c: &mut Raw) {
    for (name, definition) in NAMED {
        let mut args = vec!["RL.POLICY", "SET", name];
        args.extend_from_slice(definition);
        c.ok(&args);
    }
}

const POLICY_NAME: &[(&str, Parse)] = &[("h:gcra", item("name"))];

/// `RL.POLICY GET|DEL|STATS name`: the name any bytes, undefined an error.
const fn policy_name(sub: &'static str) -> Shape {
    Shape {
        name: "RL.POLICY",
        arity_name: match sub.as_bytes() {
            b"GET" => "rl.policy|get",
            b"DEL" => "rl.policy|del",
            _ => "rl.policy|stats",
        },
        prefix: match sub.as_bytes() {
            b"GET" => &["GET"],
            b"DEL" => &["DEL"],
            _ => &["STATS"],
        },
        infix: &[],
        fixed: POLICY_NAME,
        required: 1,
        min_arity: 3,
        short: None,
        tail: &[],
        options: &[],
        extra: Extra::Arity,
        state: State::NoKey,
    }
}

/// Every command the module has, in every mode, with valid arguments.
/// The clock shapes assume the manual clock stands at [`T0`].
pub const SHAPES: &[Shape] = &[
    Shape {
        name: "RL.GCRA",
        arity_name: "rl.gcra",
        prefix: &[],
        infix: &[],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("period"))],
        required: 2,
        min_arity: 4,
        short: None,
        tail: &[],
        options: &[
            valued("BURST", count("BURST", 1, MAX), "10"),
            COST,
            DRYRUN,
            WAIT,
            FLOW,
            WEIGHT,
            CHARGES[0],
            CHARGES[1],
            CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA1,
            name: "RL.GCRA",
            corrupt: tat_corrupt!(0xA1),
        },
    },
    Shape {
        name: "RL.BUCKET",
        arity_name: "rl.bucket",
        prefix: &[],
        infix: &[],
        fixed: &[
            ("10", count("capacity", 1, MAX)),
            ("1", count("refill", 1, MAX)),
            ("1d", duration("period")),
        ],
        required: 3,
        min_arity: 5,
        short: None,
        tail: &[],
        options: &[
            COST, DRYRUN, WAIT, FLOW, WEIGHT, CHARGES[0], CHARGES[1], CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA2,
            name: "RL.BUCKET",
            corrupt: tat_corrupt!(0xA2),
        },
    },
    Shape {
        name: "CL.THROTTLE",
        arity_name: "cl.throttle",
        prefix: &[],
        infix: &[],
        fixed: &[
            ("5", cell_count("max_burst", 0, MAX - 1)),
            ("10", cell_count("count per period", 1, MAX)),
            ("86400", cell_count("period", 1, 36_500 * 86_400)),
            ("1", Parse::CellSigned { name: "quantity", max: MAX }),
        ],
        required: 3,
        min_arity: 5,
        short: None,
        tail: &[],
        options: &[],
        extra: Extra::Arity,
        state: State::Cell,
    },
    Shape {
        name: "RL.CLOCK",
        arity_name: "rl.clock",
        prefix: &["SET"],
        infix: &[],
        fixed: &[("1767225600000000", count("microseconds", 0, MAX))],
        required: 1,
        min_arity: 1,
        short: None,
        tail: &[],
        options: &[],
        extra: Extra::Arity,
        state: State::NoKey,
    },
    Shape {
        name: "RL.CLOCK",
        arity_name: "rl.clock",
        prefix: &["ADVANCE"],
        infix: &[],
        fixed: &[("0", count("microseconds", 0, MAX - T0))],
        required: 1,
        min_arity: 1,
        short: None,
        tail: &[],
        options: &[],
        extra: Extra::Arity,
        state: State::NoKey,
    },
    Shape {
        name: "RL.ALL",
        arity_name: "rl.all",
        prefix: &["1"],
        infix: &["GCRA"],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("period"))],
        required: 2,
        min_arity: 5,
        short: Some("ERR syntax error: the policy is GCRA limit period [BURST n]"),
        tail: &[],
        options: &[
            valued("BURST", count("BURST", 1, MAX), "10"),
            COST,
            DRYRUN,
            WAIT,
            FLOW,
            WEIGHT,
            CHARGES[0],
            CHARGES[1],
            CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA1,
            name: "RL.GCRA",
            corrupt: tat_corrupt!(0xA1),
        },
    },
    Shape {
        name: "RL.ALL",
        arity_name: "rl.all",
        prefix: &["1"],
        infix: &["BUCKET"],
        fixed: &[
            ("10", count("capacity", 1, MAX)),
            ("1", count("refill", 1, MAX)),
            ("1d", duration("period")),
        ],
        required: 3,
        min_arity: 5,
        short: Some("ERR syntax error: the policy is BUCKET capacity refill period"),
        tail: &[],
        options: &[
            COST, DRYRUN, WAIT, FLOW, WEIGHT, CHARGES[0], CHARGES[1], CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA2,
            name: "RL.BUCKET",
            corrupt: tat_corrupt!(0xA2),
        },
    },
    Shape {
        name: "RL.SLIDING",
        arity_name: "rl.sliding",
        prefix: &[],
        infix: &[],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("window"))],
        required: 2,
        min_arity: 4,
        short: None,
        tail: &[],
        options: &[
            SLIDING_MODES[0],
            SLIDING_MODES[1],
            SLIDING_MODES[2],
            COST,
            DRYRUN,
            WAIT,
            FLOW,
            WEIGHT,
            CHARGES[0],
            CHARGES[1],
            CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xAB,
            name: "RL.SLIDING EXACT",
            corrupt: EXACT_CORRUPT,
        },
    },
    Shape {
        name: "RL.SLIDING",
        arity_name: "rl.sliding",
        prefix: &[],
        infix: &[],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("window"))],
        required: 2,
        min_arity: 4,
        short: None,
        tail: &["APPROX"],
        options: &[
            COST, DRYRUN, WAIT, FLOW, WEIGHT, CHARGES[0], CHARGES[1], CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA4,
            name: "RL.SLIDING APPROX",
            corrupt: APPROX_CORRUPT,
        },
    },
    Shape {
        name: "RL.SLIDING",
        arity_name: "rl.sliding",
        prefix: &[],
        infix: &[],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("window"))],
        required: 2,
        min_arity: 4,
        short: None,
        tail: &["BUCKETS", "4"],
        options: &[
            COST, DRYRUN, WAIT, FLOW, WEIGHT, CHARGES[0], CHARGES[1], CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA5,
            name: "RL.SLIDING BUCKETS",
            corrupt: BUCKETS_CORRUPT,
        },
    },
    Shape {
        name: "RL.FIXED",
        arity_name: "rl.fixed",
        prefix: &[],
        infix: &[],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("window"))],
        required: 2,
        min_arity: 4,
        short: None,
        tail: &[],
        options: &[
            flag("ALIGNED"),
            COST,
            DRYRUN,
            WAIT,
            FLOW,
            WEIGHT,
            CHARGES[0],
            CHARGES[1],
            CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA6,
            name: "RL.FIXED",
            corrupt: FIXED_CORRUPT,
        },
    },
    Shape {
        name: "RL.FIXED",
        arity_name: "rl.fixed",
        prefix: &[],
        infix: &[],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("window"))],
        required: 2,
        min_arity: 4,
        short: None,
        tail: &["ALIGNED"],
        options: &[
            COST, DRYRUN, WAIT, FLOW, WEIGHT, CHARGES[0], CHARGES[1], CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA7,
            name: "RL.FIXED ALIGNED",
            corrupt: FIXED_ALIGNED_CORRUPT,
        },
    },
    Shape {
        name: "RL.ALL",
        arity_name: "rl.all",
        prefix: &["1"],
        infix: &["SLIDING"],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("window"))],
        required: 2,
        min_arity: 5,
        short: Some(
            "ERR syntax error: the policy is SLIDING limit window [EXACT | APPROX | BUCKETS n]",
        ),
        tail: &[],
        options: &[
            SLIDING_MODES[0],
            SLIDING_MODES[1],
            SLIDING_MODES[2],
            COST,
            DRYRUN,
            WAIT,
            FLOW,
            WEIGHT,
            CHARGES[0],
            CHARGES[1],
            CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xAB,
            name: "RL.SLIDING EXACT",
            corrupt: EXACT_CORRUPT,
        },
    },
    Shape {
        name: "RL.ALL",
        arity_name: "rl.all",
        prefix: &["1"],
        infix: &["SLIDING"],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("window"))],
        required: 2,
        min_arity: 5,
        short: Some(
            "ERR syntax error: the policy is SLIDING limit window [EXACT | APPROX | BUCKETS n]",
        ),
        tail: &["BUCKETS", "4"],
        options: &[
            COST, DRYRUN, WAIT, FLOW, WEIGHT, CHARGES[0], CHARGES[1], CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA5,
            name: "RL.SLIDING BUCKETS",
            corrupt: BUCKETS_CORRUPT,
        },
    },
    Shape {
        name: "RL.ALL",
        arity_name: "rl.all",
        prefix: &["1"],
        infix: &["FIXED"],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("window"))],
        required: 2,
        min_arity: 5,
        short: Some("ERR syntax error: the policy is FIXED limit window [ALIGNED]"),
        tail: &[],
        options: &[
            flag("ALIGNED"),
            COST,
            DRYRUN,
            WAIT,
            FLOW,
            WEIGHT,
            CHARGES[0],
            CHARGES[1],
            CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA6,
            name: "RL.FIXED",
            corrupt: FIXED_CORRUPT,
        },
    },
    Shape {
        name: "RL.PEEK",
        arity_name: "rl.peek",
        prefix: &[],
        infix: &["GCRA"],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("period"))],
        required: 2,
        min_arity: 4,
        short: Some("ERR syntax error: the policy is GCRA limit period [BURST n]"),
        tail: &[],
        options: &[
            valued("BURST", count("BURST", 1, MAX), "10"),
        ],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA1,
            name: "RL.GCRA",
            corrupt: tat_corrupt!(0xA1),
        },
    },
    Shape {
        name: "RL.PEEK",
        arity_name: "rl.peek",
        prefix: &[],
        infix: &["SLIDING"],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("window"))],
        required: 2,
        min_arity: 4,
        short: Some(
            "ERR syntax error: the policy is SLIDING limit window [EXACT | APPROX | BUCKETS n]",
        ),
        tail: &["APPROX"],
        options: &[],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA4,
            name: "RL.SLIDING APPROX",
            corrupt: APPROX_CORRUPT,
        },
    },
    Shape {
        name: "RL.PEEK",
        arity_name: "rl.peek",
        prefix: &[],
        infix: &["FIXED"],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("window"))],
        required: 2,
        min_arity: 4,
        short: Some("ERR syntax error: the policy is FIXED limit window [ALIGNED]"),
        tail: &[],
        options: &[flag("ALIGNED")],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA6,
            name: "RL.FIXED",
            corrupt: FIXED_CORRUPT,
        },
    },
    Shape {
        name: "RL.SKETCH",
        arity_name: "rl.sketch",
        prefix: &[],
        infix: &[],
        fixed: &[
            ("198.51.100.7", item("item")),
            ("10", count("limit", 1, u32::MAX as u64)),
            ("1d", duration("window")),
        ],
        required: 3,
        min_arity: 5,
        short: None,
        tail: &[],
        options: &[
            valued("WIDTH", count("WIDTH", 1, 262_144), "64"),
            valued("DEPTH", count("DEPTH", 1, 8), "2"),
            COST,
            DRYRUN,
            // PARTIAL alone: RL.SKETCH refuses FORCE, REFUND and WAIT.
            CHARGES[1], JITTER,],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xA8,
            name: "RL.SKETCH",
            corrupt: SKETCH_CORRUPT,
        },
    },
    Shape {
        name: "RL.ACQUIRE",
        arity_name: "rl.acquire",
        prefix: &[],
        infix: &[],
        fixed: &[
            ("10", bounded("limit", 1, 100_000, "max-leases-per-key")),
            ("1d", duration("ttl")),
        ],
        required: 2,
        min_arity: 4,
        short: None,
        tail: &[],
        options: &[COST, DRYRUN, WAIT, FLOW, WEIGHT, JITTER,],
        extra: Extra::UnknownOption,
        state: LEASES,
    },
    Shape {
        name: "RL.ALL",
        arity_name: "rl.all",
        prefix: &["1"],
        infix: &["CONCURRENCY"],
        fixed: &[
            ("10", bounded("limit", 1, 100_000, "max-leases-per-key")),
            ("1d", duration("ttl")),
        ],
        required: 2,
        min_arity: 5,
        short: Some("ERR syntax error: the policy is CONCURRENCY limit ttl"),
        tail: &[],
        options: &[COST, DRYRUN, WAIT, FLOW, WEIGHT, JITTER,],
        extra: Extra::UnknownOption,
        state: LEASES,
    },
    // Named policies (the module loaded with `policies on`, [`NAMED`]
    // defined).
    Shape {
        name: "RL.CHECK",
        arity_name: "rl.check",
        prefix: &[],
        infix: &["h:gcra"],
        fixed: &[],
        required: 0,
        min_arity: 3,
        short: None,
        tail: &[],
        options: &[
            COST, DRYRUN, WAIT, FLOW, WEIGHT, CHARGES[0], CHARGES[1], CHARGES[2], RESERVE, JITTER, PENALTY[0], PENALTY[1],],
        extra: Extra::UnknownOption,
        state: State::Named {
            tag: 0xA1,
            name: "RL.GCRA",
            corrupt: tat_corrupt!(0xA1),
        },
    },
    // RL.SHARE: the key under test is the leaf of a path of two; the root
    // and the leaf's ceiling (high enough for any valid limit) follow as
    // fixed words.
    Shape {
        name: "RL.SHARE",
        arity_name: "rl.share",
        prefix: &["2"],
        infix: &["rl:share:root"],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("period"))],
        required: 2,
        min_arity: 5,
        short: Some(
            "ERR syntax error: the policy is NODE limit period [BURST n] [CEIL n] [CBURST n] [MAXDEBT n]",
        ),
        tail: &["CEIL", "9223372036854775807", "CBURST", "10", "100", "1d"],
        options: &[
            valued("BURST", count("BURST", 1, MAX), "10"),
            valued("MAXDEBT", duration("MAXDEBT"), "1s"),
            COST,
            DRYRUN,
            WAIT,
            FLOW,
            WEIGHT, RESERVE, JITTER,],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xAD,
            name: "RL.SHARE",
            corrupt: SHARE_CORRUPT,
        },
    },
    // RL.SHARE.PEEK: RL.SHARE's path, nothing after it.
    Shape {
        name: "RL.SHARE.PEEK",
        arity_name: "rl.share.peek",
        prefix: &["2"],
        infix: &["rl:share:root"],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("period"))],
        required: 2,
        min_arity: 5,
        short: Some(
            "ERR syntax error: the policy is NODE limit period [BURST n] [CEIL n] [CBURST n] [MAXDEBT n]",
        ),
        tail: &["CEIL", "9223372036854775807", "CBURST", "10", "100", "1d"],
        options: &[
            valued("BURST", count("BURST", 1, MAX), "10"),
            valued("MAXDEBT", duration("MAXDEBT"), "1s"),
        ],
        extra: Extra::UnknownOption,
        state: State::Tagged {
            tag: 0xAD,
            name: "RL.SHARE",
            corrupt: SHARE_CORRUPT,
        },
    },
    Shape {
        name: "RL.POLICY",
        arity_name: "rl.policy|set",
        prefix: &["SET", "h:set"],
        infix: &["GCRA"],
        fixed: &[("10", count("limit", 1, MAX)), ("1d", duration("period"))],
        required: 2,
        min_arity: 5,
        short: Some("ERR syntax error: the policy is GCRA limit period [BURST n]"),
        tail: &[],
        options: &[
            valued("BURST", count("BURST", 1, MAX), "10"),
        ],
        extra: Extra::UnknownOption,
        state: State::NoKey,
    },
    policy_name("GET"),
    policy_name("DEL"),
    policy_name("STATS"),
    Shape {
        name: "RL.POLICY",
        arity_name: "rl.policy|list",
        prefix: &["LIST"],
        infix: &[],
        fixed: &[],
        required: 0,
        min_arity: 2,
        short: None,
        tail: &[],
        options: &[valued("MATCH", item("MATCH"), "h:*")],
        extra: Extra::UnknownOption,
        state: State::NoKey,
    },
    Shape {
        name: "RL.POLICY",
        arity_name: "rl.policy|digest",
        prefix: &["DIGEST"],
        infix: &[],
        fixed: &[],
        required: 0,
        min_arity: 2,
        short: None,
        tail: &[],
        options: &[],
        extra: Extra::Arity,
        state: State::NoKey,
    },
];

/// The state kinds by tag, as errors name them.
pub const TAGS: &[(u8, &str)] = &[
    (0xA1, "RL.GCRA"),
    (0xA2, "RL.BUCKET"),
    (0xAE, "RL.GCRA"),
    (0xAF, "RL.BUCKET"),
    (0xA3, "RL.SLIDING EXACT"),
    (0xAB, "RL.SLIDING EXACT"),
    (0xA4, "RL.SLIDING APPROX"),
    (0xA5, "RL.SLIDING BUCKETS"),
    (0xA6, "RL.FIXED"),
    (0xA7, "RL.FIXED ALIGNED"),
    (0xA8, "RL.SKETCH"),
    (0xA9, "RL.ACQUIRE"),
    (0xAA, "RL.ACQUIRE"),
    (0xAD, "RL.SHARE"),
];

impl Shape {
    /// Whether the command takes several keys (`numkeys` first) and
    /// answers RL.ALL's combined reply, its errors naming the key.
    pub fn combined(&self) -> bool {
        matches!(self.name, "RL.ALL" | "RL.SHARE" | "RL.SHARE.PEEK")
    }

    pub fn keyed(&self) -> bool {
        self.state != State::NoKey
    }

    /// The command with `key` (ignored without one), `fixed` arguments and
    /// then `rest`.
    pub fn args(&self, key: &[u8], fixed: &[Vec<u8>], rest: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut v = vec![self.name.as_bytes().to_vec()];
        v.extend(self.prefix.iter().map(|w| w.as_bytes().to_vec()));
        if self.keyed() {
            v.push(key.to_vec());
        }
        v.extend(self.infix.iter().map(|w| w.as_bytes().to_vec()));
        v.extend(fixed.iter().cloned());
        v.extend(self.tail.iter().map(|w| w.as_bytes().to_vec()));
        v.extend(rest.iter().cloned());
        v
    }

    /// The valid fixed arguments.
    pub fn valid_fixed(&self) -> Vec<Vec<u8>> {
        self.fixed
            .iter()
            .map(|(v, _)| v.as_bytes().to_vec())
            .collect()
    }

    /// A valid call on `key`.
    pub fn valid(&self, key: &[u8]) -> Vec<Vec<u8>> {
        self.args(key, &self.valid_fixed(), &[])
    }

    pub fn arity_error(&self) -> String {
        format!(
            "ERR wrong number of arguments for '{}' command",
            self.arity_name
        )
    }
}

// ------------------------------------------------------- expected messages

/// How a value reads as a count: `None` if not decimal digits only,
/// otherwise its value (saturated at u128::MAX).
fn reference_number(v: &[u8]) -> Option<u128> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u128, |acc, &d| {
        acc.saturating_mul(10).saturating_add(u128::from(d - b'0'))
    }))
}

/// The error `parse` gives `v`; `None` when `v` is valid for it.
pub fn expected_error(parse: Parse, v: &[u8]) -> Option<String> {
    match parse {
        Parse::Item { .. } => None,
        Parse::Count { name, min, max } => match reference_number(v) {
            Some(n) if n >= u128::from(min) && n <= u128::from(max) => None,
            _ => Some(format!("ERR {name} must be an integer from {min} to {max}")),
        },
        Parse::Bounded {
            name,
            min,
            max,
            setting,
        } => match reference_number(v) {
            Some(n) if n >= u128::from(min) && n <= u128::from(max) => None,
            Some(n) if n >= u128::from(min) && n <= i64::MAX as u128 => Some(format!(
                "ERR {name} must be at most {max} (ratelimit.{setting})"
            )),
            _ => Some(format!(
                "ERR {name} must be an integer from {min} to {}",
                i64::MAX
            )),
        },
        Parse::CellCount { name, min, max } => {
            let unsigned = match v {
                [b'+', rest @ ..] => rest,
                [b'-', rest @ ..] if reference_number(rest) == Some(0) => rest,
                [b'-', ..] => b"-",
                _ => v,
            };
            expected_error(Parse::Count { name, min, max }, unsigned)
        }
        Parse::CellSigned { name, max } => {
            let magnitude = match v {
                [b'-', rest @ ..] => rest,
                [b'+', rest @ ..] => rest,
                _ => v,
            };
            match reference_number(magnitude) {
                Some(n) if n <= u128::from(max) => None,
                _ => Some(format!(
                    "ERR {name} must be an integer from -{max} to {max}"
                )),
            }
        }
        Parse::Duration { name } => {
            let split = v
                .iter()
                .position(|b| !b.is_ascii_digit())
                .unwrap_or(v.len());
            let (number, unit) = v.split_at(split);
            let ms: u128 = match unit.to_ascii_lowercase().as_slice() {
                b"" | b"s" => 1_000,
                b"ms" => 1,
                b"m" => 60_000,
                b"h" => 3_600_000,
                b"d" => 86_400_000,
                _ => 0,
            };
            let bad = format!(
                "ERR {name} must be a positive integer with an optional unit ms, s, m, h or d"
            );
            match reference_number(number) {
                _ if ms == 0 => Some(bad),
                None | Some(0) => Some(bad),
                Some(n) if n.saturating_mul(ms) > 36_500 * 86_400_000 => {
                    Some(format!("ERR {name} must be at most 36500d"))
                }
                Some(_) => None,
            }
        }
    }
}

/// The module's rendering of a client word in an error: at most 32 bytes,
/// anything but printable ASCII (or a space) as `?`, and `...` after a
/// longer word.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub fn printable(bytes: &[u8]) -> String {
    let shown = bytes.iter().take(32).map(|&b| {
        if b.is_ascii_graphic() || b == b' ' {
            b as char
        } else {
            '?'
        }
    });
    let more = if bytes.len() > 32 { "..." } else { "" };
    shown.collect::<String>() + more
}

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// How RL.ALL words an error about its key at `position` (1-based).
pub fn in_key(message: &str, position: usize) -> String {
    match message.strip_prefix("WRONGTYPE Operation against a key ") {
        Some(rest) => format!("WRONGTYPE Operation against key {position} {rest}"),
        None => message.replacen(" key ", &format!(" key {position} "), 1),
    }
}

/// What a command of `state` answers on a string key holding `value`;
/// `None` when the value is valid state for it.
pub fn expected_state_error(state: State, value: &[u8]) -> Option<String> {
    let other = TAGS.iter().find(|(t, _)| value.first() == Some(t));
    match state {
        State::NoKey => None,
        State::Tagged { tag, name, corrupt } => match other {
            Some((t, _)) if *t == tag => corrupt
                .contains(&value)
                .then(|| format!("ERR key holds corrupt {name} state")),
            // RL.FIXED ALIGNED reads RL.FIXED's 0xA6 values of earlier
            // versions: corrupt ones are reported as such; others are
            // taken if they start on a boundary (tests/upgrade.rs).
            // The sliding log's first layout (0xA3) is read as its current one.
            Some((0xA3, found)) if tag == 0xAB => EXACT_CORRUPT
                .contains(&value)
                .then(|| format!("ERR key holds corrupt {found} state")),
            Some((0xA6, found)) if tag == 0xA7 => FIXED_CORRUPT
                .contains(&value)
                .then(|| format!("ERR key holds corrupt {found} state")),
            // GCRA and BUCKET read their layout that records the pace
            // (0xAE, 0xAF: written by named policies).
            Some((0xAE, _)) if tag == 0xA1 => {
                (!paced_ok(value)).then(|| format!("ERR key holds corrupt {name} state"))
            }
            Some((0xAF, _)) if tag == 0xA2 => {
                (!paced_ok(value)).then(|| format!("ERR key holds corrupt {name} state"))
            }
            // RL.ACQUIRE reads its earlier layout (0xA9) and converts it.
            Some((0xA9, _)) if tag == 0xAA => corrupt
                .contains(&value)
                .then(|| format!("ERR key holds corrupt {name} state")),
            Some((_, found)) => Some(format!(
                "WRONGTYPE key holds {found} state, not {name} state"
            )),
            None => Some(format!(
                "WRONGTYPE key holds a string that is not {name} state"
            )),
        },
        State::Named { tag, name, corrupt } => {
            let tagged = State::Tagged { tag, name, corrupt };
            match other {
                // Its own algorithm's state (either layout): as tagged.
                Some((t, _)) if *t == tag || *t == tag + 0x0D => {
                    expected_state_error(tagged, value)
                }
                // The other schedule's: carried, unless corrupt.
                Some((t @ (0xA1 | 0xA2 | 0xAE | 0xAF), found)) => {
                    let readable = if *t >= 0xAE {
                        paced_ok(value)
                    } else {
                        let rest = &value[1..];
                        rest.len() == 8 || tat_v1_fraction_ok(rest)
                    };
                    (!readable).then(|| format!("ERR key holds corrupt {found} state"))
                }
                // Another algorithm's: the key restarts.
                Some(_) => None,
                None => expected_state_error(tagged, value),
            }
        }
        State::Cell => match other {
            Some((_, found)) => Some(format!(
                "WRONGTYPE key holds {found} state, not CL.THROTTLE state"
            )),
            None if reference_number(value).is_some_and(|n| n <= u128::from(MAX)) => None,
            None => Some("WRONGTYPE key holds a string that is not CL.THROTTLE state".into()),
        },
    }
}

/// Whether `value` (tag 0xAE or 0xAF) is a well-formed paced schedule
/// state: tag, 8 bytes, varints interval and den (both non-zero), and an
/// optional fraction below den.
fn paced_ok(value: &[u8]) -> bool {
    fn varint(b: &[u8]) -> Option<(u64, &[u8])> {
        let mut x: u64 = 0;
        for (i, &byte) in b.iter().enumerate().take(10) {
            let bits = u64::from(byte & 0x7f);
            if i == 9 && bits > 1 {
                return None;
            }
            x |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Some((x, &b[i + 1..]));
            }
        }
        None
    }
    let Some(rest) = value.get(9..) else {
        return false;
    };
    let Some((interval, rest)) = varint(rest) else {
        return false;
    };
    let Some((den, rest)) = varint(rest) else {
        return false;
    };
    if interval == 0 || den == 0 {
        return false;
    }
    match varint(rest) {
        None => rest.is_empty(),
        Some((frac, tail)) => tail.is_empty() && frac != 0 && frac < den,
    }
}

/// Whether `rest` (a v1 schedule state after its tag) is 8 bytes and a
/// proper non-zero fraction as two varints.
fn tat_v1_fraction_ok(rest: &[u8]) -> bool {
    let mut paced = vec![0xAEu8];
    // The same checks as a paced state with interval 1 and the fraction's
    // denominator: 8 bytes, then num and den (den written first there).
    let Some(tail) = rest.get(8..) else {
        return false;
    };
    let mut parts = Vec::new();
    let mut b = tail;
    while !b.is_empty() {
        let Some(end) = b.iter().position(|x| x & 0x80 == 0) else {
            return false;
        };
        if end >= 10 {
            return false;
        }
        parts.push(&b[..=end]);
        b = &b[end + 1..];
    }
    let [num, den] = parts[..] else {
        return false;
    };
    paced.extend_from_slice(&rest[..8]);
    paced.push(1);
    paced.extend_from_slice(den);
    paced.extend_from_slice(num);
    paced_ok(&paced)
}

/// Argument values every position gets, valid or not.
pub const HOSTILE: &[&[u8]] = &[
    b"",
    b"abc",
    b"-1",
    b"0",
    b"00",
    b"1.5",
    b"1,5",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999999999999999999999",
    b"99999999999d",
    b"36501d",
    b"36500d",
    b"1w",
    b"1y",
    b"1sec",
    b"1S",
    b"1MS",
    b"1 s",
    b" 1",
    b"1 ",
    b"+1",
    b"+0",
    b"-0",
    b"-00",
    b"++1",
    b"+-0",
    b"+",
    b"-",
    b"1e3",
    b"0x10",
    b"inf",
    b"NaN",
    b"\xff\xfe",
    b"1\x00",
    b"\x001",
    b"1\r\n",
    b"\xd9\xa1",
    b"\xef\xbc\x91",
    b"1ms5",
    b"ms",
    b"COST",
    b"DRYRUN",
];

/// Foreign keys: every Redis type and strings this module did not write.
/// Each is created by the commands given; half of them get a TTL.
pub fn foreign_fixture() -> Vec<(Vec<u8>, Vec<Vec<u8>>)> {
    let cmd = |words: &[&[u8]]| -> Vec<Vec<u8>> { words.iter().map(|w| w.to_vec()).collect() };
    let mut keys = vec![
        (b"f:list".to_vec(), cmd(&[b"RPUSH", b"f:list", b"a", b"b"])),
        (b"f:hash".to_vec(), cmd(&[b"HSET", b"f:hash", b"f", b"v"])),
        (b"f:set".to_vec(), cmd(&[b"SADD", b"f:set", b"m"])),
        (b"f:zset".to_vec(), cmd(&[b"ZADD", b"f:zset", b"1", b"m"])),
        (
            b"f:stream".to_vec(),
            cmd(&[b"XADD", b"f:stream", b"*", b"f", b"v"]),
        ),
    ];
    let strings: &[&[u8]] = &[
        b"hello",
        b"12345",
        b"-5",
        b"",
        b"1.5",
        b"99999999999999999999",
        b"9223372036854775807",
        b"\xff\xfe\x00",
        b"\xa0\x01",
        b"\xb0",
        b"\xb1\x00\x00\x00\x00\x00\x00\x00\x00",
        b"\xa8\x00\x00\x00\x00\x00\x00\x00\x00",
    ];
    for (i, v) in strings.iter().enumerate() {
        let key = format!("f:str{i}").into_bytes();
        keys.push((key.clone(), cmd(&[b"SET", &key, v])));
    }
    for (tag, _) in TAGS {
        let key = format!("f:tag{tag:x}").into_bytes();
        let mut v = vec![*tag];
        v.extend_from_slice(&T0.to_le_bytes());
        keys.push((key.clone(), cmd(&[b"SET", &key, &v])));
    }
    keys
}

/// Creates the foreign fixture, TTLs on every other key.
pub fn create_foreign(c: &mut Raw) -> Vec<Vec<u8>> {
    let mut names = Vec::new();
    for (i, (key, create)) in foreign_fixture().into_iter().enumerate() {
        c.ok(&create);
        if i % 2 == 0 {
            c.ok(&[&b"PEXPIRE"[..], &key, b"100000000"]);
        }
        names.push(key);
    }
    names
}
