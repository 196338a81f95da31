//! Named paths on real servers: an RL.SHARE path defined once
//! (`RL.POLICY SET name SHARE node ...`) and decided by name
//! (`RL.SHARE numkeys key ... POLICY name`), changed live with the units
//! used carried, deleted, counted per node by RL.POLICY STATS, refused
//! with errors naming the argument, and kept across DEBUG RELOAD, RDB
//! restarts, AOF rewrites and full syncs of replicas (diskless too).

mod common;
use common::named::{err, ok, policies, text};
use common::topology::{info, replica_config, wait_link_up, wait_replicas, wait_until};
use common::*;
use redis::Value;

/// Defines `name` as the path of `nodes` (words as RL.SHARE takes them).
fn define(c: &mut redis::Connection, name: &str, nodes: &str) {
    let mut args = vec!["RL.POLICY", "SET", name, "SHARE"];
    args.extend(nodes.split(' '));
    ok(c, &args);
}

/// RL.SHARE on `keys` by the name `name`, then `extra` words.
fn by_name(
    c: &mut redis::Connection,
    keys: &[&str],
    name: &str,
    extra: &[&str],
) -> (i64, i64, i64, Vec<[i64; 5]>) {
    let n = keys.len().to_string();
    let mut args = vec!["RL.SHARE", n.as_str()];
    args.extend_from_slice(keys);
    args.extend(["POLICY", name]);
    args.extend_from_slice(extra);
    combined(c, &args)
}

/// RL.SHARE on `keys` with the nodes given literally.
fn literal(
    c: &mut redis::Connection,
    keys: &[&str],
    nodes: &str,
) -> (i64, i64, i64, Vec<[i64; 5]>) {
    let n = keys.len().to_string();
    let mut args = vec!["RL.SHARE", n.as_str()];
    args.extend_from_slice(keys);
    args.extend(nodes.split(' '));
    combined(c, &args)
}

/// How many of `n` calls of one unit the path `name` admits on `keys`.
fn admitted(c: &mut redis::Connection, keys: &[&str], name: &str, n: usize) -> usize {
    (0..n)
        .filter(|_| by_name(c, keys, name, &[]).0 == 1)
        .count()
}

/// The user/organisation path of docs/commands.md, per hour.
const ORG: &str = "10 1h CEIL 50 CBURST 20 100 1h";

#[test]
fn a_path_by_name_decides_as_the_same_path_given_literally() {
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    define(&mut c, "org", ORG);
    assert_eq!(
        text(&mut c, &["RL.POLICY", "GET", "org"]),
        "SHARE 10 1h CEIL 50 CBURST 20 100 1h"
    );
    // Two users by name, two by their nodes on other keys: the same
    // replies, call for call, as the clock moves.
    for step in 0..60 {
        for (u, n) in [("1", 3), ("2", 1)] {
            for _ in 0..n {
                let named_keys = [format!("{{a}}:user:{u}"), "{a}".to_string()];
                let literal_keys = [format!("{{b}}:user:{u}"), "{b}".to_string()];
                let named = by_name(&mut c, &[&named_keys[0], &named_keys[1]], "org", &[]);
                let given = literal(&mut c, &[&literal_keys[0], &literal_keys[1]], ORG);
                assert_eq!(named, given, "step {step}, user {u}");
            }
        }
        advance(&mut c, 20_000_000);
    }
    // A literal call with the same definition reads the named keys' nodes
    // as its own; with another, it is refused as for any node.
    let e = err(
        &mut c,
        &[
            "RL.SHARE",
            "2",
            "{a}:user:1",
            "{a}",
            "10",
            "1h",
            "CEIL",
            "50",
            "CBURST",
            "20",
            "200",
            "1h",
        ],
    );
    assert_eq!(
        e,
        "ERR RL.SHARE node '{a}' is defined as '100 1h BURST 100 MAXDEBT 1m', not '200 1h \
         BURST 200 MAXDEBT 1m': one definition per node (delete the node to change it)"
    );
    assert_eq!(
        literal(&mut c, &["{a}:user:1", "{a}"], ORG),
        literal(&mut c, &["{b}:user:1", "{b}"], ORG)
    );
    // A look by name: RL.SHARE.PEEK answers as with the nodes given.
    let look = |c: &mut redis::Connection, args: &[&str]| -> Value { call(c, args).unwrap() };
    assert_eq!(
        look(
            &mut c,
            &["RL.SHARE.PEEK", "2", "{a}:user:2", "{a}", "POLICY", "org"]
        ),
        look(
            &mut c,
            &[
                "RL.SHARE.PEEK",
                "2",
                "{b}:user:2",
                "{b}",
                "10",
                "1h",
                "CEIL",
                "50",
                "CBURST",
                "20",
                "100",
                "1h"
            ]
        )
    );
}

