//! `make demo`: replays classic traffic traces against every algorithm on a
//! real server with the manual clock, prints what each admitted and when,
//! and draws, for each trace, which requests each algorithm admitted.
//!
//! ```sh
//! cargo run --example demo -- [--module PATH] [--url redis://...] [--out docs/demo.svg]
//! ```
//!
//! Without `--url` it starts its own `redis-server` on a free loopback port
//! with the module (default `target/release/libredis_ratelimit.so`) loaded
//! with `clock manual`. With `--url` the server must have been started that
//! way. Every limit is "10 per 10 seconds" in its own words.

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MS: u64 = 1_000;
pub const SECOND: u64 = 1_000_000;
/// 2026-01-01T00:00:00Z: a multiple of every window, so ALIGNED windows
/// start at t = 0, 10 s, 20 s, ... of each trace.
pub const T0: u64 = 1_767_225_600 * SECOND;

/// One limiter: its label and its command after the key.
pub struct Algorithm {
    pub label: &'static str,
    pub command: &'static str,
    pub args: &'static str,
}

/// The rows of each panel of the chart, in this order.
pub const ALGORITHMS: &[Algorithm] = &[
    Algorithm {
        label: "FIXED ALIGNED",
        command: "RL.FIXED",
        args: "10 10s ALIGNED",
    },
    Algorithm {
        label: "FIXED",
        command: "RL.FIXED",
        args: "10 10s",
    },
    Algorithm {
        label: "SLIDING EXACT",
        command: "RL.SLIDING",
        args: "10 10s EXACT",
    },
    Algorithm {
        label: "SLIDING BUCKETS 5",
        command: "RL.SLIDING",
        args: "10 10s BUCKETS 5",
    },
    Algorithm {
        label: "SLIDING APPROX",
        command: "RL.SLIDING",
        args: "10 10s APPROX",
    },
    Algorithm {
        label: "GCRA",
        command: "RL.GCRA",
        args: "10 10s",
    },
    Algorithm {
        label: "BUCKET (= GCRA)",
        command: "RL.BUCKET",
        args: "10 1 1s",
    },
];

/// A trace: request times in microseconds from its start.
pub struct Trace {
    pub title: &'static str,
    about: &'static str,
    length_s: u64,
    /// Where to draw a dotted vertical line (a window boundary), seconds.
    mark_s: Option<u64>,
    pub times_us: Vec<u64>,
}

/// `n` requests evenly spaced from `start_ms`, `every_ms` apart.
fn train(start_ms: u64, every_ms: u64, n: u64) -> impl Iterator<Item = u64> {
    (0..n).map(move |i| (start_ms + i * every_ms) * MS)
}

pub fn traces() -> Vec<Trace> {
    vec![
        Trace {
            title: "A burst that straddles a window boundary",
            about: "20 requests, 100 ms apart, from 9.0 s to 10.9 s",
            length_s: 30,
            mark_s: Some(10),
            times_us: train(9_000, 100, 20).collect(),
        },
        Trace {
            title: "A burst after a long idle",
            about: "1/s for 10 s, quiet until 40 s, 40 requests in 1 s, then 2/s",
            length_s: 70,
            mark_s: None,
            times_us: train(0, 1_000, 10)
                .chain(train(40_000, 25, 40))
                .chain(train(41_000, 500, 58))
                .collect(),
        },
        Trace {
            title: "Steady overload",
            about: "4 requests per second from 2.5 s on (4 times the limit)",
            length_s: 60,
            mark_s: None,
            times_us: train(2_500, 250, 230).collect(),
        },
    ]
}

/// What one algorithm did with one trace.
pub struct Run {
    pub admitted_us: Vec<u64>,
}

