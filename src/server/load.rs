//! Module load: arguments, API checks, options, commands, INFO.

use super::ffi::Ctx;
use super::{acl, clock, config, info, policies, register};
use redis_module::{raw, redis_module, Context, RedisString, Status};
use std::ffi::c_int;

redis_module! {
    name: "ratelimit",
    // major * 10000 + minor * 100 + patch of the crate version.
    version: crate::server::version::VERSION_NUMBER,
    // Module state lives in Redis strings, allocated by Redis; the module's
    // own allocations (transient, and the wait queues) go to the system
    // allocator, counted for INFO, and the core stays usable outside a
    // server (tests, benches).
    allocator: (crate::server::heap::Counted, crate::server::heap::Counted),
    // Not a data type: the one hook the macro runs between RedisModule_Init
    // and its defrag registration (see `DefragCheck`).
    data_types: [DEFRAG_CHECK],
    init: on_load,
}

/// The module defines no defrag function, so the crate registers none;
/// but where the server lacks the defrag API (Redis before 8.0 has no
/// `RegisterDefragCallbacks`) the crate logs a warning on every load
/// before looking whether there is anything to register. This checks the
/// API first: a missing function is replaced by one that registers
/// nothing, which is what there is to register, so a clean load logs
/// nothing at warning level.
struct DefragCheck;

impl DefragCheck {
    /// Called by `redis_module!` as a data type's creation.
    fn create_data_type(&self, _ctx: *mut raw::RedisModuleCtx) -> Result<(), &'static str> {
        // SAFETY: during OnLoad, on the main thread, after RedisModule_Init
        // filled these pointers and before anything reads them again; only
        // missing ones are set, to functions that do nothing.
        unsafe {
            let (func, callbacks) = (
                raw::RedisModule_RegisterDefragFunc,
                raw::RedisModule_RegisterDefragCallbacks,
            );
            if func.is_none() {
                raw::RedisModule_RegisterDefragFunc = Some(register_no_defrag_func);
            }
            if callbacks.is_none() {
                raw::RedisModule_RegisterDefragCallbacks = Some(register_no_defrag_callbacks);
            }
        }
        Ok(())
    }
}

static DEFRAG_CHECK: DefragCheck = DefragCheck;

/// Registers nothing (the module has no defrag function).
unsafe extern "C" fn register_no_defrag_func(
    _ctx: *mut raw::RedisModuleCtx,
    _func: raw::RedisModuleDefragFunc,
) -> c_int {
    raw::REDISMODULE_OK as c_int
}

/// Registers nothing (the module has no defrag callbacks).
unsafe extern "C" fn register_no_defrag_callbacks(
    _ctx: *mut raw::RedisModuleCtx,
    _start: raw::RedisModuleDefragFunc,
    _end: raw::RedisModuleDefragFunc,
) -> c_int {
    raw::REDISMODULE_OK as c_int
}

/// What the module was loaded with.
#[derive(Default)]
struct LoadArgs {
    manual_clock: bool,
    policies: bool,
}

/// `clock manual|real` (real by default) and `policies on|off` (off by
/// default), each at most once, in any order and case.
fn parse_load_args(args: &[RedisString]) -> Result<LoadArgs, String> {
    let words: Vec<Vec<u8>> = args
        .iter()
        .map(|a| a.as_slice().to_ascii_lowercase())
        .collect();
    let mut parsed = LoadArgs::default();
    let (mut clock, mut policies) = (false, false);
    for pair in words.chunks(2) {
        match pair {
            [k, v] if k == b"clock" && !clock && (v == b"manual" || v == b"real") => {
                clock = true;
                parsed.manual_clock = v == b"manual";
            }
            [k, v] if k == b"policies" && !policies && (v == b"on" || v == b"off") => {
                policies = true;
                parsed.policies = v == b"on";
            }
            _ => {
                return Err(
                    "unknown module arguments: expected 'clock real|manual' and \
                            'policies on|off'"
                        .into(),
                )
            }
        }
    }
    Ok(parsed)
}

