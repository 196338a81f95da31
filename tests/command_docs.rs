//! COMMAND DOCS and COMMAND INFO for every command, as a real server
//! reports them: summary, since, complexity, and the arguments with their
//! types, tokens, nesting and optional/multiple flags.

mod common;
use common::*;
use redis::Value;

/// A value of a COMMAND DOCS reply read over RESP3.
fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) | Value::VerbatimString { text: s, .. } => s.clone(),
        Value::Int(n) => n.to_string(),
        other => panic!("not text: {other:?}"),
    }
}

fn field<'a>(map: &'a Value, name: &str) -> Option<&'a Value> {
    let Value::Map(pairs) = map else {
        panic!("not a map: {map:?}")
    };
    pairs.iter().find(|(k, _)| text(k) == name).map(|(_, v)| v)
}

fn flags(arg: &Value) -> Vec<String> {
    match field(arg, "flags") {
        Some(Value::Set(f) | Value::Array(f)) => f.iter().map(text).collect(),
        _ => Vec::new(),
    }
}

/// One argument as a synopsis: `name:type`, `TOKEN name:type`, `TOKEN` for
/// pure tokens, `(a | b)` for one-ofs, `[...]` when optional, `...` after
/// an argument that repeats.
fn synopsis(arg: &Value) -> String {
    let kind = text(field(arg, "type").expect("type"));
    let name = text(field(arg, "name").expect("name"));
    let token = field(arg, "token").map(text);
    let subargs = || -> Vec<String> {
        match field(arg, "arguments") {
            Some(Value::Array(list)) => list.iter().map(synopsis).collect(),
            other => panic!("{name}: no subargs: {other:?}"),
        }
    };
    let mut s = match kind.as_str() {
        "pure-token" => token.clone().expect("pure token has a token"),
        "oneof" => format!("({})", subargs().join(" | ")),
        "block" => {
            let parts = subargs().join(" ");
            match &token {
                Some(t) => format!("{t} {parts}"),
                None => parts,
            }
        }
        _ => {
            let typed = format!("{name}:{kind}");
            match &token {
                Some(t) => format!("{t} {typed}"),
                None => typed,
            }
        }
    };
    let flags = flags(arg);
    if flags.iter().any(|f| f == "multiple") {
        s.push_str("...");
    }
    if flags.iter().any(|f| f == "optional") {
        s = format!("[{s}]");
    }
    s
}

fn docs(c: &mut redis::Connection, command: &str) -> Value {
    let reply: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg(command)
        .query(c)
        .expect("COMMAND DOCS");
    field(&reply, command)
        .unwrap_or_else(|| panic!("no docs for {command}: {reply:?}"))
        .clone()
}

fn command_synopsis(doc: &Value) -> String {
    match field(doc, "arguments") {
        Some(Value::Array(args)) => args.iter().map(synopsis).collect::<Vec<_>>().join(" "),
        other => panic!("no arguments: {other:?}"),
    }
}

const GCRA: &str = "GCRA limit:integer period:string [BURST burst:integer]";
const BUCKET: &str = "BUCKET capacity:integer refill:integer period:string";
const MODE: &str = "[(EXACT | APPROX | BUCKETS buckets:integer)]";
const COMMON: &str = "[COST cost:integer] [DRYRUN] [WAIT timeout:string [FLOW flow:string [WEIGHT weight:integer]]] [(FORCE | PARTIAL | REFUND refund:integer)] [RESERVE maxdelay:string] [JITTER] [(BLOCK duration:string | COUNTDENIALS maxdebt:string)]";
/// RL.ALL's: COST is one of its amounts.
const COMMON_BUT_COST: &str =
    "[DRYRUN] [WAIT timeout:string [FLOW flow:string [WEIGHT weight:integer]]] \
                               [(FORCE | PARTIAL | REFUND refund:integer)] [RESERVE maxdelay:string] [JITTER] [(BLOCK duration:string | COUNTDENIALS maxdebt:string)]";
const POLICY: &str = "(GCRA limit:integer period:string [BURST burst:integer] | \
                      BUCKET capacity:integer refill:integer period:string | \
                      SLIDING limit:integer window:string [(EXACT | APPROX | BUCKETS buckets:integer)] | \
                      FIXED limit:integer window:string [ALIGNED] | \
                      CONCURRENCY limit:integer ttl:string | \
                      POLICY name:string)";

