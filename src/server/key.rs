//! The keys of one command as a [`Store`]: read their string values, write
//! new state with its expiry, and replicate the effect (never the command).

use super::ffi::{self, api, Arg, Ctx, RString};
use crate::algorithm::Micros;
use crate::engine::error::Error;
use crate::engine::leases::LeaseChange;
use crate::engine::penalty::{listing, Event};
use crate::engine::store::Store;
use crate::policy::StateWrite;
use redis_module::raw;
use smallvec::SmallVec;
use std::cell::Cell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

/// The keys a command names, opened for reading and writing; closed on drop.
pub struct RedisStore {
    ctx: Ctx,
    /// Most calls name one key, RL.ALL a few: no allocation for those.
    keys: SmallVec<[OpenKey; 1]>,
    /// Opened for reading only: every write is refused.
    read_only: bool,
}

struct OpenKey {
    name: RString,
    key: *mut raw::RedisModuleKey,
    prepared: Option<Prepared>,
    /// The string last read (null: none since the key was opened or
    /// written): a reservation's second read of the key is a load.
    read: Cell<(*const u8, usize)>,
}

/// A write made ready by `prepare`.
enum Prepared {
    /// The value already has the room the write needs, at `ptr`.
    InPlace {
        ptr: *mut u8,
        len: usize,
        undo: Undo,
    },
    /// A value of another length, set whole at commit.
    Replace(RString),
    /// The key is deleted at commit.
    Delete,
}

/// How to take back what `prepare` changed.
enum Undo {
    Nothing,
    /// The value was grown (with zeros) from this length.
    Shrink(usize),
    /// The key was created.
    Delete,
}

/// Why a prepared write failed, for the reply and the log.
const NO_ROOM: &str = "the server gave no room for the value";
const NOT_WRITABLE: &str = "the server refused to resize the value";
const READ_ONLY: &str = "the key was opened for reading only";

impl RedisStore {
    pub fn open(ctx: Ctx, names: &[Arg]) -> RedisStore {
        Self::open_with(ctx, names, false)
    }

    /// Opens the keys for reading only (RL.PEEK): a missing key is not
    /// looked up for writing, nothing can be written, and a replica or a
    /// server out of memory serves it.
    pub fn open_read(ctx: Ctx, names: &[Arg]) -> RedisStore {
        Self::open_with(ctx, names, true)
    }

    fn open_with(ctx: Ctx, names: &[Arg], read_only: bool) -> RedisStore {
        let mode = if read_only {
            raw::REDISMODULE_READ as c_int
        } else {
            (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int
        };
        // A key opened for reading that does not exist is NULL, which
        // every call below treats as an empty key.
        let keys = names
            .iter()
            .map(|name| OpenKey {
                name: name.0,
                // SAFETY: ctx and name are the live command context and argument.
                key: unsafe { api!(RedisModule_OpenKey)(ctx.0, name.0, mode) },
                prepared: None,
                read: Cell::new((std::ptr::null(), 0)),
            })
            .collect();
        RedisStore {
            ctx,
            keys,
            read_only,
        }
    }

    /// Forgets `key`'s last read before a write (only a store of one key
    /// keeps one: two arguments may name one key, whose string a write to
    /// either may move).
    fn forget_read(&self, key: usize) {
        self.keys[key].read.set((std::ptr::null(), 0));
    }

    fn fail(&self, key: usize, why: &'static str) -> Error {
        ffi::log_warning(
            self.ctx,
            &format!("ratelimit: a write to a limiter key (argument {key}) failed: {why}"),
        );
        Error::WriteFailed(why)
    }
}

impl OpenKey {
    fn key_type(&self) -> isize {
        if self.key.is_null() {
            // Opened for reading, and not there.
            return raw::REDISMODULE_KEYTYPE_EMPTY;
        }
        // SAFETY: self.key is open (not NULL).
        unsafe { api!(RedisModule_KeyType)(self.key) as isize }
    }

    /// The string value's bytes for writing: pointer and length.
    fn dma_write(&self) -> (*mut u8, usize) {
        let mut len = 0usize;
        // SAFETY: the key is open for writing; Redis returns NULL for a key
        // that holds no string.
        let ptr = unsafe {
            api!(RedisModule_StringDMA)(self.key, &mut len, raw::REDISMODULE_WRITE as c_int)
        };
        (ptr.cast::<u8>(), len)
    }

