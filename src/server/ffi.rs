//! Safe wrappers over the few Redis module API functions the shell calls.
//!
//! The function pointers are filled in by `RedisModule_Init` before any
//! command runs; `load::missing_api` refuses to load when one is missing, so
//! a missing pointer here is a bug, and a panic (caught by the command guard)
//! is the right answer to it.

use redis_module::raw;
use std::ffi::{c_char, c_int, CStr};

pub type RString = *mut raw::RedisModuleString;

/// The context of the running command (or of module load).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Ctx(pub(super) *mut raw::RedisModuleCtx);

macro_rules! api {
    ($name:ident) => {{
        // SAFETY: written once by RedisModule_Init, before any call; read only.
        #[allow(unused_unsafe)]
        let f = unsafe { redis_module::raw::$name };
        f.expect(concat!(stringify!($name), " is not available"))
    }};
}
pub(crate) use api;

/// The bytes of a Redis string argument, valid while the command runs.
fn bytes<'a>(s: RString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: `s` is an argument Redis passed to the command; the pointer and
    // length it returns stay valid until the command returns.
    unsafe {
        let ptr = api!(RedisModule_StringPtrLen)(s, &mut len);
        if ptr.is_null() || len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(ptr.cast::<u8>(), len)
    }
}

/// One command argument; its bytes are read on demand.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Arg(pub(super) RString);

impl AsRef<[u8]> for Arg {
    fn as_ref(&self) -> &[u8] {
        bytes(self.0)
    }
}

/// The arguments of a command as Redis passed them.
///
/// # Safety
/// `argv` holds `argc` valid argument pointers that outlive `'a`.
pub unsafe fn argv<'a>(argv: *mut RString, argc: c_int) -> &'a [Arg] {
    let n = usize::try_from(argc).unwrap_or(0);
    if argv.is_null() || n == 0 {
        return &[];
    }
    // SAFETY: Redis passes `argc` valid pointers; `Arg` is a transparent
    // wrapper of the pointer type.
    unsafe { std::slice::from_raw_parts(argv.cast::<Arg>(), n) }
}

pub fn reply_array(ctx: Ctx, len: usize) {
    // SAFETY: ctx is the live command context.
    unsafe { api!(RedisModule_ReplyWithArray)(ctx.0, len as _) };
}

pub fn reply_map(ctx: Ctx, len: usize) {
    // SAFETY: as above.
    unsafe { api!(RedisModule_ReplyWithMap)(ctx.0, len as _) };
}

pub fn reply_int(ctx: Ctx, n: i64) {
    // SAFETY: as above.
    unsafe { api!(RedisModule_ReplyWithLongLong)(ctx.0, n) };
}

pub fn reply_bool(ctx: Ctx, b: bool) {
    // SAFETY: as above.
    unsafe { api!(RedisModule_ReplyWithBool)(ctx.0, c_int::from(b)) };
}

/// A bulk string reply.
pub fn reply_bulk(ctx: Ctx, bytes: &[u8]) {
    // SAFETY: as above; Redis copies `len` bytes from the pointer.
    unsafe { api!(RedisModule_ReplyWithStringBuffer)(ctx.0, bytes.as_ptr().cast(), bytes.len()) };
}

/// A simple string: `text` up to any NUL, CR or LF in it (a simple
/// string cannot hold them).
pub fn reply_simple(ctx: Ctx, text: &str) {
    let line = text.split(['\0', '\r', '\n']).next().unwrap_or("");
    let line = std::ffi::CString::new(line).unwrap_or_default();
    // SAFETY: as above; the string is NUL-terminated and Redis copies it.
    unsafe { api!(RedisModule_ReplyWithSimpleString)(ctx.0, line.as_ptr()) };
}

/// The simple string `OK`.
pub fn reply_ok(ctx: Ctx) {
    // SAFETY: as above; the string is NUL-terminated.
    unsafe { api!(RedisModule_ReplyWithSimpleString)(ctx.0, c"OK".as_ptr()) };
}

/// Sends the running command, as the client gave it, to replicas and the
/// AOF (a command with no time in it: replaying it does the same).
pub fn replicate_verbatim(ctx: Ctx) {
    // SAFETY: ctx is the live command context.
    unsafe { api!(RedisModule_ReplicateVerbatim)(ctx.0) };
}

/// Sends `command args...` to replicas and the AOF (the running call's
/// effect, in place of the call).
pub fn replicate(ctx: Ctx, command: &str, args: &[&[u8]]) {
    let Ok(name) = std::ffi::CString::new(command) else {
        return;
    };
    let argv = OwnedStrings::new(args.iter().copied());
    // SAFETY: ctx is the live command context; `v` takes an array of
    // `argv.0.len()` strings (an `Arg` is a transparent string pointer),
    // alive for the call; Redis copies them.
    unsafe {
        api!(RedisModule_Replicate)(
            ctx.0,
            name.as_ptr(),
            c"v".as_ptr(),
            argv.0.as_ptr(),
            argv.0.len(),
        )
    };
}

/// A nil reply (RESP3 null).
pub fn reply_null(ctx: Ctx) {
    // SAFETY: as above.
    unsafe { api!(RedisModule_ReplyWithNull)(ctx.0) };
}

/// A bulk string reply from a static, NUL-terminated name.
pub fn reply_name(ctx: Ctx, name: &CStr) {
    // SAFETY: as above; `name` is NUL-terminated.
    unsafe { api!(RedisModule_ReplyWithCString)(ctx.0, name.as_ptr()) };
}

