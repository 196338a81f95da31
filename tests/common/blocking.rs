//! Clients that block (WAIT, RL.ACQUIRE ... WAIT): send without reading,
//! read the reply later, and wait (bounded) until the server counts the
//! waiters.

use super::cmd;
use super::topology::{info_field, wait_until};
use redis::Connection;

/// Sends a command without reading its reply (the client blocks).
pub fn send(c: &mut Connection, args: &[&str]) {
    c.send_packed_command(&cmd(args).get_packed_command())
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// Reads a reply of five integers (a decision in RESP2).
pub fn recv5(c: &mut Connection) -> [i64; 5] {
    let v = c.recv_response().expect("reply");
    let v: Vec<i64> = redis::from_redis_value(v).expect("five integers");
    v.try_into().expect("five fields")
}

/// How many clients the module has waiting (INFO ratelimit).
pub fn waiting(c: &mut Connection) -> u64 {
    info_field(c, "ratelimit", "ratelimit_waiting")
        .and_then(|v| v.parse().ok())
        .expect("ratelimit_waiting")
}

/// Waits (bounded) until the server has `n` clients waiting: a blocked
/// command sent on another connection has arrived.
pub fn await_waiting(c: &mut Connection, n: u64) {
    wait_until(&format!("{n} waiting"), 10, || waiting(c) == n);
}