/// The live-change rule of named policies, per node: the units used carry
/// (rescaled to the new rates), so a raise admits the difference at once
/// and a cut admits nothing until the used units drain under the new
/// limit; the new definition is stored with the node's next write.
#[test]
fn a_change_carries_each_nodes_units_used_and_a_delete_keeps_the_keys() {
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // A path of one node, the root: as the docs' table of changes.
    define(&mut c, "solo", "2 1h");
    assert_eq!(admitted(&mut c, &["k"], "solo", 3), 2);
    define(&mut c, "solo", "4 1h");
    assert_eq!(admitted(&mut c, &["k"], "solo", 3), 2);
    define(&mut c, "solo", "2 1h");
    // 4 used under a limit of 2: nothing now (the wait told: until 3 of
    // them drain at the new rate, 1.5 h). Until the key's next write they
    // drain at the rate they were written at (4 an hour), as for every
    // named policy: one unit fits once 1 of the 4 is left, after 45 min.
    let (_, blocked_by, retry, _) = by_name(&mut c, &["k"], "solo", &[]);
    assert_eq!((blocked_by, retry), (0, 5_400_000));
    advance(&mut c, 2_700_000_000 - 1);
    assert_eq!(admitted(&mut c, &["k"], "solo", 1), 0);
    advance(&mut c, 1);
    assert_eq!(admitted(&mut c, &["k"], "solo", 2), 1);

    // Two levels: the user's ceiling (2 at once) carries to a raised one
    // (4 at once): 2 more.
    let keys = ["{o}:u", "{o}"];
    define(&mut c, "team", "1 1h CEIL 2 CBURST 2 100 1h");
    assert_eq!(admitted(&mut c, &keys, "team", 3), 2);
    let (allowed, blocked_by, _, _) = by_name(&mut c, &keys, "team", &[]);
    assert_eq!((allowed, blocked_by), (0, 0));
    define(&mut c, "team", "1 1h CEIL 4 CBURST 4 100 1h");
    assert_eq!(admitted(&mut c, &keys, "team", 3), 2);
    // Written under the new definition: a literal call of the old one is
    // refused, naming the new one as stored.
    let e = err(
        &mut c,
        &[
            "RL.SHARE", "2", "{o}:u", "{o}", "1", "1h", "CEIL", "2", "CBURST", "2", "100", "1h",
        ],
    );
    assert!(
        e.contains("is defined as '1 1h BURST 1 CEIL 4 CBURST 4 MAXDEBT 1m'"),
        "{e}"
    );
    // Cut back: 4 used under a ceiling of 2 at once: nothing now.
    define(&mut c, "team", "1 1h CEIL 2 CBURST 2 100 1h");
    assert_eq!(admitted(&mut c, &keys, "team", 2), 0);
    // A key of another algorithm restarts under a name, as for every named
    // policy.
    ok(&mut c, &["RL.POLICY", "SET", "g", "GCRA", "1", "1h"]);
    let _ = decide(&mut c, &["RL.CHECK", "{o}:v", "g"]);
    assert_eq!(admitted(&mut c, &["{o}:v", "{o}"], "team", 1), 1);
    let e = err(
        &mut c,
        &[
            "RL.SHARE", "2", "{o}:w", "{o}:v", "1", "1h", "CEIL", "2", "100", "1h",
        ],
    );
    assert!(e.starts_with("ERR RL.SHARE node '{o}:v'"), "{e}");

    // Deleted: the name is gone, the keys keep their state.
    ok(&mut c, &["RL.POLICY", "DEL", "team"]);
    assert_eq!(
        err(&mut c, &["RL.SHARE", "2", "{o}:u", "{o}", "POLICY", "team"]),
        "ERR no policy named 'team'"
    );
    let exists: i64 = cmd(&["EXISTS", "{o}:u", "{o}"]).query(&mut c).unwrap();
    assert_eq!(exists, 2);
}

