//! ACL categories. Redis 7.0 has no API for module commands' categories
//! (they have none there: name them in ACL rules); Redis 7.2+ and Valkey 8
//! set them with `SetCommandACLCategories`, and Redis 7.4+ and Valkey 8 let
//! a module add its own category with `AddACLCategory`. Each call is made
//! only where the server has the function.

use super::ffi::Ctx;
use crate::commands::definition::CommandDef;
use redis_module::raw;
use std::ffi::{c_int, CString};

/// The module's own category: every command of the module.
pub const CATEGORY: &str = "ratelimit";

/// Adds [`CATEGORY`] (during OnLoad, before any command uses it); where
/// that cannot be done, a notice for the log saying what it means.
pub fn add_category(ctx: Ctx) -> Option<String> {
    // SAFETY: reading pointers written by RedisModule_Init.
    let (set, add) = unsafe {
        (
            raw::RedisModule_SetCommandACLCategories,
            raw::RedisModule_AddACLCategory,
        )
    };
    if set.is_none() {
        return Some(
            "ratelimit: this server has no ACL categories for module commands \
             (Redis 7.2+ and Valkey 8 have them): name the commands in ACL rules"
                .into(),
        );
    }
    let Some(add) = add else {
        return Some(format!(
            "ratelimit: this server cannot add the ACL category '{CATEGORY}' \
             (Redis 7.4+ and Valkey 8 can)"
        ));
    };
    let name = CString::new(CATEGORY).ok()?;
    // SAFETY: during OnLoad with its context; `name` is NUL-terminated.
    if unsafe { add(ctx.0, name.as_ptr()) } == raw::REDISMODULE_OK as c_int {
        return None;
    }
    Some(format!(
        "ratelimit: the ACL category '{CATEGORY}' was not added \
         (it may exist from an earlier load)"
    ))
}

/// Sets a registered command's categories: its own, and [`CATEGORY`] where
/// the server knows it. Nothing where the server has no such API.
///
/// # Safety
/// During OnLoad; `command` is what `RedisModule_GetCommand` returned for
/// `def`.
pub unsafe fn set_categories(
    command: *mut raw::RedisModuleCommand,
    def: &CommandDef,
) -> Result<(), String> {
    // SAFETY: reading a pointer written by RedisModule_Init.
    let Some(set) = (unsafe { raw::RedisModule_SetCommandACLCategories }) else {
        return Ok(());
    };
    let own = def.acl_categories();
    // A category the server does not know fails the whole call, and the
    // server logs a warning for it: where no category can be added, only
    // the command's own are tried; where adding failed, they are the
    // fallback.
    // SAFETY: reading a pointer written by RedisModule_Init.
    let can_add = unsafe { raw::RedisModule_AddACLCategory }.is_some();
    let with_category = can_add.then(|| format!("{own} {CATEGORY}"));
    for categories in with_category.into_iter().chain([own.clone()]) {
        let text = CString::new(categories).map_err(|e| e.to_string())?;
        // SAFETY: as the caller promises; `text` is NUL-terminated and
        // Redis parses it during the call.
        if unsafe { set(command, text.as_ptr()) } == raw::REDISMODULE_OK as c_int {
            return Ok(());
        }
    }
    Err(format!(
        "cannot set the ACL categories '{own}' of {}",
        def.name
    ))
}
