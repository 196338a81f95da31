//! RL.SHARE: borrowing between limits on a real server, with the manual
//! clock. Key TTLs still run on the server's real clock: the paths have
//! periods of hours, so that no key expires while a test runs, however
//! slow the machine; the docs' example keeps its periods of a second and
//! runs in one transaction.

mod common;
use common::blocking::*;
use common::*;

/// RL.SHARE's RESP2 reply, as RL.ALL's: (allowed, blocked_by,
/// retry_after_ms, per-node replies).
fn share(c: &mut redis::Connection, args: &[&str]) -> (i64, i64, i64, Vec<[i64; 5]>) {
    let mut full = vec!["RL.SHARE"];
    full.extend_from_slice(args);
    combined(c, &full)
}

/// User `u` of org 7: assured 10 an hour, ceiling 50 (bursts of 50),
/// org 100 an hour (the worked example of docs/commands.md, per hour).
fn user(u: usize, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec!["2".into(), format!("{{org:7}}:user:{u}"), "{org:7}".into()];
    for w in ["10", "1h", "CEIL", "50", "CBURST", "50", "100", "1h"] {
        v.push(w.into());
    }
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn state(c: &mut redis::Connection, key: &str) -> (Option<Vec<u8>>, i64) {
    (get_bytes(c, key), pexpiretime(c, key))
}

#[test]
fn a_user_alone_borrows_up_to_its_ceiling_and_a_denial_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let u1 = user(1, &[]);
    let mut call = vec!["RL.SHARE"];
    call.extend(strs(&u1));
    let calls = vec![&call[..]; 50];
    for (i, reply) in atomically(&mut c, &calls).into_iter().enumerate() {
        let (allowed, blocked_by, retry, replies) = combined_reply(reply);
        let i = i as i64;
        assert_eq!((allowed, blocked_by, retry), (1, -1, -1), "call {i}");
        assert_eq!(replies[0][..3], [1, 50, 49 - i]);
        // From its 11th unit on, the user borrows: the org's remaining is
        // what this user could take from it, which leaves a margin of 4 x
        // the org's rate x the user's lead of 1/10 hour (40 units).
        let margin = if i >= 10 { 40 } else { 0 };
        assert_eq!(replies[1][..3], [1, 100, 99 - i - margin]);
    }
    let before = [state(&mut c, "{org:7}:user:1"), state(&mut c, "{org:7}")];
    // At its ceiling: 1/50 of an hour until the ceiling admits again.
    let (allowed, blocked_by, retry, replies) = share(&mut c, &strs(&u1));
    assert_eq!((allowed, blocked_by, retry), (0, 0, 72_000));
    assert_eq!(replies[0][0], 0);
    assert_eq!(replies[0][3], 72_000);
    let after = [state(&mut c, "{org:7}:user:1"), state(&mut c, "{org:7}")];
    assert_eq!(before, after, "a denial writes nothing");
    // Exact: 1 µs early still denied, on time admitted.
    advance(&mut c, 72_000 * MS - 1);
    assert_eq!(share(&mut c, &strs(&u1)).0, 0);
    advance(&mut c, 1);
    assert_eq!(share(&mut c, &strs(&u1)).0, 1);
    // The example of docs/commands.md.
    let example = [
        "2",
        "{org:9}:user:42",
        "{org:9}",
        "10",
        "1s",
        "CEIL",
        "50",
        "CBURST",
        "20",
        "100",
        "1s",
    ];
    // And the look that follows it in docs/commands.md; then user 42 alone
    // takes 20 at once, its CBURST: 19 more after the first. All in one
    // transaction: the org's key lives 10 ms of wall clock, which a loaded
    // machine may let pass between two commands.
    let (mut decide, mut look) = (vec!["RL.SHARE"], vec!["RL.SHARE.PEEK"]);
    decide.extend(&example);
    look.extend(&example);
    let mut calls = vec![&decide[..], &look[..]];
    calls.extend(vec![&decide[..]; 25]);
    let mut replies = atomically(&mut c, &calls).into_iter();
    for reply in replies.by_ref().take(2) {
        let (allowed, blocked_by, retry, replies) = combined_reply(reply);
        assert_eq!((allowed, blocked_by, retry), (1, -1, -1));
        assert_eq!(replies, [[1, 20, 19, -1, 100], [1, 100, 99, -1, 10]]);
    }
    let admitted = replies
        .take_while(|reply| combined_reply(reply.clone()).0 == 1)
        .count();
    assert_eq!(admitted, 19);
    // DRYRUN decides and writes nothing.
    let before = state(&mut c, "{org:7}:user:2");
    assert_eq!(share(&mut c, &strs(&user(2, &["DRYRUN"]))).0, 1);
    assert_eq!(state(&mut c, "{org:7}:user:2"), before);
    assert_eq!(before.0, None);
}

