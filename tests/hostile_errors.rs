//! The error table, against a real server: every command (every entry of
//! `hostile::SHAPES`), every argument position and option, every hostile
//! value, wrong arity, and keys of every type and every other algorithm.
//! Each case must answer the exact code and message, change no key (type,
//! value and expiry of every key are compared), and leave the server
//! answering PING.

mod common;
mod hostile;

use common::Server;
use hostile::*;

/// One hostile call and the exact error it must get.
struct Case {
    args: Vec<Vec<u8>>,
    want: String,
}

fn words(ws: &[&str]) -> Vec<Vec<u8>> {
    ws.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// Every argument case of `shape` on `key`: each position and option value
/// replaced by each hostile value, missing, repeated and unknown options,
/// extra and missing arguments.
fn argument_cases(shape: &Shape, key: &[u8]) -> Vec<Case> {
    let mut cases = Vec::new();
    let valid = shape.valid_fixed();
    // Each fixed position.
    for (i, (_, parse)) in shape.fixed.iter().enumerate() {
        for v in HOSTILE {
            if let Some(want) = expected_error(*parse, v) {
                let mut fixed = valid.clone();
                fixed[i] = v.to_vec();
                cases.push(Case {
                    args: shape.args(key, &fixed, &[]),
                    want,
                });
            }
        }
    }
    // Too few arguments: the fixed ones cut short, and the key missing.
    for n in 0..shape.required {
        let mut args = words(&[shape.name]);
        args.extend(words(shape.prefix));
        if shape.keyed() {
            args.push(key.to_vec());
        }
        args.extend(words(shape.infix));
        args.extend(valid[..n].iter().cloned());
        let want = match shape.short {
            Some(short) if args.len() >= shape.min_arity => short.to_string(),
            _ => shape.arity_error(),
        };
        cases.push(Case { args, want });
    }
    if shape.keyed() {
        cases.push(Case {
            args: words(&[shape.name]),
            want: shape.arity_error(),
        });
    }
    // Options: hostile values (keyword in any case), missing values, repeats.
    for opt in shape.options {
        let lower = opt.word.to_ascii_lowercase();
        if let Some((parse, ok)) = opt.value {
            for (j, v) in HOSTILE.iter().enumerate() {
                if let Some(want) = expected_error(parse, v) {
                    let word = if j % 2 == 0 { opt.word } else { &lower };
                    cases.push(Case {
                        args: shape.args(
                            key,
                            &valid,
                            &words(&[word])
                                .into_iter()
                                .chain([v.to_vec()])
                                .collect::<Vec<_>>(),
                        ),
                        want,
                    });
                }
            }
            cases.push(Case {
                args: shape.args(key, &valid, &words(&[opt.word])),
                want: format!("ERR syntax error: {} needs a value", opt.word),
            });
            cases.push(Case {
                args: shape.args(key, &valid, &words(&[opt.word, ok, &lower, ok])),
                want: format!("ERR syntax error: {} given more than once", opt.word),
            });
        } else {
            cases.push(Case {
                args: shape.args(key, &valid, &words(&[opt.word, &lower])),
                want: format!("ERR syntax error: {} given more than once", opt.word),
            });
        }
    }
    // Words the command does not take.
    let mut unknown: Vec<Vec<u8>> = [
        &b"FAST"[..],
        b"",
        b"\xff\r\n",
        b"1",
        b"-",
        &[b'a'; 40],
        b"COSTS",
        b"DRY",
        b"BURST",
        b"APPROX",
        b"ALIGNED",
    ]
    .iter()
    .map(|w| w.to_vec())
    .collect();
    // Not the command's own words: its options, and the modes that any
    // shape of the same command takes (those conflict, tested below).
    let modes = SHAPES
        .iter()
        .filter(|s| s.name == shape.name && s.infix == shape.infix)
        .flat_map(|s| s.options.iter().filter(|o| o.mode));
    let mut known: Vec<&str> = shape.options.iter().chain(modes).map(|o| o.word).collect();
    if shape.name == "RL.ALL" {
        // RL.ALL's per-key amounts: their own cases below.
        known.push("COSTS");
    }
    unknown.retain(|w| {
        !known.iter().any(|k| k.as_bytes() == w) && !shape.tail.iter().any(|t| t.as_bytes() == w)
    });
    for w in unknown {
        let want = match shape.extra {
            Extra::UnknownOption => {
                format!("ERR syntax error: unknown option '{}'", printable(&w))
            }
            Extra::Arity => shape.arity_error(),
        };
        // After the valid options too, where the shape has any.
        let mut rest: Vec<Vec<u8>> = Vec::new();
        let mut modes = 0;
        for opt in shape.options {
            if opt.mode {
                modes += 1;
                if modes > 1 {
                    continue;
                }
            }
            rest.push(opt.word.as_bytes().to_vec());
            if let Some((_, ok)) = opt.value {
                rest.push(ok.as_bytes().to_vec());
            }
        }
        rest.push(w.clone());
        cases.push(Case {
            args: shape.args(key, &valid, &rest),
            want: want.clone(),
        });
        // Right after RL.CHECK's names, a word that is no option is most
        // likely a name without its OR.
        let want = if shape.name == "RL.CHECK" {
            format!(
                "ERR syntax error: unknown option '{}' (separate policy names with OR): \
                 RL.CHECK key name [OR name ...] [options]",
                printable(&w)
            )
        } else {
            want
        };
        cases.push(Case {
            args: shape.args(key, &valid, &[w]),
            want,
        });
    }
    cases.extend(charge_cases(shape, key, &valid));
    cases.extend(flow_cases(shape, key, &valid));
    cases
}

/// A flow without a wait, and a weight without a flow.
fn flow_cases(shape: &Shape, key: &[u8], valid: &[Vec<u8>]) -> Vec<Case> {
    if !shape.options.iter().any(|o| o.word == "FLOW") {
        return Vec::new();
    }
    let table: Vec<(&[&str], &str)> = vec![
        (&["FLOW", "t"], "ERR syntax error: FLOW needs WAIT timeout"),
        (
            &["FLOW", "t", "WEIGHT", "2"],
            "ERR syntax error: FLOW needs WAIT timeout",
        ),
        (&["WEIGHT", "2"], "ERR syntax error: WEIGHT needs FLOW name"),
        (
            &["WAIT", "1ms", "WEIGHT", "2"],
            "ERR syntax error: WEIGHT needs FLOW name",
        ),
    ];
    table
        .into_iter()
        .map(|(rest, want)| Case {
            args: shape.args(key, valid, &words(rest)),
            want: want.to_string(),
        })
        .collect()
}

/// The combinations of charges and amounts the interface excludes.
fn charge_cases(shape: &Shape, key: &[u8], valid: &[Vec<u8>]) -> Vec<Case> {
    let mut cases = Vec::new();
    if !shape.options.iter().any(|o| o.word == "REFUND") {
        return cases;
    }
    let max = i64::MAX;
    let mut table: Vec<(&[&str], String)> = vec![
        (
            &["REFUND", "1", "COST", "1"],
            "ERR syntax error: REFUND cannot be combined with COST".into(),
        ),
        (
            &["DRYRUN", "REFUND", "2"],
            "ERR syntax error: REFUND cannot be combined with DRYRUN".into(),
        ),
        (
            &["FORCE"],
            "ERR syntax error: FORCE needs COST n of 1 or more".into(),
        ),
        (
            &["COST", "0", "PARTIAL"],
            "ERR syntax error: PARTIAL needs COST n of 1 or more".into(),
        ),
        (
            &["COST", "1", "PARTIAL", "FORCE"],
            "ERR syntax error: FORCE, PARTIAL and REFUND are mutually exclusive".into(),
        ),
        (
            &["REFUND", "0"],
            format!("ERR REFUND must be an integer from 1 to {max}"),
        ),
    ];
    if shape.name == "RL.ALL" {
        table.extend([
            (
                &["COSTS"][..],
                "ERR syntax error: COSTS needs one cost per key, got 0 costs for 1 key".into(),
            ),
            (
                &["COSTS", "1", "2"][..],
                "ERR syntax error: COSTS needs one cost per key, got 2 costs for 1 key".into(),
            ),
            (
                &["COSTS", "-1"][..],
                format!("ERR COSTS must be an integer from 0 to {max}"),
            ),
            (
                &["COSTS", "1", "COST", "1"][..],
                "ERR syntax error: COST and COSTS are mutually exclusive".into(),
            ),
            (
                &["COSTS", "1", "PARTIAL"][..],
                "ERR syntax error: PARTIAL cannot be combined with COSTS".into(),
            ),
            (
                &["REFUND", "1", "COSTS", "1"][..],
                "ERR syntax error: REFUND cannot be combined with COSTS".into(),
            ),
            (
                &["REFUND", "COSTS", "1", "REFUND", "1"][..],
                "ERR syntax error: REFUND given more than once".into(),
            ),
        ]);
    }
    for (rest, want) in table {
        cases.push(Case {
            args: shape.args(key, valid, &words(rest)),
            want,
        });
    }
    cases
}

fn code(message: &str) -> &str {
    message.split(' ').next().unwrap_or("")
}

/// Runs `args`, which must fail with `want` and change nothing.
fn check(c: &mut Raw, args: &[Vec<u8>], want: &str, before: &Snapshot, failures: &mut Vec<String>) {
    let got = c.call(args);
    match got.error() {
        Some(msg) if msg == want => {}
        _ => failures.push(format!("{}\n   got {got:?}\n  want {want}", show(args))),
    }
    assert!(matches!(code(want), "ERR" | "WRONGTYPE"), "{want}");
    let after = snapshot(c);
    let diff = changed(before, &after);
    if !diff.is_empty() {
        failures.push(format!("{} changed keys {diff:?}", show(args)));
    }
    assert!(c.ping(), "no PONG after {}", show(args));
}

fn report(failures: Vec<String>, checked: usize) {
    eprintln!("{checked} cases checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A server with named policies on and [`NAMED`] defined, its clock at T0.
fn server() -> (Server, Raw) {
    let server = Server::with(common::Config::default().with_policies());
    let mut c = Raw::connect(server.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    define_named(&mut c);
    (server, c)
}

#[test]
fn every_argument_position_gets_its_error_and_changes_nothing() {
    let (mut server, mut c) = server();
    create_foreign(&mut c);
    // A live limiter per command, which a failing call must not touch.
    for (i, shape) in SHAPES.iter().enumerate() {
        if shape.keyed() {
            c.ok(&shape.valid(format!("live:{i}").as_bytes()));
        }
    }
    // Without their TTLs (on the wall clock, which the manual one does not
    // stop), so that none expires during the thousands of cases, however
    // slow the machine: the module never reads a TTL, and a failing call
    // that wrote one would show in the snapshot.
    let keys = match c.ok(&["KEYS", "*"]) {
        Reply::Array(Some(keys)) => keys,
        other => panic!("KEYS: {other:?}"),
    };
    for key in keys {
        c.ok(&[&b"PERSIST"[..], &key.bulk().expect("a key")]);
    }
    let before = snapshot(&mut c);
    let digest = c.call(&["RL.POLICY", "DIGEST"]);
    let mut failures = Vec::new();
    let mut checked = 0;
    for (i, shape) in SHAPES.iter().enumerate() {
        for key in [format!("live:{i}"), format!("fresh:{i}")] {
            for case in argument_cases(shape, key.as_bytes()) {
                check(&mut c, &case.args, &case.want, &before, &mut failures);
                checked += 1;
            }
        }
    }
    assert_eq!(c.call(&["RL.CLOCK"]), Reply::Int(T0 as i64), "clock moved");
    // Nor did a failing RL.POLICY call change a named policy.
    assert_eq!(c.call(&["RL.POLICY", "DIGEST"]), digest, "policies changed");
    assert!(server.alive());
    assert!(checked > 1_000, "only {checked} cases");
    report(failures, checked);
}

#[test]
fn keys_of_every_type_and_other_state_are_refused_and_kept() {
    let (mut server, mut c) = server();
    let mut keys = create_foreign(&mut c);
    // Values under each command's own tag that are not its layout.
    for shape in SHAPES {
        if let State::Tagged { corrupt, tag, .. } = shape.state {
            for (j, v) in corrupt.iter().enumerate() {
                let key = format!("corrupt:{tag:x}:{j}").into_bytes();
                c.ok(&[&b"SET"[..], &key, v, b"PX", b"100000000"]);
                keys.push(key);
            }
        }
    }
    let before = snapshot(&mut c);
    let mut failures = Vec::new();
    let mut checked = 0;
    for shape in SHAPES.iter().filter(|s| s.keyed()) {
        // The plain call, a dry run and a zero cost must all check the key.
        let mut variants = vec![Vec::new()];
        for opt in shape.options {
            match opt.word {
                "DRYRUN" => variants.push(words(&["DRYRUN"])),
                "COST" => variants.push(words(&["COST", "0"])),
                _ => {}
            }
        }
        for key in &keys {
            let kind = c.ok(&[&b"TYPE"[..], key]);
            let want = if kind == Reply::Status("string".into()) {
                let value = c.ok(&[&b"GET"[..], key]).bulk().unwrap_or_default();
                match expected_state_error(shape.state, &value) {
                    Some(w) => w,
                    None => continue,
                }
            } else {
                WRONGTYPE.to_string()
            };
            // RL.ALL names which of its keys is at fault; the shapes put
            // the key under test first.
            let want = if shape.combined() {
                in_key(&want, 1)
            } else {
                want
            };
            for rest in &variants {
                let args = shape.args(key, &shape.valid_fixed(), rest);
                check(&mut c, &args, &want, &before, &mut failures);
                checked += 1;
            }
        }
    }
    assert!(server.alive());
    assert!(checked > 100, "only {checked} cases");
    report(failures, checked);
}

#[test]
fn the_clock_refuses_what_it_cannot_do() {
    let s = Server::start();
    let mut c = Raw::connect(s.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    let before = snapshot(&mut c);
    let mut failures = Vec::new();
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[b"RL.CLOCK", b"FOO", b"1"],
            "ERR unknown subcommand 'FOO' for RL.CLOCK: try SET, ADVANCE or HELP",
        ),
        (
            &[b"RL.CLOCK", b"\xff\r\n", b"1"],
            "ERR unknown subcommand '???' for RL.CLOCK: try SET, ADVANCE or HELP",
        ),
        (
            &[b"RL.CLOCK", b"SET"],
            "ERR wrong number of arguments for 'rl.clock' command",
        ),
        (
            &[b"RL.CLOCK", b"SET", b"1", b"2"],
            "ERR wrong number of arguments for 'rl.clock' command",
        ),
        (
            &[b"RL.CLOCK", b"GET"],
            "ERR unknown subcommand 'GET' for RL.CLOCK: try SET, ADVANCE or HELP",
        ),
    ];
    for (args, want) in cases {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        check(&mut c, &args, want, &before, &mut failures);
    }
    report(failures, cases.len());
    // At the end of time, ADVANCE can move by nothing more.
    c.ok(&["RL.CLOCK", "SET", "9223372036854775807"]);
    assert_eq!(
        c.call(&["RL.CLOCK", "ADVANCE", "1"]).error(),
        Some("ERR microseconds must be an integer from 0 to 0")
    );
    assert_eq!(c.call(&["RL.CLOCK", "ADVANCE", "0"]), Reply::Int(i64::MAX));
    // The real clock cannot be moved, whatever the value.
    let real = Server::with(common::Config::real_clock());
    let mut r = Raw::connect(real.port);
    for args in [
        ["SET", "1"],
        ["ADVANCE", "1"],
        ["SET", "x"],
        ["ADVANCE", "-1"],
    ] {
        let got = r.call(&["RL.CLOCK", args[0], args[1]]);
        assert_eq!(
            got.error(),
            Some("ERR RL.CLOCK SET and ADVANCE need the module loaded with 'clock manual'"),
            "{args:?}"
        );
    }
}

#[test]
fn rl_all_refuses_as_a_whole_and_changes_no_key() {
    let s = Server::start();
    let mut c = Raw::connect(s.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    create_foreign(&mut c);
    c.ok(&["RL.GCRA", "rl:a", "10", "1d"]);
    c.ok(&["RL.BUCKET", "rl:bucket", "10", "1", "1d"]);
    let before = snapshot(&mut c);
    let g = ["GCRA", "10", "1d"];
    let all = |keys: &[&str], policies: &[&[&str]], rest: &[&str]| -> Vec<Vec<u8>> {
        let mut v = words(&["RL.ALL", &keys.len().to_string()]);
        v.extend(words(keys));
        for p in policies {
            v.extend(words(p));
        }
        v.extend(words(rest));
        v
    };
    let mut cases: Vec<(Vec<Vec<u8>>, String)> = vec![
        // A later key that cannot be decided stops the whole call: the
        // first key, which would admit, is not charged either.
        (
            all(&["rl:a", "f:list"], &[&g, &g], &[]),
            in_key(WRONGTYPE, 2),
        ),
        (
            all(&["rl:a", "f:list"], &[&g, &g], &["DRYRUN"]),
            in_key(WRONGTYPE, 2),
        ),
        (
            all(&["rl:a", "rl:bucket"], &[&g, &g], &[]),
            "WRONGTYPE key 2 holds RL.BUCKET state, not RL.GCRA state".into(),
        ),
        (
            all(&["rl:a", "f:str0"], &[&g, &["BUCKET", "1", "1", "1d"]], &[]),
            "WRONGTYPE key 2 holds a string that is not RL.BUCKET state".into(),
        ),
        (
            all(&["rl:a", "rl:b", "rl:a"], &[&g, &g, &g], &[]),
            "ERR key 3 is the same as key 1: each limit needs its own key".into(),
        ),
        (
            all(&["rl:a", "rl:b"], &[&g], &[]),
            "ERR syntax error: RL.ALL needs one policy per key, got 2 keys and 1 policy".into(),
        ),
        (
            all(&["rl:a"], &[&g, &g], &[]),
            "ERR syntax error: RL.ALL needs one policy per key, got 1 key and 2 policies".into(),
        ),
        (
            all(&["rl:a"], &[&["LEAKY", "1", "1"]], &[]),
            "ERR syntax error: unknown policy 'LEAKY': expected GCRA, BUCKET, SLIDING, FIXED or CONCURRENCY"
                .into(),
        ),
        (
            all(&["rl:a"], &[&["\u{ff}", "1", "1"]], &[]),
            "ERR syntax error: unknown policy '??': expected GCRA, BUCKET, SLIDING, FIXED or CONCURRENCY".into(),
        ),
        (
            all(&["rl:a", "rl:b"], &[&g, &["BUCKET", "1", "1"]], &[]),
            "ERR syntax error: the policy is BUCKET capacity refill period".into(),
        ),
        (
            all(&["rl:a"], &[&g], &["COST", "1", "COST", "1"]),
            "ERR syntax error: COST given more than once".into(),
        ),
        (
            words(&["RL.ALL", "5", "rl:a", "GCRA", "10", "1d"]),
            "ERR numkeys must be an integer from 1 to 4".into(),
        ),
    ];
    for v in HOSTILE {
        if let Some(want) = expected_error(count("numkeys", 1, 4), v) {
            let mut args = vec![b"RL.ALL".to_vec(), v.to_vec()];
            args.extend(words(&["rl:a", "GCRA", "10", "1d"]));
            cases.push((args, want));
        }
    }
    let mut failures = Vec::new();
    for (args, want) in &cases {
        check(&mut c, args, want, &before, &mut failures);
    }
    report(failures, cases.len());
}

#[test]
fn window_modes_conflict_and_bound_the_exact_log() {
    let s = Server::start();
    let mut c = Raw::connect(s.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    c.ok(&["RL.SLIDING", "w", "10", "1d"]);
    let before = snapshot(&mut c);
    let exclusive = "ERR syntax error: EXACT, APPROX and BUCKETS are mutually exclusive";
    let cases: &[(&[&str], &str)] = &[
        (
            &["RL.SLIDING", "w", "10", "1d", "APPROX", "EXACT"],
            exclusive,
        ),
        (
            &["RL.SLIDING", "w", "10", "1d", "EXACT", "BUCKETS", "4"],
            exclusive,
        ),
        (
            &[
                "RL.SLIDING",
                "w",
                "10",
                "1d",
                "BUCKETS",
                "4",
                "COST",
                "1",
                "approx",
            ],
            exclusive,
        ),
        (
            &["RL.ALL", "1", "w", "SLIDING", "10", "1d", "APPROX", "EXACT"],
            exclusive,
        ),
        (
            &["RL.SLIDING", "w", "100001", "1d"],
            "ERR limit must be at most 100000 with EXACT (ratelimit.max-log-entries)",
        ),
        (
            &["RL.SLIDING", "w", "9223372036854775807", "1d", "EXACT"],
            "ERR limit must be at most 100000 with EXACT (ratelimit.max-log-entries)",
        ),
        (
            &["RL.ALL", "1", "w", "SLIDING", "100001", "1d"],
            "ERR limit must be at most 100000 with EXACT (ratelimit.max-log-entries)",
        ),
        (
            &["RL.SLIDING", "w", "10", "1d", "BUCKETS", "1025"],
            "ERR BUCKETS must be an integer from 2 to 1024",
        ),
        (
            &["RL.FIXED", "w", "10", "1d", "ALIGNED", "aligned"],
            "ERR syntax error: ALIGNED given more than once",
        ),
        (
            &["RL.FIXED", "w", "10", "1d"],
            "WRONGTYPE key holds RL.SLIDING EXACT state, not RL.FIXED state",
        ),
        (
            &["RL.SLIDING", "w", "10", "1d", "APPROX"],
            "WRONGTYPE key holds RL.SLIDING EXACT state, not RL.SLIDING APPROX state",
        ),
    ];
    let mut failures = Vec::new();
    for (args, want) in cases {
        check(&mut c, &words(args), want, &before, &mut failures);
    }
    report(failures, cases.len());
}

#[test]
fn huge_arguments_get_short_errors() {
    let s = Server::start();
    let mut c = Raw::connect(s.port);
    c.ok(&["RL.CLOCK", "SET", &T0.to_string()]);
    let before = snapshot(&mut c);
    let mut failures = Vec::new();
    let word = vec![b'x'; 1 << 20];
    let digits: Vec<u8> = std::iter::once(b'1').chain(vec![b'0'; 1 << 20]).collect();
    let zeros: Vec<u8> = vec![b'0'; 1 << 20].into_iter().chain(*b"1").collect();
    let unknown = format!("ERR syntax error: unknown option '{}...'", "x".repeat(32));
    let cases: Vec<(Vec<Vec<u8>>, String)> = vec![
        (
            vec![
                b"RL.GCRA".to_vec(),
                b"k".to_vec(),
                b"10".to_vec(),
                b"1s".to_vec(),
                word.clone(),
            ],
            unknown.clone(),
        ),
        (
            vec![
                b"RL.GCRA".to_vec(),
                b"k".to_vec(),
                digits.clone(),
                b"1s".to_vec(),
            ],
            "ERR limit must be an integer from 1 to 9223372036854775807".into(),
        ),
        (
            vec![b"RL.GCRA".to_vec(), b"k".to_vec(), b"10".to_vec(), digits],
            "ERR period must be at most 36500d".into(),
        ),
        (
            vec![b"RL.CLOCK".to_vec(), word.clone(), b"1".to_vec()],
            format!(
                "ERR unknown subcommand '{}...' for RL.CLOCK: try SET, ADVANCE or HELP",
                "x".repeat(32)
            ),
        ),
    ];
    for (args, want) in &cases {
        check(&mut c, args, want, &before, &mut failures);
    }
    report(failures, cases.len());
    // A million leading zeros are still the number one.
    let r = c.ok(&[&b"RL.GCRA"[..], b"z", &zeros, b"1d", b"DRYRUN"]);
    assert_eq!(r.ints(), [1, 1, 0, -1, 86_400_000]);
}

/// A named policy's definition is an RL.PEEK policy: every hostile case of
/// RL.PEEK's shapes, sent as `RL.POLICY SET p <policy ...>`, gets the same
/// error (arity errors naming `rl.policy|set`) and stores nothing.
#[test]
fn named_policy_definitions_get_the_errors_of_rl_peek() {
    let server = Server::with(common::Config::default().with_policies());
    let mut c = Raw::connect(server.port);
    c.ok(&["RL.POLICY", "SET", "live", "FIXED", "1", "1s"]);
    let digest = c.call(&["RL.POLICY", "DIGEST"]);
    let before = snapshot(&mut c);
    let mut failures = Vec::new();
    let mut checked = 0;
    for shape in SHAPES.iter().filter(|s| s.name == "RL.PEEK") {
        for case in argument_cases(shape, b"k") {
            // RL.PEEK key policy... -> RL.POLICY SET p policy...
            let Some(policy) = case.args.get(2..) else {
                continue;
            };
            let mut args = words(&["RL.POLICY", "SET", "p"]);
            args.extend(policy.iter().cloned());
            let want = case.want.replace("'rl.peek'", "'rl.policy|set'");
            check(&mut c, &args, &want, &before, &mut failures);
            checked += 1;
        }
    }
    assert_eq!(
        c.call(&["RL.POLICY", "DIGEST"]),
        digest,
        "a policy was stored"
    );
    assert!(checked > 100, "only {checked} cases");
    report(failures, checked);
}
