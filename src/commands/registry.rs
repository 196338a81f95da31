//! The command table: names, flags, arity, key specs and summaries, and
//! their registration with `RedisModule_CreateCommand` and
//! `RedisModule_SetCommandInfo` (not the crate's `#[command]` macro, which
//! needs a Redis 7.2 API and fails to load on 7.0).

use super::{all, bucket, clock, docs, fixed, gcra, guard, sliding, throttle};
use crate::server::ffi::{api, Ctx, RString};
use crate::stats::Command;
use redis_module::raw;
use std::ffi::{c_int, CStr};

type CommandFn = extern "C" fn(*mut raw::RedisModuleCtx, *mut RString, c_int) -> c_int;

/// Where a command's keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    None,
    /// One key, the first argument.
    First,
    /// `numkeys key [key ...]` from the first argument on.
    NumKeys,
}

pub struct Spec {
    pub name: &'static CStr,
    pub command: Command,
    pub handler: CommandFn,
    pub flags: &'static CStr,
    /// Redis arity: positive is exact, negative is a minimum (name included).
    pub arity: c_int,
    pub keys: Keys,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
}

macro_rules! handler {
    ($fn_name:ident, $command:expr, $run:path) => {
        extern "C" fn $fn_name(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut RString,
            argc: c_int,
        ) -> c_int {
            // SAFETY: Redis calls this with the command's own arguments.
            unsafe { guard(ctx, argv, argc, $command, $run) }
        }
    };
}

handler!(rl_gcra, Command::Gcra, gcra::run);
handler!(rl_bucket, Command::Bucket, bucket::run);
handler!(rl_sliding, Command::Sliding, sliding::run);
handler!(rl_fixed, Command::Fixed, fixed::run);
/// RL.ALL also answers Redis's keys-position requests (`getkeys-api`).
extern "C" fn rl_all(ctx: *mut raw::RedisModuleCtx, argv: *mut RString, argc: c_int) -> c_int {
    let context = crate::server::ffi::Ctx(ctx);
    if crate::server::ffi::is_keys_position_request(context) {
        // SAFETY: Redis calls this with the command's own arguments.
        let args = unsafe { crate::server::ffi::argv(argv, argc) };
        all::declare_keys(context, args);
        return raw::REDISMODULE_OK as c_int;
    }
    // SAFETY: as above.
    unsafe { guard(ctx, argv, argc, Command::All, all::run) }
}
handler!(cl_throttle, Command::Throttle, throttle::run);
handler!(rl_clock, Command::Clock, clock::run);

const DECISION_FLAGS: &CStr = c"write deny-oom fast";

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: c"rl.gcra",
        command: Command::Gcra,
        handler: rl_gcra,
        flags: DECISION_FLAGS,
        arity: -4,
        keys: Keys::First,
        summary: c"Admits or denies a request under a GCRA limit: a sustained rate with a burst.",
        complexity: c"O(1)",
    },
    Spec {
        name: c"rl.bucket",
        command: Command::Bucket,
        handler: rl_bucket,
        flags: DECISION_FLAGS,
        arity: -5,
        keys: Keys::First,
        summary: c"Admits or denies a request under a token bucket that refills continuously.",
        complexity: c"O(1)",
    },
    Spec {
        name: c"rl.sliding",
        command: Command::Sliding,
        handler: rl_sliding,
        flags: DECISION_FLAGS,
        arity: -4,
        keys: Keys::First,
        summary: c"Admits or denies a request under a sliding window: exact log, two-window estimate or sub-window buckets.",
        complexity: c"O(1) for APPROX; O(log limit + COST) for EXACT; O(n) for BUCKETS n",
    },
    Spec {
        name: c"rl.fixed",
        command: Command::Fixed,
        handler: rl_fixed,
        flags: DECISION_FLAGS,
        arity: -4,
        keys: Keys::First,
        summary: c"Admits or denies a request under a fixed window count.",
        complexity: c"O(1)",
    },
    Spec {
        name: c"rl.all",
        command: Command::All,
        handler: rl_all,
        flags: c"write deny-oom fast getkeys-api",
        arity: -6,
        keys: Keys::NumKeys,
        summary: c"Admits a request only if every one of several limits admits it, and then charges them all.",
        complexity: c"O(N) where N is the number of keys, plus each limit's own cost",
    },
    Spec {
        name: c"cl.throttle",
        command: Command::Throttle,
        handler: cl_throttle,
        flags: DECISION_FLAGS,
        arity: -5,
        keys: Keys::First,
        summary: c"redis-cell compatible GCRA rate limiting.",
        complexity: c"O(1)",
    },
    Spec {
        name: c"rl.clock",
        command: Command::Clock,
        handler: rl_clock,
        flags: c"fast",
        arity: -1,
        keys: Keys::None,
        summary: c"Returns the limiter clock in microseconds; SET and ADVANCE move a manual clock.",
        complexity: c"O(1)",
    },
];