#[test]
fn busy_users_each_get_their_assured_rate_and_together_the_org_rate() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Three users assured 10 an hour up to 50 inside an org of 30 an
    // hour: the assured rates sum to the org's.
    let path = |u: usize| -> Vec<String> {
        let mut v = user(u, &[]);
        v[9] = "30".into();
        v
    };
    let paths: Vec<Vec<String>> = (0..3).map(path).collect();
    let mut got = [0u64; 3];
    let hours = 20;
    let step = 120 * SECOND;
    for t in 0..(hours * 3600 * SECOND / step) {
        for k in 0..3 {
            let u = (k + t as usize) % 3;
            while share(&mut c, &strs(&paths[u])).0 == 1 {
                got[u] += 1;
            }
        }
        advance(&mut c, step);
    }
    for g in got {
        assert!(g >= 10 * hours, "{got:?}");
    }
    let total: u64 = got.iter().sum();
    // The org's rate and burst, plus each user's assured burst.
    assert!(total <= 30 * hours + 30 + 3 * 10, "{got:?}");
}

#[test]
fn a_three_level_path_and_a_user_within_its_assured_rate_despite_a_busy_team() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let path = three_levels;
    let (a, b) = (path("a"), path("b"));
    // User a alone takes 10 at once: its own 5, then what the team and
    // the org lend it while they keep the margin its lead over its
    // siblings asks (the team's 8, at most half its burst; the org's 10).
    let mut n = 0;
    while share(&mut c, &strs(&a)).0 == 1 {
        n += 1;
    }
    assert_eq!(n, 10);
    // User b still has its own assured 5, though what is left of the team
    // and the org is held back: the assured rate is not borrowed.
    for _ in 0..5 {
        assert_eq!(share(&mut c, &strs(&b)).0, 1);
    }
    let (allowed, blocked_by, retry, _) = share(&mut c, &strs(&b));
    // Its own assured rate frees a unit first (1/5 hour).
    assert_eq!((allowed, blocked_by, retry), (0, 0, 720_000));
}

#[test]
fn a_waiter_is_admitted_when_the_path_admits() {
    let s = Server::start();
    let mut ctl = s.conn();
    let mut w = s.conn();
    clock_set(&mut ctl, T0);
    let u1 = user(1, &[]);
    for _ in 0..50 {
        assert_eq!(share(&mut ctl, &strs(&u1)).0, 1);
    }
    let waiting_call = {
        let mut v = vec!["RL.SHARE".to_string()];
        v.extend(user(1, &["WAIT", "1h"]));
        v
    };
    send(&mut w, &strs(&waiting_call));
    await_waiting(&mut ctl, 1);
    advance(&mut ctl, 72_000 * MS - 1);
    assert_eq!(waiting(&mut ctl), 1);
    advance(&mut ctl, 1);
    assert_eq!(waiting(&mut ctl), 0);
    let (allowed, ..) = combined_reply(w.recv_response().unwrap());
    assert_eq!(allowed, 1);
}

