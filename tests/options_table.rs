//! docs/commands.md's table of which command takes which option, held
//! against a real server: every cell is sent, with the option's
//! prerequisites, on a fresh key; "yes" must answer, "no" must be refused.

mod common;
mod hostile;

use common::Server;
use hostile::{Raw, Reply, T0};

/// Each command's shortest valid call, `{k}` where a fresh key goes.
const BASE: &[(&str, &[&str])] = &[
    ("RL.GCRA", &["RL.GCRA", "{k}", "10", "1m"]),
    ("RL.BUCKET", &["RL.BUCKET", "{k}", "10", "1", "1m"]),
    ("RL.SLIDING", &["RL.SLIDING", "{k}", "10", "1m"]),
    ("RL.FIXED", &["RL.FIXED", "{k}", "10", "1m"]),
    ("RL.SKETCH", &["RL.SKETCH", "{k}", "item", "10", "1m"]),
    ("RL.ACQUIRE", &["RL.ACQUIRE", "{k}", "10", "1m"]),
    ("RL.ALL", &["RL.ALL", "1", "{k}", "GCRA", "10", "1m"]),
    ("RL.SHARE", &["RL.SHARE", "1", "{k}", "10", "1m"]),
    ("RL.CHECK", &["RL.CHECK", "{k}", "plan"]),
    ("RL.PEEK", &["RL.PEEK", "{k}", "GCRA", "10", "1m"]),
    ("RL.SHARE.PEEK", &["RL.SHARE.PEEK", "1", "{k}", "10", "1m"]),
    // With its quantity: an option after it is one argument too many.
    (
        "CL.THROTTLE",
        &["CL.THROTTLE", "{k}", "10", "10", "60", "1"],
    ),
];

/// The words each column adds (with what it needs).
fn column_words(column: &str) -> &'static [&'static str] {
    match column {
        "`COST n`" => &["COST", "2"],
        "`COSTS c1 .. cN`" => &["COSTS", "2"],
        "`DRYRUN`" => &["DRYRUN"],
        "`WAIT timeout`" => &["WAIT", "1s"],
        "`FLOW name [WEIGHT w]`" => &["WAIT", "1s", "FLOW", "f", "WEIGHT", "2"],
        "`FORCE`" => &["COST", "2", "FORCE"],
        "`PARTIAL`" => &["COST", "2", "PARTIAL"],
        "`REFUND n`" => &["REFUND", "1"],
        "`RESERVE maxdelay`" => &["RESERVE", "1m"],
        "`JITTER`" => &["JITTER"],
        "`BLOCK duration`" => &["BLOCK", "1m"],
        "`COUNTDENIALS maxdebt`" => &["COUNTDENIALS", "1m"],
        other => panic!("a column the test does not know: {other}"),
    }
}

/// The table between its markers: the header's columns and each row.
fn table() -> (Vec<String>, Vec<Vec<String>>) {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands.md"))
        .expect("docs/commands.md");
    let start = doc.find("<!-- options-table -->").expect("table start");
    let end = doc.find("<!-- /options-table -->").expect("table end");
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut lines = doc[start..end].lines().skip(1);
    let header = cells(lines.next().expect("header"));
    let rows = lines
        .skip(1)
        .filter(|l| l.starts_with('|'))
        .map(cells)
        .collect();
    (header, rows)
}

#[test]
fn every_cell_of_the_options_table_is_what_the_server_does() {
    let s = Server::with(common::Config::default().with_policies());
    let mut c = Raw::connect(s.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    c.ok(&["RL.POLICY", "SET", "plan", "GCRA", "10", "1m"]);
    let (header, rows) = table();
    let documented: Vec<&str> = rows.iter().map(|r| r[0].trim_matches('`')).collect();
    let defined: Vec<&str> = BASE.iter().map(|(name, _)| *name).collect();
    assert_eq!(documented, defined, "the table's commands");
    let mut n = 0;
    let mut wrong = Vec::new();
    for row in &rows {
        let name = row[0].trim_matches('`');
        let base = BASE.iter().find(|(b, _)| *b == name).expect("base").1;
        for (column, cell) in header.iter().zip(row).skip(1) {
            n += 1;
            let key = format!("t:{n}");
            let mut args: Vec<&str> = base
                .iter()
                .map(|w| if *w == "{k}" { key.as_str() } else { w })
                .collect();
            // Without the option, the call answers.
            assert!(c.call(&args).error().is_none(), "{args:?}");
            args.extend(column_words(column));
            let args: Vec<String> = args.iter().map(|w| w.replace("{k}", &key)).collect();
            let got = c.call(&args);
            // Refused as an option this command does not take, not for
            // some other reason.
            let refused = |e: &str| {
                [
                    "cannot be combined with",
                    "unknown option",
                    "wrong number of arguments",
                ]
                .iter()
                .any(|why| e.contains(why))
            };
            let taken = match (&got, cell.as_str()) {
                (Reply::Error(e), "no") => refused(e),
                (Reply::Array(_), "yes") => true,
                _ => false,
            };
            if !taken {
                wrong.push(format!("{name} {column}: documented {cell}, got {got:?}"));
            }
        }
    }
    assert!(n > 90, "only {n} cells");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// docs/commands.md's Configuration table: every `ratelimit.*` setting the
/// server has, with its default and its range (the bounds accepted by
/// `CONFIG SET`, one past them refused).
#[test]
fn the_configuration_table_is_every_setting_with_its_default_and_range() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands.md"))
        .expect("docs/commands.md");
    let section = &doc[doc.find("## Configuration").expect("section")..];
    let section = &section[..section[3..].find("\n## ").expect("next section")];
    // `| `ratelimit.NAME` | DEFAULT (MIN to MAX) | ...`
    let mut documented: Vec<(String, u64, u64, u64)> = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("| `ratelimit.")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let name = cells[0].trim_matches('`').to_string();
        let (default, range) = cells[1].split_once(" (").expect("default (range)");
        let (min, max) = range
            .trim_end_matches(')')
            .split_once(" to ")
            .expect("range");
        let n = |t: &str| t.parse::<u64>().unwrap_or_else(|_| panic!("{name}: {t}"));
        documented.push((name.clone(), n(default), n(min), n(max)));
    }
    let s = Server::start();
    let mut c = s.conn();
    let mut settings: Vec<(String, String)> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("ratelimit.*")
        .query(&mut c)
        .expect("CONFIG GET");
    settings.sort();
    let mut names: Vec<String> = documented.iter().map(|d| d.0.clone()).collect();
    names.sort();
    let server_names: Vec<String> = settings.iter().map(|s| s.0.clone()).collect();
    assert_eq!(names, server_names, "documented settings");
    for (name, default, min, max) in documented {
        let value = &settings.iter().find(|s| s.0 == name).expect("set").1;
        assert_eq!(value, &default.to_string(), "{name}'s default");
        let set = |c: &mut redis::Connection, v: u64| -> bool {
            redis::cmd("CONFIG")
                .arg("SET")
                .arg(&name)
                .arg(v)
                .query::<()>(c)
                .is_ok()
        };
        assert!(
            set(&mut c, max) && set(&mut c, min),
            "{name}: {min} to {max}"
        );
        assert!(!set(&mut c, max + 1), "{name}: above {max}");
        if min > 0 {
            assert!(!set(&mut c, min - 1), "{name}: below {min}");
        }
        assert!(set(&mut c, default));
    }
}