#[test]
fn bad_input_is_an_error_naming_it_and_changes_nothing() {
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    define(&mut c, "org", ORG);
    ok(&mut c, &["RL.POLICY", "SET", "plan", "GCRA", "10", "1m"]);
    let digest = text(&mut c, &["RL.POLICY", "DIGEST"]);
    let max = i64::MAX;
    let set = |c: &mut redis::Connection, words: &str| {
        let mut args = vec!["RL.POLICY", "SET", "p"];
        args.extend(words.split(' '));
        err(c, &args)
    };
    for (words, want) in [
        (
            "SHARE",
            "ERR wrong number of arguments for 'rl.policy|set' command".to_string(),
        ),
        (
            "SHARE 10",
            "ERR syntax error: the policy is SHARE node [node ...], each node limit period \
             [BURST n] [CEIL n] [CBURST n] [MAXDEBT n]"
                .to_string(),
        ),
        (
            "SHARE 10 1h CEIL 50",
            "ERR syntax error: node 1 is the root (the last node) and takes no CEIL".into(),
        ),
        (
            "share 10 1h 100 1h",
            "ERR syntax error: node 1 needs CEIL limit: every node but the last (the root) has \
             a ceiling"
                .into(),
        ),
        (
            "SHARE 10 1h CEIL 5 100 1h",
            format!("ERR CEIL must be an integer from 10 to {max}"),
        ),
        (
            "SHARE 10 1h CEIL 50 CBURST 20 100 1h CBURST 5",
            "ERR syntax error: CBURST cannot be combined with the root (a node without CEIL)"
                .into(),
        ),
        (
            "SHARE x 1h",
            format!("ERR limit must be an integer from 1 to {max}"),
        ),
        (
            "SHARE 10 1h CEIL 50 100 1h COST 2",
            "ERR syntax error: unknown option 'COST'".into(),
        ),
        (
            "SHARE 10 1h CEIL 50 100 1h SHADOW",
            "ERR syntax error: SHADOW cannot be combined with SHARE".into(),
        ),
        (
            "LEAKY 10 1h",
            "ERR syntax error: unknown policy 'LEAKY': expected GCRA, BUCKET, SLIDING, FIXED, \
             CONCURRENCY or SHARE"
                .into(),
        ),
    ] {
        assert_eq!(set(&mut c, words), want, "{words}");
    }
    // The bounds: the path's depth, the name's length, the number of
    // policies.
    ok(&mut c, &["CONFIG", "SET", "ratelimit.max-path-nodes", "2"]);
    assert_eq!(
        set(&mut c, "SHARE 1 1h CEIL 2 10 1h CEIL 20 100 1h"),
        "ERR a path's number of nodes must be at most 2 (ratelimit.max-path-nodes)"
    );
    define(&mut c, "two", "1 1h CEIL 2 100 1h");
    let long = "n".repeat(257);
    assert_eq!(
        err(&mut c, &["RL.POLICY", "SET", &long, "SHARE", "100", "1h"]),
        "ERR policy name must be 1 to 256 bytes (ratelimit.max-policy-name)"
    );
    ok(&mut c, &["CONFIG", "SET", "ratelimit.max-policies", "3"]);
    assert_eq!(
        err(&mut c, &["RL.POLICY", "SET", "four", "SHARE", "100", "1h"]),
        "ERR too many policies: at most 3 (ratelimit.max-policies)"
    );
    ok(&mut c, &["RL.POLICY", "DEL", "two"]);
    assert_eq!(text(&mut c, &["RL.POLICY", "DIGEST"]), digest);

    // Uses that do not fit the definition.
    for (args, want) in [
        (
            &["RL.SHARE", "3", "a", "b", "c", "POLICY", "org"][..],
            "ERR syntax error: policy 'org' is a path of 2 nodes, got 3 keys: one key per node, \
             leaf first",
        ),
        (
            &["RL.SHARE.PEEK", "1", "a", "POLICY", "org"],
            "ERR syntax error: policy 'org' is a path of 2 nodes, got 1 key: one key per node, \
             leaf first",
        ),
        (
            &["RL.SHARE", "3", "a", "b", "POLICY", "org"],
            "ERR numkeys must be an integer from 1 to 2",
        ),
        (
            &["RL.SHARE", "2", "a", "b", "POLICY", "nope"],
            "ERR no policy named 'nope'",
        ),
        (
            &["RL.SHARE", "2", "a", "b", "POLICY"],
            "ERR syntax error: POLICY needs a value",
        ),
        (
            &["RL.SHARE", "1", "a", "POLICY", "plan"],
            "ERR policy 'plan' is GCRA, not a SHARE path: use RL.CHECK key plan",
        ),
        (
            &["RL.CHECK", "a", "nope", "OR", "org"],
            "ERR policy 'org' is a SHARE path of 2 nodes: use RL.SHARE numkeys key [key ...] \
             POLICY org",
        ),
        (
            &["RL.ALL", "1", "a", "POLICY", "org"],
            "ERR policy 'org' is a SHARE path of 2 nodes: use RL.SHARE numkeys key [key ...] \
             POLICY org",
        ),
        (
            &["RL.PEEK", "a", "POLICY", "org"],
            "ERR policy 'org' is a SHARE path of 2 nodes: use RL.SHARE numkeys key [key ...] \
             POLICY org",
        ),
        (
            &["RL.SHARE", "2", "a", "b", "POLICY", "org", "REFUND", "1"],
            "ERR syntax error: REFUND cannot be combined with RL.SHARE",
        ),
        (
            &["RL.SHARE", "2", "a", "b", "POLICY", "org", "NOW"],
            "ERR syntax error: unknown option 'NOW'",
        ),
        (
            &["RL.SHARE.PEEK", "2", "a", "b", "POLICY", "org", "COST", "1"],
            "ERR syntax error: unknown option 'COST'",
        ),
        (
            &["RL.SHARE", "2", "a", "a", "POLICY", "org"],
            "ERR key 2 is the same as key 1: each limit needs its own key",
        ),
    ] {
        assert_eq!(err(&mut c, args), want, "{args:?}");
    }
    let keys: i64 = cmd(&["DBSIZE"]).query(&mut c).unwrap();
    assert_eq!(keys, 0, "an error writes nothing");
    let stats = stats(&mut c, "org");
    assert_eq!(stats.calls, 0, "an error counts nothing");
    // A key may be named POLICY.
    let (allowed, ..) = by_name(&mut c, &["{p}", "POLICY"], "org", &[]);
    assert_eq!(allowed, 1);
    cmd(&["DEL", "{p}", "POLICY"]).query::<i64>(&mut c).unwrap();

    // Without `policies on`.
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(
        err(&mut c, &["RL.SHARE", "1", "a", "POLICY", "org"]),
        "ERR named policies are off: load the module with 'policies on'"
    );
}