#[test]
fn bad_input_is_refused_by_name_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let err = |c: &mut redis::Connection, args: &[&str]| {
        let mut full = vec!["RL.SHARE"];
        full.extend_from_slice(args);
        call(c, &full).unwrap_err().to_string()
    };
    assert!(err(&mut c, &["2", "u", "o", "10", "1m", "100", "1m"]).contains("node 1 needs CEIL"));
    assert!(err(
        &mut c,
        &["2", "u", "o", "10", "1m", "CEIL", "5", "100", "1m"]
    )
    .contains("CEIL must be an integer from 10"));
    assert!(err(
        &mut c,
        &["2", "u", "u", "10", "1m", "CEIL", "50", "100", "1m"]
    )
    .contains("key 2 is the same as key 1"));
    assert!(err(&mut c, &["1", "o", "10", "1m", "FORCE", "COST", "1"])
        .contains("FORCE cannot be combined with RL.SHARE"));
    let _: () = redis::cmd("SET")
        .arg("o")
        .arg("text")
        .query(&mut c)
        .unwrap();
    let e = err(
        &mut c,
        &["2", "u", "o", "10", "1m", "CEIL", "50", "100", "1m"],
    );
    assert!(e.starts_with("WRONGTYPE") || e.contains("WRONGTYPE"), "{e}");
    assert_eq!(get_bytes(&mut c, "u"), None, "nothing written");
    assert_eq!(get_bytes(&mut c, "o"), Some(b"text".to_vec()));
}

#[test]
fn replication_carries_effects_not_the_command() {
    let aof = Server::with(
        Config::default()
            .arg("appendonly", "yes")
            .arg("aof-use-rdb-preamble", "no"),
    );
    let mut a = aof.conn();
    clock_set(&mut a, T0);
    let u1 = user(1, &[]);
    assert_eq!(share(&mut a, &strs(&u1)).0, 1);
    let _: () = redis::cmd("SET")
        .arg("marker")
        .arg("1")
        .query(&mut a)
        .unwrap();
    let text = aof_through(&aof, "marker");
    assert!(!text.to_lowercase().contains("rl.share"), "{text}");
    assert_eq!(text.matches("PXAT").count(), 2, "{text}");
}

/// A waiter admitted and then unblocked with an error in the same
/// event-loop turn (no reply reaches it) is taken back whole: the assured
/// rate it used is given back as well as the ceilings and the root's rate.
#[test]
fn an_admission_taken_back_gives_back_the_assured_rate_it_used() {
    let s = Server::start();
    let mut ctl = s.conn();
    if !client_unblock_allowed(&mut ctl) {
        eprintln!("skipped: this server refuses CLIENT UNBLOCK of a waiter (INFO ratelimit_client_unblock:no)");
        return;
    }
    clock_set(&mut ctl, T0);
    // Users assured 2 per hour up to 10 inside an org of 10 per 10 hours
    // (slow enough to stay spent for the test).
    let path = |u: usize, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["2", &format!("{{o}}:u:{u}"), "{o}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for w in ["2", "1h", "CEIL", "10", "CBURST", "10", "10", "10h"]
            .iter()
            .chain(extra)
        {
            v.push(w.to_string());
        }
        v
    };
    // User 2 spends the org; user 1 its own assured 2.
    while share(&mut ctl, &strs(&path(2, &[]))).0 == 1 {}
    for _ in 0..2 {
        assert_eq!(share(&mut ctl, &strs(&path(1, &[]))).0, 1);
    }
    let mut w = s.conn();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut w).unwrap();
    let mut waiting_call = vec!["RL.SHARE".to_string()];
    waiting_call.extend(path(1, &["WAIT", "2h"]));
    send(&mut w, &strs(&waiting_call));
    await_waiting(&mut ctl, 1);
    // Half an hour frees one unit of user 1's assured rate (the org is in
    // debt): the waiter is admitted on it, and unblocked with an error
    // before its reply is sent.
    let (_, unblocked): (u64, i64) = redis::pipe()
        .cmd("RL.CLOCK")
        .arg("ADVANCE")
        .arg(1_800 * SECOND)
        .cmd("CLIENT")
        .arg("UNBLOCK")
        .arg(id)
        .arg("ERROR")
        .query(&mut ctl)
        .unwrap();
    assert_eq!(unblocked, 1);
    let reply = match w.recv_response() {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("{e:?}"),
    };
    assert!(reply.contains("UNBLOCKED"), "{reply}");
    assert_eq!(waiting(&mut ctl), 0);
    // The unit is user 1's again.
    let (allowed, _, _, replies) = share(&mut ctl, &strs(&path(1, &[])));
    assert_eq!(allowed, 1);
    assert_eq!(
        replies[0][2], 0,
        "its assured rate spent again, the org's too"
    );
}