/// A `redis-server` this program started; stopped on drop.
struct OwnServer {
    child: Child,
    dir: PathBuf,
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_server(module: &str) -> Result<(OwnServer, String), String> {
    // Absolute: redis-server changes into its --dir before loading modules.
    let module = std::fs::canonicalize(module).map_err(|e| {
        format!(
            "module not found at {module} ({e}): run `cargo build --release` (or pass --module)"
        )
    })?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let dir = std::env::temp_dir().join(format!("rl-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    // RL_SERVER picks another binary, as in the tests (valkey-server).
    let binary = std::env::var("RL_SERVER").unwrap_or("redis-server".into());
    let child = Command::new(&binary)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(&dir)
        .arg("--loadmodule")
        .arg(&module)
        .args(["clock", "manual"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {binary}: {e}"))?;
    let server = OwnServer { child, dir };
    let url = format!("redis://127.0.0.1:{port}/");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(mut c) = redis::Client::open(url.as_str()).and_then(|c| c.get_connection()) {
            if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                return Ok((server, url));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err("redis-server did not answer within 20 s".into())
}

/// Replays `trace` against `alg` on its own key and its own stretch of the
/// manual clock, in one transaction: the server expires keys on its real
/// clock (the manual one moves only the limits' time), and during EXEC no
/// key expires between two requests, however slow the machine. `None` when
/// the server does not have the command.
pub fn replay(
    c: &mut redis::Connection,
    trace: &Trace,
    alg: &Algorithm,
    base_us: u64,
    key: &str,
) -> Result<Option<Run>, String> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for &t in &trace.times_us {
        pipe.cmd("RL.CLOCK").arg("SET").arg(base_us + t).ignore();
        pipe.cmd(alg.command)
            .arg(key)
            .arg(alg.args.split_whitespace().collect::<Vec<_>>());
    }
    let reply: redis::RedisResult<Vec<Vec<i64>>> = pipe.query(c);
    match reply {
        Ok(decisions) => {
            let admitted_us = trace
                .times_us
                .iter()
                .zip(decisions)
                .filter(|(_, fields)| fields.first() == Some(&1))
                .map(|(&t, _)| t)
                .collect();
            Ok(Some(Run { admitted_us }))
        }
        // A command this build lacks (or has only as a placeholder).
        Err(e)
            if e.to_string().contains("unknown command")
                || e.to_string().contains("not implemented") =>
        {
            Ok(None)
        }
        Err(e) => Err(format!("{} {key}: {e}", alg.command)),
    }
}

/// Admitted requests per second as one character each: `.` none, `1`-`9`,
/// `+` more.
fn per_second(admitted_us: &[u64], length_s: u64) -> String {
    let mut counts = vec![0u32; length_s as usize];
    for &t in admitted_us {
        if let Some(c) = counts.get_mut((t / SECOND) as usize) {
            *c += 1;
        }
    }
    counts
        .iter()
        .map(|&n| match n {
            0 => '.',
            1..=9 => char::from_digit(n, 10).unwrap_or('?'),
            _ => '+',
        })
        .collect()
}

fn report(trace: &Trace, runs: &[(&Algorithm, Run)]) -> String {
    let mut out = String::new();
    let offered = trace.times_us.len();
    let _ = writeln!(
        out,
        "\n{} — {} ({offered} offered)",
        trace.title, trace.about
    );
    let ruler: String = (0..trace.length_s)
        .map(|s| if s % 10 == 0 { '|' } else { ' ' })
        .collect();
    let _ = writeln!(
        out,
        "  {:<28} {:>8}  {}",
        "limit: 10 per 10 s", "admitted", ruler
    );
    for (alg, run) in runs {
        let _ = writeln!(
            out,
            "  {:<28} {:>8}  {}",
            format!("{} {}", alg.command, alg.args),
            run.admitted_us.len(),
            per_second(&run.admitted_us, trace.length_s)
        );
    }
    out
}

// ---- the chart ----
//
// Small multiples: a panel per trace, a row per algorithm. Every offered
// request is a light tick in every row and each admitted one a dark tick
// over it, so the rows compare request by request. The time axis shows only
// where requests are: a quiet stretch longer than `QUIET_S` is cut out.

const WIDTH: f64 = 900.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 80.0;
const TOP: f64 = 66.0;
const ROW_H: f64 = 20.0;
const ROW_GAP: f64 = 5.0;
/// Title, subtitle and axis of a panel, and the space after it.
const PANEL_EXTRA: f64 = 100.0 + RATE_H + ROW_GAP;
/// The offered load's row: requests per second as bars.
const RATE_H: f64 = 30.0;
/// Width of the cut where a quiet stretch was left out.
const CUT_W: f64 = 24.0;
const QUIET_S: f64 = 10.0;
const OFFERED: &str = "#c8c8c8";
const ADMITTED: &str = "#1f5fa8";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn secs(t_us: u64) -> f64 {
    t_us as f64 / SECOND as f64
}

/// The stretches of time shown, in seconds: the requests grouped where they
/// are less than `QUIET_S` apart, each padded by half a second, in whole
/// half-seconds, within the trace.
fn segments(trace: &Trace) -> Vec<(f64, f64)> {
    let mut groups: Vec<(f64, f64)> = Vec::new();
    for t in trace.times_us.iter().map(|&t| secs(t)) {
        match groups.last_mut() {
            Some(g) if t - g.1 < QUIET_S => g.1 = t,
            _ => groups.push((t, t)),
        }
    }
    let half = |s: f64, round: fn(f64) -> f64| round(s * 2.0) / 2.0;
    groups
        .into_iter()
        .map(|(a, b)| {
            (
                half(a - 0.5, f64::floor).max(0.0),
                half(b + 0.5, f64::ceil).min(trace.length_s as f64),
            )
        })
        .collect()
}

/// Maps seconds to x over the shown segments.
struct Axis {
    segments: Vec<(f64, f64)>,
    px_per_s: f64,
}

impl Axis {
    fn new(segments: Vec<(f64, f64)>) -> Axis {
        let shown: f64 = segments.iter().map(|(a, b)| b - a).sum();
        let cuts = segments.len().saturating_sub(1) as f64 * CUT_W;
        let px_per_s = (WIDTH - LEFT - RIGHT - cuts) / shown.max(0.5);
        Axis { segments, px_per_s }
    }

    /// x of `s`; `None` in a cut.
    fn x(&self, s: f64) -> Option<f64> {
        let mut left = LEFT;
        for &(a, b) in &self.segments {
            if s >= a && s <= b {
                return Some(left + (s - a) * self.px_per_s);
            }
            left += (b - a) * self.px_per_s + CUT_W;
        }
        None
    }

    /// A tick every 0.5, 1, 2, 5 or 10 s: the finest at least 45 px apart.
    fn tick_step(&self) -> f64 {
        [0.5, 1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .find(|s| s * self.px_per_s >= 45.0)
            .unwrap_or(20.0)
    }

    fn end(&self) -> f64 {
        self.segments
            .last()
            .and_then(|&(_, b)| self.x(b))
            .unwrap_or(LEFT)
    }
}

/// Vertical ticks, one per time, in one path.
fn ticks(times_us: &[u64], axis: &Axis, top: f64, height: f64) -> String {
    let mut d = String::new();
    for &t in times_us {
        if let Some(x) = axis.x(secs(t)) {
            let _ = write!(d, "M{x:.1},{top:.1}v{height}");
        }
    }
    d
}

fn fmt_s(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// The offered load: a bar per second of the trace, as tall as the
/// requests in it, on the panel's own scale (its peak written at the end).
fn rate_row(svg: &mut String, top: f64, trace: &Trace, axis: &Axis) {
    let mut per_s = vec![0usize; trace.length_s as usize + 1];
    for &t in &trace.times_us {
        if let Some(n) = per_s.get_mut((t / SECOND) as usize) {
            *n += 1;
        }
    }
    let peak = per_s.iter().copied().max().unwrap_or(0).max(1);
    let mut d = String::new();
    for (s, &n) in per_s.iter().enumerate().filter(|(_, &n)| n > 0) {
        // The part of this second that is shown.
        let (a, b) = (s as f64, s as f64 + 1.0);
        for &(lo, hi) in &axis.segments {
            let (x0, x1) = (axis.x(a.max(lo)), axis.x(b.min(hi)));
            if let (Some(x0), Some(x1), true) = (x0, x1, a.max(lo) < b.min(hi)) {
                let h = n as f64 / peak as f64 * RATE_H;
                let _ = write!(
                    d,
                    "M{x0:.1},{:.1}H{:.1}V{:.1}H{x0:.1}Z",
                    top + RATE_H,
                    x1 - 0.5,
                    top + RATE_H - h
                );
            }
        }
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" class="label" text-anchor="end">offered / s</text><path d="{d}" class="rate"/><text x="{:.1}" y="{:.1}" class="count">peak {peak}/s</text>"#,
        LEFT - 10.0,
        top + RATE_H / 2.0 + 4.0,
        axis.end() + 10.0,
        top + 10.0
    );
}

fn panel(svg: &mut String, top: f64, trace: &Trace, runs: &[(&Algorithm, Run)]) {
    let axis = Axis::new(segments(trace));
    let offered = trace.times_us.len();
    let _ = writeln!(
        svg,
        r#"<text x="12" y="{:.1}" class="title">{}</text><text x="12" y="{:.1}" class="about">{} — {offered} offered</text>"#,
        top - 26.0,
        esc(trace.title),
        top - 10.0,
        esc(trace.about)
    );
    let rows_h = RATE_H + runs.len() as f64 * (ROW_H + ROW_GAP);
    let bottom = top + rows_h;
    // Time grid, window boundaries, and cuts.
    let step = axis.tick_step();
    for &(a, b) in &axis.segments {
        let mut s = (a / step).ceil() * step;
        while s <= b + 1e-9 {
            if let Some(x) = axis.x(s) {
                let class = if s % 10.0 == 0.0 { "window" } else { "grid" };
                let _ = writeln!(
                    svg,
                    r#"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" class="{class}"/><text x="{x:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
                    top - 3.0,
                    bottom + 3.0,
                    bottom + 16.0,
                    fmt_s(s)
                );
            }
            s += step;
        }
    }
    for pair in axis.segments.windows(2) {
        if let Some(x) = axis.x(pair[0].1) {
            let (cx, cy) = (x + CUT_W / 2.0 + 4.0, top + rows_h / 2.0);
            let _ = writeln!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" class="cut"/><text x="{cx:.1}" y="{cy:.1}" class="tick" text-anchor="middle" transform="rotate(-90 {cx:.1} {cy:.1})">{} quiet</text>"#,
                x + 4.0,
                top - 3.0,
                CUT_W - 8.0,
                rows_h + 6.0,
                fmt_s(pair[1].0 - pair[0].1)
            );
        }
    }
    if let Some(x) = trace.mark_s.and_then(|m| axis.x(m as f64)) {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="mark">window boundary</text>"#,
            x + 4.0,
            top - 6.0
        );
    }
    rate_row(svg, top, trace, &axis);
    // One row per algorithm: offered requests light, admitted ones dark.
    for (i, (alg, run)) in runs.iter().enumerate() {
        let y = top + RATE_H + ROW_GAP + i as f64 * (ROW_H + ROW_GAP);
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="label" text-anchor="end">{}</text>"#,
            LEFT - 10.0,
            y + ROW_H / 2.0 + 4.0,
            esc(alg.label)
        );
        let _ = writeln!(
            svg,
            r#"<path d="{}" class="offered"/>"#,
            ticks(&trace.times_us, &axis, y + ROW_H * 0.25, ROW_H * 0.5)
        );
        let _ = writeln!(
            svg,
            r#"<path d="{}" class="admitted"/>"#,
            ticks(&run.admitted_us, &axis, y, ROW_H)
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="count">{} of {offered}</text>"#,
            axis.end() + 10.0,
            y + ROW_H / 2.0 + 4.0,
            run.admitted_us.len()
        );
    }
}

pub fn chart(results: &[(Trace, Vec<(&Algorithm, Run)>)]) -> String {
    let panel_h = |runs: usize| runs as f64 * (ROW_H + ROW_GAP) + PANEL_EXTRA;
    let height = TOP + results.iter().map(|(_, r)| panel_h(r.len())).sum::<f64>();
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif">
<style>
.title {{ font-size: 15px; font-weight: bold; fill: #222; }}
.about, .tick, .label, .count, .legend, .mark {{ font-size: 11px; fill: #444; }}
.label {{ font-size: 12px; fill: #222; }}
.mark {{ fill: #b35806; }}
.grid {{ stroke: #ececec; stroke-width: 1; }}
.window {{ stroke: #b35806; stroke-width: 1; stroke-dasharray: 2 3; }}
.cut {{ fill: #f4f4f4; stroke: #bbb; stroke-dasharray: 3 2; }}
.offered {{ stroke: {OFFERED}; stroke-width: 1.2; fill: none; }}
.rate {{ fill: #9a9a9a; stroke: none; }}
.admitted {{ stroke: {ADMITTED}; stroke-width: 1.6; fill: none; }}
</style>
<rect width="100%" height="100%" fill="white"/>
<text x="12" y="22" class="title">Which requests each limiter admits: limit "10 per 10 s", manual clock</text>
<path d="M14,36v12" class="admitted"/><text x="22" y="46" class="legend">admitted</text>
<path d="M86,39v6" class="offered"/><text x="94" y="46" class="legend">refused (every offered request is a light tick)</text>
<line x1="370" x2="370" y1="35" y2="49" class="window"/><text x="376" y="46" class="legend">10 s window boundaries (ALIGNED)</text>"#
    );
    let mut top = TOP;
    for (trace, runs) in results {
        panel(&mut svg, top + 40.0, trace, runs);
        top += panel_h(runs.len());
    }
    svg.push_str("</svg>\n");
    svg
}

struct Options {
    module: String,
    url: Option<String>,
    out: PathBuf,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        module: "target/release/libredis_ratelimit.so".into(),
        url: None,
        out: PathBuf::from("docs/demo.svg"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--module" => o.module = value()?,
            "--url" => o.url = Some(value()?),
            "--out" => o.out = PathBuf::from(value()?),
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    Ok(o)
}

fn main() -> Result<(), String> {
    let opts = options()?;
    let (_server, url) = match &opts.url {
        Some(url) => (None, url.clone()),
        None => {
            let (s, url) = start_server(&opts.module)?;
            (Some(s), url)
        }
    };
    let mut c = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    for (ti, trace) in traces().into_iter().enumerate() {
        let mut runs = Vec::new();
        for (ai, alg) in ALGORITHMS.iter().enumerate() {
            // Each run gets its own day of the manual clock and its own key.
            let base = T0 + (ti * ALGORITHMS.len() + ai) as u64 * 86_400 * SECOND;
            let key = format!("demo:{ti}:{ai}");
            match replay(&mut c, &trace, alg, base, &key)? {
                Some(run) => runs.push((alg, run)),
                None if !skipped.contains(&alg.command) => skipped.push(alg.command),
                None => {}
            }
        }
        print!("{}", report(&trace, &runs));
        results.push((trace, runs));
    }
    if !skipped.is_empty() {
        println!(
            "\n(not in this build of the module: {})",
            skipped.join(", ")
        );
    }
    if let Some(dir) = opts.out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    std::fs::write(&opts.out, chart(&results)).map_err(|e| e.to_string())?;
    println!(
        "\nOne character per second: admitted requests in that second ('.' none, '+' ten or more).\nChart: {}",
        opts.out.display()
    );
    Ok(())
}
