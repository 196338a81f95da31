//! The `INFO ratelimit` section: per-command calls, allowed, denied and
//! errors move with each call and reset with `CONFIG RESETSTAT`.

mod common;
use common::*;
use std::collections::HashMap;

/// `INFO ratelimit` as field -> value (dict fields kept as their text).
fn info(c: &mut redis::Connection) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg("ratelimit").query(c).unwrap();
    assert!(text.starts_with("# ratelimit"), "{text}");
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The counters of one command: [calls, allowed, denied, errors].
fn counts(c: &mut redis::Connection, field: &str) -> [u64; 4] {
    let all = info(c);
    let line = all
        .get(&format!("ratelimit_{field}"))
        .unwrap_or_else(|| panic!("no {field} in {all:?}"));
    let mut out = [0u64; 4];
    for (i, name) in ["calls", "allowed", "denied", "errors"].iter().enumerate() {
        out[i] = line
            .split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"));
    }
    out
}

#[test]
fn lists_every_command_and_the_clock() {
    let s = Server::start();
    let mut c = s.conn();
    let all = info(&mut c);
    assert_eq!(all["ratelimit_clock"], "manual");
    for field in [
        "rl_gcra",
        "rl_bucket",
        "rl_sliding",
        "rl_fixed",
        "rl_all",
        "cl_throttle",
        "rl_clock",
    ] {
        assert_eq!(
            all[&format!("ratelimit_{field}")],
            "calls=0,allowed=0,denied=0,errors=0"
        );
    }
    // Also part of INFO everything, and the real clock says so.
    let everything: String = redis::cmd("INFO").arg("everything").query(&mut c).unwrap();
    assert!(everything.contains("ratelimit_rl_gcra:calls=0"));
    let real = Server::with(Config::real_clock());
    assert_eq!(info(&mut real.conn())["ratelimit_clock"], "real");
}

#[test]
fn counters_move_with_allowed_denied_and_failed_calls() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Periods of hours: no key expires on the wall clock mid-test.
    for _ in 0..3 {
        decide(&mut c, &["RL.GCRA", "g", "2", "10h"]);
    }
    // A dry run is a decision too.
    decide(&mut c, &["RL.GCRA", "g", "2", "10h", "DRYRUN"]);
    error_of(&mut c, &[b"RL.GCRA", b"g", b"0", b"10h"]);
    assert_eq!(counts(&mut c, "rl_gcra"), [5, 2, 2, 1]);

    decide(&mut c, &["RL.BUCKET", "b", "1", "1", "10h"]);
    decide(&mut c, &["RL.BUCKET", "b", "1", "1", "10h"]);
    assert_eq!(counts(&mut c, "rl_bucket"), [2, 1, 1, 0]);

    let cell: Vec<i64> = cmd(&["CL.THROTTLE", "t", "0", "1", "36000"])
        .query(&mut c)
        .unwrap();
    assert_eq!(cell[0], 0);
    let cell: Vec<i64> = cmd(&["CL.THROTTLE", "t", "0", "1", "36000"])
        .query(&mut c)
        .unwrap();
    assert_eq!(cell[0], 1);
    assert_eq!(counts(&mut c, "cl_throttle"), [2, 1, 1, 0]);

    // RL.ALL counts once per call, not once per limit.
    let all = [
        "RL.ALL", "2", "x", "y", "GCRA", "1", "10h", "GCRA", "5", "10h",
    ];
    call(&mut c, &all).unwrap();
    call(&mut c, &all).unwrap();
    assert_eq!(counts(&mut c, "rl_all"), [2, 1, 1, 0]);
    assert_eq!(counts(&mut c, "rl_gcra")[0], 5);

    // A key of the wrong type is an error; RL.CLOCK is neither allowed nor denied.
    let _: () = cmd(&["SET", "s", "text"]).query(&mut c).unwrap();
    error_of(&mut c, &[b"RL.GCRA", b"s", b"1", b"1s"]);
    assert_eq!(counts(&mut c, "rl_gcra"), [6, 2, 2, 2]);
    assert_eq!(counts(&mut c, "rl_clock"), [1, 0, 0, 0]);
}

/// The module's counters count from its load: `CONFIG RESETSTAT` zeroes
/// Redis's own statistics (`INFO commandstats` rows of the module's
/// commands included) and leaves them, so a server where nobody waits
/// needs no command filter to see it.
#[test]
fn the_counters_count_from_the_load_through_config_resetstat() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    decide(&mut c, &["RL.GCRA", "g", "1", "10h"]);
    decide(&mut c, &["RL.GCRA", "g", "1", "10h"]);
    assert_eq!(counts(&mut c, "rl_gcra"), [2, 1, 1, 0]);
    let redis_calls = |c: &mut redis::Connection| {
        common::topology::info_field(c, "commandstats", "cmdstat_rl.gcra")
            .map(|v| v.split(',').next().unwrap_or_default().to_string())
    };
    assert_eq!(redis_calls(&mut c).as_deref(), Some("calls=2"));
    let _: () = cmd(&["config", "ResetStat"]).query(&mut c).unwrap();
    assert_eq!(redis_calls(&mut c), None, "Redis's own rows are reset");
    assert_eq!(counts(&mut c, "rl_gcra"), [2, 1, 1, 0]);
    assert_eq!(counts(&mut c, "rl_clock"), [1, 0, 0, 0]);
    decide(&mut c, &["RL.GCRA", "g", "1", "10h"]);
    assert_eq!(counts(&mut c, "rl_gcra"), [3, 1, 2, 0]);
}

#[test]
fn a_reloaded_module_starts_from_zero() {
    let s = Server::start();
    let mut c = s.conn();
    decide(&mut c, &["RL.GCRA", "g", "1", "10h"]);
    assert_eq!(counts(&mut c, "rl_gcra"), [1, 1, 0, 0]);
    call(&mut c, &["MODULE", "UNLOAD", "ratelimit"]).unwrap();
    let path = module_path();
    let path = path.to_str().unwrap();
    call(&mut c, &["MODULE", "LOAD", path, "clock", "manual"]).unwrap();
    assert_eq!(counts(&mut c, "rl_gcra"), [0, 0, 0, 0]);
    decide(&mut c, &["RL.GCRA", "g", "1", "10h"]);
    assert_eq!(counts(&mut c, "rl_gcra")[0], 1);
}

/// `MODULE LIST` numbers the crate version major * 10000 + minor * 100 +
/// patch; `INFO ratelimit` has it as text.
#[test]
fn reports_the_crate_version() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(info(&mut c)["ratelimit_version"], env!("CARGO_PKG_VERSION"));
    let part = |p: &str| p.parse::<i64>().expect("a numeric version part");
    let number = part(env!("CARGO_PKG_VERSION_MAJOR")) * 10_000
        + part(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + part(env!("CARGO_PKG_VERSION_PATCH"));
    let modules: Vec<Vec<redis::Value>> = redis::cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    let fields = |m: &[redis::Value]| -> HashMap<String, redis::Value> {
        m.chunks(2)
            .map(|kv| {
                (
                    redis::from_redis_value(kv[0].clone()).unwrap(),
                    kv[1].clone(),
                )
            })
            .collect()
    };
    let module = modules
        .iter()
        .map(|m| fields(m))
        .find(|m| m.get("name") == Some(&redis::Value::BulkString(b"ratelimit".to_vec())))
        .expect("ratelimit in MODULE LIST");
    assert_eq!(module["ver"], redis::Value::Int(number));
}
