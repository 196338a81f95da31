//! A module data type that no key holds: state of the server's own (the
//! named policies, the deny list) saved in the RDB as auxiliary data, before
//! the keys. Its per-key callbacks never run.

use super::ffi::{api, Ctx};
use redis_module::raw;
use std::ffi::{c_int, c_void, CStr};

/// Saves the state (`aux_save`).
pub type Save = unsafe extern "C" fn(*mut raw::RedisModuleIO, c_int);
/// Loads it (`aux_load`): `REDISMODULE_OK` or `REDISMODULE_ERR`.
pub type Load = unsafe extern "C" fn(*mut raw::RedisModuleIO, c_int, c_int) -> c_int;

/// Registers the type `name` (nine characters, as Redis requires) at
/// `version`, during OnLoad. `save_unless_empty` is used in place of `save`
/// where the server offers `aux_save2` (Redis 7.2+, Valkey): empty state
/// writes nothing, so that the RDB loads on a server without the module.
pub fn register(
    ctx: Ctx,
    name: &CStr,
    version: c_int,
    load: Load,
    save: Save,
    save_unless_empty: Save,
) -> Result<(), String> {
    let mut methods = raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(no_value_load),
        rdb_save: Some(no_value_save),
        aof_rewrite: None,
        mem_usage: None,
        digest: None,
        free: Some(no_value_free),
        aux_load: Some(load),
        aux_save: Some(save),
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as c_int,
        free_effort: None,
        unlink: None,
        copy: None,
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: Some(save_unless_empty),
    };
    // SAFETY: during OnLoad with its context; Redis copies the methods.
    let created =
        unsafe { api!(RedisModule_CreateDataType)(ctx.0, name.as_ptr(), version, &mut methods) };
    if created.is_null() {
        return Err(format!(
            "cannot create the {} data type",
            name.to_string_lossy()
        ));
    }
    Ok(())
}

unsafe extern "C" fn no_value_load(_rdb: *mut raw::RedisModuleIO, _encver: c_int) -> *mut c_void {
    std::ptr::null_mut()
}

unsafe extern "C" fn no_value_save(_rdb: *mut raw::RedisModuleIO, _value: *mut c_void) {}

unsafe extern "C" fn no_value_free(_value: *mut c_void) {}
