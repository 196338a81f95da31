//! A client keeps calling while a replica takes over. Over the whole run a
//! key admits at most its limit plus the admitted writes that had not
//! reached the replica at the switch; exactly its limit when the replica
//! was caught up (WAIT after each admission, or a coordinated FAILOVER).
//! Both servers run manual clocks set to the same time, and the windows
//! are an hour long, so that nothing refills during the run.

mod common;
use common::topology::*;
use common::workload::*;
use common::*;

const LIMIT: u64 = 8;
const KEYS_PER_FAMILY: usize = 4;

/// Every key's call, and what happened to it.
struct Run {
    calls: Vec<(Vec<String>, &'static Family)>,
    admitted: Vec<usize>,
    /// The primary's replication offset just after each admission there.
    offsets: Vec<Vec<u64>>,
}

impl Run {
    fn new() -> Run {
        let calls: Vec<_> = FAMILIES
            .iter()
            .flat_map(|f| {
                (0..KEYS_PER_FAMILY)
                    .map(move |i| ((f.fixed)(&format!("{}:{i}", f.prefix), LIMIT), f))
            })
            .collect();
        let n = calls.len();
        Run {
            calls,
            admitted: vec![0; n],
            offsets: vec![Vec::new(); n],
        }
    }

    /// One call on every key; after each admission, `after` runs (WAIT,
    /// or reading the offset). Stops at the first error (READONLY while a
    /// FAILOVER turns the server into a replica) and returns it.
    fn round(
        &mut self,
        c: &mut redis::Connection,
        mut after: impl FnMut(&mut redis::Connection, usize, &mut Run),
    ) -> Result<(), redis::RedisError> {
        for i in 0..self.calls.len() {
            let (call, family) = (&self.calls[i].0, self.calls[i].1);
            let reply = common::cmd(&call.iter().map(String::as_str).collect::<Vec<_>>())
                .query::<redis::Value>(c)?;
            if (family.admitted)(&reply) {
                self.admitted[i] += 1;
                after(c, i, self);
            }
        }
        Ok(())
    }

    /// Calls until every key is denied, plus a round to show it stays so.
    fn drain(&mut self, c: &mut redis::Connection) {
        for _ in 0..=LIMIT + 1 {
            self.round(c, |_, _, _| {})
                .expect("calls on the new primary");
        }
    }
}

fn pair() -> (Server, Server) {
    let primary = Server::start();
    let replica = Server::with(replica_config(&primary));
    wait_link_up(&replica);
    wait_replicas_online(&primary, 1);
    clock_set(&mut primary.conn(), T0);
    clock_set(&mut replica.conn(), T0);
    (primary, replica)
}

fn promote(replica: &Server) -> redis::Connection {
    let mut r = replica.conn();
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .unwrap();
    r
}

#[test]
fn a_synchronously_caught_up_replica_admits_exactly_the_limit() {
    let (mut primary, replica) = pair();
    let mut p = primary.conn();
    let mut run = Run::new();
    for _ in 0..5 {
        run.round(&mut p, |c, _, _| wait_replicas(c, 1)).unwrap();
    }
    kill9(&mut primary);
    let mut r = promote(&replica);
    run.drain(&mut r);
    for (i, (call, _)) in run.calls.iter().enumerate() {
        assert_eq!(run.admitted[i] as u64, LIMIT, "{call:?}");
    }
}

#[test]
fn after_a_crash_a_key_admits_at_most_its_limit_plus_unreplicated_writes() {
    let (mut primary, mut replica) = pair();
    let mut p = primary.conn();
    let mut run = Run::new();
    let record = |c: &mut redis::Connection, i: usize, run: &mut Run| {
        let offset = repl_offset(c);
        run.offsets[i].push(offset);
    };
    for _ in 0..3 {
        run.round(&mut p, record).unwrap();
    }
    // Cut the link for good: the replica is stopped, so it cannot
    // reconnect, and what the primary admits next stays in its backlog.
    let replica_pid = info_field(&mut replica.conn(), "server", "process_id").unwrap();
    signal(&replica_pid, "-STOP");
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut p)
        .unwrap();
    for _ in 0..2 {
        run.round(&mut p, record).unwrap();
    }
    kill9(&mut primary);
    signal(&replica_pid, "-CONT");
    assert!(replica.alive());
    // The replica first applies what its socket still holds, then sees the
    // link close; only then is its offset final.
    let mut r = replica.conn();
    wait_until("the replica to see its link close", 10, || {
        !info(&mut r, "replication").contains("master_link_status:up")
    });
    let reached = repl_offset(&mut r);
    let mut r = promote(&replica);
    run.drain(&mut r);

    let mut lost_total = 0;
    for (i, (call, _)) in run.calls.iter().enumerate() {
        let lost = run.offsets[i].iter().filter(|&&o| o > reached).count();
        lost_total += lost;
        let admitted = run.admitted[i];
        assert!(admitted as u64 >= LIMIT, "{call:?}: {admitted}");
        assert!(
            admitted as u64 <= LIMIT + lost as u64,
            "{call:?}: {admitted} admitted, limit {LIMIT}, {lost} unreplicated"
        );
    }
    // At least the two rounds after the cut never reached the replica.
    assert!(lost_total >= 2 * run.calls.len(), "{lost_total} lost");
}

fn signal(pid: &str, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, pid])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_coordinated_failover_admits_exactly_the_limit() {
    let (primary, replica) = pair();
    let mut p = primary.conn();
    let mut run = Run::new();
    for _ in 0..3 {
        run.round(&mut p, |_, _, _| {}).unwrap();
    }
    // FAILOVER returns at once; the client keeps calling the old primary
    // until it answers READONLY, then moves to the new one.
    let _: () = redis::cmd("FAILOVER").query(&mut primary.conn()).unwrap();
    wait_until("the old primary to answer READONLY", 20, || {
        match run.round(&mut p, |_, _, _| {}) {
            Ok(()) => false,
            Err(e) => {
                assert_eq!(e.code(), Some("READONLY"), "{e}");
                true
            }
        }
    });
    let mut r = replica.conn();
    wait_until("the replica to become primary", 10, || {
        info(&mut r, "replication").contains("role:master")
    });
    run.drain(&mut r);
    for (i, (call, _)) in run.calls.iter().enumerate() {
        assert_eq!(run.admitted[i] as u64, LIMIT, "{call:?}");
    }
}
