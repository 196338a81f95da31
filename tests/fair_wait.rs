//! Fair waiting (`WAIT timeout FLOW name [WEIGHT w]`) on real servers with
//! the manual clock: flows on one key share its admissions by weight,
//! whatever the lengths of their lines; disconnects, timeouts and CLIENT
//! UNBLOCK keep the shares; a flow past `ratelimit.max-waiters-per-flow` is
//! denied at once; replicas see the same state. Closed-loop clients, that
//! re-send as soon as they are answered, get their flow's weight's share
//! and no more, one client against a hundred.

mod common;
use common::blocking::*;
use common::topology::{replica_config, wait_link_up, wait_replicas};
use common::*;
use redis::Connection;

/// One admission an hour: the key's TTL (on the wall clock) outlives the
/// test.
const HOUR: u64 = 3_600 * 1_000_000;

/// A request of `flow` (`""`: without FLOW) with `WAIT wait`.
fn request(flow: &str, weight: u64, wait: &str) -> Vec<String> {
    let mut v: Vec<String> = ["RL.GCRA", "k", "1", "1h", "WAIT", wait]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !flow.is_empty() {
        v.extend([
            "FLOW".into(),
            flow.into(),
            "WEIGHT".into(),
            weight.to_string(),
        ]);
    }
    v
}

fn client_id(c: &mut Connection) -> i64 {
    redis::cmd("CLIENT").arg("ID").query(c).expect("CLIENT ID")
}

fn unblock(ctl: &mut Connection, id: i64) -> i64 {
    redis::cmd("CLIENT")
        .arg("UNBLOCK")
        .arg(id)
        .query(ctl)
        .expect("CLIENT UNBLOCK")
}

/// A waiting client and its flow.
struct Waiter {
    conn: Option<Connection>,
    id: i64,
    flow: &'static str,
}

/// A key whose admission of the hour is taken; flows line up on it.
struct Key<'s> {
    server: &'s Server,
    ctl: Connection,
    waiters: Vec<Waiter>,
    /// How many the server should count waiting.
    waiting: u64,
}