fn peek_path(c: &mut redis::Connection, path: &[String]) -> (i64, i64, i64, Vec<[i64; 5]>) {
    let mut full = vec!["RL.SHARE.PEEK"];
    full.extend(strs(path));
    combined(c, &full)
}

/// A three-level path: user `u` assured 5 an hour up to 100, in a team
/// assured 10 up to 20, in an org of 20 an hour (ceilings' bursts of the
/// ceilings; debts of up to an hour, the period, as the default minute is
/// for periods of a minute).
fn three_levels(u: &str) -> Vec<String> {
    let words = [
        "3",
        &format!("{{o}}:u:{u}"),
        "{o}:team",
        "{o}",
        "5",
        "1h",
        "CEIL",
        "100",
        "CBURST",
        "100",
        "MAXDEBT",
        "1h",
        "10",
        "1h",
        "CEIL",
        "20",
        "CBURST",
        "20",
        "MAXDEBT",
        "1h",
        "20",
        "1h",
        "MAXDEBT",
        "1h",
    ];
    words.iter().map(|s| s.to_string()).collect()
}

/// A node's `remaining` is the most a request through it could take now:
/// its ceiling's below an idle parent, its assured rate's below a spent
/// one. RL.SHARE.PEEK reports it, with the rest of the reply, and changes
/// nothing; it runs on a replica, as RL.PEEK does.
#[test]
fn a_peek_at_a_path_reports_each_node_and_changes_nothing() {
    let primary = Server::start();
    let replica = Server::with(common::topology::replica_config(&primary));
    common::topology::wait_link_up(&replica);
    common::topology::wait_replicas_online(&primary, 1);
    let (mut c, mut r) = (primary.conn(), replica.conn());
    clock_set(&mut c, T0);
    clock_set(&mut r, T0);
    let (a, b) = (three_levels("a"), three_levels("b"));
    // Nothing sent yet: the leaf may take the team's ceiling (20).
    assert_eq!(
        peek_path(&mut c, &b),
        (
            1,
            -1,
            -1,
            vec![[1, 100, 20, -1, 0], [1, 20, 20, -1, 0], [1, 20, 20, -1, 0]]
        )
    );
    let mut n = 0;
    while share(&mut c, &strs(&a)).0 == 1 {
        n += 1;
    }
    assert_eq!(n, 10);
    // User a is ahead of its siblings: what is left of the team's assured
    // rate (4) is user b's to borrow, not a's; the org keeps a margin of 8
    // for the team (its lead over its own siblings). User b may take its
    // assured 5, not its ceiling's 100.
    let keys = ["{o}:u:b", "{o}:team", "{o}"];
    let before: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    let (allowed, blocked_by, retry, replies) = peek_path(&mut c, &b);
    assert_eq!((allowed, blocked_by, retry), (1, -1, -1));
    assert_eq!(replies[0], [1, 100, 5, -1, 0]);
    assert_eq!(replies[1][..3], [1, 20, 4]);
    assert_eq!(replies[2][..3], [1, 20, 2]);
    let after: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    assert_eq!(before, after, "a peek writes nothing");
    // RL.SHARE's own reply says the same of what is left after it.
    let (allowed, _, _, replies) = share(&mut c, &strs(&b));
    assert_eq!(allowed, 1);
    assert_eq!(replies[0][..3], [1, 100, 4]);
    // On the replica: the same look; RL.SHARE is refused there.
    common::topology::wait_replicas(&mut c, 1);
    assert_eq!(peek_path(&mut r, &b), peek_path(&mut c, &b));
    let mut decision = vec!["RL.SHARE"];
    decision.extend(strs(&b));
    assert_eq!(
        call(&mut r, &decision).unwrap_err().code(),
        Some("READONLY")
    );
    // RESP3: RL.ALL's map.
    let mut c3 = primary.conn_resp3();
    let mut look = vec!["RL.SHARE.PEEK"];
    look.extend(strs(&b));
    let map = resp3_map(call(&mut c3, &look).unwrap());
    assert_eq!(
        names(&map),
        ["allowed", "blocked_by", "retry_after_ms", "limits"]
    );
    assert_eq!(map[0].1, redis::Value::Boolean(true));
    // Nothing but the path: an option is refused as unknown.
    look.extend(["COST", "1"]);
    let refused = call(&mut c, &look).unwrap_err().to_string();
    assert!(
        refused.ends_with("syntax error: unknown option 'COST'"),
        "{refused}"
    );
}

