//! Saving the registry of named policies (`crate::engine::registry`) in the RDB:
//! a module data type with only auxiliary-data callbacks, saved before the
//! keys, as Redis saves its functions. Registered only when the module is
//! loaded with `policies on`: Redis refuses `MODULE UNLOAD` for a module
//! with a data type, and an RDB holding the data needs the module to load
//! (where the server saves through `aux_save2`, an empty registry writes
//! none, so such an RDB loads anywhere).
//!
//! Replicas load their primary's RDB diskless (`repl-diskless-load`): the
//! type declares that it handles read errors, and a load reads the saved
//! registry into a staging copy that replaces the live one only when the
//! load succeeds (`LOADING_ENDED`, or `REPL_ASYNC_LOAD_COMPLETED` when the
//! replica served its old data meanwhile); a load that fails or is aborted
//! part-way leaves the registry it had. An RDB with no registry in it (an
//! empty one is not written where the server offers `aux_save2`) loads as
//! no policies. An AOF loads in place: its commands after the preamble
//! change the registry as they replay.
//!
//! An AOF rewrite without the RDB preamble (`aof-use-rdb-preamble no`)
//! writes keys only: module auxiliary data has no AOF form. So when such a
//! rewrite starts, every policy is written once more as `RL.POLICY SET`
//! into the AOF part that follows the rewritten base (and to replicas,
//! where it changes nothing): a restart from the rewritten AOF replays them.
//! [`POLICIES_PER_TICK`] at a time, from a timer, so that 10,000 policies
//! do not hold the server up at once; each is written as it is when its
//! turn comes (one deleted meanwhile is not: its `DEL` is in the AOF).

use super::denies;
use super::ffi::{api, log_warning, writes_paused, CallReply, Ctx, OwnedStrings, PAUSED_RETRY_MS};
use crate::commands::named::parse_definition;
use crate::engine::registry;
use redis_module::raw;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

/// The data type's name (nine characters, as Redis requires) and version.
const TYPE_NAME: &std::ffi::CStr = c"rl-policy";
const ENCODING_VERSION: c_int = 1;

/// Registers the data type (during OnLoad) and turns the registry on.
pub fn register(ctx: Ctx) -> Result<(), String> {
    super::aux_type::register(
        ctx,
        TYPE_NAME,
        ENCODING_VERSION,
        aux_load,
        aux_save,
        aux_save_unless_empty,
    )?;
    registry::with(|r| r.clear());
    registry::enable();
    super::denies::register(ctx)?;
    let fork = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_FORK_CHILD,
        dataver: 1,
    };
    // SAFETY: during OnLoad; the callback lives as long as the module (which
    // cannot be unloaded: it has a data type).
    let status = unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.0, fork, Some(on_fork)) };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("cannot subscribe to fork events".into());
    }
    for id in [
        raw::REDISMODULE_EVENT_LOADING,
        raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD,
    ] {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: as above.
        let status =
            unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.0, event, Some(on_loading)) };
        if status != raw::REDISMODULE_OK as c_int {
            return Err("cannot subscribe to loading events".into());
        }
    }
    Ok(())
}

/// Whether the server saves through `aux_save2`, so that an empty registry
/// writes no auxiliary data (its type methods are version 5 or later).
pub fn empty_rdb_needs_no_module() -> bool {
    // SAFETY: reading a pointer written by RedisModule_Init.
    let Some(version) = (unsafe { raw::RedisModule_GetTypeMethodVersion }) else {
        return false;
    };
    // SAFETY: takes no arguments.
    (unsafe { version() }) >= 5
}

/// The registry read from an RDB being loaded, until the load ends.
struct Staging {
    /// `Some` while an RDB or a replica's sync loads: what replaces the
    /// registry if the load succeeds (no policies unless the RDB has some).
    /// `None`: an AOF loads (its preamble's registry applies at once), or
    /// nothing loads.
    staged: Option<Vec<(Vec<u8>, registry::Entry)>>,
}

static STAGING: Mutex<Staging> = Mutex::new(Staging { staged: None });

fn staging() -> MutexGuard<'static, Staging> {
    // Each change to it is whole: a poisoned lock is usable.
    STAGING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Loading and async-loading events: when to stage, commit or discard.