    /// The length of the string value; `None` if the key does not exist.
    fn string_len(&self) -> Option<usize> {
        if self.key_type() == raw::REDISMODULE_KEYTYPE_EMPTY {
            return None;
        }
        // SAFETY: the key is open; this reads the length only.
        Some(unsafe { api!(RedisModule_ValueLength)(self.key) })
    }

    /// Resizes the value (creating the key if it does not exist).
    fn truncate(&self, len: usize) -> bool {
        // SAFETY: the key is open for writing.
        unsafe { api!(RedisModule_StringTruncate)(self.key, len) == raw::REDISMODULE_OK as c_int }
    }

    fn undo(&mut self) {
        match self.prepared.take() {
            None
            | Some(Prepared::Delete)
            | Some(Prepared::InPlace {
                undo: Undo::Nothing,
                ..
            }) => {}
            Some(Prepared::InPlace {
                undo: Undo::Shrink(len),
                ..
            }) => {
                // Only zeros were appended: cutting them restores the value.
                self.truncate(len);
            }
            Some(Prepared::InPlace {
                undo: Undo::Delete, ..
            }) => {
                // SAFETY: the key is open for writing.
                unsafe { api!(RedisModule_DeleteKey)(self.key) };
            }
            // SAFETY: created in `prepare` with no context, freed once.
            Some(Prepared::Replace(s)) => unsafe {
                api!(RedisModule_FreeString)(std::ptr::null_mut(), s)
            },
        }
    }
}

impl Store for RedisStore {
    /// Counted for INFO, and the block listed by its key (RL.PENALIZED).
    fn penalized(&mut self, key: usize, event: Event) {
        let Some(open) = self.keys.get(key) else {
            return;
        };
        let name = Arg(open.name);
        match event {
            Event::Began { end } => listing::began(name.as_ref(), end),
            Event::Charged { end } => listing::charged(name.as_ref(), end),
            Event::Held => listing::held(),
        }
    }

    /// Reading never changes the value, its expiry or its WATCH state.
    fn value(&self, key: usize) -> Result<Option<&[u8]>, Error> {
        let open = &self.keys[key];
        let (ptr, len) = open.read.get();
        if !ptr.is_null() {
            // SAFETY: read below from the store's only key, which nothing
            // wrote since: every write goes through `prepare`, `commit` or
            // `abandon`, which forget the read.
            return Ok(Some(unsafe { std::slice::from_raw_parts(ptr, len) }));
        }
        match open.key_type() {
            raw::REDISMODULE_KEYTYPE_EMPTY => Ok(None),
            raw::REDISMODULE_KEYTYPE_STRING => {
                let mut len = 0usize;
                // SAFETY: the key holds a string; the pointer is valid until
                // the key is written or closed, and `&self` outlives neither.
                let ptr = unsafe {
                    api!(RedisModule_StringDMA)(open.key, &mut len, raw::REDISMODULE_READ as c_int)
                };
                if ptr.is_null() {
                    return Err(Error::WrongType);
                }
                if len == 0 {
                    return Ok(Some(&[]));
                }
                if self.keys.len() == 1 {
                    open.read.set((ptr.cast::<u8>(), len));
                }
                // SAFETY: as above.
                Ok(Some(unsafe {
                    std::slice::from_raw_parts(ptr.cast::<u8>(), len)
                }))
            }
            _ => Err(Error::WrongType),
        }
    }

