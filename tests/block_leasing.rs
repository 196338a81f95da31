//! Block leasing from the client library against a real server with the
//! manual clock: blocks taken with PARTIAL, admitted locally, the rest
//! returned with REFUND; the store sees one command per block.

mod common;

use common::*;
use redis_ratelimit_client::{BlockLease, BlockingLeasedLimit, Gcra};
use std::time::Duration;

type Lease = BlockingLeasedLimit<redis::Connection>;

fn lease(s: &Server, key: &str, block: u64) -> Lease {
    let policy = Gcra::new(10, Duration::from_secs(10));
    BlockingLeasedLimit::new(s.conn(), key, policy, BlockLease::fixed(block))
}

fn peek(c: &mut redis::Connection, key: &str) -> Vec<i64> {
    cmd(&["RL.PEEK", key, "GCRA", "10", "10s"])
        .query(c)
        .unwrap()
}

#[test]
fn a_lease_takes_blocks_admits_locally_and_returns_the_rest() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let mut a = lease(&s, "l", 4);
    let mut b = lease(&s, "l", 4);
    // One command takes a block of 4; three more are admitted locally.
    for _ in 0..4 {
        assert!(a.acquire().unwrap());
    }
    assert_eq!(a.commands, 1);
    assert_eq!(peek(&mut c, "l")[2], 6);
    // The second manager takes 4, then a partial block of the last 2.
    for _ in 0..6 {
        assert!(b.acquire().unwrap());
    }
    assert_eq!(b.commands, 2);
    assert_eq!(peek(&mut c, "l")[2], 0);
    // Nothing left: denied, and then answered locally until due.
    assert!(!a.acquire().unwrap());
    assert!(!a.acquire().unwrap());
    assert_eq!(a.commands, 2);
    // A second later one unit has accrued: a (new) manager's block of 4
    // takes it. (`a` paces itself on the real clock: not tested here.)
    advance(&mut c, SECOND);
    let mut d = lease(&s, "l", 4);
    assert!(d.acquire().unwrap());
    // One of 4 and the key empty: answered locally until a block could
    // have accrued, without asking the store.
    assert!(!d.acquire().unwrap());
    assert!(!d.acquire().unwrap());
    assert_eq!(d.commands, 1, "the later answers were local");
    assert_eq!(peek(&mut c, "l")[2], 0);
    // Unused units go back: take a block, spend one, return three. (A
    // new manager: `b`, which got a short block, paces itself on the real
    // clock.)
    advance(&mut c, 10 * SECOND);
    let mut e = lease(&s, "l", 4);
    assert!(e.acquire().unwrap());
    assert_eq!(peek(&mut c, "l")[2], 6);
    e.refund_all().unwrap();
    assert_eq!(peek(&mut c, "l")[2], 9);
    e.refund_all().unwrap();
    assert_eq!(e.commands, 2, "nothing held, nothing sent");
}