extern "C" fn on_loading(
    _ctx: *mut raw::RedisModuleCtx,
    event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let mut staging = staging();
        let commit = |staged: Option<Vec<_>>| {
            if let Some(entries) = staged {
                registry::with(|r| r.replace(entries));
            }
        };
        match (event.id, subevent) {
            (raw::REDISMODULE_EVENT_LOADING, raw::REDISMODULE_SUBEVENT_LOADING_AOF_START) => {
                staging.staged = None;
                registry::with(|r| r.clear());
                denies::load_started(false);
            }
            (raw::REDISMODULE_EVENT_LOADING, raw::REDISMODULE_SUBEVENT_LOADING_RDB_START)
            | (raw::REDISMODULE_EVENT_LOADING, raw::REDISMODULE_SUBEVENT_LOADING_REPL_START)
            | (
                raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD,
                raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_STARTED,
            ) => {
                staging.staged = Some(Vec::new());
                denies::load_started(true);
            }
            // With `swapdb`, COMPLETED comes when the loaded data is swapped
            // in, before LOADING_ENDED (which then finds nothing staged).
            (raw::REDISMODULE_EVENT_LOADING, raw::REDISMODULE_SUBEVENT_LOADING_ENDED)
            | (
                raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD,
                raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_COMPLETED,
            ) => {
                commit(staging.staged.take());
                denies::load_ended(true);
            }
            (raw::REDISMODULE_EVENT_LOADING, raw::REDISMODULE_SUBEVENT_LOADING_FAILED)
            | (
                raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD,
                raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_ABORTED,
            ) => {
                staging.staged = None;
                denies::load_ended(false);
            }
            _ => {}
        }
    }));
}

/// A child process was born: if it rewrites the AOF without the RDB
/// preamble, the policies are written after it (from a timer: the command
/// or cron that forked is still running).
extern "C" fn on_fork(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_FORK_CHILD_BORN {
        return;
    }
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !rewriting_aof_without_preamble(ctx) {
            return;
        }
        // Only the newest rewritten base counts: what an earlier rewrite
        // had left to write starts over.
        let mut rewrite = rewrite();
        rewrite.names = registry::with(|r| r.owned_names());
        if !rewrite.names.is_empty() && !rewrite.armed {
            rewrite.armed = true;
            start_timer(ctx, 0);
        }
    }));
}

/// The policies written again after a rewrite, per timer tick.
const POLICIES_PER_TICK: usize = 100;

/// The names of the policies still to write after an AOF rewrite began,
/// and whether a timer is armed to write them.
struct Rewrite {
    names: Vec<Vec<u8>>,
    armed: bool,
}

static REWRITE: Mutex<Rewrite> = Mutex::new(Rewrite {
    names: Vec::new(),
    armed: false,
});

fn rewrite() -> MutexGuard<'static, Rewrite> {
    // Each change to it is whole: a poisoned lock is usable.
    REWRITE.lock().unwrap_or_else(|e| e.into_inner())
}

fn start_timer(ctx: Ctx, delay_ms: u64) {
    let delay = i64::try_from(delay_ms).unwrap_or(i64::MAX);
    // SAFETY: ctx is a live context; the callback takes no data.
    unsafe { api!(RedisModule_CreateTimer)(ctx.0, delay, Some(on_timer), std::ptr::null_mut()) };
}

extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let mut rewrite = rewrite();
        // Nothing may be propagated while writes are paused.
        if writes_paused() {
            start_timer(ctx, PAUSED_RETRY_MS);
            return;
        }
        for _ in 0..POLICIES_PER_TICK {
            let Some(name) = rewrite.names.pop() else {
                break;
            };
            let Some(definition) = registry::with(|r| r.get(&name).map(|e| e.definition.clone()))
            else {
                continue;
            };
            let mut words = vec![&b"SET"[..], name.as_slice()];
            words.extend(definition.split(|b| *b == b' '));
            replicate_policy_command(ctx, &words);
        }
        if rewrite.names.is_empty() {
            rewrite.armed = false;
        } else {
            start_timer(ctx, 0);
        }
    }));
}