    fn prepare(&mut self, key: usize, write: &StateWrite) -> Result<(), Error> {
        if self.read_only {
            return Err(self.fail(key, READ_ONLY));
        }
        self.forget_read(key);
        let open = &mut self.keys[key];
        let current = open.string_len();
        let needed = match write {
            StateWrite::Delete => {
                // Nothing to make ready: deleting an open key cannot fail.
                open.prepared = Some(Prepared::Delete);
                return Ok(());
            }
            StateWrite::Value(v) if current == Some(v.len()) => v.len(),
            StateWrite::Value(v) => {
                // Another length: a new string, set whole at commit (Redis
                // sizes it exactly; nothing changes until then).
                // SAFETY: with no context the string is not auto-freed; it
                // is freed at commit or abandon.
                let s = unsafe {
                    api!(RedisModule_CreateString)(std::ptr::null_mut(), v.as_ptr().cast(), v.len())
                };
                open.prepared = Some(Prepared::Replace(s));
                return Ok(());
            }
            StateWrite::Patch(patch) => patch
                .ranges()
                .iter()
                .map(|(off, b)| off + b.len())
                .max()
                .unwrap_or(0)
                .max(current.unwrap_or(0)),
        };
        let undo = match current {
            Some(len) if len >= needed => Undo::Nothing,
            Some(len) => Undo::Shrink(len),
            None => Undo::Delete,
        };
        let grows = !matches!(undo, Undo::Nothing);
        if grows && !open.truncate(needed) {
            return Err(self.fail(key, NOT_WRITABLE));
        }
        let (ptr, len) = open.dma_write();
        open.prepared = Some(Prepared::InPlace { ptr, len, undo });
        if ptr.is_null() || len < needed {
            open.undo();
            return Err(self.fail(key, NO_ROOM));
        }
        Ok(())
    }

    fn abandon(&mut self, key: usize) {
        self.forget_read(key);
        self.keys[key].undo();
    }