/// RL.POLICY STATS of a path, as RESP3 gives it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Stats {
    calls: i64,
    allowed: i64,
    denied: i64,
    waits: i64,
    top: Vec<(String, i64)>,
    /// Per node: calls, allowed, denied, blocked, lent.
    nodes: Vec<[i64; 5]>,
}

fn stats(c: &mut redis::Connection, name: &str) -> Stats {
    let v: Value = cmd(&["RL.POLICY", "STATS", name]).query(c).unwrap();
    // RESP2: a flat array of names and values.
    let Value::Array(items) = v else {
        panic!("{v:?}")
    };
    let int = |v: &Value| match v {
        Value::Int(n) => *n,
        other => panic!("{other:?}"),
    };
    let mut out = Stats::default();
    for pair in items.chunks(2) {
        let Value::BulkString(field) = &pair[0] else {
            panic!("{pair:?}")
        };
        match std::str::from_utf8(field).unwrap() {
            "calls" => out.calls = int(&pair[1]),
            "allowed" => out.allowed = int(&pair[1]),
            "denied" => out.denied = int(&pair[1]),
            "waits" => out.waits = int(&pair[1]),
            "shadow_denied" | "deny_listed" => assert_eq!(int(&pair[1]), 0),
            "top_denied" => {
                let top: Vec<(String, i64, i64)> =
                    redis::from_redis_value(pair[1].clone()).unwrap();
                out.top = top.into_iter().map(|(k, n, _)| (k, n)).collect();
            }
            "nodes" => {
                let nodes: Vec<Vec<Value>> = redis::from_redis_value(pair[1].clone()).unwrap();
                out.nodes = nodes
                    .iter()
                    .map(|n| {
                        let names: Vec<String> = n
                            .chunks(2)
                            .map(|p| redis::from_redis_value(p[0].clone()).unwrap())
                            .collect();
                        assert_eq!(names, ["calls", "allowed", "denied", "blocked", "lent"]);
                        let values: Vec<i64> = n.chunks(2).map(|p| int(&p[1])).collect();
                        values.try_into().unwrap()
                    })
                    .collect();
            }
            other => panic!("field {other}"),
        }
    }
    out
}

