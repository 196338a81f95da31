//! A primary made a replica (`REPLICAOF`, `FAILOVER`) ends every wait:
//! Redis unblocks each blocked client with `-UNBLOCKED`. The module then
//! drops its whole queue, deciding nothing and touching no waiter (no
//! planned admission is given back: a replica admits no one), so the work
//! counted in `ratelimit_work` is zero at 10 waiters as at 10,000 (a count,
//! not a time). Its cost beside Redis's own blocked `BLPOP` clients is
//! measured by `scripts/bench_waiters.sh`.

mod common;
use common::blocking::*;
use common::topology::{replica_config, wait_link_up, wait_until, work};
use common::*;
use redis::Connection;

/// The work a role change does with `n` clients waiting in one line, each
/// of which is answered `-UNBLOCKED`: `REPLICAOF`, or `FAILOVER` to a
/// replica.
fn role_change_with_waiters(n: usize, failover: bool) -> (u64, u64) {
    let server = Server::with(Config::default().arg("maxclients", &(n + 100).to_string()));
    let mut ctl = server.conn();
    clock_set(&mut ctl, T0);
    for name in ["max-waiters-per-key", "max-waiters-per-flow", "max-waiters"] {
        call(
            &mut ctl,
            &[
                "CONFIG",
                "SET",
                &format!("ratelimit.{name}"),
                &n.to_string(),
            ],
        )
        .unwrap();
    }
    let replica = failover.then(|| {
        let replica = Server::with(replica_config(&server));
        wait_link_up(&replica);
        replica
    });
    // The key's state must outlive adding the waiters, however slowly:
    // without a TTL (nothing here writes it again).
    atomically(&mut ctl, &[&["RL.GCRA", "k", "1", "1s"], &["PERSIST", "k"]]);
    let mut waiters: Vec<Connection> = (0..n)
        .map(|_| {
            let mut c = server.conn();
            send(&mut c, &["RL.GCRA", "k", "1", "1s", "WAIT", "1d"]);
            c
        })
        .collect();
    await_waiting(&mut ctl, n as u64);
    let before = work(&mut ctl);
    if failover {
        call(&mut ctl, &["FAILOVER"]).unwrap();
    } else {
        // Nothing listens on port 1: the server stays a replica trying to
        // connect.
        call(&mut ctl, &["REPLICAOF", "127.0.0.1", "1"]).unwrap();
    }
    for w in &mut waiters {
        let reply = w.recv_response();
        let message = format!("{reply:?}");
        assert!(message.contains("UNBLOCKED"), "{message}");
    }
    wait_until("no waiter", 30, || waiting(&mut ctl) == 0);
    let after = work(&mut ctl);
    drop(replica);
    (after.0 - before.0, after.1 - before.1)
}

/// One test, so that the 10,000-client cases run one after the other
/// (each needs as many file descriptors).
#[test]
fn a_role_change_decides_nothing_at_10_and_at_10000_waiters() {
    assert_eq!(role_change_with_waiters(10, false), (0, 0), "REPLICAOF");
    assert_eq!(role_change_with_waiters(10_000, false), (0, 0), "REPLICAOF");
    assert_eq!(role_change_with_waiters(10_000, true), (0, 0), "FAILOVER");
}
