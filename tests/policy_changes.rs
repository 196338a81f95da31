//! Named policies changed live, on a primary and its replica: a changed
//! limit keeps the units already used, for every algorithm (a raise admits
//! the difference at once, a cut denies until the used units fall under
//! the new limit), and a policy changed to another algorithm converts or
//! restarts its live keys by the documented rule, never a wrong-kind error.
//! The replica receives the effects and ends with the same bytes.

mod common;
use common::topology::{replica_config, wait_link_up, wait_replicas};
use common::*;
use redis::Value;

/// Every algorithm a policy can name, at a limit of `n` per hour.
fn algorithms(n: u64) -> Vec<(&'static str, String)> {
    vec![
        ("GCRA", format!("GCRA {n} 1h")),
        ("BUCKET", format!("BUCKET {n} {n} 1h")),
        ("SLIDING", format!("SLIDING {n} 1h")),
        ("APPROX", format!("SLIDING {n} 1h APPROX")),
        ("BUCKETS", format!("SLIDING {n} 1h BUCKETS 4")),
        ("FIXED", format!("FIXED {n} 1h")),
        ("ALIGNED", format!("FIXED {n} 1h ALIGNED")),
        ("CONCURRENCY", format!("CONCURRENCY {n} 1h")),
    ]
}

struct Pair {
    primary: Server,
    replica: Server,
    p: redis::Connection,
    r: redis::Connection,
}

fn pair() -> Pair {
    let primary = Server::with(Config::default().with_policies());
    let replica = Server::with(replica_config(&primary).with_policies());
    wait_link_up(&replica);
    let mut p = primary.conn();
    clock_set(&mut p, T0);
    let r = replica.conn();
    Pair {
        primary,
        replica,
        p,
        r,
    }
}

impl Pair {
    fn define(&mut self, name: &str, definition: &str) {
        let mut args = vec!["RL.POLICY", "SET", name];
        args.extend(definition.split(' '));
        assert_eq!(call(&mut self.p, &args).unwrap(), Value::Okay, "{args:?}");
    }

    /// RL.CHECK key name: (allowed, remaining).
    fn check(&mut self, key: &str, name: &str) -> (bool, i64) {
        let reply = call(&mut self.p, &["RL.CHECK", key, name])
            .unwrap_or_else(|e| panic!("RL.CHECK {key} {name}: {e}"));
        let Value::Array(fields) = reply else {
            panic!("RL.CHECK {key} {name}: {reply:?}");
        };
        let int = |v: &Value| match v {
            Value::Int(i) => *i,
            other => panic!("{other:?}"),
        };
        (int(&fields[0]) == 1, int(&fields[2]))
    }

    /// Admits `n` in a row.
    fn use_units(&mut self, key: &str, name: &str, n: u64) {
        for i in 0..n {
            assert!(self.check(key, name).0, "{name} {key}: use {i} denied");
        }
    }

    /// How many in a row are admitted now (at most `most`).
    fn admitted_now(&mut self, key: &str, name: &str, most: u64) -> u64 {
        (0..most).take_while(|_| self.check(key, name).0).count() as u64
    }

    /// The replica holds the primary's bytes for `key` and its policies.
    fn replica_agrees(&mut self, key: &str) {
        wait_replicas(&mut self.p, 1);
        assert_eq!(
            get_bytes(&mut self.r, key),
            get_bytes(&mut self.p, key),
            "{key} on the replica"
        );
        assert_eq!(digest_of(&mut self.r), digest_of(&mut self.p));
    }
}

