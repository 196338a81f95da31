//! `RESERVE maxdelay` on the window limiters (RL.FIXED, aligned or not;
//! RL.SLIDING EXACT, APPROX and BUCKETS) on a real server, with the manual
//! clock: charged in the window where the admission starts, at the instant
//! a waiter (`WAIT`) would be admitted; a reservation never goes ahead of
//! a waiter already in line, and a waiter that comes after one is admitted
//! behind it. Windows are hours, so that no key expires on the server's
//! real clock while a test runs; the clock starts on an hour.

mod common;
use common::blocking::*;
use common::*;
use redis::Connection;

const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

/// Every window mode, 2 an hour (BUCKETS: four sub-windows of 15 min),
/// and where a request of 1 is admitted again after 2 at the start
/// (the log's entries expire an hour later, a fixed window ends; the
/// sub-window of the start leaves the count 75 min later; the two-window
/// estimate falls to 1 half-way through the next window).
const MODES: [(&[&str], u64); 5] = [
    (&["RL.FIXED"], HOUR),
    (&["RL.FIXED", "ALIGNED"], HOUR),
    (&["RL.SLIDING", "EXACT"], HOUR),
    (&["RL.SLIDING", "APPROX"], 90 * MINUTE),
    (&["RL.SLIDING", "BUCKETS", "4"], 75 * MINUTE),
];

/// `RL.<mode> key 2 1h <mode options> <extra>`.
fn command<'a>(mode: &[&'a str], key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![mode[0], key, "2", "1h"];
    v.extend_from_slice(&mode[1..]);
    v.extend_from_slice(extra);
    v
}

