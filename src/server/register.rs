//! Registers every command of the command table with
//! `RedisModule_CreateCommand`, `RedisModule_SetCommandInfo` and, where the
//! server has it, `RedisModule_SetCommandACLCategories` (not the
//! crate's `#[command]` macro, which needs a Redis 7.2 API and fails to
//! load on 7.0), and runs each call behind the panic guard.

use super::ffi::{self, api, Ctx, RString};
use super::host::ServerHost;
use super::stats::{self, MAX_COMMANDS};
use super::{acl, reply};
use crate::commands::definition::{CommandDef, Keys};
use crate::commands::docs::{self, DocArg, DocType};
use crate::engine::error::Error;
use redis_module::raw;
use std::ffi::{c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// The command table given at load.
static TABLE: OnceLock<&'static [CommandDef]> = OnceLock::new();

/// The command table given at load (empty before).
pub fn table() -> &'static [CommandDef] {
    TABLE.get().copied().unwrap_or(&[])
}

type CommandFn = extern "C" fn(*mut raw::RedisModuleCtx, *mut RString, c_int) -> c_int;

/// Redis calls command `I` of the table through this.
extern "C" fn call<const I: usize>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut RString,
    argc: c_int,
) -> c_int {
    // SAFETY: Redis calls this with the command's own context and arguments.
    unsafe { dispatch(I, ctx, argv, argc) }
}

/// One entry per place in a command table.
const CALLS: [CommandFn; MAX_COMMANDS] = [
    call::<0>, call::<1>, call::<2>, call::<3>, call::<4>, call::<5>, call::<6>, call::<7>,
    call::<8>, call::<9>, call::<10>, call::<11>, call::<12>, call::<13>, call::<14>, call::<15>,
    call::<16>, call::<17>, call::<18>, call::<19>, call::<20>, call::<21>, call::<22>, call::<23>,
    call::<24>, call::<25>, call::<26>, call::<27>, call::<28>, call::<29>, call::<30>, call::<31>,
];

/// Answers a keys-position request, or runs the command so that no panic
/// reaches Redis: an unexpected panic becomes an error reply. Handlers write
/// state only after every check has passed and reply last, so a caught
/// panic leaves nothing half-written; the reply is written inside the
/// guard, from where the handler left it.
///
/// # Safety
/// `ctx`, `argv` and `argc` are what Redis passed to the command callback.
unsafe fn dispatch(
    index: usize,
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut RString,
    argc: c_int,
) -> c_int {
    let ctx = Ctx(ctx);
    let Some(command) = table().get(index) else {
        ffi::reply_error(ctx, &Error::Internal("the command table").to_string());
        return raw::REDISMODULE_OK as c_int;
    };
    // SAFETY: forwarded from the caller's contract.
    let args = unsafe { ffi::argv(argv, argc) };
    if command.keys() == Keys::Counted && ffi::is_keys_position_request(ctx) {
        for pos in command.key_positions(args) {
            ffi::key_at_pos(ctx, pos);
        }
        return raw::REDISMODULE_OK as c_int;
    }
    let mut host = ServerHost::new(ctx, index);
    // The reply is written where the handler left it: a decision's outcome
    // is never copied out of the guard.
    let run = || {
        let answered = crate::commands::run(command, &mut host, args);
        match &answered {
            Ok(answer) => {
                reply::write(ctx, answer);
                stats::record(index, answer.verdict());
                // Dropped where it is: moving it out copies it whole.
                Ok(())
            }
            Err(_) => answered.map(drop),
        }
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            stats::record_error(index);
            ffi::reply_error(ctx, &e.to_string());
        }
        Err(_) => {
            stats::record_error(index);
            ffi::reply_error(ctx, &Error::Internal(command.name).to_string());
        }
    }
    raw::REDISMODULE_OK as c_int
}

fn c_string(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("a NUL byte in {s:?}"))
}

