//! Saving the deny list (`crate::engine::deny`) in the RDB, as the named
//! policies are saved (`policies`): a data type with only auxiliary-data
//! callbacks, registered with them under `policies on`, saved before the
//! keys. An RDB (or a replica's sync) loads into a staging copy that
//! replaces the live list when the load succeeds; a failed load keeps the
//! list it had. An AOF loads in place: its `RL.DENY` and `RL.UNDENY`
//! commands change the list as they replay, each denial with the instant it
//! ends.
//!
//! An AOF rewritten without the RDB preamble (`aof-use-rdb-preamble no`)
//! has no place for auxiliary data: the list is not in it.

use super::ffi::{log_warning, Ctx};
use crate::engine::deny::{self, Listed};
use redis_module::raw;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

/// The data type's name (nine characters, as Redis requires) and version.
const TYPE_NAME: &std::ffi::CStr = c"rl-denied";
const ENCODING_VERSION: c_int = 1;

/// Registers the data type (during OnLoad).
pub fn register(ctx: Ctx) -> Result<(), String> {
    super::aux_type::register(
        ctx,
        TYPE_NAME,
        ENCODING_VERSION,
        aux_load,
        aux_save,
        aux_save_unless_empty,
    )?;
    deny::replace(Vec::new());
    Ok(())
}

/// The list read from an RDB being loaded, until the load ends (`Some`
/// while an RDB or a replica's sync loads).
static STAGED: Mutex<Option<Vec<Listed>>> = Mutex::new(None);

fn staged() -> MutexGuard<'static, Option<Vec<Listed>>> {
    // Each change to it is whole: a poisoned lock is usable.
    STAGED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A load began: an RDB's stages (no denials unless it has some), an AOF's
/// starts from none.
pub fn load_started(rdb: bool) {
    if rdb {
        *staged() = Some(Vec::new());
    } else {
        *staged() = None;
        deny::replace(Vec::new());
    }
}

/// A load ended: what it staged replaces the list if it succeeded.
pub fn load_ended(succeeded: bool) {
    let taken = staged().take();
    if let Some(entries) = taken.filter(|_| succeeded) {
        deny::replace(entries);
    }
}

unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, _when: c_int) {
    let bytes = catch_unwind(|| deny::with(|l| l.encode())).unwrap_or_default();
    raw::save_slice(rdb, &bytes);
}

unsafe extern "C" fn aux_save_unless_empty(rdb: *mut raw::RedisModuleIO, when: c_int) {
    if !deny::with(|l| l.is_empty()) {
        // SAFETY: forwarded from Redis's call.
        unsafe { aux_save(rdb, when) };
    }
}

/// Reads the saved list whole into the staging copy (or, loading an AOF's
/// preamble, into the list); a list that does not decode fails the load.
unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, _when: c_int) -> c_int {
    let loaded = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
        if encver != ENCODING_VERSION {
            return Err(format!("deny list saved in unknown version {encver}"));
        }
        let buffer = raw::load_string_buffer(rdb).map_err(|e| e.to_string())?;
        let entries = deny::decode(buffer.as_ref()).ok_or("deny list saved corrupt")?;
        let mut staged = staged();
        match staged.as_mut() {
            Some(s) => *s = entries,
            None => deny::replace(entries),
        }
        Ok(())
    }));
    match loaded {
        Ok(Ok(())) => raw::REDISMODULE_OK as c_int,
        Ok(Err(why)) => {
            log_warning(Ctx(std::ptr::null_mut()), &format!("ratelimit: {why}"));
            raw::REDISMODULE_ERR as c_int
        }
        Err(_) => raw::REDISMODULE_ERR as c_int,
    }
}