/// An RL.SHARE node.
const NODE: &str = "limit:integer period:string [BURST burst:integer] [CEIL ceil:integer] \
                    [CBURST cburst:integer] [MAXDEBT maxdebt:string]";

#[test]
fn every_command_documents_its_arguments() {
    let s = Server::start();
    let mut c = s.conn_resp3();
    let expected = [
        (
            "rl.gcra",
            format!("key:key limit:integer period:string [BURST burst:integer] {COMMON}"),
        ),
        (
            "rl.bucket",
            format!("key:key capacity:integer refill:integer period:string {COMMON}"),
        ),
        (
            "rl.sliding",
            format!("key:key limit:integer window:string {MODE} {COMMON}"),
        ),
        (
            "rl.fixed",
            format!("key:key limit:integer window:string [ALIGNED] {COMMON}"),
        ),
        (
            "rl.sketch",
            "key:key item:string limit:integer window:string [WIDTH width:integer] \
             [DEPTH depth:integer] [COST cost:integer] [DRYRUN] [PARTIAL] [JITTER]"
                .to_string(),
        ),
        (
            "rl.all",
            format!(
                "numkeys:integer key:key... ({GCRA} | {BUCKET} | \
                 SLIDING limit:integer window:string {MODE} | \
                 FIXED limit:integer window:string [ALIGNED] | \
                 CONCURRENCY limit:integer ttl:string | POLICY name:string)... \
                 [(COST cost:integer | COSTS costs:integer...)] {COMMON_BUT_COST}"
            ),
        ),
        ("rl.peek", format!("key:key {POLICY}")),
        (
            "rl.share",
            format!(
                "numkeys:integer key:key... ({NODE}... | POLICY name:string) \
                 [COST cost:integer] [DRYRUN] \
                 [WAIT timeout:string [FLOW flow:string [WEIGHT weight:integer]]] \
                 [RESERVE maxdelay:string] [JITTER]"
            ),
        ),
        (
            "rl.share.peek",
            format!("numkeys:integer key:key... ({NODE}... | POLICY name:string)"),
        ),
        (
            "cl.throttle",
            "key:key max_burst:integer count:integer period:integer [quantity:integer]".into(),
        ),
        (
            "rl.clock",
            "[(SET microseconds:integer | ADVANCE microseconds:integer | HELP)]".into(),
        ),
        (
            "rl.acquire",
            "key:key limit:integer ttl:string [COST cost:integer] [DRYRUN] [WAIT timeout:string [FLOW flow:string [WEIGHT weight:integer]]] [JITTER]"
                .to_string(),
        ),
        ("rl.release", "key:key lease:string".into()),
        ("rl.renew", "key:key lease:string ttl:string".into()),
    ];
    for (command, synopsis) in expected {
        let doc = docs(&mut c, command);
        assert_eq!(command_synopsis(&doc), synopsis, "{command}");
        let since = if command.starts_with("rl.share") {
            "0.2.0"
        } else {
            "0.1.0"
        };
        assert_eq!(
            text(field(&doc, "since").expect("since")),
            since,
            "{command}"
        );
        assert_eq!(text(field(&doc, "group").expect("group")), "module");
        assert_eq!(text(field(&doc, "module").expect("module")), "ratelimit");
        let summary = text(field(&doc, "summary").expect("summary"));
        assert!(summary.len() > 20, "{command}: summary {summary:?}");
        let complexity = text(field(&doc, "complexity").expect("complexity"));
        assert!(complexity.starts_with("O("), "{command}: {complexity:?}");
    }
}

#[test]
fn rl_gcra_arguments_in_detail() {
    let s = Server::start();
    let mut c = s.conn_resp3();
    let doc = docs(&mut c, "rl.gcra");
    let Some(Value::Array(args)) = field(&doc, "arguments") else {
        panic!("no arguments")
    };
    let key = &args[0];
    assert_eq!(text(field(key, "type").unwrap()), "key");
    assert_eq!(text(field(key, "key_spec_index").unwrap()), "0");
    let burst = &args[3];
    assert_eq!(text(field(burst, "name").unwrap()), "burst");
    assert_eq!(text(field(burst, "type").unwrap()), "integer");
    assert_eq!(text(field(burst, "token").unwrap()), "BURST");
    assert_eq!(flags(burst), ["optional"]);
    let dryrun = &args[5];
    assert_eq!(text(field(dryrun, "type").unwrap()), "pure-token");
    assert_eq!(text(field(dryrun, "token").unwrap()), "DRYRUN");
    assert_eq!(flags(dryrun), ["optional"]);
    // Only the key carries a key spec index.
    for arg in &args[1..] {
        assert!(field(arg, "key_spec_index").is_none());
    }
}

