//! The server's own limits hold for every RL.* command: at `maxmemory`
//! with `noeviction` they get Redis's OOM error and write nothing, and work
//! again once memory is freed; a user whose ACL allows only `rl:*` keys can
//! neither read nor write any other key through them (RL.ALL's extra keys
//! included), directly, in a transaction or from a script.

mod common;
mod hostile;

use common::{Config, Server};
use hostile::*;

/// A valid call of every decision command on `keys[0]` (RL.ALL on all).
fn calls(keys: &[&str]) -> Vec<Vec<String>> {
    let k = keys[0].to_string();
    let s = |w: &[&str]| w.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut all = s(&["RL.ALL", &keys.len().to_string()]);
    all.extend(keys.iter().map(|k| k.to_string()));
    for _ in keys {
        all.extend(s(&["GCRA", "10", "1d"]));
    }
    vec![
        s(&["RL.GCRA", &k, "10", "1d"]),
        s(&["RL.BUCKET", &k, "10", "1", "1d"]),
        s(&["RL.SLIDING", &k, "10", "1d"]),
        s(&["RL.FIXED", &k, "10", "1d"]),
        s(&["CL.THROTTLE", &k, "5", "10", "86400"]),
        all,
        s(&["RL.GCRA", &k, "10", "1d", "DRYRUN"]),
        s(&["RL.GCRA", &k, "10", "1d", "COST", "0"]),
    ]
}

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