/// An error reply. `message` starts with its code (`ERR`, `WRONGTYPE`).
pub fn reply_error(ctx: Ctx, message: &str) {
    let clean: Vec<u8> = message
        .bytes()
        .map(|b| {
            if b == b'\r' || b == b'\n' || b == 0 {
                b' '
            } else {
                b
            }
        })
        .chain(std::iter::once(0))
        .collect();
    // SAFETY: as above; `clean` is NUL-terminated with no interior NUL.
    unsafe { api!(RedisModule_ReplyWithError)(ctx.0, clean.as_ptr().cast::<c_char>()) };
}

/// Whether the calling client speaks RESP3.
pub fn is_resp3(ctx: Ctx) -> bool {
    // SAFETY: as above.
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx.0) };
    flags as u32 & raw::REDISMODULE_CTX_FLAGS_RESP3 != 0
}

/// The server's wall clock in milliseconds (what key expiry runs on).
pub fn server_ms() -> i64 {
    // SAFETY: no arguments.
    unsafe { api!(RedisModule_Milliseconds)() }
}

/// Whether Redis called the command only to learn where its keys are
/// (commands flagged `getkeys-api`, for cluster routing).
pub fn is_keys_position_request(ctx: Ctx) -> bool {
    // SAFETY: ctx is the live command context.
    unsafe { api!(RedisModule_IsKeysPositionRequest)(ctx.0) != 0 }
}

/// Declares argument `pos` a key, in a keys-position request.
pub fn key_at_pos(ctx: Ctx, pos: usize) {
    let pos = c_int::try_from(pos).unwrap_or(c_int::MAX);
    // SAFETY: as above.
    unsafe { api!(RedisModule_KeyAtPos)(ctx.0, pos) };
}

/// Writes a warning to the server's log.
pub fn log_warning(ctx: Ctx, message: &str) {
    let Ok(text) = std::ffi::CString::new(message.replace('\0', " ")) else {
        return;
    };
    // SAFETY: ctx is a live context (or NULL, which Log accepts); both
    // strings are NUL-terminated and the format is "%s".
    unsafe { api!(RedisModule_Log)(ctx.0, c"warning".as_ptr(), c"%s".as_ptr(), text.as_ptr()) };
}

/// Whether writes are paused (CLIENT PAUSE WRITE, a failover): nothing may
/// be propagated until they resume.
pub fn writes_paused() -> bool {
    // SAFETY: no arguments.
    unsafe { api!(RedisModule_AvoidReplicaTraffic)() != 0 }
}

/// While writes are paused, a timer that would write looks again this much
/// later.
pub const PAUSED_RETRY_MS: u64 = 10;

/// Redis strings made by the module (key names, command arguments), freed
/// on drop.
pub struct OwnedStrings(pub Vec<Arg>);

impl OwnedStrings {
    pub fn new<'a>(bytes: impl Iterator<Item = &'a [u8]>) -> OwnedStrings {
        OwnedStrings(
            bytes
                .map(|b| {
                    // SAFETY: with no context the string is not auto-freed;
                    // `drop` frees it. Redis copies the bytes.
                    Arg(unsafe {
                        api!(RedisModule_CreateString)(
                            std::ptr::null_mut(),
                            b.as_ptr().cast(),
                            b.len(),
                        )
                    })
                })
                .collect(),
        )
    }
}

impl Drop for OwnedStrings {
    fn drop(&mut self) {
        for s in &self.0 {
            // SAFETY: created in `OwnedStrings::new`, freed once.
            unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), s.0) };
        }
    }
}

/// A reply of `RedisModule_Call`, freed on drop.
pub struct CallReply(*mut raw::RedisModuleCallReply);

impl CallReply {
    /// # Safety
    /// `reply` is NULL or a reply `RedisModule_Call` returned, freed
    /// nowhere else.
    pub unsafe fn new(reply: *mut raw::RedisModuleCallReply) -> Option<CallReply> {
        (!reply.is_null()).then_some(CallReply(reply))
    }

    /// An integer reply's value.
    pub fn integer(&self) -> Option<i64> {
        // SAFETY: a live reply.
        unsafe {
            (api!(RedisModule_CallReplyType)(self.0) == raw::REDISMODULE_REPLY_INTEGER as c_int)
                .then(|| api!(RedisModule_CallReplyInteger)(self.0))
        }
    }

    /// A string reply's bytes.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        reply_bytes(self.0)
    }

    /// The bytes of element `index` of an array reply.
    pub fn element_bytes(&self, index: usize) -> Option<Vec<u8>> {
        // SAFETY: a live reply; the element belongs to it (not freed alone).
        let element = unsafe { api!(RedisModule_CallReplyArrayElement)(self.0, index) };
        (!element.is_null()).then(|| reply_bytes(element)).flatten()
    }
}

impl Drop for CallReply {
    fn drop(&mut self) {
        // SAFETY: a reply freed only here.
        unsafe { api!(RedisModule_FreeCallReply)(self.0) };
    }
}

/// The bytes of a live, non-NULL string reply (copied).
fn reply_bytes(reply: *mut raw::RedisModuleCallReply) -> Option<Vec<u8>> {
    let mut len = 0usize;
    // SAFETY: `reply` is live; the pointer and length are read before it
    // can be freed.
    unsafe {
        let ptr = api!(RedisModule_CallReplyStringPtr)(reply, &mut len);
        (!ptr.is_null()).then(|| std::slice::from_raw_parts(ptr.cast::<u8>(), len).to_vec())
    }
}
