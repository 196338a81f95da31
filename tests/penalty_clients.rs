//! The penalty box under the traffic users send: a hundred clients, each on
//! a connection of its own, re-sending at once on one key, the server frozen
//! (SIGSTOP) in the middle of the run; then the server's state. The manual
//! clock stands still during a run, so every figure is exact whatever the
//! interleaving; periods are hours, so that no key expires on the server's
//! real clock while a test runs.

mod common;
use common::topology::info_field;
use common::*;
use redis::Connection;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

const CLIENTS: usize = 100;
const ASKS: usize = 30;
const MIN_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;

fn info_u64(c: &mut Connection, name: &str) -> u64 {
    info_field(c, "ratelimit", name)
        .unwrap_or_else(|| panic!("no {name}"))
        .parse()
        .unwrap()
}

/// `CLIENTS` threads, each on its own connection, send `args` `ASKS` times
/// in a closed loop; the server is frozen for 200 ms once a third of the
/// answers are in (the clients' requests pile up behind it). Every answer.
fn hammer(s: &mut Server, args: &[&str]) -> Vec<[i64; 5]> {
    let args: Arc<Vec<String>> = Arc::new(args.iter().map(|a| a.to_string()).collect());
    let start = Arc::new(Barrier::new(CLIENTS));
    let answered = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let mut c = s.conn();
            let (args, start, answered) = (args.clone(), start.clone(), answered.clone());
            thread::spawn(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                start.wait();
                (0..ASKS)
                    .map(|_| {
                        let d = decide(&mut c, &args);
                        answered.fetch_add(1, Ordering::Relaxed);
                        d
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    while answered.load(Ordering::Relaxed) < CLIENTS * ASKS / 3 {
        thread::yield_now();
    }
    s.freeze();
    // Not a wait for a result: the time in which the clients' requests pile up.
    thread::sleep(Duration::from_millis(200));
    s.resume();
    clients
        .into_iter()
        .flat_map(|t| t.join().expect("a client"))
        .collect()
}

#[test]
fn a_hundred_clients_on_a_blocked_key_meet_one_block_from_the_first_denial() {
    let mut s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let block = ["RL.GCRA", "hammered", "10", "1h", "BLOCK", "1h"];
    let (blocks, denials) = (
        info_u64(&mut c, "ratelimit_penalty_blocks"),
        info_u64(&mut c, "ratelimit_penalty_denials"),
    );
    let answers = hammer(&mut s, &block);
    assert_eq!(answers.len(), CLIENTS * ASKS);
    let admitted = answers.iter().filter(|d| d[0] == 1).count();
    // What one client alone gets from the same limit at the same instant.
    let alone = (0..20)
        .take_while(|_| decide(&mut c, &["RL.GCRA", "alone", "10", "1h"])[0] == 1)
        .count();
    assert_eq!(admitted, alone, "exactly what the limit admits");
    // One block, begun by the first denial; the rest held by it, each told
    // its end (the limit's own wait, 6 min, is shorter), none extending it.
    let denied: Vec<i64> = answers.iter().filter(|d| d[0] == 0).map(|d| d[3]).collect();
    assert!(denied.iter().all(|&w| w == HOUR_MS), "{denied:?}");
    assert_eq!(info_u64(&mut c, "ratelimit_penalty_blocks") - blocks, 1);
    assert_eq!(
        info_u64(&mut c, "ratelimit_penalty_denials") - denials,
        denied.len() as u64 - 1
    );
    let listed: Vec<(String, i64, String)> =
        redis::from_redis_value(call(&mut c, &["RL.PENALIZED"]).unwrap()).unwrap();
    assert_eq!(listed, [("hammered".into(), HOUR_MS, "block".into())]);
    // The block ends an hour after the first denial, not after the last.
    advance(&mut c, 3600 * SECOND - 1);
    assert_eq!(decide(&mut c, &block)[0], 0);
    advance(&mut c, 1);
    assert_eq!(decide(&mut c, &block)[0], 1);
}

#[test]
fn a_hundred_clients_counting_denials_dig_no_deeper_than_maxdebt() {
    let mut s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Two an hour: two admitted, then each denial charged adds 30 min to
    // the wait until it would pass 2 h.
    let count = ["RL.GCRA", "digging", "2", "1h", "COUNTDENIALS", "2h"];
    let charges = info_u64(&mut c, "ratelimit_penalty_charges");
    let answers = hammer(&mut s, &count);
    assert_eq!(answers.iter().filter(|d| d[0] == 1).count(), 2);
    assert_eq!(info_u64(&mut c, "ratelimit_penalty_charges") - charges, 3);
    let deepest = answers.iter().filter(|d| d[0] == 0).map(|d| d[3]).max();
    assert_eq!(deepest, Some(120 * MIN_MS));
    let peek = decide(&mut c, &["RL.PEEK", "digging", "GCRA", "2", "1h"]);
    assert_eq!(peek[3], 120 * MIN_MS);
    // Every client stops: the key admits again at the bound (asked without
    // the option, which would charge the probe 1 µs before it).
    let plain = ["RL.GCRA", "digging", "2", "1h"];
    advance(&mut c, 2 * 3600 * SECOND - 1);
    assert_eq!(decide(&mut c, &plain)[0], 0);
    advance(&mut c, 1);
    assert_eq!(decide(&mut c, &plain)[0], 1);
}
