//! What operators meet first: replicas loading asynchronously, ACL rules,
//! unloading and reloading the module on the server `make run` starts.

mod common;
use common::topology::{replica_config, wait_link_up};
use common::*;
use redis::Value;
use std::path::{Path, PathBuf};

/// Every command of the module, as Redis names them, with the ACL
/// categories its definition gives it.
fn commands() -> Vec<(String, Vec<String>)> {
    redis_ratelimit::api::COMMANDS
        .iter()
        .map(|c| {
            let cats = c.acl_categories();
            let cats = cats.split(' ').map(|w| format!("@{w}"));
            (c.lower_name(), cats.collect())
        })
        .collect()
}

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md")
}

/// The words in backquotes in `text`.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The README's ACL table gives every command, once, the categories of its
/// definition; its ACL rule names every command but the administrator's.
#[test]
fn the_readme_gives_every_command_its_acl_categories() {
    let readme = readme();
    let section = &readme[readme.find("**ACL.**").expect("an ACL paragraph")..];
    let section = &section[..section.find("```").expect("the ACL rule")];
    let rows: Vec<(Vec<String>, Vec<String>)> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|row| {
            // A subcommand's `|` is escaped in a Markdown table.
            let row = row.replace("\\|", "\u{1}");
            let cells: Vec<&str> = row.split('|').collect();
            let names = quoted(cells[1])
                .into_iter()
                .map(|n| n.to_lowercase().replace('\u{1}', "|"));
            let mut cats: Vec<String> = quoted(cells[2])
                .iter()
                .flat_map(|c| c.split(' '))
                .map(str::to_string)
                .collect();
            cats.sort();
            (names.collect(), cats)
        })
        .collect();
    let listed: usize = rows.iter().map(|(names, _)| names.len()).sum();
    assert_eq!(listed, commands().len(), "{rows:?}");
    for (command, mut expected) in commands() {
        let row = rows.iter().find(|(names, _)| names.contains(&command));
        expected.sort();
        assert_eq!(row.map(|(_, cats)| cats), Some(&expected), "{command}");
    }
    let rule = readme
        .lines()
        .find(|l| l.starts_with("ACL SETUSER app "))
        .expect("an ACL SETUSER app rule");
    let mut named: Vec<String> = rule
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('+'))
        .map(str::to_string)
        .collect();
    named.sort();
    let mut expected: Vec<String> = commands()
        .into_iter()
        .filter(|(_, cats)| !cats.iter().any(|c| c == "@admin"))
        .map(|(name, _)| name)
        .collect();
    expected.sort();
    assert_eq!(named, expected);
}

fn command_names() -> Vec<String> {
    commands().into_iter().map(|(name, _)| name).collect()
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not text: {other:?}"),
    }
}

fn texts(v: Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(text).collect(),
        other => panic!("not a list: {other:?}"),
    }
}

/// The ACL categories `COMMAND INFO` reports for a command (RESP2: the
/// seventh field), e.g. `["@write", "@fast"]`.
fn acl_categories(c: &mut redis::Connection, command: &str) -> Vec<String> {
    let reply = call(c, &["COMMAND", "INFO", command]).unwrap();
    let Value::Array(mut commands) = reply else {
        panic!("COMMAND INFO: {reply:?}")
    };
    let Value::Array(mut info) = commands.remove(0) else {
        panic!("no info for {command}")
    };
    texts(info.remove(6))
}

/// A connection authenticated as `user`.
fn conn_as(s: &Server, user: &str, password: &str) -> redis::Connection {
    let mut c = s.conn();
    let _: () = cmd(&["AUTH", user, password]).query(&mut c).unwrap();
    c
}

fn error_code(r: redis::RedisResult<Value>) -> String {
    match r {
        Ok(v) => panic!("succeeded with {v:?}"),
        Err(e) => e.code().unwrap_or("").to_string(),
    }
}

/// With `repl-diskless-load swapdb`, a replica loads its primary's data
/// while serving the old: Redis allows it only if every module declares it
/// handles that, and otherwise falls back to loading from disk.
#[test]
fn a_replica_loads_asynchronously_with_the_module() {
    let primary = Server::with(Config::default().arg("repl-diskless-sync", "yes"));
    let mut p = primary.conn();
    clock_set(&mut p, T0);
    decide(&mut p, &["RL.GCRA", "rl:user:1", "10", "1m"]);
    let replica = Server::with(replica_config(&primary).arg("repl-diskless-load", "swapdb"));
    wait_link_up(&replica);
    let log = replica.log();
    assert!(!log.contains("Skipping diskless-load"), "{log}");
    assert!(log.contains("receiving streamed RDB from"), "{log}");
    assert!(
        log.contains("Swapping active DB with loaded DB"),
        "no async load: {log}"
    );
    let mut r = replica.conn();
    assert_eq!(
        get_bytes(&mut r, "rl:user:1"),
        get_bytes(&mut p, "rl:user:1")
    );
}