fn used_memory(c: &mut Raw) -> u64 {
    let info = c.ok(&["INFO", "memory"]).bulk().unwrap();
    let info = String::from_utf8(info).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

#[test]
fn at_maxmemory_every_command_gets_oom_and_writes_nothing() {
    let config = Config::default().with_policies();
    let mut s = Server::with(config.arg("maxmemory-policy", "noeviction"));
    let mut c = Raw::connect(s.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    define_named(&mut c);
    for (i, shape) in SHAPES.iter().enumerate().filter(|(_, s)| s.keyed()) {
        c.ok(&shape.valid(format!("live:{i}").as_bytes()));
    }
    // Fill 4 MB, then set maxmemory below what is used: every write that
    // Redis guards with deny-oom is refused from now on.
    let chunk = vec![b'x'; 256 << 10];
    for i in 0..16 {
        c.ok(&[&b"SET"[..], format!("fill:{i}").as_bytes(), &chunk]);
    }
    let limit = used_memory(&mut c) - (512 << 10);
    c.ok(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    assert_eq!(c.call(&["SET", "probe", "x"]).error(), Some(OOM));

    let before = snapshot(&mut c);
    let mut keys = vec!["fresh".to_string()];
    keys.extend((0..SHAPES.len()).map(|i| format!("live:{i}")));
    for key in &keys {
        for call in calls(&[key, "fresh2"]) {
            let r = c.call(&call);
            assert_eq!(r.error(), Some(OOM), "{call:?}");
        }
    }
    assert_eq!(changed(&before, &snapshot(&mut c)), Vec::<String>::new());
    // Reading the clock writes nothing and still works.
    assert_eq!(c.call(&["RL.CLOCK"]), Reply::Int(T0 as i64));

    // More room: the limiters work again, then at the limit refuse again.
    c.ok(&["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(
        c.ok(&["RL.GCRA", "live:0", "10", "1d"]).ints()[..3],
        [1, 10, 8]
    );
    c.ok(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    assert_eq!(
        c.call(&["RL.GCRA", "live:0", "10", "1d"]).error(),
        Some(OOM)
    );
    // Memory freed: they work again, on a fresh database. (SYNC: Valkey 8
    // frees a user FLUSHALL lazily by default.)
    c.ok(&["FLUSHALL", "SYNC"]);
    assert!(used_memory(&mut c) < limit);
    for shape in SHAPES.iter().filter(|s| s.keyed()) {
        c.ok(&shape.valid(b"after"));
        c.ok(&["DEL", "after"]);
    }
    assert!(c.ping() && s.alive());
}

const NOPERM: &str = "NOPERM";

fn user(s: &Server, name: &str) -> Raw {
    let mut c = Raw::connect(s.port);
    c.ok(&["AUTH", name, "pw"]);
    c
}

fn is_noperm(r: &Reply) -> bool {
    r.error().is_some_and(|e| e.starts_with(NOPERM))
}

/// How Redis 7.0 words an ACL key denial inside a script.
fn is_script_denial(r: &Reply) -> bool {
    r.error().is_some_and(|e| {
        // Redis: NOPERM or "can't access at least one of the keys";
        // Valkey 8: "ACL failure in script: No permissions to access a key".
        e.contains(NOPERM)
            || e.contains("can't access at least one of the keys")
            || e.contains("No permissions to access a key")
    })
}

#[test]
fn a_user_limited_to_rl_keys_reaches_no_other_key() {
    let mut s = Server::start();
    let mut admin = Raw::connect(s.port);
    admin.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    for (name, keys) in [
        ("limited", "~rl:*"),
        ("reader", "%R~rl:*"),
        ("writer", "%W~rl:*"),
        ("both", "%RW~rl:*"),
    ] {
        admin.ok(&["ACL", "SETUSER", name, "on", ">pw", keys, "+@all"]);
    }
    // Keys outside rl:*, of our state and not, with and without a TTL.
    admin.ok(&["SET", "other", "secret"]);
    admin.ok(&["RL.GCRA", "other:gcra", "10", "1d"]);
    admin.ok(&["CL.THROTTLE", "other:cell", "5", "10", "86400"]);
    admin.ok(&["RPUSH", "other:list", "x"]);
    let before = snapshot(&mut admin);
    let others = ["other", "other:gcra", "other:cell", "other:list", "missing"];

    let mut limited = user(&s, "limited");
    for other in others {
        // Directly, as the only key, or as any one of RL.ALL's keys.
        for keys in [
            vec![other],
            vec!["rl:a", other],
            vec!["rl:a", "rl:b", other],
        ] {
            for call in calls(&keys) {
                if keys.len() > 1 && call[0] != "RL.ALL" {
                    continue;
                }
                let r = limited.call(&call);
                assert!(is_noperm(&r), "{call:?}: {r:?}");
            }
        }
        // numkeys spelt so that Redis's own integer parser (no leading
        // zeros) and the module's might disagree about the keys.
        for numkeys in ["01", "001", "1", "2"] {
            let mut call = vec!["RL.ALL", numkeys, other];
            if numkeys == "2" {
                call.insert(2, "rl:a");
            }
            call.extend(["GCRA", "10", "1d"]);
            if numkeys == "2" {
                call.extend(["GCRA", "10", "1d"]);
            }
            let r = limited.call(&call);
            assert!(is_noperm(&r), "{call:?}: {r:?}");
        }
        // From a script, declared or not, and in a transaction.
        let script = "return redis.call('RL.GCRA', KEYS[1], '10', '1d')";
        let r = limited.call(&["EVAL", script, "1", other]);
        assert!(is_script_denial(&r), "{r:?}");
        let script = format!("return redis.call('RL.GCRA', '{other}', '10', '1d')");
        let r = limited.call(&["EVAL", &script, "0"]);
        assert!(is_script_denial(&r), "{r:?}");
        limited.ok(&["MULTI"]);
        assert!(is_noperm(&limited.call(&["RL.GCRA", other, "10", "1d"])));
        let r = limited.call(&["EXEC"]);
        assert!(
            r.error().is_some_and(|e| e.starts_with("EXECABORT")),
            "{r:?}"
        );
    }
    // Its own keys work (commands still being written may answer an error
    // of their own, never NOPERM).
    for call in calls(&["rl:a", "rl:b"]) {
        let r = limited.call(&call);
        assert!(!is_noperm(&r), "{call:?}: {r:?}");
    }
    assert_eq!(limited.ok(&["RL.GCRA", "rl:x", "10", "1d"]).ints()[0], 1);
    assert_eq!(
        limited
            .ok(&["CL.THROTTLE", "rl:c", "5", "10", "86400"])
            .ints()[0],
        0
    );
    // Every RL.* decision reads and writes: read-only or write-only access
    // to rl:* is not enough, both are.
    for (name, allowed) in [("reader", false), ("writer", false), ("both", true)] {
        let mut c = user(&s, name);
        for call in calls(&["rl:a", "rl:b"]) {
            let r = c.call(&call);
            assert_eq!(!is_noperm(&r), allowed, "{name} {call:?}: {r:?}");
        }
    }
    let after = snapshot(&mut admin);
    let outside: Vec<String> = changed(&before, &after)
        .into_iter()
        .filter(|k| !k.starts_with("rl:"))
        .collect();
    assert_eq!(outside, Vec::<String>::new());
    assert!(admin.ping() && s.alive());
}
