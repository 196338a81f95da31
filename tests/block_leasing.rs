//! Block leasing from the client library against a real server with the
//! manual clock, on a clock of the test's own for the client (`acquire_at`):
//! blocks taken with PARTIAL, admitted locally, the rest returned with
//! REFUND; the store sees one command per block. A queued lease waits in
//! the server's line for whole blocks.

mod common;

use common::blocking::await_waiting;
use common::*;
use redis_ratelimit_client::blocks::MAX_GAP;
use redis_ratelimit_client::{BlockingLeasedLimit, Gcra, LeasePlan};
use std::time::{Duration, Instant};

type Lease = BlockingLeasedLimit<redis::Connection>;

/// One unit an hour, bursts of 10 (an hour, not a second: keys expire on
/// the server's real clock, and each outlives the test however slow the
/// machine).
fn policy() -> Gcra {
    Gcra::new(10, 10 * HOUR)
}

const HOUR: Duration = Duration::from_secs(3_600);

fn lease(s: &Server, key: &str, block: LeasePlan) -> Lease {
    BlockingLeasedLimit::new(s.conn(), key, policy(), block)
}

fn remaining(c: &mut redis::Connection, key: &str) -> i64 {
    let d: Vec<i64> = cmd(&["RL.PEEK", key, "GCRA", "10", "10h"])
        .query(c)
        .unwrap();
    d[2]
}

#[test]
fn a_lease_takes_blocks_admits_locally_and_returns_the_rest() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let t = Instant::now();
    let mut a = lease(&s, "l", LeasePlan::fixed(4));
    let mut b = lease(&s, "l", LeasePlan::fixed(4));
    // One command takes a block of 4; three more are admitted locally.
    for _ in 0..4 {
        assert!(a.acquire_at(t).unwrap().allowed);
    }
    assert_eq!(a.commands(), 1);
    assert_eq!(remaining(&mut c, "l"), 6);
    // The second manager takes 4, then a partial block of the last 2.
    for _ in 0..6 {
        assert!(b.acquire_at(t).unwrap().allowed);
    }
    assert_eq!(b.commands(), 2);
    assert_eq!(remaining(&mut c, "l"), 0);
    // Nothing left: denied, and then answered locally until due.
    assert!(!a.acquire_at(t).unwrap().allowed);
    assert!(!a.acquire_at(t).unwrap().allowed);
    assert_eq!(a.commands(), 2);
    // An hour later one unit has accrued: a (new) manager's block of 4
    // takes it.
    advance(&mut c, 3_600 * SECOND);
    let mut d = lease(&s, "l", LeasePlan::fixed(4));
    assert!(d.acquire_at(t).unwrap().allowed);
    // One of 4 and the key empty: answered locally until a block could
    // have accrued (4 h), or at most `MAX_GAP`, without asking the store...
    assert_eq!(MAX_GAP, Duration::from_secs(1));
    assert!(!d.acquire_at(t).unwrap().allowed);
    assert!(
        !d.acquire_at(t + Duration::from_millis(999))
            .unwrap()
            .allowed
    );
    assert_eq!(d.commands(), 1, "the later answers were local");
    assert_eq!(remaining(&mut c, "l"), 0);
    // ...then it asks again, and a whole block has accrued.
    advance(&mut c, 4 * 3_600 * SECOND);
    assert!(d.acquire_at(t + MAX_GAP).unwrap().allowed);
    assert_eq!(d.commands(), 2);
    assert_eq!(d.lease().held(), 3);
    // Unused units go back: take a block, spend one, return three.
    d.refund_all().unwrap();
    assert_eq!(remaining(&mut c, "l"), 3);
    d.refund_all().unwrap();
    assert_eq!(d.commands(), 3, "nothing held, nothing sent");
}

#[test]
fn a_queued_lease_waits_in_line_for_whole_blocks_one_command_each() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let t = Instant::now();
    let queued = || LeasePlan::fixed(4).queued(24 * HOUR);
    let mut a = lease(&s, "q", queued());
    let mut b = lease(&s, "q", queued());
    // Whole blocks at once while they fit: 10 - 4 - 4 leaves 2.
    assert!(a.acquire_at(t).unwrap().allowed);
    assert!(b.acquire_at(t).unwrap().allowed);
    assert_eq!(remaining(&mut c, "q"), 2);
    for _ in 0..3 {
        assert!(a.acquire_at(t).unwrap().allowed);
    }
    // `a`'s block is spent: its next call waits in line for 4 units,
    // two of which have yet to accrue.
    let waiter = std::thread::spawn(move || {
        let admitted = a.acquire_at(t).unwrap().allowed;
        (admitted, a)
    });
    await_waiting(&mut c, 1);
    advance(&mut c, 3_600 * SECOND);
    assert_eq!(blocking::waiting(&mut c), 1, "3 of 4 units: still waiting");
    advance(&mut c, 3_600 * SECOND);
    let (admitted, mut a) = waiter.join().unwrap();
    assert!(admitted, "the whole block came");
    assert_eq!((a.commands(), a.lease().held()), (2, 3));
    assert_eq!(remaining(&mut c, "q"), 0);
    // Leaving (at shutdown) gives the rest back.
    a.refund_all().unwrap();
    b.refund_all().unwrap();
    assert_eq!(remaining(&mut c, "q"), 6);
    assert_eq!((a.commands(), b.commands()), (3, 2));
}

#[test]
fn a_failed_call_does_not_leave_the_lease_waiting_for_it() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let t = Instant::now();
    // A key of another type: the store answers the block's call with an
    // error.
    let _: () = cmd(&["SET", "broken", "x"]).query(&mut c).unwrap();
    let mut a = lease(&s, "broken", LeasePlan::fixed(4));
    assert!(matches!(
        a.acquire_at(t),
        Err(redis_ratelimit_client::Error::Server { .. })
    ));
    // Once the key is fixed the next request calls again.
    let _: () = cmd(&["DEL", "broken"]).query(&mut c).unwrap();
    let answer = a.acquire_at(t).unwrap();
    assert!(answer.allowed, "{answer:?}");
    assert_eq!((a.commands(), a.lease().held()), (2, 3));
    assert_eq!(remaining(&mut c, "broken"), 6);
}

#[test]
fn a_request_of_several_units_takes_them_from_the_block_or_is_denied() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let t = Instant::now();
    let mut a = lease(&s, "costs", LeasePlan::fixed(4));
    // A call of max(block, cost) units; the request takes 3 of them.
    assert!(a.acquire_cost_at(t, 3).unwrap().allowed);
    assert_eq!((a.commands(), a.lease().held()), (1, 1));
    assert_eq!(remaining(&mut c, "costs"), 6);
    let mut admitted: i64 = 3;
    for cost in [2, 0, 4, 1, 5, 2, 3] {
        let answer = a.acquire_cost_at(t, cost).unwrap();
        if answer.allowed {
            admitted += cost as i64;
        } else {
            // Denied locally until the next call is due.
            assert!(
                answer.retry_after.is_some_and(|d| d <= MAX_GAP),
                "{answer:?}"
            );
        }
    }
    // More than the limit: never admitted; what the call took is held.
    assert!(!a.acquire_cost_at(t + MAX_GAP, 11).unwrap().allowed);
    assert!(a.acquire_cost_at(t + MAX_GAP, 0).unwrap().allowed);
    a.refund_all().unwrap();
    assert_eq!(a.lease().held(), 0);
    assert_eq!(
        remaining(&mut c, "costs"),
        10 - admitted,
        "the server charged what was admitted"
    );
}