/// Registers every command of `table` and keeps it for the calls; an error
/// message on failure.
pub fn register(ctx: Ctx, table: &'static [CommandDef]) -> Result<(), String> {
    if table.len() > MAX_COMMANDS {
        return Err(format!("more than {MAX_COMMANDS} commands"));
    }
    if TABLE.set(table).is_err() && !std::ptr::eq(self::table(), table) {
        return Err("another command table is registered".into());
    }
    for (command, handler) in table.iter().zip(CALLS) {
        let name = c_string(&command.lower_name())?;
        let flags = c_string(&command.command_flags())?;
        // RL.ALL's keys are found by its key spec (set below), not a range.
        let (first, last, step) = match command.keys() {
            Keys::None | Keys::Counted => (0, 0, 0),
            Keys::First => (1, 1, 1),
        };
        let status = match command.container() {
            // SAFETY: called from RedisModule_OnLoad with its context; the
            // strings are NUL-terminated and outlive the call.
            None => unsafe {
                api!(RedisModule_CreateCommand)(
                    ctx.0,
                    name.as_ptr(),
                    Some(handler),
                    flags.as_ptr(),
                    first,
                    last,
                    step,
                )
            },
            Some((container, sub)) => {
                let parent = container_command(ctx, container)?;
                let sub = c_string(&sub.to_ascii_lowercase())?;
                // SAFETY: as above; `parent` is a command of this module.
                unsafe {
                    api!(RedisModule_CreateSubcommand)(
                        parent,
                        sub.as_ptr(),
                        Some(handler),
                        flags.as_ptr(),
                        first,
                        last,
                        step,
                    )
                }
            }
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot create command {}", command.name));
        }
        // SAFETY: reading a function pointer set by RedisModule_Init.
        let Some(get_command) = (unsafe { raw::RedisModule_GetCommand }) else {
            // Before Redis 7.0: the legacy key range above still applies.
            continue;
        };
        // SAFETY: during OnLoad; `name` is NUL-terminated.
        let registered = unsafe { get_command(ctx.0, name.as_ptr()) };
        if registered.is_null() {
            return Err(format!("cannot find command {}", command.name));
        }
        // SAFETY: during OnLoad, with the command just registered.
        unsafe {
            set_info(registered, command)?;
            acl::set_categories(registered, command)?;
        }
    }
    Ok(())
}

/// The container command `name` (`RL.POLICY`), created on first use: it
/// has no handler of its own, only subcommands.
fn container_command(ctx: Ctx, name: &str) -> Result<*mut raw::RedisModuleCommand, String> {
    let lower = c_string(&name.to_ascii_lowercase())?;
    // SAFETY: during OnLoad; the name is NUL-terminated.
    let existing = unsafe { api!(RedisModule_GetCommand)(ctx.0, lower.as_ptr()) };
    if !existing.is_null() {
        return Ok(existing);
    }
    // SAFETY: during OnLoad; the strings are NUL-terminated. A container
    // has no handler and no keys.
    let status = unsafe {
        api!(RedisModule_CreateCommand)(ctx.0, lower.as_ptr(), None, c"".as_ptr(), 0, 0, 0)
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("cannot create command {name}"));
    }
    // SAFETY: as above.
    let created = unsafe { api!(RedisModule_GetCommand)(ctx.0, lower.as_ptr()) };
    if created.is_null() {
        return Err(format!("cannot find command {name}"));
    }
    Ok(created)
}

/// Owns the C strings and argument lists of one command's info until
/// `SetCommandInfo` has copied them.
#[derive(Default)]
struct Arena {
    strings: Vec<CString>,
    lists: Vec<Vec<raw::RedisModuleCommandArg>>,
}

impl Arena {
    fn text(&mut self, s: &str) -> Result<*const std::ffi::c_char, String> {
        let c = c_string(s)?;
        // The heap buffer does not move when the CString does.
        let ptr = c.as_ptr();
        self.strings.push(c);
        Ok(ptr)
    }

