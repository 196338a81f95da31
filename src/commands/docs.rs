//! `COMMAND DOCS` arguments for each command, registered with
//! `RedisModule_SetCommandInfo`.
//!
//! Redis copies every argument (names, tokens, nested lists) during
//! `SetCommandInfo`, so the lists only have to outlive that call. The
//! top-level list is the returned `Vec`; nested lists (the alternatives of
//! a `oneof`, the parts of a `block`) are leaked: a few hundred bytes, once
//! per module load.

use redis_module::raw;
use std::ffi::CStr;

type CommandArg = raw::RedisModuleCommandArg;
type ArgType = raw::RedisModuleCommandArgType;

/// The argument list of `command`, terminated by a zeroed entry; `None` when
/// the command declares no arguments.
pub fn args(command: &CStr) -> Option<Vec<CommandArg>> {
    let list = match command.to_bytes() {
        b"rl.gcra" => vec![
            key(),
            int(c"limit"),
            duration(c"period"),
            optional(with_token(int(c"burst"), c"BURST")),
            cost(),
            dryrun(),
        ],
        b"rl.bucket" => vec![
            key(),
            int(c"capacity"),
            int(c"refill"),
            duration(c"period"),
            cost(),
            dryrun(),
        ],
        b"rl.sliding" => vec![
            key(),
            int(c"limit"),
            duration(c"window"),
            optional(sliding_mode()),
            cost(),
            dryrun(),
        ],
        b"rl.fixed" => vec![
            key(),
            int(c"limit"),
            duration(c"window"),
            optional(token(c"ALIGNED")),
            cost(),
            dryrun(),
        ],
        b"rl.all" => vec![
            int(c"numkeys"),
            multiple(key()),
            multiple(policy()),
            cost(),
            dryrun(),
        ],
        b"cl.throttle" => vec![
            key(),
            int(c"max_burst"),
            int(c"count"),
            int(c"period"),
            optional(int(c"quantity")),
        ],
        b"rl.clock" => vec![optional(oneof(
            c"operation",
            vec![
                with_token(int(c"microseconds"), c"SET"),
                with_token(int(c"microseconds"), c"ADVANCE"),
            ],
        ))],
        _ => return None,
    };
    Some(terminated(list))
}

/// `GCRA limit period [BURST n] | BUCKET capacity refill period |
/// SLIDING limit window [mode] | FIXED limit window [ALIGNED]`.
fn policy() -> CommandArg {
    oneof(
        c"policy",
        vec![
            block(
                c"gcra",
                c"GCRA",
                vec![
                    int(c"limit"),
                    duration(c"period"),
                    optional(with_token(int(c"burst"), c"BURST")),
                ],
            ),
            block(
                c"bucket",
                c"BUCKET",
                vec![int(c"capacity"), int(c"refill"), duration(c"period")],
            ),
            block(
                c"sliding",
                c"SLIDING",
                vec![int(c"limit"), duration(c"window"), optional(sliding_mode())],
            ),
            block(
                c"fixed",
                c"FIXED",
                vec![
                    int(c"limit"),
                    duration(c"window"),
                    optional(token(c"ALIGNED")),
                ],
            ),
        ],
    )
}

/// `EXACT | APPROX | BUCKETS n`.
fn sliding_mode() -> CommandArg {
    oneof(
        c"mode",
        vec![
            token(c"EXACT"),
            token(c"APPROX"),
            with_token(int(c"buckets"), c"BUCKETS"),
        ],
    )
}

fn cost() -> CommandArg {
    optional(with_token(int(c"cost"), c"COST"))
}

fn dryrun() -> CommandArg {
    optional(token(c"DRYRUN"))
}

fn arg(name: &'static CStr, type_: ArgType) -> CommandArg {
    CommandArg {
        name: name.as_ptr(),
        type_,
        key_spec_index: -1,
        token: std::ptr::null(),
        summary: std::ptr::null(),
        since: std::ptr::null(),
        flags: raw::REDISMODULE_CMD_ARG_NONE as i32,
        deprecated_since: std::ptr::null(),
        subargs: std::ptr::null_mut(),
        display_text: std::ptr::null(),
    }
}