/// Sends `RL.POLICY words...` to the AOF and replicas.
fn replicate_policy_command(ctx: Ctx, words: &[&[u8]]) {
    let argv = OwnedStrings::new(words.iter().copied());
    // SAFETY: `v` takes an array of `argv.0.len()` strings (an `Arg` is a
    // transparent string pointer), alive for the call; Redis copies them.
    unsafe {
        api!(RedisModule_Replicate)(
            ctx.0,
            c"RL.POLICY".as_ptr(),
            c"v".as_ptr(),
            argv.0.as_ptr(),
            argv.0.len(),
        )
    };
}

/// Whether the child just born rewrites the AOF, and without the preamble.
fn rewriting_aof_without_preamble(ctx: Ctx) -> bool {
    // SAFETY: ctx is live; the info data is freed below.
    let rewriting = unsafe {
        let info = api!(RedisModule_GetServerInfo)(ctx.0, c"persistence".as_ptr());
        if info.is_null() {
            return false;
        }
        let mut error: c_int = 0;
        let value = api!(RedisModule_ServerInfoGetFieldSigned)(
            info,
            c"aof_rewrite_in_progress".as_ptr(),
            &mut error,
        );
        api!(RedisModule_FreeServerInfo)(ctx.0, info);
        error == 0 && value == 1
    };
    rewriting && config_is(ctx, c"aof-use-rdb-preamble", b"no")
}

/// Whether the server configuration `name` reads `value`.
fn config_is(ctx: Ctx, name: &std::ffi::CStr, value: &[u8]) -> bool {
    // SAFETY: ctx is live; `cc` takes two NUL-terminated strings.
    let reply = unsafe {
        CallReply::new(api!(RedisModule_Call)(
            ctx.0,
            c"CONFIG".as_ptr(),
            c"cc".as_ptr(),
            c"GET".as_ptr(),
            name.as_ptr(),
        ))
    };
    // The reply is [name, value].
    reply.and_then(|r| r.element_bytes(1)).as_deref() == Some(value)
}

unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, _when: c_int) {
    let bytes = catch_unwind(|| registry::with(|r| r.encode())).unwrap_or_default();
    raw::save_slice(rdb, &bytes);
}

/// `aux_save`, but nothing at all for an empty registry.
unsafe extern "C" fn aux_save_unless_empty(rdb: *mut raw::RedisModuleIO, when: c_int) {
    let empty = catch_unwind(|| registry::with(|r| r.is_empty())).unwrap_or(false);
    if !empty {
        aux_save(rdb, when);
    }
}

/// Reads the registry saved, whole, into the staging copy (or, loading an
/// AOF, into the registry); an RDB that does not hold a valid one, or
/// whose read fails part-way, fails to load (rather than lose policies
/// silently) and changes nothing.
unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, _when: c_int) -> c_int {
    let loaded = catch_unwind(AssertUnwindSafe(|| load(rdb, encver)));
    match loaded {
        Ok(Ok(())) => raw::REDISMODULE_OK as c_int,
        Ok(Err(why)) => {
            log_warning(Ctx(std::ptr::null_mut()), &format!("ratelimit: {why}"));
            raw::REDISMODULE_ERR as c_int
        }
        Err(_) => raw::REDISMODULE_ERR as c_int,
    }
}

fn load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> Result<(), String> {
    if encver != ENCODING_VERSION {
        return Err(format!("named policies saved in unknown version {encver}"));
    }
    // With the type's HANDLE_IO_ERRORS, a failed read returns (it does not
    // abort the server): the buffer read checks RedisModule_IsIOError.
    let buffer = raw::load_string_buffer(rdb).map_err(|e| e.to_string())?;
    let saved = registry::decode(buffer.as_ref()).ok_or("named policies saved corrupt")?;
    let mut entries = Vec::with_capacity(saved.len());
    for (name, definition) in saved {
        let words: Vec<&[u8]> = definition.split(|b| *b == b' ').collect();
        let entry = parse_definition(&words, "RL.POLICY|SET").map_err(|e| {
            format!(
                "the saved policy '{}' does not parse: {e}",
                String::from_utf8_lossy(&name)
            )
        })?;
        entries.push((name, entry));
    }
    let mut staging = staging();
    match staging.staged.as_mut() {
        Some(staged) => *staged = entries,
        None => registry::with(|r| r.replace(entries)),
    }
    Ok(())
}
