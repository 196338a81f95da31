//! `make demo`: replays classic traffic traces against every algorithm on a
//! real server with the manual clock, prints what each admitted and when,
//! and draws the admitted requests over time as an SVG chart.
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
    color: &'static str,
    width: f64,
    dashed: bool,
}

/// Drawn in this order, each line narrower than the one before, so that
/// algorithms that admit the same requests show as stripes of one cable.
pub const ALGORITHMS: &[Algorithm] = &[
    Algorithm {
        label: "FIXED ALIGNED",
        command: "RL.FIXED",
        args: "10 10s ALIGNED",
        color: "#fdae6b",
        width: 10.0,
        dashed: false,
    },
    Algorithm {
        label: "FIXED",
        command: "RL.FIXED",
        args: "10 10s",
        color: "#d62728",
        width: 7.5,
        dashed: false,
    },
    Algorithm {
        label: "SLIDING EXACT",
        command: "RL.SLIDING",
        args: "10 10s EXACT",
        color: "#6baed6",
        width: 5.0,
        dashed: false,
    },
    Algorithm {
        label: "SLIDING BUCKETS 5",
        command: "RL.SLIDING",
        args: "10 10s BUCKETS 5",
        color: "#756bb1",
        width: 3.0,
        dashed: false,
    },
    Algorithm {
        label: "SLIDING APPROX",
        command: "RL.SLIDING",
        args: "10 10s APPROX",
        color: "#17becf",
        width: 1.75,
        dashed: false,
    },
    Algorithm {
        label: "GCRA",
        command: "RL.GCRA",
        args: "10 10s",
        color: "#2ca02c",
        width: 3.0,
        dashed: false,
    },
    Algorithm {
        label: "BUCKET (= GCRA)",
        command: "RL.BUCKET",
        args: "10 1 1s",
        color: "#000000",
        width: 1.25,
        dashed: true,
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
/// manual clock. `None` when the server does not have the command.
pub fn replay(
    c: &mut redis::Connection,
    trace: &Trace,
    alg: &Algorithm,
    base_us: u64,
    key: &str,
) -> Result<Option<Run>, String> {
    let mut admitted_us = Vec::new();
    for &t in &trace.times_us {
        let mut pipe = redis::pipe();
        pipe.cmd("RL.CLOCK").arg("SET").arg(base_us + t).ignore();
        pipe.cmd(alg.command)
            .arg(key)
            .arg(alg.args.split_whitespace().collect::<Vec<_>>());
        let reply: redis::RedisResult<(Vec<i64>,)> = pipe.query(c);
        match reply {
            Ok((fields,)) if fields.first() == Some(&1) => admitted_us.push(t),
            Ok(_) => {}
            // A command this build lacks (or has only as a placeholder).
            Err(e)
                if e.to_string().contains("unknown command")
                    || e.to_string().contains("not implemented") =>
            {
                return Ok(None)
            }
            Err(e) => return Err(format!("{} {key}: {e}", alg.command)),
        }
    }
    Ok(Some(Run { admitted_us }))
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

const WIDTH: f64 = 900.0;
const PANEL_H: f64 = 260.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const GAP: f64 = 70.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A step line of the cumulative count of `times_us`.
fn steps(
    times_us: &[u64],
    length_s: u64,
    x: impl Fn(f64) -> f64,
    y: impl Fn(f64) -> f64,
) -> String {
    let mut d = format!("M{:.1},{:.1}", x(0.0), y(0.0));
    for (i, &t) in times_us.iter().enumerate() {
        let s = t as f64 / SECOND as f64;
        let _ = write!(d, " H{:.1} V{:.1}", x(s), y((i + 1) as f64));
    }
    let _ = write!(d, " H{:.1}", x(length_s as f64));
    d
}

fn nice_step(max: f64) -> f64 {
    [5.0, 10.0, 20.0, 25.0, 50.0, 100.0]
        .into_iter()
        .find(|s| max / s <= 6.0)
        .unwrap_or(200.0)
}

fn panel(svg: &mut String, id: usize, top: f64, trace: &Trace, runs: &[(&Algorithm, Run)]) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = PANEL_H - 40.0;
    // Scaled to what was admitted (the offered line leaves the panel).
    let most = runs
        .iter()
        .map(|(_, r)| r.admitted_us.len())
        .max()
        .unwrap_or(0);
    let step = nice_step(most as f64 * 1.1);
    let max_y = ((most as f64 * 1.1) / step).ceil().max(1.0) * step;
    let x = |s: f64| LEFT + s / trace.length_s as f64 * plot_w;
    let y = |n: f64| top + plot_h - n / max_y * plot_h;
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="{:.1}" class="title">{}</text><text x="{LEFT}" y="{:.1}" class="about">{}</text>"#,
        top - 22.0,
        esc(trace.title),
        top - 8.0,
        esc(trace.about)
    );
    // Grid and axes.
    let mut n = 0.0;
    while n <= max_y {
        let _ = writeln!(
            svg,
            r#"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{n}</text>"#,
            x(trace.length_s as f64),
            y(n),
            y(n),
            LEFT - 6.0,
            y(n) + 4.0
        );
        n += step;
    }
    for s in (0..=trace.length_s).step_by(10) {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="middle">{s} s</text>"#,
            x(s as f64),
            top + plot_h + 16.0
        );
    }
    let _ = writeln!(
        svg,
        r#"<path d="M{LEFT},{top} V{:.1} H{:.1}" class="axis"/>"#,
        top + plot_h,
        x(trace.length_s as f64)
    );
    if let Some(m) = trace.mark_s {
        let _ = writeln!(
            svg,
            r#"<line x1="{0:.1}" x2="{0:.1}" y1="{top}" y2="{1:.1}" class="mark"/><text x="{2:.1}" y="{3:.1}" class="tick">window boundary</text>"#,
            x(m as f64),
            top + plot_h,
            x(m as f64) + 4.0,
            top + plot_h - 6.0
        );
    }
    // Offered requests, then each algorithm's admitted ones, inside the plot.
    let _ = writeln!(
        svg,
        r#"<clipPath id="plot{id}"><rect x="{LEFT}" y="{:.1}" width="{plot_w}" height="{:.1}"/></clipPath><g clip-path="url(#plot{id})">"#,
        top - 3.0,
        plot_h + 6.0
    );
    let _ = writeln!(
        svg,
        r#"<path d="{}" class="offered"/>"#,
        steps(&trace.times_us, trace.length_s, x, y)
    );
    for (alg, run) in runs {
        let dash = if alg.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            r#"<path d="{}" stroke="{}" stroke-width="{}"{dash} class="line"/>"#,
            steps(&run.admitted_us, trace.length_s, x, y),
            alg.color,
            alg.width
        );
    }
    svg.push_str("</g>\n");
    // Legend with the totals.
    let lx = WIDTH - RIGHT + 16.0;
    let mut ly = top + 6.0;
    let _ = writeln!(
        svg,
        r#"<line x1="{lx}" x2="{:.1}" y1="{ly}" y2="{ly}" class="offered"/><text x="{:.1}" y="{:.1}" class="legend">offered ({})</text>"#,
        lx + 22.0,
        lx + 28.0,
        ly + 4.0,
        trace.times_us.len()
    );
    for (alg, run) in runs {
        ly += 20.0;
        let dash = if alg.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" x2="{:.1}" y1="{ly}" y2="{ly}" stroke="{}" stroke-width="{}"{dash} class="line"/><text x="{:.1}" y="{:.1}" class="legend">{} ({})</text>"#,
            lx + 22.0,
            alg.color,
            alg.width.min(8.0),
            lx + 28.0,
            ly + 4.0,
            esc(alg.label),
            run.admitted_us.len()
        );
    }
}

pub fn chart(results: &[(Trace, Vec<(&Algorithm, Run)>)]) -> String {
    let height = TOP + results.len() as f64 * (PANEL_H + GAP);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif">
<style>
.title {{ font-size: 15px; font-weight: bold; fill: #222; }}
.about, .tick, .legend {{ font-size: 11px; fill: #444; }}
.grid {{ stroke: #e6e6e6; stroke-width: 1; }}
.axis {{ stroke: #888; fill: none; }}
.mark {{ stroke: #888; stroke-dasharray: 2 3; }}
.offered {{ stroke: #999; stroke-width: 1.5; stroke-dasharray: 3 3; fill: none; }}
.line {{ fill: none; stroke-linejoin: round; }}
</style>
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="20" class="title">Admitted requests over time (cumulative), limit "10 per 10 s", manual clock</text>"#
    );
    for (i, (trace, runs)) in results.iter().enumerate() {
        let top = TOP + GAP * 0.6 + i as f64 * (PANEL_H + GAP);
        panel(&mut svg, i, top, trace, runs);
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