/// The same documentation reaches RESP2 clients (redis-cli's default).
#[test]
fn resp2_clients_see_the_docs_too() {
    let s = Server::start();
    let mut c = s.conn();
    let reply: Vec<Value> = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("rl.sliding")
        .query(&mut c)
        .expect("COMMAND DOCS");
    assert_eq!(text(&reply[0]), "rl.sliding");
    let Value::Array(doc) = &reply[1] else {
        panic!("{reply:?}")
    };
    let keys: Vec<String> = doc.iter().step_by(2).map(text).collect();
    for k in [
        "summary",
        "since",
        "group",
        "complexity",
        "module",
        "arguments",
    ] {
        assert!(keys.iter().any(|x| x == k), "{k} missing from {keys:?}");
    }
}

/// On whichever server runs the suite (Redis 7.0+, Valkey 8) the module
/// loads with its command info, and its key specs let the server find the
/// keys.
#[test]
fn loads_on_the_installed_server_with_key_specs() {
    let s = Server::start();
    let mut c = s.conn();
    let docs: Vec<Value> = cmd(&["COMMAND", "DOCS", "rl.gcra"]).query(&mut c).unwrap();
    assert_eq!(
        docs.len(),
        2,
        "the server keeps module command docs: {docs:?}"
    );
    let modules: Value = redis::cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    assert!(format!("{modules:?}").contains("ratelimit"), "{modules:?}");
    let keys: Vec<String> = cmd(&["COMMAND", "GETKEYS", "RL.GCRA", "user:1", "10", "1s"])
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["user:1"]);
    let keys: Vec<String> = cmd(&[
        "COMMAND", "GETKEYS", "RL.ALL", "2", "a", "b", "GCRA", "1", "1s", "GCRA", "1", "1s",
    ])
    .query(&mut c)
    .unwrap();
    assert_eq!(keys, ["a", "b"]);
    let count: Vec<Value> = cmd(&["COMMAND", "DOCS"]).query(&mut c).unwrap();
    assert!(
        count.len() > 100,
        "COMMAND DOCS without arguments still works"
    );
}

/// The flags COMMAND INFO reports (RESP2: the third field).
fn info_flags(c: &mut redis::Connection, command: &str) -> Vec<String> {
    let reply: Vec<Value> = cmd(&["COMMAND", "INFO", command]).query(c).unwrap();
    let [Value::Array(info)] = &reply[..] else {
        panic!("COMMAND INFO {command}: {reply:?}")
    };
    match &info[2] {
        Value::Array(f) | Value::Set(f) => f.iter().map(text).collect(),
        other => panic!("{command}: flags {other:?}"),
    }
}

/// The server reports each command's flags and complexity as its cost in
/// the command table gives them: `fast` only where the cost is O(1).
#[test]
fn flags_and_complexity_come_from_the_command_table() {
    let s = Server::start();
    let mut c = s.conn();
    let mut r3 = s.conn_resp3();
    for def in redis_ratelimit::api::COMMANDS.iter() {
        let name = def.lower_name();
        let flags = info_flags(&mut c, &name);
        let reported = |f: &str| flags.iter().any(|x| x == f);
        assert_eq!(reported("fast"), def.cost.is_fast(), "{name}: {flags:?}");
        for (ours, theirs) in [
            ("write", "write"),
            ("readonly", "readonly"),
            ("deny-oom", "denyoom"),
        ] {
            assert_eq!(reported(theirs), def.has_flag(ours), "{name}: {flags:?}");
        }
        let doc = docs(&mut r3, &name);
        let complexity = text(field(&doc, "complexity").expect("complexity"));
        assert_eq!(complexity, def.complexity(), "{name}");
    }
    // A decision's work grows with its key's waiters: not `fast`.
    assert!(!info_flags(&mut c, "rl.gcra").contains(&"fast".to_string()));
    assert!(info_flags(&mut c, "cl.throttle").contains(&"fast".to_string()));
}