fn ints(c: &mut Connection, args: &[&str]) -> Vec<i64> {
    redis::from_redis_value(call(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}")))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn ms(us: u64) -> i64 {
    (us / 1_000) as i64
}

/// The key filled at the start of an hour: the instant a request of 1 is
/// admitted again is `start` from now.
fn filled(c: &mut Connection, mode: &[&str], key: &str) {
    clock_set(c, T0);
    assert_eq!(decide(c, &command(mode, key, &["COST", "2"]))[0], 1);
}

#[test]
fn a_reservation_starts_when_a_waiter_would_and_is_charged_in_that_window() {
    let s = Server::start();
    let (mut c, mut w) = (s.conn(), s.conn());
    for (mode, start) in MODES {
        let (reserved, waited) = (
            format!("r:{}", mode.join(".")),
            format!("w:{}", mode.join(".")),
        );
        filled(&mut c, mode, &reserved);
        filled(&mut c, mode, &waited);
        // Without the option: denied, told the start.
        let plain = decide(&mut c, &command(mode, &reserved, &["DRYRUN"]));
        assert_eq!((plain[0], plain[3]), (0, ms(start)), "{mode:?}");
        let reply = ints(&mut c, &command(mode, &reserved, &["RESERVE", "2h"]));
        assert_eq!((reply[0], reply[5]), (1, ms(start)), "{mode:?}");
        send(&mut w, &command(mode, &waited, &["WAIT", "2h"]));
        await_waiting(&mut c, 1);
        advance(&mut c, start - 1);
        assert_eq!(waiting(&mut c), 1, "{mode:?}: 1 µs before the start");
        advance(&mut c, 1);
        assert_eq!(recv5(&mut w)[0], 1, "{mode:?}");
        // The same state, to the byte; the same answers from here on.
        assert_eq!(
            get_bytes(&mut c, &reserved),
            get_bytes(&mut c, &waited),
            "{mode:?}"
        );
        for step in [0, 20 * MINUTE, 40 * MINUTE, HOUR] {
            advance(&mut c, step);
            let a = decide(&mut c, &command(mode, &reserved, &[]));
            let b = decide(&mut c, &command(mode, &waited, &[]));
            assert_eq!(a, b, "{mode:?}");
        }
    }
}

#[test]
fn a_reservation_never_goes_ahead_of_a_waiter_already_in_line() {
    let s = Server::start();
    let (mut c, mut w) = (s.conn(), s.conn());
    for (mode, start) in MODES {
        let key = format!("k:{}", mode.join("."));
        filled(&mut c, mode, &key);
        send(&mut w, &command(mode, &key, &["WAIT", "3h"]));
        await_waiting(&mut c, 1);
        let before = get_bytes(&mut c, &key);
        // Behind the line: denied, no delay, nothing charged; told a wait
        // no earlier than the waiter's start.
        let reply = ints(&mut c, &command(mode, &key, &["RESERVE", "3h"]));
        assert_eq!((reply[0], reply[5]), (0, -1), "{mode:?}");
        assert!(reply[3] >= ms(start), "{mode:?}: {reply:?}");
        assert_eq!(get_bytes(&mut c, &key), before, "{mode:?}");
        // The waiter is admitted when it was due, not a microsecond later.
        advance(&mut c, start - 1);
        assert_eq!(waiting(&mut c), 1, "{mode:?}");
        advance(&mut c, 1);
        assert_eq!(waiting(&mut c), 0, "{mode:?}");
        assert_eq!(recv5(&mut w)[0], 1, "{mode:?}");
    }
}

#[test]
fn a_waiter_after_a_reservation_is_admitted_behind_it() {
    let s = Server::start();
    let (mut c, mut w) = (s.conn(), s.conn());
    for (mode, start) in MODES {
        let key = format!("k:{}", mode.join("."));
        filled(&mut c, mode, &key);
        assert_eq!(
            ints(&mut c, &command(mode, &key, &["RESERVE", "3h"]))[5],
            ms(start),
            "{mode:?}"
        );
        // Nothing is admitted before the reservation's start; where the
        // window it starts in has room for one more, at the start.
        let told = decide(&mut c, &command(mode, &key, &["DRYRUN"]));
        assert_eq!(told[0], 0, "{mode:?}");
        let after = told[3] as u64 * 1_000;
        assert!(after >= start, "{mode:?}: {told:?}");
        if !mode.contains(&"APPROX") {
            assert_eq!(after, start, "{mode:?}");
        }
        send(&mut w, &command(mode, &key, &["WAIT", "4h"]));
        await_waiting(&mut c, 1);
        advance(&mut c, after - 1);
        assert_eq!(waiting(&mut c), 1, "{mode:?}");
        advance(&mut c, 1);
        assert_eq!(recv5(&mut w)[0], 1, "{mode:?}");
        // The reservation and the waiter hold the window: a third waits.
        assert_eq!(decide(&mut c, &command(mode, &key, &[]))[0], 0, "{mode:?}");
    }
}

/// Beyond `maxdelay` a window is denied as without the option and charges
/// nothing; DRYRUN says the delay and charges nothing.
#[test]
fn beyond_maxdelay_or_dry_a_window_is_left_as_it_was() {
    let s = Server::start();
    let mut c = s.conn();
    for (mode, start) in MODES {
        let key = format!("k:{}", mode.join("."));
        filled(&mut c, mode, &key);
        let before = get_bytes(&mut c, &key);
        let short = format!("{}ms", ms(start) - 1);
        let reply = ints(&mut c, &command(mode, &key, &["RESERVE", &short]));
        assert_eq!(
            (reply[0], reply[3], reply[5]),
            (0, ms(start), -1),
            "{mode:?}"
        );
        let dry = ints(&mut c, &command(mode, &key, &["RESERVE", "3h", "DRYRUN"]));
        assert_eq!((dry[0], dry[5]), (1, ms(start)), "{mode:?}");
        assert_eq!(get_bytes(&mut c, &key), before, "{mode:?}");
    }
}

/// RL.ALL over a GCRA limit and each window: one start, the later of the
/// two; both keys left as a waiter admitted then leaves them.
#[test]
fn rl_all_reserves_a_schedule_and_a_window_at_one_start() {
    let s = Server::start();
    let (mut c, mut w) = (s.conn(), s.conn());
    for (mode, _) in MODES {
        let tag = mode.join(".");
        let all = |side: &str, extra: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = vec!["RL.ALL".into(), "2".into()];
            v.push(format!("{{{side}{tag}}}:g"));
            v.push(format!("{{{side}{tag}}}:w"));
            for word in ["GCRA", "1", "1h"] {
                v.push(word.into());
            }
            v.push(mode[0].trim_start_matches("RL.").into());
            v.push("2".into());
            v.push("1h".into());
            v.extend(mode[1..].iter().map(|s| s.to_string()));
            v.extend(extra.iter().map(|s| s.to_string()));
            v
        };
        let run = |c: &mut Connection, v: &[String]| {
            let args: Vec<&str> = v.iter().map(String::as_str).collect();
            call(c, &args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
        };
        clock_set(&mut c, T0);
        for side in ["r", "w"] {
            assert_eq!(combined_reply(run(&mut c, &all(side, &["COST", "1"]))).0, 1);
            assert_eq!(combined_reply(run(&mut c, &all(side, &["COST", "1"]))).0, 0);
        }
        // The GCRA limit admits again in an hour, each window at once (it
        // holds 1 of 2): both are charged at the hour.
        let reply = run(&mut c, &all("r", &["RESERVE", "3h"]));
        let items: Vec<redis::Value> = redis::from_redis_value(reply).unwrap();
        let limits: Vec<Vec<i64>> = items[3..]
            .iter()
            .map(|v| redis::from_redis_value(v.clone()).unwrap())
            .collect();
        assert_eq!(
            (limits[0][5], limits[1][5]),
            (ms(HOUR), ms(HOUR)),
            "{mode:?}"
        );
        let waiter = all("w", &["WAIT", "3h"]);
        send(
            &mut w,
            &waiter.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        await_waiting(&mut c, 1);
        advance(&mut c, HOUR);
        assert_eq!(combined_reply(w.recv_response().unwrap()).0, 1, "{mode:?}");
        for key in ["g", "w"] {
            assert_eq!(
                get_bytes(&mut c, &format!("{{r{tag}}}:{key}")),
                get_bytes(&mut c, &format!("{{w{tag}}}:{key}")),
                "{mode:?} {key}"
            );
        }
    }
}