/// RL.POLICY STATS counts a path's calls as every policy's, and per node
/// (leaf first): the calls through it, its own answer (whether the leaf's
/// request could pass it), the denials whose wait it set (`blocked`) and
/// the admissions that used its assured rate (`lent`).
#[test]
fn stats_count_per_node_which_node_blocked_and_which_lent() {
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Users assured 1 an hour, up to 3 at once; the org 4 an hour.
    define(&mut c, "org", "1 1h CEIL 3 CBURST 3 4 1h");
    let u1 = ["{o}:u1", "{o}"];
    let u2 = ["{o}:u2", "{o}"];
    // u1: its own unit, then one borrowed; then the org keeps the rest
    // (half its burst) for a sibling less far ahead: denied by the org.
    let mut replies = Vec::new();
    for _ in 0..4 {
        replies.push(by_name(&mut c, &u1, "org", &[]));
    }
    // u2, behind u1: its own unit, then one borrowed from what the org kept.
    for _ in 0..2 {
        replies.push(by_name(&mut c, &u2, "org", &[]));
    }
    let verdicts: Vec<(i64, i64)> = replies.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(
        verdicts,
        [(1, -1), (1, -1), (0, 1), (0, 1), (1, -1), (1, -1)]
    );
    let st = stats(&mut c, "org");
    assert_eq!((st.calls, st.allowed, st.denied, st.waits), (6, 4, 2, 0));
    assert_eq!(st.top, [("{o}:u1".to_string(), 2)]);
    // Per node: calls, allowed, denied, blocked, lent. Each node's
    // allowed and denied are its own answers in the replies.
    assert_eq!(st.nodes, [[6, 4, 2, 0, 2], [6, 4, 2, 2, 2]]);
    for (node, counts) in st.nodes.iter().enumerate() {
        let allowed = replies.iter().filter(|r| r.3[node][0] == 1).count();
        assert_eq!(counts[1], allowed as i64);
    }
    assert_eq!(st.nodes.iter().map(|n| n[3]).sum::<i64>(), st.denied);
    assert_eq!(st.nodes.iter().map(|n| n[4]).sum::<i64>(), st.allowed);
    let want = st.nodes.clone();
    // A look counts nothing.
    let _ = call(
        &mut c,
        &["RL.SHARE.PEEK", "2", "{o}:u1", "{o}", "POLICY", "org"],
    )
    .unwrap();
    assert_eq!(stats(&mut c, "org").calls, 6);
    // Redefined with a third level: the counts stay, by place; the new
    // root starts at zero.
    define(&mut c, "org", "1 1h CEIL 3 CBURST 3 4 1h CEIL 4 100 1h");
    let st = stats(&mut c, "org");
    assert_eq!(st.calls, 6);
    assert_eq!(st.nodes[..2], want[..]);
    assert_eq!(st.nodes[2], [0; 5]);
    // RESP3: a map, `nodes` its last field, each node a map.
    let mut c3 = s.conn_resp3();
    let v: Value = cmd(&["RL.POLICY", "STATS", "org"]).query(&mut c3).unwrap();
    let fields = resp3_map(v);
    assert_eq!(
        names(&fields),
        [
            "calls",
            "allowed",
            "denied",
            "shadow_denied",
            "waits",
            "deny_listed",
            "top_denied",
            "nodes"
        ]
    );
    // Counted from the load: CONFIG RESETSTAT leaves them, the nodes too.
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    let after = stats(&mut c, "org");
    assert_eq!(
        (after.calls, after.nodes.clone()),
        (st.calls, st.nodes.clone())
    );
    // A single limit's STATS has no `nodes`.
    ok(&mut c, &["RL.POLICY", "SET", "plan", "GCRA", "10", "1m"]);
    let v: Value = cmd(&["RL.POLICY", "STATS", "plan"]).query(&mut c3).unwrap();
    assert!(!names(&resp3_map(v)).contains(&"nodes"));
}

