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

/// Whether `CLIENT UNBLOCK` ends a wait on this server (INFO says; the
/// module refuses it where the server could abort on it).
pub fn client_unblock_allowed(c: &mut Connection) -> bool {
    info_field(c, "ratelimit", "ratelimit_client_unblock").as_deref() == Some("yes")
}

/// Makes the waiting client `id` leave its line: by `CLIENT UNBLOCK` where
/// the server allows it, else by `CLIENT KILL`.
pub fn unblock_or_kill(ctl: &mut Connection, id: i64) {
    let id = id.to_string();
    let ended: i64 = if client_unblock_allowed(ctl) {
        redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(&id)
            .query(ctl)
            .unwrap()
    } else {
        redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(&id)
            .query(ctl)
            .unwrap()
    };
    assert_eq!(ended, 1, "client {id} was not waiting");
}

/// Ends the waits of clients `ids` that are still blocked, and says which
/// of them were ended without a reply to read: by `CLIENT UNBLOCK` where
/// the server allows it (each then gets the timeout's denial), else by
/// `CLIENT KILL` of the blocked ones (found in `CLIENT LIST`).
pub fn end_waits(ctl: &mut Connection, ids: &[i64]) -> Vec<bool> {
    if client_unblock_allowed(ctl) {
        for id in ids {
            let _: i64 = redis::cmd("CLIENT")
                .arg("UNBLOCK")
                .arg(id)
                .query(ctl)
                .expect("CLIENT UNBLOCK");
        }
        await_waiting(ctl, 0);
        return vec![false; ids.len()];
    }
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(ctl)
        .expect("CLIENT LIST");
    let blocked: Vec<i64> = list
        .lines()
        .filter(|l| {
            l.split(' ')
                .any(|f| f.starts_with("flags=") && f.contains('b'))
        })
        .filter_map(|l| {
            l.split(' ')
                .find_map(|f| f.strip_prefix("id="))?
                .parse()
                .ok()
        })
        .collect();
    let killed: Vec<bool> = ids.iter().map(|id| blocked.contains(id)).collect();
    for id in ids.iter().filter(|id| blocked.contains(id)) {
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query(ctl)
            .expect("CLIENT KILL");
    }
    await_waiting(ctl, 0);
    killed
}