/// With a waiter on the path, a look answers as a new request would:
/// denied behind it.
#[test]
fn a_peek_answers_behind_the_waiters_of_the_path() {
    let s = Server::start();
    let mut ctl = s.conn();
    let mut w = s.conn();
    clock_set(&mut ctl, T0);
    let u1 = user(1, &[]);
    for _ in 0..50 {
        assert_eq!(share(&mut ctl, &strs(&u1)).0, 1);
    }
    let (allowed, blocked_by, retry, _) = peek_path(&mut ctl, &u1);
    assert_eq!((allowed, blocked_by, retry), (0, 0, 72_000));
    let mut waiting_call = vec!["RL.SHARE".to_string()];
    waiting_call.extend(user(1, &["WAIT", "1h"]));
    send(&mut w, &strs(&waiting_call));
    await_waiting(&mut ctl, 1);
    let (allowed, _, retry, _) = peek_path(&mut ctl, &u1);
    assert_eq!((allowed, retry), (0, 144_000), "after the waiter's unit");
    advance(&mut ctl, 72_000 * MS);
    assert_eq!(combined_reply(w.recv_response().unwrap()).0, 1);
}

/// RL.SHARE.PEEK is `readonly`: it breaks no WATCH on the path's keys and
/// answers out of memory, where RL.SHARE is refused.
#[test]
fn a_peek_at_a_path_runs_under_oom_and_breaks_no_watch() {
    let s = Server::with(Config::default().arg("maxmemory-policy", "noeviction"));
    let (mut c, mut w) = (s.conn(), s.conn());
    clock_set(&mut c, T0);
    let u1 = user(1, &[]);
    assert_eq!(share(&mut c, &strs(&u1)).0, 1);
    let _: () = redis::cmd("WATCH")
        .arg("{org:7}:user:1")
        .arg("{org:7}")
        .query(&mut w)
        .unwrap();
    let look = peek_path(&mut c, &u1);
    let mut tx = redis::pipe();
    tx.atomic().cmd("SET").arg("marker").arg(1).ignore();
    let committed: redis::Value = tx.query(&mut w).unwrap();
    assert_ne!(committed, redis::Value::Nil, "WATCH kept");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let mut decision = vec!["RL.SHARE"];
    decision.extend(strs(&u1));
    assert_eq!(call(&mut c, &decision).unwrap_err().code(), Some("OOM"));
    assert_eq!(peek_path(&mut c, &u1), look);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query(&mut c)
        .unwrap();
}

/// One admission an hour: the keys' TTLs (on the wall clock) outlive the
/// tests.
const HOUR: u64 = 3_600 * 1_000_000;

/// Tenant `t`'s path under one root: an assured one per 100 hours (used
/// up first), borrowing up to one an hour; the root one an hour for all:
/// the root is what the tenants share.
fn tenant(t: &str) -> Vec<String> {
    let leaf = format!("{{org}}:{t}");
    let words = [
        "RL.SHARE", "2", &leaf, "{org}", "1", "100h", "CEIL", "100", "1", "1h",
    ];
    words.iter().map(|s| s.to_string()).collect()
}