/// Registers every command; an error message on failure.
pub fn register(ctx: Ctx) -> Result<(), String> {
    for spec in COMMANDS {
        // RL.ALL's keys are found by its key spec (set below), not a range.
        let (first, last, step) = match spec.keys {
            Keys::None | Keys::NumKeys => (0, 0, 0),
            Keys::First => (1, 1, 1),
        };
        // SAFETY: called from RedisModule_OnLoad with its context; the names
        // and flags are NUL-terminated statics.
        let status = unsafe {
            api!(RedisModule_CreateCommand)(
                ctx.0,
                spec.name.as_ptr(),
                Some(spec.handler),
                spec.flags.as_ptr(),
                first,
                last,
                step,
            )
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot create command {}", spec.command.name()));
        }
        set_info(ctx, spec)?;
    }
    Ok(())
}

fn set_info(ctx: Ctx, spec: &Spec) -> Result<(), String> {
    // SAFETY: reading function pointers set by RedisModule_Init.
    let (Some(get_command), Some(set_command_info)) =
        (unsafe { raw::RedisModule_GetCommand }, unsafe {
            raw::RedisModule_SetCommandInfo
        })
    else {
        // Before Redis 7.0: the legacy key range above still applies.
        return Ok(());
    };
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let mut key_specs = key_specs(spec.keys);
    let mut args = docs::args(spec.name);
    let info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: spec.summary.as_ptr(),
        complexity: spec.complexity.as_ptr(),
        since: c"0.1.0".as_ptr(),
        history: std::ptr::null_mut(),
        tips: std::ptr::null(),
        arity: spec.arity,
        key_specs: if key_specs.len() > 1 {
            key_specs.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        },
        args: args
            .as_mut()
            .map_or(std::ptr::null_mut(), |a| a.as_mut_ptr()),
    };
    // SAFETY: during OnLoad; `info` and everything it points to outlive the
    // call, and Redis copies what it keeps.
    let status = unsafe {
        let command = get_command(ctx.0, spec.name.as_ptr());
        if command.is_null() {
            return Err(format!("cannot find command {}", spec.command.name()));
        }
        set_command_info(command, &info)
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!(
            "cannot set command info of {}",
            spec.command.name()
        ));
    }
    Ok(())
}

/// A decision reads the state, replies with what it read (remaining,
/// reset) and updates it: like INCR, RW + ACCESS + UPDATE, so an ACL user
/// needs both read and write permission on the key (`%W~` alone is not
/// enough to learn a limiter's state).
const DECISION_KEY_FLAGS: u64 = (raw::REDISMODULE_CMD_KEY_RW
    | raw::REDISMODULE_CMD_KEY_ACCESS
    | raw::REDISMODULE_CMD_KEY_UPDATE) as u64;

/// The key specs of a command, terminated by a zeroed spec. Both kinds
/// begin at argument 1: the key itself, or RL.ALL's `numkeys`.
fn key_specs(keys: Keys) -> Vec<raw::RedisModuleCommandKeySpec> {
    // SAFETY: the key spec is plain data (integers, unions of integers and
    // null pointers); all-zero is its documented terminator.
    let zeroed = || unsafe { std::mem::zeroed::<raw::RedisModuleCommandKeySpec>() };
    let mut spec = zeroed();
    spec.flags = DECISION_KEY_FLAGS;
    spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    spec.bs.index.pos = 1;
    match keys {
        Keys::None => return vec![zeroed()],
        Keys::First => {
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            spec.fk.range.lastkey = 0;
            spec.fk.range.keystep = 1;
            spec.fk.range.limit = 0;
        }
        Keys::NumKeys => {
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
            spec.fk.keynum.keynumidx = 0;
            spec.fk.keynum.firstkey = 1;
            spec.fk.keynum.keystep = 1;
        }
    }
    vec![spec, zeroed()]
}
