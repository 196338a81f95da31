//! The operator's bounds (`crate::bounds`) as module configuration
//! parameters: `CONFIG GET ratelimit.*`, `CONFIG SET ratelimit.NAME n`, and
//! `ratelimit.NAME n` lines in redis.conf after `loadmodule`.

use super::ffi::{api, Ctx};
use crate::bounds::{self, Bound};
use crate::engine::hot;
use redis_module::raw;
use std::ffi::{c_char, c_int, c_longlong, c_void, CString};

/// Registers every bound and loads the values given at load time.
pub fn register(ctx: Ctx) -> Result<(), String> {
    for (i, bound) in bounds::ALL.iter().enumerate() {
        bound.reset();
        let name = CString::new(bound.name).map_err(|e| e.to_string())?;
        let as_ll = |v: u64| c_longlong::try_from(v).unwrap_or(c_longlong::MAX);
        // SAFETY: ctx is the OnLoad context; the name is copied by Redis;
        // the callbacks are plain functions living as long as the module and
        // get the bound's index as private data.
        let status = unsafe {
            api!(RedisModule_RegisterNumericConfig)(
                ctx.0,
                name.as_ptr(),
                as_ll(bound.default),
                raw::REDISMODULE_CONFIG_DEFAULT,
                as_ll(bound.min),
                as_ll(bound.max),
                Some(get),
                Some(set),
                None,
                i as *mut c_void,
            )
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot register ratelimit.{}", bound.name));
        }
    }
    // SAFETY: ctx is the OnLoad context, after every config is registered.
    if unsafe { api!(RedisModule_LoadConfigs)(ctx.0) } != raw::REDISMODULE_OK as c_int {
        return Err("cannot load the ratelimit.* configuration".into());
    }
    hot::configure(bounds::HOT_KEY_COUNTERS.get());
    Ok(())
}

fn bound(privdata: *mut c_void) -> Option<&'static Bound> {
    bounds::ALL.get(privdata as usize).copied()
}

extern "C" fn get(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    bound(privdata).map_or(0, |b| {
        c_longlong::try_from(b.get()).unwrap_or(c_longlong::MAX)
    })
}

extern "C" fn set(
    _name: *const c_char,
    value: c_longlong,
    privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // Redis checked the range already; a value that does not fit is refused.
    let stored = bound(privdata)
        .zip(u64::try_from(value).ok())
        .map(|(b, v)| b.set(v));
    match stored {
        Some(Ok(())) => {
            // The hot keys start over with the counters given.
            if bound(privdata) == Some(&bounds::HOT_KEY_COUNTERS) {
                hot::configure(bounds::HOT_KEY_COUNTERS.get());
            }
            raw::REDISMODULE_OK as c_int
        }
        _ => raw::REDISMODULE_ERR as c_int,
    }
}
