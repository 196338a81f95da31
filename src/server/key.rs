//! One limiter key: read its string value, write new state with its expiry,
//! and replicate the effect (never the command).

use super::ffi::{self, api, Arg, Ctx, RString};
use crate::error::Error;
use crate::policy::StateWrite;
use redis_module::raw;
use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

/// A key opened for reading and writing; closed on drop.
pub struct LimiterKey {
    ctx: Ctx,
    name: RString,
    key: *mut raw::RedisModuleKey,
}

impl LimiterKey {
    pub fn open(ctx: Ctx, name: Arg) -> LimiterKey {
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        let name = name.0;
        // SAFETY: ctx and name are the live command context and argument.
        let key = unsafe { api!(RedisModule_OpenKey)(ctx.0, name, mode) };
        LimiterKey { ctx, name, key }
    }

    fn key_type(&self) -> isize {
        // SAFETY: self.key is open.
        unsafe { api!(RedisModule_KeyType)(self.key) as isize }
    }

    /// The length of the key's string value; `None` if it holds no string.
    fn string_len(&self) -> Option<usize> {
        if self.key_type() != raw::REDISMODULE_KEYTYPE_STRING {
            return None;
        }
        let mut len = 0usize;
        // SAFETY: the key is open and holds a string; a read-mode DMA of a
        // string we wrote (raw-encoded) changes nothing.
        unsafe { api!(RedisModule_StringDMA)(self.key, &mut len, raw::REDISMODULE_READ as c_int) };
        Some(len)
    }

    /// The key's string value; `None` if the key does not exist.
    /// Reading never changes the value, its expiry or its WATCH state.
    pub fn value(&self) -> Result<Option<&[u8]>, Error> {
        match self.key_type() {
            raw::REDISMODULE_KEYTYPE_EMPTY => Ok(None),
            raw::REDISMODULE_KEYTYPE_STRING => {
                let mut len = 0usize;
                // SAFETY: the key holds a string; the pointer is valid until
                // the key is written or closed, and `&self` outlives neither.
                let ptr = unsafe {
                    api!(RedisModule_StringDMA)(self.key, &mut len, raw::REDISMODULE_READ as c_int)
                };
                if ptr.is_null() {
                    return Err(Error::WrongType);
                }
                if len == 0 {
                    return Ok(Some(&[]));
                }
                // SAFETY: as above.
                Ok(Some(unsafe {
                    std::slice::from_raw_parts(ptr.cast::<u8>(), len)
                }))
            }
            _ => Err(Error::WrongType),
        }
    }

    /// Stores `value` with a TTL of `ttl_ms`, and replicates the effect as
    /// `SET key value PXAT <absolute ms>` so that replicas and the AOF hold
    /// the same bytes and the same expiry time.
    pub fn write(&mut self, value: &[u8], ttl_ms: u64) {
        let expire_at = expire_at(ttl_ms);
        self.set_bytes(value);
        // SAFETY: self.key is open for writing and now holds a string.
        unsafe {
            api!(RedisModule_SetAbsExpire)(self.key, expire_at);
            api!(RedisModule_Replicate)(
                self.ctx.0,
                c"SET".as_ptr(),
                c"sbsl".as_ptr(),
                self.name,
                value.as_ptr(),
                value.len(),
                pxat(),
                expire_at as std::ffi::c_longlong,
            );
            api!(RedisModule_SignalModifiedKey)(self.ctx.0, self.name);
        }
    }

    /// Applies a policy's write with a TTL of `ttl_ms`, replicating effects.
    pub fn apply(&mut self, write: &StateWrite, ttl_ms: u64) {
        match write {
            StateWrite::Value(v) => self.write(v, ttl_ms),
            StateWrite::Patch(patch) => self.patch(patch.ranges(), ttl_ms),
        }
    }

    /// Overwrites byte ranges as `SETRANGE` would, sets the expiry, and
    /// replicates `SETRANGE key offset bytes` for each range and one
    /// `PEXPIREAT` (Redis wraps them in MULTI/EXEC).
    fn patch(&mut self, ranges: &[(usize, Vec<u8>)], ttl_ms: u64) {
        let expire_at = expire_at(ttl_ms);
        let needed = ranges
            .iter()
            .map(|(off, b)| off + b.len())
            .max()
            .unwrap_or(0);
        // SAFETY: self.key is open for writing; after the truncate the value
        // is at least `needed` bytes long, and every range lies within it.
        unsafe {
            let mut len = self.string_len().unwrap_or(0);
            if needed > len {
                api!(RedisModule_StringTruncate)(self.key, needed);
            }
            let ptr =
                api!(RedisModule_StringDMA)(self.key, &mut len, raw::REDISMODULE_WRITE as c_int);
            if ptr.is_null() || len < needed {
                return;
            }
            for (off, bytes) in ranges {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    ptr.cast::<u8>().add(*off),
                    bytes.len(),
                );
            }
            api!(RedisModule_SetAbsExpire)(self.key, expire_at);
            for (off, bytes) in ranges {
                api!(RedisModule_Replicate)(
                    self.ctx.0,
                    c"SETRANGE".as_ptr(),
                    c"slb".as_ptr(),
                    self.name,
                    *off as std::ffi::c_longlong,
                    bytes.as_ptr(),
                    bytes.len(),
                );
            }
            api!(RedisModule_Replicate)(
                self.ctx.0,
                c"PEXPIREAT".as_ptr(),
                c"sl".as_ptr(),
                self.name,
                expire_at as std::ffi::c_longlong,
            );
            api!(RedisModule_SignalModifiedKey)(self.ctx.0, self.name);
        }
    }

    /// Replaces the value in place when the length is unchanged (no
    /// allocation); otherwise recreates it at its exact size.
    fn set_bytes(&mut self, value: &[u8]) {
        let current_len = self.string_len();
        // SAFETY: self.key is open for writing. After StringTruncate the key
        // holds a string of exactly value.len() bytes, which DMA exposes.
        unsafe {
            if current_len != Some(value.len()) {
                if current_len.is_some() {
                    api!(RedisModule_DeleteKey)(self.key);
                }
                api!(RedisModule_StringTruncate)(self.key, value.len());
            }
            let mut len = 0usize;
            let ptr =
                api!(RedisModule_StringDMA)(self.key, &mut len, raw::REDISMODULE_WRITE as c_int);
            if !ptr.is_null() && len == value.len() {
                std::ptr::copy_nonoverlapping(value.as_ptr(), ptr.cast::<u8>(), len);
            }
        }
    }
}

/// The word `PXAT`, created once: `RM_Replicate` takes a string argument
/// by reference, where a C string would be copied into a new object on
/// every write. Created on first use on the main thread; kept for the life
/// of the module.
static PXAT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

fn pxat() -> RString {
    let word = PXAT.load(Relaxed);
    if !word.is_null() {
        return word;
    }
    // SAFETY: with a NULL context the string is not auto-freed; it is
    // never freed, so the pointer stays valid.
    let word = unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), c"PXAT".as_ptr(), 4) };
    PXAT.store(word, Relaxed);
    word
}

/// The absolute expiry, on the server's wall clock, of a key written now
/// with `ttl_ms` (at least 1 ms).
fn expire_at(ttl_ms: u64) -> i64 {
    let ttl = i64::try_from(ttl_ms.max(1)).unwrap_or(i64::MAX);
    ffi::server_ms().saturating_add(ttl)
}

impl Drop for LimiterKey {
    fn drop(&mut self) {
        if !self.key.is_null() {
            // SAFETY: opened in `open`, closed exactly once.
            unsafe { api!(RedisModule_CloseKey)(self.key) };
        }
    }
}