    fn commit(&mut self, key: usize, write: &StateWrite, ttl: Micros) {
        let ctx = self.ctx;
        self.forget_read(key);
        let open = &mut self.keys[key];
        let expire_at = expire_at(ttl);
        // The string a new value was set from: replicated as it is (Redis
        // takes a reference), where its bytes would be copied into a new
        // string.
        let mut set_whole: Option<RString> = None;
        match (open.prepared.take(), write) {
            (Some(Prepared::InPlace { ptr, len, .. }), StateWrite::Value(v)) => {
                // SAFETY: prepare checked that `ptr` holds `len` bytes and
                // that `len` is v.len(); nothing wrote the key since.
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), ptr, v.len().min(len)) };
            }
            (Some(Prepared::InPlace { ptr, len, .. }), StateWrite::Patch(patch)) => {
                for (off, bytes) in patch.ranges() {
                    if off + bytes.len() <= len {
                        // SAFETY: within the `len` bytes at `ptr` (checked).
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                bytes.as_ptr(),
                                ptr.add(*off),
                                bytes.len(),
                            )
                        };
                    }
                }
            }
            (Some(Prepared::Replace(s)), _) => {
                // SAFETY: the key is open for writing; Redis takes its own
                // reference to `s`; ours is released below, once replicated.
                unsafe {
                    if api!(RedisModule_StringSet)(open.key, s) != raw::REDISMODULE_OK as c_int {
                        ffi::log_warning(ctx, "ratelimit: StringSet failed after prepare");
                    }
                }
                set_whole = Some(s);
            }
            (_, StateWrite::Delete) => {
                // SAFETY: the key is open for writing; the replicated
                // argument matches its format letter.
                unsafe {
                    api!(RedisModule_DeleteKey)(open.key);
                    api!(RedisModule_Replicate)(ctx.0, c"DEL".as_ptr(), c"s".as_ptr(), open.name);
                    api!(RedisModule_SignalModifiedKey)(ctx.0, open.name);
                }
                return;
            }
            (None | Some(Prepared::Delete), _) => {
                ffi::log_warning(ctx, "ratelimit: commit without prepare");
                return;
            }
        }
        // Integers are replicated as the decimal text Redis would make of
        // them (a `b` argument, not `l`): the server's own conversion costs
        // several times more on every write.
        let mut digits = [0u8; DECIMAL_LEN];
        let expire_text = decimal(expire_at, &mut digits);
        // SAFETY: the key is open for writing and now holds a string; the
        // replicated arguments match their format letters.
        unsafe {
            if api!(RedisModule_SetAbsExpire)(open.key, expire_at) != raw::REDISMODULE_OK as c_int {
                ffi::log_warning(ctx, "ratelimit: SetAbsExpire failed after prepare");
            }
            match (write, set_whole) {
                (StateWrite::Value(_), Some(whole)) => {
                    api!(RedisModule_Replicate)(
                        ctx.0,
                        c"SET".as_ptr(),
                        c"sssb".as_ptr(),
                        open.name,
                        whole,
                        pxat(),
                        expire_text.as_ptr(),
                        expire_text.len(),
                    );
                }
                (StateWrite::Value(v), None) => {
                    api!(RedisModule_Replicate)(
                        ctx.0,
                        c"SET".as_ptr(),
                        c"sbsb".as_ptr(),
                        open.name,
                        v.as_ptr(),
                        v.len(),
                        pxat(),
                        expire_text.as_ptr(),
                        expire_text.len(),
                    );
                }
                // Deleted and replicated above.
                (StateWrite::Delete, _) => {}
                (StateWrite::Patch(patch), _) => {
                    // Redis wraps the effects of one command in MULTI/EXEC.
                    for (off, bytes) in patch.ranges() {
                        let mut digits = [0u8; DECIMAL_LEN];
                        let offset = decimal(i64::try_from(*off).unwrap_or(i64::MAX), &mut digits);
                        api!(RedisModule_Replicate)(
                            ctx.0,
                            c"SETRANGE".as_ptr(),
                            c"sbb".as_ptr(),
                            open.name,
                            offset.as_ptr(),
                            offset.len(),
                            bytes.as_ptr(),
                            bytes.len(),
                        );
                    }
                    api!(RedisModule_Replicate)(
                        ctx.0,
                        c"PEXPIREAT".as_ptr(),
                        c"sb".as_ptr(),
                        open.name,
                        expire_text.as_ptr(),
                        expire_text.len(),
                    );
                }
            }
            api!(RedisModule_SignalModifiedKey)(ctx.0, open.name);
            if let Some(s) = set_whole {
                // Created in `prepare` with no context; freed once.
                api!(RedisModule_FreeString)(std::ptr::null_mut(), s);
            }
        }
    }

    fn lease(&mut self, key: usize, change: LeaseChange) {
        let name = Arg(self.keys[key].name);
        super::leases::record(self.ctx, name.as_ref(), change);
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

/// The most bytes an `i64` takes in decimal (`-9223372036854775808`).
const DECIMAL_LEN: usize = 20;

/// "00", "01", ... "99": two digits per division.
const DIGIT_PAIRS: [u8; 200] = {
    let mut pairs = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// `n` in decimal, written at the end of `buf`: the text Redis makes of a
/// long long.
fn decimal(n: i64, buf: &mut [u8; DECIMAL_LEN]) -> &[u8] {
    let mut start = buf.len();
    let mut rest = n.unsigned_abs();
    // Four digits per 64-bit division (a time in ms has 13), then pairs.
    while rest >= 10_000 {
        let four = (rest % 10_000) as usize;
        rest /= 10_000;
        let (hi, lo) = (four / 100 * 2, four % 100 * 2);
        start -= 4;
        buf[start..start + 2].copy_from_slice(&DIGIT_PAIRS[hi..hi + 2]);
        buf[start + 2..start + 4].copy_from_slice(&DIGIT_PAIRS[lo..lo + 2]);
    }
    let mut rest = rest as usize;
    if rest >= 100 {
        let pair = rest % 100 * 2;
        rest /= 100;
        start -= 2;
        buf[start..start + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if rest >= 10 {
        let pair = rest * 2;
        start -= 2;
        buf[start..start + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        start -= 1;
        buf[start] = b'0' + rest as u8;
    }
    if n < 0 {
        start -= 1;
        buf[start] = b'-';
    }
    &buf[start..]
}

/// The absolute expiry, on the server's wall clock, of a key written now
/// to live `ttl` (rounded up to whole milliseconds, at least 1 ms).
fn expire_at(ttl: Micros) -> i64 {
    let ttl_ms = i64::try_from(ttl.ceil_millis().max(1)).unwrap_or(i64::MAX);
    ffi::server_ms().saturating_add(ttl_ms)
}

impl Drop for OpenKey {
    fn drop(&mut self) {
        // A write prepared and never committed is taken back.
        self.undo();
        if !self.key.is_null() {
            // SAFETY: opened in `RedisStore::open`, closed exactly once.
            unsafe { api!(RedisModule_CloseKey)(self.key) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_is_the_text_of_the_integer() {
        for n in [
            0,
            7,
            -7,
            10,
            99,
            100,
            -100,
            12_345,
            1_764_561_600_000,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ] {
            let mut buf = [0u8; DECIMAL_LEN];
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes());
        }
    }
}
