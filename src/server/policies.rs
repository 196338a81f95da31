//! Saving the registry of named policies (`crate::engine::registry`) in the RDB:
//! a module data type with only auxiliary-data callbacks, saved before the
//! keys, as Redis saves its functions. Registered only when the module is
//! loaded with `policies on`: Redis refuses `MODULE UNLOAD` for a module
//! with a data type, and an RDB holding the data needs the module to load.

use super::ffi::{api, log_warning, Ctx};
use crate::commands::named::parse_definition;
use crate::engine::registry;
use redis_module::raw;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The data type's name (nine characters, as Redis requires) and version.
const TYPE_NAME: &std::ffi::CStr = c"rl-policy";
const ENCODING_VERSION: c_int = 1;

/// Registers the data type (during OnLoad) and turns the registry on.
pub fn register(ctx: Ctx) -> Result<(), String> {
    let mut methods = raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        // No key ever holds this type: its per-key callbacks never run.
        rdb_load: Some(no_value_load),
        rdb_save: Some(no_value_save),
        aof_rewrite: None,
        mem_usage: None,
        digest: None,
        free: Some(no_value_free),
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as c_int,
        free_effort: None,
        unlink: None,
        copy: None,
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    };
    // SAFETY: during OnLoad with its context; Redis copies the methods.
    let created = unsafe {
        api!(RedisModule_CreateDataType)(ctx.0, TYPE_NAME.as_ptr(), ENCODING_VERSION, &mut methods)
    };
    if created.is_null() {
        return Err("cannot create the rl-policy data type".into());
    }
    registry::with(|r| r.clear());
    registry::enable();
    Ok(())
}

unsafe extern "C" fn no_value_load(_rdb: *mut raw::RedisModuleIO, _encver: c_int) -> *mut c_void {
    std::ptr::null_mut()
}

unsafe extern "C" fn no_value_save(_rdb: *mut raw::RedisModuleIO, _value: *mut c_void) {}

unsafe extern "C" fn no_value_free(_value: *mut c_void) {}

unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, _when: c_int) {
    let bytes = catch_unwind(|| registry::with(|r| r.encode())).unwrap_or_default();
    raw::save_slice(rdb, &bytes);
}

/// Replaces the registry with the one saved; an RDB that does not hold a
/// valid one fails to load (rather than lose policies silently).
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
    registry::with(|r| r.replace(entries));
    Ok(())
}