fn digest_of(c: &mut redis::Connection) -> String {
    match call(c, &["RL.POLICY", "DIGEST"]).unwrap() {
        Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_raise_admits_the_difference_at_once_for_every_algorithm() {
    let mut s = pair();
    for ((algorithm, two), (_, four)) in algorithms(2).into_iter().zip(algorithms(4)) {
        let (name, key) = (format!("raise:{algorithm}"), format!("k:raise:{algorithm}"));
        s.define(&name, &two);
        s.use_units(&key, &name, 2);
        assert!(!s.check(&key, &name).0, "{two}: a third is denied");
        s.define(&name, &four);
        assert_eq!(s.admitted_now(&key, &name, 5), 2, "{two} raised to {four}");
        s.replica_agrees(&key);
    }
}

#[test]
fn a_cut_denies_until_the_used_units_fall_under_the_new_limit() {
    let mut s = pair();
    for ((algorithm, four), (_, two)) in algorithms(4).into_iter().zip(algorithms(2)) {
        let (name, key) = (format!("cut:{algorithm}"), format!("k:cut:{algorithm}"));
        s.define(&name, &four);
        s.use_units(&key, &name, 3);
        s.define(&name, &two);
        assert!(!s.check(&key, &name).0, "{four} cut to {two}: 3 used");
        s.replica_agrees(&key);
    }
    // The schedules: 3 units used under 4 an hour drain as written (15 min
    // a unit) until the key's next write; under 2 an hour after 30 min,
    // when the one left is 30 min of backlog at the new pace against a
    // burst of 60: one more then, not before, and the next at the new pace.
    for algorithm in ["GCRA", "BUCKET"] {
        let (name, key) = (format!("cut:{algorithm}"), format!("k:cut:{algorithm}"));
        clock_set(&mut s.p, T0 + 1_800 * SECOND - 1);
        assert!(!s.check(&key, &name).0, "{algorithm}: 1 µs early");
        clock_set(&mut s.p, T0 + 1_800 * SECOND);
        assert!(s.check(&key, &name).0, "{algorithm}: after half an hour");
        assert!(!s.check(&key, &name).0, "{algorithm}: one only");
        clock_set(&mut s.p, T0 + 3_600 * SECOND - 1);
        assert!(!s.check(&key, &name).0, "{algorithm}: the next 1 µs early");
        clock_set(&mut s.p, T0 + 3_600 * SECOND);
        assert!(s.check(&key, &name).0, "{algorithm}: 30 min later");
        s.replica_agrees(&key);
    }
}

#[test]
fn a_schedule_keeps_its_units_when_its_refill_or_burst_changes() {
    let mut s = pair();
    // Two of a bucket of 2 refilled 2 an hour; the refill raised to 8 an
    // hour with a capacity of 4: the two taken stay taken, two are left.
    s.define("b", "BUCKET 2 2 1h");
    s.use_units("k:b", "b", 2);
    s.define("b", "BUCKET 4 8 1h");
    assert_eq!(s.admitted_now("k:b", "b", 5), 2);
    // GCRA with a burst: the burst raised keeps the rate's units.
    s.define("g", "GCRA 2 1h BURST 2");
    s.use_units("k:g", "g", 2);
    s.define("g", "GCRA 2 1h BURST 3");
    assert_eq!(s.admitted_now("k:g", "g", 5), 1);
    s.replica_agrees("k:b");
    s.replica_agrees("k:g");
    // The state of a named schedule records its pace: 15 bytes for 2 an
    // hour (1,800,000,000 µs a unit, a 5-byte varint), tag 0xAE (GCRA) or
    // 0xAF (BUCKET).
    let v = get_bytes(&mut s.p, "k:g").unwrap();
    assert_eq!((v[0], v.len()), (0xAE, 15));
    assert_eq!(get_bytes(&mut s.p, "k:b").unwrap()[0], 0xAF);
}

#[test]
fn every_change_of_algorithm_converts_or_restarts_never_an_error() {
    let mut s = pair();
    let schedules = ["GCRA", "BUCKET"];
    for (from, old) in algorithms(4) {
        for (to, new) in algorithms(4) {
            if from == to {
                continue;
            }
            let (name, key) = (format!("{from}>{to}"), format!("k:{from}>{to}"));
            s.define(&name, &old);
            s.use_units(&key, &name, 2);
            s.define(&name, &new);
            // GCRA and BUCKET carry the two units used; every other change
            // restarts the key.
            let carried = schedules.contains(&from) && schedules.contains(&to);
            let left = if carried { 2 } else { 4 };
            let (allowed, remaining) = s.check(&key, &name);
            assert!(allowed, "{old} changed to {new}");
            assert_eq!(remaining, left - 1, "{old} changed to {new}");
            s.replica_agrees(&key);
            // And back again, on a key now holding the new algorithm's state.
            s.define(&name, &old);
            assert!(s.check(&key, &name).0, "{new} changed back to {old}");
            s.replica_agrees(&key);
        }
    }
    // A literal call on a key of another algorithm is still refused: only
    // a name promises to convert.
    s.define("x", "FIXED 4 1h");
    s.use_units("k:x", "x", 1);
    let (code, _) = error_of(&mut s.p, &[b"RL.GCRA", b"k:x", b"4", b"1h"]);
    assert_eq!(code, "WRONGTYPE");
    let _ = (&s.primary, &s.replica);
}

#[test]
fn a_look_or_dry_run_converts_without_writing() {
    let mut s = pair();
    s.define("d", "GCRA 2 1h");
    s.use_units("k:d", "d", 2);
    let before = get_bytes(&mut s.p, "k:d");
    s.define("d", "GCRA 4 1h");
    let dry = call(&mut s.p, &["RL.CHECK", "k:d", "d", "DRYRUN"]).unwrap();
    let Value::Array(fields) = dry else {
        panic!("{dry:?}")
    };
    assert_eq!((&fields[0], &fields[2]), (&Value::Int(1), &Value::Int(1)));
    assert_eq!(get_bytes(&mut s.p, "k:d"), before);
    s.define("d", "FIXED 4 1h");
    let peek = call(&mut s.p, &["RL.PEEK", "k:d", "POLICY", "d"]).unwrap();
    // A fixed window restarting: all 4 could be taken now.
    assert!(matches!(peek, Value::Array(_)), "{peek:?}");
    assert_eq!(get_bytes(&mut s.p, "k:d"), before);
    s.replica_agrees("k:d");
}