    /// The arguments as Redis's structs, terminated by a zeroed entry.
    fn list(&mut self, args: &[DocArg]) -> Result<*mut raw::RedisModuleCommandArg, String> {
        let mut list = Vec::with_capacity(args.len() + 1);
        for a in args {
            list.push(self.arg(a)?);
        }
        // SAFETY: the argument struct is plain data (integers and pointers);
        // all-zero (a NULL name) ends a list.
        list.push(unsafe { std::mem::zeroed::<raw::RedisModuleCommandArg>() });
        let ptr = list.as_mut_ptr();
        self.lists.push(list);
        Ok(ptr)
    }

    fn arg(&mut self, a: &DocArg) -> Result<raw::RedisModuleCommandArg, String> {
        let type_ = match a.kind {
            DocType::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
            DocType::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            DocType::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            DocType::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
            DocType::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            DocType::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
        };
        let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
        if a.optional {
            flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
        }
        if a.multiple {
            flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
        }
        Ok(raw::RedisModuleCommandArg {
            name: self.text(&a.name)?,
            type_,
            // Every command with keys has one key spec, index 0.
            key_spec_index: if a.kind == DocType::Key { 0 } else { -1 },
            token: match a.token {
                Some(t) => self.text(t)?,
                None => std::ptr::null(),
            },
            summary: std::ptr::null(),
            since: std::ptr::null(),
            flags: flags as i32,
            deprecated_since: std::ptr::null(),
            subargs: if a.subargs.is_empty() {
                std::ptr::null_mut()
            } else {
                self.list(&a.subargs)?
            },
            display_text: std::ptr::null(),
        })
    }
}

/// Sets a registered command's info: texts, arity, key specs, arguments.
///
/// # Safety
/// During OnLoad; `registered` is what `RedisModule_GetCommand` returned
/// for `command`.
unsafe fn set_info(
    registered: *mut raw::RedisModuleCommand,
    command: &CommandDef,
) -> Result<(), String> {
    // SAFETY: reading a function pointer set by RedisModule_Init.
    let Some(set_command_info) = (unsafe { raw::RedisModule_SetCommandInfo }) else {
        // Before Redis 7.0: the legacy key range still applies.
        return Ok(());
    };
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let mut arena = Arena::default();
    let mut key_specs = key_specs(command.keys(), command.has_flag("readonly"));
    let info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: arena.text(command.summary)?,
        complexity: arena.text(command.complexity())?,
        since: arena.text(command.since)?,
        history: std::ptr::null_mut(),
        tips: std::ptr::null(),
        arity: command.arity(),
        key_specs: if key_specs.len() > 1 {
            key_specs.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        },
        args: arena.list(&docs::arguments(command))?,
    };
    // SAFETY: as the caller promises; `info` and everything it points to
    // (the arena, the key specs) outlive the call, and Redis copies what it
    // keeps.
    let status = unsafe { set_command_info(registered, &info) };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("cannot set command info of {}", command.name));
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

/// A look at the state (RL.PEEK): read-only access.
const PEEK_KEY_FLAGS: u64 = (raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS) as u64;

/// The key specs of a command, terminated by a zeroed spec. Both kinds
/// begin at argument 1: the key itself, or RL.ALL's `numkeys`.
fn key_specs(keys: Keys, readonly: bool) -> Vec<raw::RedisModuleCommandKeySpec> {
    // SAFETY: the key spec is plain data (integers, unions of integers and
    // null pointers); all-zero is its documented terminator.
    let zeroed = || unsafe { std::mem::zeroed::<raw::RedisModuleCommandKeySpec>() };
    let mut spec = zeroed();
    spec.flags = if readonly {
        PEEK_KEY_FLAGS
    } else {
        DECISION_KEY_FLAGS
    };
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
        Keys::Counted => {
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
            spec.fk.keynum.keynumidx = 0;
            spec.fk.keynum.firstkey = 1;
            spec.fk.keynum.keystep = 1;
        }
    }
    vec![spec, zeroed()]
}