/// Defines the two policies the durability tests keep, uses the path, and
/// returns the digest.
fn fill(c: &mut redis::Connection) -> String {
    clock_set(c, T0);
    define(c, "org", ORG);
    ok(c, &["RL.POLICY", "SET", "plan", "GCRA", "10", "1h"]);
    assert_eq!(admitted(c, &["{a}:u", "{a}"], "org", 5), 5);
    text(c, &["RL.POLICY", "DIGEST"])
}

/// The path after a reload: the same definition, and its keys' state
/// carried on (the user took 5 of its 20 at once).
fn holds(c: &mut redis::Connection, digest: &str, what: &str) {
    assert_eq!(text(c, &["RL.POLICY", "DIGEST"]), digest, "{what}");
    assert_eq!(
        text(c, &["RL.POLICY", "GET", "org"]),
        "SHARE 10 1h CEIL 50 CBURST 20 100 1h",
        "{what}"
    );
    clock_set(c, T0);
    let (allowed, _, _, replies) = by_name(c, &["{a}:u", "{a}"], "org", &["DRYRUN"]);
    assert_eq!((allowed, replies[0][2]), (1, 14), "{what}");
}

#[test]
fn a_named_path_survives_debug_reload_rdb_restarts_and_aof_rewrites() {
    let s = policies();
    let mut c = s.conn();
    let digest = fill(&mut c);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    holds(&mut c, &digest, "DEBUG RELOAD");
    ok(&mut c, &["SAVE"]);
    let s = s.restart();
    let mut c = s.conn();
    holds(&mut c, &digest, "an RDB restart");

    for preamble in ["no", "yes"] {
        let config = Config::default()
            .with_policies()
            .arg("appendonly", "yes")
            .arg("aof-use-rdb-preamble", preamble);
        let s = Server::with(config);
        let mut c = s.conn();
        let digest = fill(&mut c);
        let s = s.restart();
        let mut c = s.conn();
        holds(
            &mut c,
            &digest,
            &format!("an AOF restart, preamble {preamble}"),
        );
        let _: Value = call(&mut c, &["BGREWRITEAOF"]).unwrap();
        wait_until("the AOF rewrite", 30, || {
            let persistence = info(&mut c, "persistence");
            persistence.contains("aof_rewrite_in_progress:0")
                && persistence.contains("aof_last_bgrewrite_status:ok")
        });
        if preamble == "no" {
            // The policies are written again after the rewritten keys.
            wait_until("the policies after the rewrite", 30, || {
                let aof = aof_through(&s, "SHARE");
                aof.contains("SHARE") && aof.contains("plan")
            });
        }
        let s = s.restart();
        let mut c = s.conn();
        holds(
            &mut c,
            &digest,
            &format!("a rewritten AOF, preamble {preamble}"),
        );
    }
}

#[test]
fn replicas_hold_the_path_after_full_syncs_diskless_too_and_follow_changes() {
    let primary = Server::with(
        Config::default()
            .with_policies()
            .arg("repl-diskless-sync", "yes")
            .arg("repl-diskless-sync-delay", "0"),
    );
    let mut p = primary.conn();
    let digest = fill(&mut p);
    for load in ["disabled", "on-empty-db", "swapdb"] {
        let replica = Server::with(
            replica_config(&primary)
                .with_policies()
                .arg("repl-diskless-load", load),
        );
        wait_link_up(&replica);
        let mut r = replica.conn();
        // A replica takes no clock writes from clients: its clock is its own.
        assert_eq!(text(&mut r, &["RL.POLICY", "DIGEST"]), digest, "{load}");
        assert!(!replica.log().contains("Skipping diskless-load"), "{load}");
        // The look by name answers on the replica as on the primary.
        clock_set(&mut r, T0);
        let look = ["RL.SHARE.PEEK", "2", "{a}:u", "{a}", "POLICY", "org"];
        clock_set(&mut p, T0);
        assert_eq!(
            call(&mut r, &look).unwrap(),
            call(&mut p, &look).unwrap(),
            "{load}"
        );
        // A change reaches it, and a replica refuses one from a client.
        define(&mut p, "org", "10 1h CEIL 60 CBURST 20 100 1h");
        wait_replicas(&mut p, 1);
        assert_eq!(
            text(&mut r, &["RL.POLICY", "GET", "org"]),
            "SHARE 10 1h CEIL 60 CBURST 20 100 1h"
        );
        let e = err(&mut r, &["RL.POLICY", "SET", "org", "SHARE", "1", "1h"]);
        assert!(e.starts_with("READONLY"), "{e}");
        // A call carried to the new definition writes the nodes; the
        // replica holds what the primary holds.
        assert_eq!(by_name(&mut p, &["{a}:u", "{a}"], "org", &[]).0, 1);
        wait_replicas(&mut p, 1);
        for key in ["{a}:u", "{a}"] {
            assert_eq!(
                get_bytes(&mut r, key),
                get_bytes(&mut p, key),
                "{load} {key}"
            );
        }
        assert_eq!(
            call(&mut r, &look).unwrap(),
            call(&mut p, &look).unwrap(),
            "{load}"
        );
        define(&mut p, "org", ORG);
        wait_replicas(&mut p, 1);
    }
}