/// The rule the README gives for servers without ACL categories for module
/// commands, run as written there.
fn readme_rule_works(s: &Server) {
    let readme = readme();
    let rule = readme
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("ACL SETUSER app "))
        .expect("an ACL SETUSER app rule in the README");
    let words: Vec<&str> = rule.split_whitespace().collect();
    let password = words
        .iter()
        .find_map(|w| w.strip_prefix('>'))
        .expect("a >password");
    let mut admin = s.conn();
    let _: () = cmd(&words).query(&mut admin).unwrap();
    let mut app = conn_as(s, "app", password);
    clock_set(&mut admin, T0);
    for args in [
        &["RL.GCRA", "rl:a", "10", "1s"][..],
        &["RL.BUCKET", "rl:b", "10", "1", "1s"],
        &["RL.SLIDING", "rl:s", "10", "1s"],
        &["RL.FIXED", "rl:f", "10", "1s"],
    ] {
        assert_eq!(decide(&mut app, args)[0], 1, "{args:?}");
    }
    for args in [
        &[
            "RL.ALL", "2", "rl:x", "rl:y", "GCRA", "1", "1s", "FIXED", "1", "1s",
        ][..],
        &["CL.THROTTLE", "rl:t", "10", "10", "1"],
    ] {
        call(&mut app, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }
    // Only its keys, and not the clock.
    let other = call(&mut app, &["RL.GCRA", "user:1", "10", "1s"]);
    assert_eq!(error_code(other), "NOPERM");
    assert_eq!(error_code(call(&mut app, &["RL.CLOCK"])), "NOPERM");
    assert_eq!(error_code(call(&mut app, &["GET", "rl:a"])), "NOPERM");
}

/// Where the server lets modules set ACL categories (Redis 7.2+, Valkey 8)
/// the decisions are `@write` (`@fast` only where O(1)) and all commands are
/// in `@ratelimit` where it can add categories (Redis 7.4+, Valkey 8); on
/// Redis 7.0 they have none, the module says so in the log, and the
/// README's explicit rule is the way.
#[test]
fn acl_categories_where_the_server_has_them() {
    let s = Server::start();
    let mut c = s.conn();
    readme_rule_works(&s);
    let acl = |rule: &[&str]| {
        let mut args = vec!["ACL", "SETUSER"];
        args.extend_from_slice(rule);
        let _: () = cmd(&args).query(&mut s.conn()).unwrap();
    };
    acl(&["nowrite", "on", ">pw", "~*", "+@all", "-@write"]);
    acl(&["readwrite", "on", ">pw", "~*", "+@read", "+@write"]);
    let gcra = ["RL.GCRA", "rl:k", "10", "1s"];
    let mut nowrite = conn_as(&s, "nowrite", "pw");
    let mut readwrite = conn_as(&s, "readwrite", "pw");
    if acl_categories(&mut c, "rl.gcra").is_empty() {
        let log = s.log();
        assert!(
            log.contains("has no ACL categories for module commands"),
            "no categories and no notice: {log}"
        );
        for command in command_names() {
            assert_eq!(acl_categories(&mut c, &command), Vec::<String>::new());
        }
        // What the README warns of: categories neither grant nor remove them.
        assert_eq!(decide(&mut nowrite, &gcra)[0], 1);
        assert_eq!(error_code(call(&mut readwrite, &gcra)), "NOPERM");
        return;
    }
    // The definitions' categories are checked against their complexity and
    // flags in a unit test; here, that the server has them.
    assert_eq!(
        commands()
            .iter()
            .find(|(name, _)| name == "rl.gcra")
            .map(|(_, cats)| cats.join(" ")),
        Some("@write @slow".to_string())
    );
    for (command, expected) in commands() {
        let mut got = acl_categories(&mut c, &command);
        got.retain(|cat| cat != "@ratelimit");
        let mut expected = expected.clone();
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "{command}");
    }
    let writers = texts(call(&mut c, &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "write"]).unwrap());
    for (command, _) in commands()
        .iter()
        .filter(|(_, cats)| cats.iter().any(|c| c == "@write"))
    {
        assert!(writers.iter().any(|w| w == command), "{command} not @write");
    }
    // `ACL CAT <category>` leaves module commands out; COMMAND LIST has them.
    let categories = texts(call(&mut c, &["ACL", "CAT"]).unwrap());
    if categories.iter().any(|cat| cat == "ratelimit") {
        let filter = ["COMMAND", "LIST", "FILTERBY", "ACLCAT", "ratelimit"];
        let mut members = texts(call(&mut c, &filter).unwrap());
        members.sort();
        let mut all = command_names();
        all.sort();
        assert_eq!(members, all);
    } else {
        let log = s.log();
        assert!(
            log.contains("cannot add the ACL category 'ratelimit'"),
            "no ratelimit category and no notice: {log}"
        );
        // One notice, not a server warning per command.
        assert!(
            !log.contains("Unrecognized categories flag"),
            "the unknown category was tried: {log}"
        );
    }
    assert_eq!(error_code(call(&mut nowrite, &gcra)), "NOPERM");
    assert_eq!(decide(&mut readwrite, &gcra)[0], 1);
}