#[test]
fn flows_offered_10_to_1_share_the_root_half_and_half() {
    let s = Server::start();
    let mut flows = common::flows::Flows::new(&s);
    clock_set(&mut flows.ctl, T0);
    let (heavy, light) = (tenant("heavy"), tenant("light"));
    assert_eq!(share(&mut flows.ctl, &strs(&heavy)[1..]).0, 1);
    assert_eq!(share(&mut flows.ctl, &strs(&light)[1..]).0, 1);
    flows.offer_ten_to_one(&strs(&heavy), &strs(&light), 6);
    flows.advance_until_ended(HOUR, 12);
    assert_eq!(flows.admitted_by_flow(), [("heavy", 6), ("light", 6)]);
}

#[test]
fn weights_3_to_1_share_the_root_three_quarters_and_one_quarter() {
    let s = Server::start();
    let mut flows = common::flows::Flows::new(&s);
    clock_set(&mut flows.ctl, T0);
    // One leaf for both flows, borrowing up to the root's rate.
    let path = [
        "RL.SHARE",
        "2",
        "{org}:team",
        "{org}",
        "1",
        "1h",
        "CEIL",
        "4",
        "CBURST",
        "4",
        "4",
        "1h",
    ];
    // Its own unit and one borrowed: the root then keeps 2 (the team's
    // margin, at most half its burst) for siblings behind the team.
    for _ in 0..2 {
        assert_eq!(share(&mut flows.ctl, &path[1..]).0, 1);
    }
    assert_eq!(share(&mut flows.ctl, &path[1..]).0, 0);
    for _ in 0..4 {
        for _ in 0..10 {
            flows.offer(&path, "heavy", 3, "1d");
        }
        flows.offer(&path, "light", 1, "1d");
    }
    // Four an hour: 16 in four hours, 12 of them the heavy flow's.
    flows.advance_until_ended(HOUR, 16);
    let counts = flows.admitted_by_flow();
    assert_eq!(counts[0].0, "heavy");
    assert!((11..=13).contains(&counts[0].1), "{counts:?}");
    assert_eq!(counts[0].1 + counts[1].1, 16);
}

/// A node's limits are stored with its state: a call that gives its key
/// other limits is refused, naming the key and both definitions, and
/// changes nothing; the same limits spelled otherwise are the same.
#[test]
fn a_node_has_one_definition() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    assert_eq!(share(&mut c, &strs(&user(1, &[]))).0, 1);
    let keys = ["{org:7}:user:1", "{org:7}"];
    let before: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    // The org at 200 an hour in another user's path.
    let mut other = user(2, &[]);
    other[9] = "200".into();
    let mut full = vec!["RL.SHARE"];
    full.extend(strs(&other));
    let e = call(&mut c, &full).unwrap_err().to_string();
    assert!(
        e.contains(
            "RL.SHARE node '{org:7}' is defined as '100 1h BURST 100 MAXDEBT 1m', \
             not '200 1h BURST 200 MAXDEBT 1m'"
        ),
        "{e}"
    );
    // User 1 with another ceiling.
    let mut full = vec!["RL.SHARE"];
    let again = user(1, &["COST", "1"]);
    let mut again = strs(&again);
    again[6] = "40";
    full.extend(&again);
    let e = call(&mut c, &full).unwrap_err().to_string();
    assert!(
        e.contains(
            "RL.SHARE node '{org:7}:user:1' is defined as \
             '10 1h BURST 10 CEIL 50 CBURST 50 MAXDEBT 1m', \
             not '10 1h BURST 10 CEIL 40 CBURST 50 MAXDEBT 1m'"
        ),
        "{e}"
    );
    // The look is refused alike.
    let mut look = vec!["RL.SHARE.PEEK"];
    look.extend(strs(&other));
    assert!(call(&mut c, &look)
        .unwrap_err()
        .to_string()
        .contains("'{org:7}'"));
    let after: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    assert_eq!(before, after, "a refusal writes nothing");
    // The defaults spelled out are the same definition.
    let spelled = [
        "2",
        "{org:7}:user:1",
        "{org:7}",
        "10",
        "3600s",
        "BURST",
        "10",
        "CEIL",
        "50",
        "CBURST",
        "50",
        "MAXDEBT",
        "60000ms",
        "100",
        "60m",
        "MAXDEBT",
        "1m",
    ];
    assert_eq!(share(&mut c, &spelled).0, 1);
    // CBURST belongs to a node with a ceiling.
    let e = call(&mut c, &["RL.SHARE", "1", "r", "10", "1m", "CBURST", "5"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("CBURST cannot be combined with the root"), "{e}");
}