/// A call that waits (`WAIT`) counts among `waits`, not per node: it is
/// decided when its turn comes. The waiter is admitted by name as by its
/// nodes.
#[test]
fn a_named_path_waits_in_line_and_counts_as_a_wait() {
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    define(&mut c, "solo", "1 1h");
    assert_eq!(admitted(&mut c, &["k"], "solo", 1), 1);
    let mut waiter = s.conn();
    common::blocking::send(
        &mut waiter,
        &["RL.SHARE", "1", "k", "POLICY", "solo", "WAIT", "2h"],
    );
    common::blocking::await_waiting(&mut c, 1);
    advance(&mut c, 3_600_000_000);
    let reply = combined_reply(waiter.recv_response().unwrap());
    assert_eq!((reply.0, reply.3[0][2]), (1, 0));
    let st = stats(&mut c, "solo");
    assert_eq!((st.calls, st.allowed, st.waits), (2, 1, 1));
    assert_eq!(st.nodes, [[1, 1, 0, 0, 1]]);
}

/// Bounded work: a call by name decides each node of its path once,
/// whatever the number of policies defined (2,000 besides it) or of
/// children behind its root (1,000); a path is at most
/// `ratelimit.max-path-nodes` long (32: one decision each).
#[test]
fn a_call_by_name_costs_one_decision_per_node_whatever_else_is_defined() {
    use common::topology::work;
    let s = policies();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    define(&mut c, "org", "10 1h CEIL 50 100000 1h");
    let cost = |c: &mut redis::Connection, user: &str| {
        let before = work(c);
        let (allowed, ..) = by_name(c, &[user, "{org}"], "org", &[]);
        assert_eq!(allowed, 1);
        let after = work(c);
        (after.0 - before.0, after.1 - before.1)
    };
    let alone = cost(&mut c, "{org}:u0");
    let mut pipe = redis::pipe();
    for i in 0..2_000 {
        pipe.cmd("RL.POLICY")
            .arg(&["SET", &format!("p{i}"), "GCRA", "10", "1s"])
            .ignore();
    }
    for i in 1..=1_000 {
        pipe.cmd("RL.SHARE")
            .arg(&["2", &format!("{{org}}:u{i}"), "{org}", "POLICY", "org"])
            .ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    assert_eq!(alone, (2, 0), "one decision per node");
    assert_eq!(cost(&mut c, "{org}:u0"), alone);
    // The longest path the default bound allows: 32 nodes, 32 decisions.
    let mut words: Vec<String> = (0..31)
        .flat_map(|_| ["1", "1h", "CEIL", "2"].map(String::from))
        .collect();
    words.extend(["100", "1h"].map(String::from));
    let mut args = vec!["RL.POLICY", "SET", "deep", "SHARE"];
    args.extend(words.iter().map(String::as_str));
    ok(&mut c, &args);
    let keys: Vec<String> = (0..32).map(|i| format!("{{d}}:{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let before = work(&mut c);
    assert_eq!(by_name(&mut c, &keys, "deep", &[]).0, 1);
    assert_eq!(work(&mut c).0 - before.0, 32);
    args[2] = "deeper";
    args.splice(4..4, ["1", "1h", "CEIL", "2"]);
    assert_eq!(
        err(&mut c, &args),
        "ERR a path's number of nodes must be at most 32 (ratelimit.max-path-nodes)"
    );
}
