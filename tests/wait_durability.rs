//! WAIT and the replicas and AOF: state is written, and replicated as
//! effects, at the moment of admission, from whichever context admits (an
//! RL.CLOCK call, or the module's timer after a disconnect), in the
//! waiter's database; a timeout, a CLIENT UNBLOCK or a disconnect writes
//! nothing. Two replicas and an AOF restart end digest-equal.

mod common;
use common::blocking::*;
use common::topology::*;
use common::*;
use redis::Connection;

const H: u64 = 3_600_000_000;

fn select(c: &mut Connection, db: u32) {
    let _: () = redis::cmd("SELECT").arg(db).query(c).unwrap();
}

fn client_unblock(c: &mut Connection, id: i64, error: bool) {
    let mut command = redis::cmd("CLIENT");
    command.arg("UNBLOCK").arg(id);
    if error {
        command.arg("ERROR");
    }
    let n: i64 = command.query(c).unwrap();
    assert_eq!(n, 1);
}

#[test]
fn waits_admitted_timed_out_and_abandoned_replicate_exactly() {
    let primary = Server::with(
        Config::default()
            .arg("appendonly", "yes")
            .arg("appendfsync", "always")
            .arg("aof-use-rdb-preamble", "no")
            .arg("propagation-error-behavior", "panic"),
    );
    if !client_unblock_allowed(&mut primary.conn()) {
        eprintln!("skipped: this server refuses CLIENT UNBLOCK of a waiter (INFO ratelimit_client_unblock:no)");
        return;
    }
    let replicas = [
        Server::with(replica_config(&primary)),
        Server::with(replica_config(&primary)),
    ];
    for r in &replicas {
        wait_link_up(r);
    }
    wait_replicas_online(&primary, 2);
    let mut p = primary.conn();
    clock_set(&mut p, T0);
    // Hour-long limits: no key expires on the real clock during the test.
    let gcra = |key: &'static str, wait: Option<&'static str>| {
        let mut v = vec!["RL.GCRA", key, "1", "1h"];
        if let Some(w) = wait {
            v.extend(["WAIT", w]);
        }
        v
    };

    // Admitted by RL.CLOCK ADVANCE.
    decide(&mut p, &gcra("a", None));
    let mut w1 = primary.conn();
    send(&mut w1, &gcra("a", Some("2h")));
    await_waiting(&mut p, 1);
    advance(&mut p, H);
    assert_eq!(recv5(&mut w1)[0], 1);

    // In database 2: the head disconnects, the next is admitted by the
    // module's timer.
    let bucket = |cost: &'static str| {
        vec![
            "RL.BUCKET",
            "b",
            "10",
            "1",
            "1h",
            "COST",
            cost,
            "WAIT",
            "1d",
        ]
    };
    let mut w2 = primary.conn();
    let mut w3 = primary.conn();
    select(&mut w2, 2);
    select(&mut w3, 2);
    assert_eq!(
        decide(&mut w2, &["RL.BUCKET", "b", "10", "1", "1h", "COST", "10"])[0],
        1
    );
    send(&mut w2, &bucket("8"));
    await_waiting(&mut p, 1);
    send(&mut w3, &bucket("2"));
    await_waiting(&mut p, 2);
    advance(&mut p, 3 * H);
    drop(w2);
    assert_eq!(recv5(&mut w3), [1, 10, 1, -1, 9 * 3600 * 1000]);

    // Timed out: the head's state is replaced behind its back with a slot
    // ten hours away; its 2 h deadline passes first.
    decide(&mut p, &gcra("c", None));
    let mut w4 = primary.conn();
    send(&mut w4, &gcra("c", Some("2h")));
    await_waiting(&mut p, 1);
    decide(&mut p, &["RL.GCRA", "slow", "1", "10h"]);
    let _: i64 = redis::cmd("COPY")
        .arg(&["slow", "c", "REPLACE"])
        .query(&mut p)
        .unwrap();
    advance(&mut p, 2 * H);
    assert_eq!(recv5(&mut w4)[0], 0);

    // CLIENT UNBLOCK, with the timeout's denial and with an error.
    decide(&mut p, &gcra("d", None));
    let (mut w5, mut w6) = (primary.conn(), primary.conn());
    let id5: i64 = redis::cmd("CLIENT").arg("ID").query(&mut w5).unwrap();
    let id6: i64 = redis::cmd("CLIENT").arg("ID").query(&mut w6).unwrap();
    send(&mut w5, &gcra("d", Some("2h")));
    await_waiting(&mut p, 1);
    send(&mut w6, &gcra("d", Some("3h")));
    await_waiting(&mut p, 2);
    client_unblock(&mut p, id5, false);
    assert_eq!(recv5(&mut w5)[0], 0);
    client_unblock(&mut p, id6, true);
    let reply = match w6.recv_response() {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("{e:?}"),
    };
    assert!(reply.contains("UNBLOCKED"), "{reply}");
    await_waiting(&mut p, 0);

    let waits = info_field(&mut p, "ratelimit", "ratelimit_waits").unwrap();
    assert!(
        waits.starts_with("started=6,admitted=2,timed_out=2,abandoned=2,"),
        "{waits}"
    );
    wait_replicas(&mut p, 2);
    let expected = digest(&mut p);
    let mut rs: Vec<_> = replicas.iter().map(Server::conn).collect();
    for (i, r) in rs.iter_mut().enumerate() {
        assert_eq!(digest(r), expected, "replica {i}");
        // The timer wrote database 2, not the timer's default.
        let in_db0: i64 = redis::cmd("EXISTS").arg("b").query(r).unwrap();
        assert_eq!(in_db0, 0, "replica {i}");
        select(r, 2);
        let in_db2: i64 = redis::cmd("EXISTS").arg("b").query(r).unwrap();
        assert_eq!(in_db2, 1, "replica {i}");
    }
    drop(rs);
    drop(replicas);
    drop((w1, w3, w4, w5, w6));
    drop(p);
    let primary = primary.restart();
    let mut p = primary.conn();
    assert_eq!(digest(&mut p), expected, "AOF restart");
}