/// The repository's redis.conf, loading the module built for the tests.
fn repo_conf(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let conf = std::fs::read_to_string(root.join("redis.conf")).expect("redis.conf");
    let conf = conf.replace(
        "loadmodule ./target/release/libredis_ratelimit.so",
        &format!("loadmodule {}", module_path().display()),
    );
    assert!(conf.contains("enable-module-command local"), "{conf}");
    let path = dir.join("redis.conf");
    std::fs::write(&path, conf).expect("write redis.conf");
    path
}

/// `make run`'s server lets a local client unload and load the module
/// again; the commands come back with their ACL categories.
#[test]
fn module_unload_and_load_on_the_make_run_server() {
    let dir = new_dir();
    let conf = repo_conf(&dir);
    let s = Server::start_in(Config::without_module().conf_file(conf), dir);
    let mut c = s.conn();
    let setting: Vec<String> = cmd(&["CONFIG", "GET", "enable-module-command"])
        .query(&mut c)
        .unwrap();
    assert_eq!(setting, ["enable-module-command", "local"]);
    let before: Vec<Vec<String>> = command_names()
        .iter()
        .map(|name| acl_categories(&mut c, name))
        .collect();
    let _: () = cmd(&["MODULE", "UNLOAD", "ratelimit"])
        .query(&mut c)
        .unwrap();
    assert_eq!(
        error_code(call(&mut c, &["RL.GCRA", "k", "10", "1s"])),
        "ERR"
    );
    let path = module_path();
    let _: () = cmd(&["MODULE", "LOAD", path.to_str().unwrap()])
        .query(&mut c)
        .unwrap();
    assert_eq!(decide(&mut c, &["RL.GCRA", "k", "10", "1s"])[0], 1);
    let after: Vec<Vec<String>> = command_names()
        .iter()
        .map(|name| acl_categories(&mut c, name))
        .collect();
    assert_eq!(before, after);
}

/// A limiter is one plain key: `DEL` resets it, and `SCAN` with the
/// application's prefix finds every limiter.
#[test]
fn del_resets_a_limiter_and_scan_finds_them() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let _: () = cmd(&["SET", "user:1", "not a limiter"])
        .query(&mut c)
        .unwrap();
    decide(&mut c, &["RL.GCRA", "rl:a", "1", "1m"]);
    decide(&mut c, &["RL.SLIDING", "rl:b", "1", "1m"]);
    assert_eq!(decide(&mut c, &["RL.GCRA", "rl:a", "1", "1m"])[0], 0);
    let (_, found): (u64, Vec<String>) = cmd(&["SCAN", "0", "MATCH", "rl:*", "COUNT", "1000"])
        .query(&mut c)
        .unwrap();
    let mut found = found;
    found.sort();
    assert_eq!(found, ["rl:a", "rl:b"]);
    let _: i64 = cmd(&["UNLINK", "rl:a"]).query(&mut c).unwrap();
    let fresh = decide(&mut c, &["RL.GCRA", "rl:a", "1", "1m"]);
    assert_eq!((fresh[0], fresh[2]), (1, 0), "full again: {fresh:?}");
}