/// The API functions every command needs; a server without one of them
/// cannot run the module, so it refuses to load rather than fail later.
fn missing_api() -> Option<&'static str> {
    macro_rules! check {
        ($($name:ident),*) => {
            $(
                // SAFETY: reading a pointer written by RedisModule_Init.
                if unsafe { raw::$name }.is_none() {
                    return Some(stringify!($name));
                }
            )*
        };
    }
    check!(
        RedisModule_StringPtrLen,
        RedisModule_ReplyWithArray,
        RedisModule_ReplyWithMap,
        RedisModule_ReplyWithLongLong,
        RedisModule_ReplyWithBool,
        RedisModule_ReplyWithCString,
        RedisModule_ReplyWithError,
        RedisModule_ReplyWithSimpleString,
        RedisModule_GetContextFlags,
        RedisModule_Milliseconds,
        RedisModule_MonotonicMicroseconds,
        RedisModule_OpenKey,
        RedisModule_CloseKey,
        RedisModule_KeyType,
        RedisModule_StringDMA,
        RedisModule_StringTruncate,
        RedisModule_StringSet,
        RedisModule_ValueLength,
        RedisModule_FreeString,
        RedisModule_Log,
        RedisModule_DeleteKey,
        RedisModule_SetAbsExpire,
        RedisModule_Replicate,
        RedisModule_ReplicateVerbatim,
        RedisModule_CreateDataType,
        RedisModule_SaveStringBuffer,
        RedisModule_LoadStringBuffer,
        RedisModule_CreateSubcommand,
        RedisModule_CreateString,
        RedisModule_SignalModifiedKey,
        RedisModule_SetModuleOptions,
        RedisModule_CreateCommand,
        RedisModule_IsKeysPositionRequest,
        RedisModule_KeyAtPos,
        RedisModule_BlockClient,
        RedisModule_UnblockClient,
        RedisModule_SetDisconnectCallback,
        RedisModule_GetBlockedClientPrivateData,
        RedisModule_GetBlockedClientHandle,
        RedisModule_CreateTimer,
        RedisModule_StopTimer,
        RedisModule_GetSelectedDb,
        RedisModule_SelectDb,
        RedisModule_AvoidReplicaTraffic,
        RedisModule_Call,
        RedisModule_CallReplyType,
        RedisModule_CallReplyInteger,
        RedisModule_CallReplyStringPtr,
        RedisModule_FreeCallReply,
        RedisModule_CallReplyArrayElement,
        RedisModule_GetServerInfo,
        RedisModule_ServerInfoGetFieldSigned,
        RedisModule_FreeServerInfo,
        RedisModule_RegisterNumericConfig,
        RedisModule_LoadConfigs,
        RedisModule_SubscribeToKeyspaceEvents,
        RedisModule_SubscribeToServerEvent,
        RedisModule_GetClientId
    );
    None
}

fn on_load(ctx: &Context, args: &[RedisString]) -> Status {
    let LoadArgs {
        manual_clock: manual,
        policies: with_policies,
    } = match parse_load_args(args) {
        Ok(m) => m,
        Err(e) => {
            ctx.log_warning(&e);
            return Status::Err;
        }
    };
    if let Some(name) = missing_api() {
        ctx.log_warning(&format!(
            "this server lacks {name}, which redis-ratelimit needs (Redis 7.0 or later)"
        ));
        return Status::Err;
    }
    // Denied requests must not invalidate WATCH: signal modified keys
    // ourselves, only when we write. And a replica may load its primary's
    // data while serving the old (`repl-diskless-load swapdb`): limiter
    // state is plain strings in the dataset, and the named policies'
    // registry is staged until the load ends (`policies`). Their data type
    // handles read errors (an aux load that fails part-way changes
    // nothing), so replicas keep diskless loading.
    let mut options = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED
        | raw::REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD;
    if with_policies {
        options |= raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS;
    }
    // SAFETY: during OnLoad with its context.
    unsafe { raw::RedisModule_SetModuleOptions.expect("checked above")(ctx.ctx, options as c_int) };
    clock::init(manual);
    if let Err(e) = config::register(Ctx(ctx.ctx)) {
        ctx.log_warning(&e);
        return Status::Err;
    }
    if with_policies {
        if let Err(e) = policies::register(Ctx(ctx.ctx)) {
            ctx.log_warning(&e);
            return Status::Err;
        }
    }
    // The category first: registration puts the commands in it.
    if let Some(notice) = acl::add_category(Ctx(ctx.ctx)) {
        ctx.log_notice(&notice);
    }
    if let Err(e) = register::register(Ctx(ctx.ctx), &crate::commands::table::COMMANDS) {
        ctx.log_warning(&e);
        return Status::Err;
    }
    if let Err(e) = info::register(Ctx(ctx.ctx)) {
        ctx.log_warning(&e);
        return Status::Err;
    }
    if manual {
        ctx.log_notice("ratelimit: manual clock; RL.CLOCK SET and ADVANCE move it");
    }
    Status::Ok
}