/// The limiter key: every command with keys has one key spec, index 0.
fn key() -> CommandArg {
    CommandArg {
        key_spec_index: 0,
        ..arg(
            c"key",
            raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        )
    }
}

fn int(name: &'static CStr) -> CommandArg {
    arg(
        name,
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
    )
}

/// A duration is a string: an integer with an optional unit (`250ms`, `1m`).
fn duration(name: &'static CStr) -> CommandArg {
    arg(
        name,
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
    )
}

/// A keyword on its own (`DRYRUN`), named after itself in lower case.
fn token(word: &'static CStr) -> CommandArg {
    let name = Box::leak(
        word.to_bytes_with_nul()
            .to_ascii_lowercase()
            .into_boxed_slice(),
    );
    let name = CStr::from_bytes_until_nul(name).unwrap_or(word);
    with_token(
        arg(
            name,
            raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        ),
        word,
    )
}

fn with_token(arg: CommandArg, word: &'static CStr) -> CommandArg {
    CommandArg {
        token: word.as_ptr(),
        ..arg
    }
}

fn optional(arg: CommandArg) -> CommandArg {
    CommandArg {
        flags: arg.flags | raw::REDISMODULE_CMD_ARG_OPTIONAL as i32,
        ..arg
    }
}

fn multiple(arg: CommandArg) -> CommandArg {
    CommandArg {
        flags: arg.flags | raw::REDISMODULE_CMD_ARG_MULTIPLE as i32,
        ..arg
    }
}

/// Exactly one of `alternatives`.
fn oneof(name: &'static CStr, alternatives: Vec<CommandArg>) -> CommandArg {
    CommandArg {
        subargs: leak(alternatives),
        ..arg(
            name,
            raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
        )
    }
}

/// `word part [part ...]` as one unit.
fn block(name: &'static CStr, word: &'static CStr, parts: Vec<CommandArg>) -> CommandArg {
    CommandArg {
        subargs: leak(parts),
        ..with_token(
            arg(
                name,
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
            ),
            word,
        )
    }
}

/// A nested list that lives as long as the module.
fn leak(list: Vec<CommandArg>) -> *mut CommandArg {
    Box::leak(terminated(list).into_boxed_slice()).as_mut_ptr()
}

/// The list followed by the all-null entry that ends it.
fn terminated(mut list: Vec<CommandArg>) -> Vec<CommandArg> {
    let mut end = arg(c"", 0);
    end.name = std::ptr::null();
    end.key_spec_index = 0;
    list.push(end);
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: *const CommandArg) -> Vec<String> {
        let mut out = Vec::new();
        let mut i = 0;
        // SAFETY: the lists built above end with a null name.
        unsafe {
            while !(*list.add(i)).name.is_null() {
                out.push(CStr::from_ptr((*list.add(i)).name).to_string_lossy().into());
                i += 1;
            }
        }
        out
    }

    #[test]
    fn every_command_has_a_terminated_list() {
        for name in [
            c"rl.gcra",
            c"rl.bucket",
            c"rl.sliding",
            c"rl.fixed",
            c"rl.all",
            c"cl.throttle",
            c"rl.clock",
        ] {
            let list = args(name).expect("documented");
            assert!(list.last().is_some_and(|a| a.name.is_null()));
        }
        assert!(args(c"rl.nope").is_none());
    }

    #[test]
    fn pure_tokens_are_named_in_lower_case() {
        let list = args(c"rl.fixed").expect("documented");
        assert_eq!(
            names(list.as_ptr()),
            ["key", "limit", "window", "aligned", "cost", "dryrun"]
        );
        let policy = args(c"rl.all").expect("documented")[2];
        assert_eq!(
            names(policy.subargs),
            ["gcra", "bucket", "sliding", "fixed"]
        );
    }
}