/// A node written in the first layout (tag 0xAD: its TATs alone) decides as
/// it did, takes the call's definition, and is rewritten in the current
/// layout (0xB2) on its next write.
#[test]
fn a_node_in_the_first_layout_is_read_and_rewritten() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let path = |u: &str, org: &str| -> Vec<String> {
        [
            "2", u, org, "10", "1h", "CEIL", "50", "CBURST", "50", "100", "1h",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    // Whole-µs intervals (6 min, 36 s): each TAT is 8 bytes and "0 1".
    // Periods of an hour: the keys outlive the test on the wall clock.
    for _ in 0..4 {
        assert_eq!(share(&mut c, &strs(&path("{o}:u", "{o}"))).0, 1);
    }
    let (user, org) = (
        get_bytes(&mut c, "{o}:u").unwrap(),
        get_bytes(&mut c, "{o}").unwrap(),
    );
    assert_eq!((user[0], org[0]), (0xB2, 0xB2));
    let v1_user = [&[0xAD][..], &user[2..22]].concat();
    let v1_org = [&[0xAD][..], &org[2..12]].concat();
    for (k, v) in [("{o}:v1", &v1_user), ("{o}", &v1_org)] {
        let _: () = redis::cmd("SET").arg(k).arg(v).query(&mut c).unwrap();
    }
    // The same look from the first layout as from the current one.
    let look = |c: &mut redis::Connection, u: &str| {
        let mut full = vec!["RL.SHARE.PEEK".to_string()];
        full.extend(path(u, "{o}"));
        combined(c, &strs(&full))
    };
    let _: () = redis::cmd("SET")
        .arg("{o}:cur")
        .arg(&user)
        .query(&mut c)
        .unwrap();
    let from_v1 = look(&mut c, "{o}:v1");
    assert_eq!(from_v1, look(&mut c, "{o}:cur"));
    assert_eq!(from_v1.3[0][2], 46, "50 less the 4 taken");
    assert_eq!(share(&mut c, &strs(&path("{o}:v1", "{o}"))).0, 1);
    assert_eq!(get_bytes(&mut c, "{o}:v1").unwrap()[0], 0xB2);
}

/// Two users assured 6 a minute each (ceilings 10) in an org of 10 a
/// minute: both busy for ten minutes put the org in debt, never more than
/// its MAXDEBT of 6 s. Once user b stops, user a borrows again as soon as
/// that debt is repaid (at the org's rate less a's own 6: 15 s), not after
/// the ten minutes' 20 units of overcommitment are.
#[test]
fn an_overcommitted_org_lends_again_once_its_capped_debt_is_repaid() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let path = |u: &str| -> Vec<String> {
        let leaf = format!("{{o}}:{u}");
        let words = [
            "2", &leaf, "{o}", "6", "1m", "CEIL", "10", "10", "1m", "MAXDEBT", "6s",
        ];
        words.iter().map(|s| s.to_string()).collect()
    };
    let (a, b) = (path("a"), path("b"));
    for _ in 0..(10 * 60) {
        for p in [&a, &b] {
            while share(&mut c, &strs(p)).0 == 1 {}
        }
        advance(&mut c, SECOND);
    }
    // The org's reset: its burst (1 minute) and at most 6 s of debt.
    let (_, _, _, replies) = peek_path(&mut c, &a);
    assert!(replies[1][4] <= 66_000, "{replies:?}");
    // User a alone, second by second: it borrows again within 16 s.
    let mut got = Vec::new();
    for _ in 0..30 {
        advance(&mut c, SECOND);
        let mut n = 0;
        while share(&mut c, &strs(&a)).0 == 1 {
            n += 1;
        }
        got.push(n);
    }
    // Its assured 6 a minute is 3 in 30 s; borrowing adds the org's spare.
    assert!(got.iter().sum::<i64>() > 3, "{got:?}");
}