impl<'s> Key<'s> {
    fn new(server: &'s Server) -> Key<'s> {
        let mut ctl = server.conn();
        clock_set(&mut ctl, T0);
        assert_eq!(decide(&mut ctl, &["RL.GCRA", "k", "1", "1h"])[0], 1);
        Key {
            server,
            ctl,
            waiters: Vec::new(),
            waiting: 0,
        }
    }

    /// A client of `flow` starts waiting, after every other; its index.
    fn offer(&mut self, flow: &'static str, weight: u64, wait: &str) -> usize {
        let mut conn = self.server.conn();
        let id = client_id(&mut conn);
        let args = request(flow, weight, wait);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        send(&mut conn, &args);
        self.waiters.push(Waiter {
            conn: Some(conn),
            id,
            flow,
        });
        self.waiting += 1;
        await_waiting(&mut self.ctl, self.waiting);
        self.waiters.len() - 1
    }

    /// `heavy.0` waiters of flow "heavy" (weight `heavy.1`) then `light.0`
    /// of "light", `rounds` times: offered 10:1 with (10, _), (1, _).
    fn offer_rounds(&mut self, heavy: (usize, u64), light: (usize, u64), rounds: usize) {
        for _ in 0..rounds {
            for _ in 0..heavy.0 {
                self.offer("heavy", heavy.1, "1d");
            }
            for _ in 0..light.0 {
                self.offer("light", light.1, "1d");
            }
        }
    }

    /// The next hour, in which `ends` waits end (admitted or timed out).
    fn hour(&mut self, ends: u64) {
        advance(&mut self.ctl, HOUR);
        self.waiting -= ends;
        assert_eq!(waiting(&mut self.ctl), self.waiting);
    }

    /// `n` hours of one admission each.
    fn admit(&mut self, n: u64) {
        for _ in 0..n {
            self.hour(1);
        }
    }

    /// Waiter `i` disconnects.
    fn disconnect(&mut self, i: usize) {
        self.waiters[i].conn = None;
        self.waiting -= 1;
        await_waiting(&mut self.ctl, self.waiting);
    }

    /// Ends every wait still going ([`end_waits`]) and reads every reply:
    /// how many of each flow were admitted, in order of the flows' first
    /// waiters.
    fn admitted_by_flow(mut self) -> Vec<(&'static str, usize)> {
        let ids: Vec<i64> = self.waiters.iter().map(|w| w.id).collect();
        let killed = end_waits(&mut self.ctl, &ids);
        let mut counts: Vec<(&'static str, usize)> = Vec::new();
        for (w, killed) in self.waiters.iter_mut().zip(killed) {
            if counts.iter().all(|c| c.0 != w.flow) {
                counts.push((w.flow, 0));
            }
            if killed {
                continue;
            }
            let Some(conn) = w.conn.as_mut() else {
                continue;
            };
            if recv5(conn)[0] == 1 {
                let count = counts.iter_mut().find(|c| c.0 == w.flow);
                count.expect("counted").1 += 1;
            }
        }
        counts
    }
}

#[test]
fn two_flows_offered_10_to_1_share_the_admissions_half_and_half() {
    let server = Server::start();
    let mut key = Key::new(&server);
    // 60 of the heavy flow, 6 of the light one, arriving 10:1.
    key.offer_rounds((10, 1), (1, 1), 6);
    key.admit(12);
    assert_eq!(key.admitted_by_flow(), [("heavy", 6), ("light", 6)]);
}

#[test]
fn weights_3_to_1_share_three_quarters_and_one_quarter() {
    let server = Server::start();
    let mut key = Key::new(&server);
    key.offer_rounds((10, 3), (1, 1), 6);
    key.admit(16);
    let counts = key.admitted_by_flow();
    assert_eq!(counts[0].0, "heavy");
    assert!((11..=13).contains(&counts[0].1), "{counts:?}");
    assert_eq!(counts[0].1 + counts[1].1, 16);
    // The light flow weighs more: it takes three quarters.
    let server = Server::start();
    let mut key = Key::new(&server);
    key.offer_rounds((10, 1), (1, 3), 6);
    key.admit(8);
    let counts = key.admitted_by_flow();
    assert!((5..=6).contains(&counts[1].1), "{counts:?}");
}

#[test]
fn without_flow_waiters_are_first_come_first_served_as_one_flow() {
    let server = Server::start();
    let mut key = Key::new(&server);
    for _ in 0..4 {
        key.offer("", 1, "1d");
    }
    key.offer("a", 1, "1d");
    // The four without FLOW are one flow: it takes turns with "a".
    key.admit(2);
    let counts = key.admitted_by_flow();
    assert_eq!(counts, [("", 1), ("a", 1)]);
}

#[test]
fn disconnects_timeouts_and_client_unblock_keep_the_shares() {
    let server = Server::start();
    let mut key = Key::new(&server);
    if !client_unblock_allowed(&mut key.ctl) {
        eprintln!("skipped: this server refuses CLIENT UNBLOCK of a waiter (INFO ratelimit_client_unblock:no)");
        return;
    }
    key.offer_rounds((10, 1), (1, 1), 4);
    // One heavy waiter that times out in the third hour, then more light.
    let short = key.offer("heavy", 1, "150m");
    key.offer_rounds((0, 1), (1, 1), 6);
    // The first heavy waiter (the line's front) and another disconnect; a
    // light one is unblocked.
    key.disconnect(0);
    key.disconnect(5);
    let light = key.waiters.iter().position(|w| w.flow == "light").unwrap();
    assert_eq!(unblock(&mut key.ctl, key.waiters[light].id), 1);
    key.waiting -= 1;
    let reply = recv5(key.waiters[light].conn.as_mut().unwrap());
    assert_eq!(reply[0], 0);
    key.waiters[light].conn = None;
    key.admit(2);
    // The third hour: an admission and the timeout.
    key.hour(2);
    let reply = recv5(key.waiters[short].conn.as_mut().unwrap());
    assert_eq!(reply[0], 0, "timed out");
    key.waiters[short].conn = None;
    key.admit(9);
    // 12 admissions: half each.
    assert_eq!(key.admitted_by_flow(), [("heavy", 6), ("light", 6)]);
}

#[test]
fn a_flow_past_its_bound_is_denied_at_once_others_still_wait() {
    let server = Server::start();
    let mut key = Key::new(&server);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("ratelimit.max-waiters-per-flow")
        .arg(3)
        .query(&mut key.ctl)
        .unwrap();
    for _ in 0..3 {
        key.offer("a", 1, "1d");
    }
    // The fourth of "a": denied at once, its wait after the line (4 h).
    let args = request("a", 1, "1d");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(
        decide(&mut key.ctl, &args),
        [0, 1, 0, 4 * 3_600_000, 3_600_000]
    );
    // Another flow and the requests without FLOW still wait.
    key.offer("b", 1, "1d");
    for _ in 0..4 {
        key.offer("", 1, "1d");
    }
    key.admit(3);
    let counts = key.admitted_by_flow();
    assert_eq!(counts, [("a", 1), ("b", 1), ("", 1)]);
}

#[test]
fn a_replica_sees_the_state_the_admissions_left() {
    let primary = Server::start();
    let replica = Server::with(replica_config(&primary));
    wait_link_up(&replica);
    let mut key = Key::new(&primary);
    key.offer_rounds((3, 1), (1, 2), 3);
    key.admit(6);
    wait_replicas(&mut key.ctl, 1);
    let on_primary = get_bytes(&mut key.ctl, "k");
    assert!(on_primary.is_some());
    assert_eq!(get_bytes(&mut replica.conn(), "k"), on_primary);
    assert_eq!(
        pexpiretime(&mut replica.conn(), "k"),
        pexpiretime(&mut key.ctl, "k")
    );
    let counts = key.admitted_by_flow();
    assert_eq!(counts.iter().map(|c| c.1).sum::<usize>(), 6);
}

/// Runs closed-loop flows `(clients, flow, weight)` on `RL.GCRA k 1 1h` for
/// `steps` admissions, one an hour: each flow's admissions.
fn closed_loops(flows: &[(usize, &'static str, u64)], steps: usize) -> Vec<(&'static str, usize)> {
    let server = Server::start();
    let mut loops = common::flows::ClosedLoops::new(&server);
    clock_set(&mut loops.ctl, T0);
    assert_eq!(decide(&mut loops.ctl, &["RL.GCRA", "k", "1", "1h"])[0], 1);
    for &(n, flow, weight) in flows {
        loops.start(n, &["RL.GCRA", "k", "1", "1h"], flow, weight);
    }
    loops.run(steps, HOUR);
    let counts = loops.admitted_by_flow();
    eprintln!("closed loops {flows:?}: {counts:?}");
    counts
}

/// Each flow's admissions are its weight over the weights of all, within
/// 5 % of that share.
fn assert_shares(counts: &[(&'static str, usize)], weights: &[u64]) {
    let total: usize = counts.iter().map(|c| c.1).sum();
    let weight: u64 = weights.iter().sum();
    for (c, w) in counts.iter().zip(weights) {
        let ideal = *w as f64 / weight as f64;
        let got = c.1 as f64 / total as f64;
        assert!(
            (got - ideal).abs() <= 0.05 * ideal,
            "{counts:?}: {} {got} vs {ideal}",
            c.0
        );
    }
}

#[test]
fn a_one_client_flow_that_re_sends_at_once_gets_half_against_a_hundred_clients() {
    let counts = closed_loops(&[(100, "a", 1), (1, "b", 1)], 200);
    assert_eq!(counts.iter().map(|c| c.1).sum::<usize>(), 200);
    assert_shares(&counts, &[1, 1]);
}

#[test]
fn a_one_client_flow_gets_its_weights_share_and_no_more() {
    // Weight 8 with 50 clients against weight 1 with one.
    let counts = closed_loops(&[(50, "a", 8), (1, "b", 1)], 360);
    assert_shares(&counts, &[8, 1]);
    // One client per flow, weights 1:4.
    let counts = closed_loops(&[(1, "a", 1), (1, "b", 4)], 200);
    assert_shares(&counts, &[1, 4]);
}

#[test]
fn five_backlogged_flows_and_a_one_client_flow_share_by_weight() {
    let flows = [
        (20, "f1", 1),
        (20, "f2", 1),
        (20, "f3", 2),
        (20, "f4", 4),
        (20, "f5", 8),
        (1, "six", 1),
    ];
    let counts = closed_loops(&flows, 680);
    assert_shares(&counts, &[1, 1, 2, 4, 8, 1]);
}

/// On the real clock, `RL.GCRA k 100 1s`: closed-loop clients of `flows`
/// `(clients, flow, weight)`, each re-sending as soon as it is answered,
/// for 5 s to settle and 10 s measured. Prints each flow's share against
/// its ideal (its weight over the sum) and returns the ratios.
fn real_clock_shares(flows: &[(usize, &'static str, u64)]) -> Vec<f64> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;
    let server = Server::with(Config::real_clock());
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Vec<Arc<AtomicUsize>> = flows.iter().map(|_| Arc::default()).collect();
    let mut threads = Vec::new();
    for (i, &(n, flow, weight)) in flows.iter().enumerate() {
        for _ in 0..n {
            let mut c = server.conn();
            let (stop, count) = (stop.clone(), counts[i].clone());
            let weight = weight.to_string();
            threads.push(std::thread::spawn(move || {
                let args = [
                    "RL.GCRA", "k", "100", "1s", "WAIT", "30s", "FLOW", flow, "WEIGHT", &weight,
                ];
                while !stop.load(Relaxed) {
                    match call(&mut c, &args) {
                        Ok(redis::Value::Array(v)) if v.first() == Some(&redis::Value::Int(1)) => {
                            count.fetch_add(1, Relaxed);
                        }
                        Ok(_) => {}
                        // Printed: a client that fails stops wanting service.
                        Err(e) => {
                            eprintln!("{flow}: {e}");
                            return;
                        }
                    }
                }
            }));
        }
    }
    std::thread::sleep(std::time::Duration::from_secs(5));
    let start: Vec<usize> = counts.iter().map(|c| c.load(Relaxed)).collect();
    std::thread::sleep(std::time::Duration::from_secs(10));
    let end: Vec<usize> = counts.iter().map(|c| c.load(Relaxed)).collect();
    stop.store(true, Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let got: Vec<usize> = end.iter().zip(&start).map(|(e, s)| e - s).collect();
    let total: usize = got.iter().sum();
    let weights: u64 = flows.iter().map(|f| f.2).sum();
    println!("real clock, RL.GCRA k 100 1s, {total} admissions in 10 s:");
    let mut ratios = Vec::new();
    for ((clients, flow, weight), n) in flows.iter().zip(&got) {
        let ideal = *weight as f64 / weights as f64;
        let share = *n as f64 / total as f64;
        println!("  {flow:<4} {clients:>3} clients, weight {weight}: {n:>5} admitted, share {share:.4}, ideal {ideal:.4}, ratio {:.3}", share / ideal);
        ratios.push(share / ideal);
    }
    ratios
}

/// The real clock (`scripts/bench_fair.sh`; not in `make test`: each runs
/// 15 s on a real clock). A one-client flow takes no more than its share
/// (a slow machine may give it less: its client re-sends late).
#[test]
#[ignore]
fn real_clock_closed_loop_shares() {
    let six = [
        (20, "f1", 1),
        (20, "f2", 1),
        (20, "f3", 2),
        (20, "f4", 4),
        (20, "f5", 8),
        (1, "six", 1),
    ];
    let shapes: [&[(usize, &'static str, u64)]; 4] = [
        &[(100, "a", 1), (1, "b", 1)],
        &[(50, "a", 8), (1, "b", 1)],
        &[(1, "a", 1), (1, "b", 4)],
        &six,
    ];
    for flows in shapes {
        let ratios = real_clock_shares(flows);
        let one = flows.iter().position(|f| f.0 == 1).unwrap();
        assert!(ratios[one] <= 1.05, "{flows:?}: {ratios:?}");
    }
}
