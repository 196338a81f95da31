//! Decisions inside MULTI/EXEC and Lua scripts are the decisions made
//! outside them, and replicate to the same state; WATCH sees admitted
//! requests and nothing else.

mod common;
use common::topology::*;
use common::workload::*;
use common::*;
use redis::Value;

/// Runs each call of `calls` (flattened as `n arg1 .. argn`) with
/// redis.call and returns their replies.
const RUN_CALLS: &str = r"
local out, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local call = {}
  for j = 1, n do call[j] = ARGV[i + j] end
  out[#out + 1] = redis.call(unpack(call))
  i = i + n + 1
end
return out
";

/// Sends a group of calls plainly (pipelined), in MULTI/EXEC, or in EVAL.
fn run_group(c: &mut redis::Connection, calls: &[Vec<String>], how: usize) -> Vec<Value> {
    match how {
        0 => {
            let mut pipe = redis::pipe();
            for call in calls {
                pipe.cmd(&call[0]).arg(&call[1..]);
            }
            pipe.query(c).expect("pipeline")
        }
        1 => {
            let mut pipe = redis::pipe();
            pipe.atomic();
            for call in calls {
                pipe.cmd(&call[0]).arg(&call[1..]);
            }
            pipe.query(c).expect("MULTI/EXEC")
        }
        _ => {
            let mut eval = redis::cmd("EVAL");
            eval.arg(RUN_CALLS).arg(0);
            for call in calls {
                eval.arg(call.len()).arg(call);
            }
            eval.query(c).expect("EVAL")
        }
    }
}

#[test]
fn multi_exec_and_scripts_decide_and_replicate_like_plain_calls() {
    // `plain` runs every call on its own; `primary` runs the same calls in
    // groups, each group plainly, in MULTI/EXEC or in a script.
    let plain = Server::start();
    let primary = Server::start();
    let replica = Server::with(replica_config(&primary));
    wait_link_up(&replica);
    let (mut a, mut p, mut r) = (plain.conn(), primary.conn(), replica.conn());
    clock_set(&mut a, T0);
    clock_set(&mut p, T0);
    let errors_before = info(&mut r, "errorstats");

    // Periods of days: a key expiring on one server's wall clock and not
    // yet on the other's would tell them apart.
    let mut workload = Workload::new(91, Windows::Days);
    workload.keys = 200;
    let (mut allowed, mut denied) = (0, 0);
    for group in 0..300 {
        let calls: Vec<(Vec<String>, &Family)> = (0..10).map(|_| workload.next_call()).collect();
        let args: Vec<Vec<String>> = calls.iter().map(|(c, _)| c.clone()).collect();
        let expected = run_group(&mut a, &args, 0);
        let got = run_group(&mut p, &args, group % 3);
        assert_eq!(
            got,
            expected,
            "group {group} ({})",
            ["plain", "MULTI", "EVAL"][group % 3]
        );
        for ((_, family), reply) in calls.iter().zip(&got) {
            if (family.admitted)(reply) {
                allowed += 1;
            } else {
                denied += 1;
            }
        }
        if group % 7 == 0 {
            advance(&mut a, 900 * MS);
            advance(&mut p, 900 * MS);
        }
    }
    assert!(
        allowed > 300 && denied > 300,
        "{allowed} allowed, {denied} denied"
    );
    wait_replicas(&mut p, 1);
    // Expiry times are on each server's own real clock: compare values
    // with the plain server, and everything with the replica.
    let values = |s: Vec<(Vec<u8>, Vec<u8>, i64)>| -> Vec<_> {
        s.into_iter().map(|(k, v, _)| (k, v)).collect()
    };
    let state = snapshot(&mut p);
    assert_eq!(values(snapshot(&mut a)), values(state.clone()), "values");
    assert_same_state(&state, &snapshot(&mut r), "replica");
    assert_eq!(digest(&mut p), digest(&mut r));
    assert_eq!(info(&mut r, "errorstats"), errors_before);
}

/// Whether a transaction that WATCHed the keys of `between` still commits
/// after `between` ran on another connection.
fn watch_survives(
    watcher: &mut redis::Connection,
    other: &mut redis::Connection,
    between: &[String],
) -> (bool, Value) {
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg(between)
        .query(watcher)
        .unwrap();
    assert!(!keys.is_empty());
    let _: () = redis::cmd("WATCH").arg(&keys).query(watcher).unwrap();
    let reply = call_ok(other, between);
    let mut tx = redis::pipe();
    tx.atomic().cmd("SET").arg("watch-marker").arg(1).ignore();
    let committed: Value = tx.query(watcher).unwrap();
    (committed != Value::Nil, reply)
}

#[test]
fn watch_is_invalidated_by_admitted_requests_only() {
    let server = Server::start();
    let (mut w, mut o) = (server.conn(), server.conn());
    clock_set(&mut o, T0);
    for f in FAMILIES {
        let key = format!("{}:watched", f.prefix);
        let call = (f.fixed)(&key, 1);
        let peek = peeking(&call, f.peek);
        let name = f.prefix;
        // A peek at a new key writes nothing.
        let (kept, reply) = watch_survives(&mut w, &mut o, &peek);
        assert!(kept && (f.admitted)(&reply), "{name}: peek at a new key");
        // The one admitted request is a write.
        let (kept, reply) = watch_survives(&mut w, &mut o, &call);
        assert!(!kept && (f.admitted)(&reply), "{name}: admitted");
        // Denied and peeked requests are not.
        let (kept, reply) = watch_survives(&mut w, &mut o, &call);
        assert!(kept && !(f.admitted)(&reply), "{name}: denied");
        // (CL.THROTTLE's quantity 0 is "not limited" even when full.)
        let (kept, _) = watch_survives(&mut w, &mut o, &peek);
        assert!(kept, "{name}: peek when full");
    }
}
