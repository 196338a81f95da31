//! `CLIENT UNBLOCK` of a client admitted in this event-loop turn, whose
//! reply is not sent yet, on servers that do not tell it apart from
//! `CLIENT UNBLOCK … ERROR`.
//!
//! On Redis 7.0 both call the disconnect callback, with the admission as
//! private data: after `ERROR` Redis has replied with its error (the
//! admission is taken back); without it Redis sends nothing, and the
//! admission's reply must be sent from the callback. Only the command
//! tells them apart, so there a command filter sees every command while
//! an admitted reply is pending: registered when the first such reply is
//! pending, unregistered (from a timer, never from inside the filter) once
//! none is, so it runs at most one event-loop iteration per batch of
//! admissions and never while clients merely wait. Redis 7.2 gives such
//! waiters no timeout callback (`CLIENT UNBLOCK` answers 0 for them);
//! Redis 7.4 and later and Valkey 8 ignore `CLIENT UNBLOCK` without
//! `ERROR` for a client already unblocked and call the disconnect callback
//! after `ERROR`: neither needs a filter.

use crate::server::ffi::{api, Ctx};
use redis_module::raw;
use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Whether the filter is registered.
static FILTERING: AtomicBool = AtomicBool::new(false);

/// How many times the filter was registered since the module loaded.
static REGISTRATIONS: AtomicU64 = AtomicU64::new(0);

/// Admissions unblocked with their reply not yet sent (and their private
/// data not yet freed): `CLIENT UNBLOCK` may still concern them.
static REPLIES_PENDING: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Only Redis's main thread runs commands, filters and callbacks.
    /// The registered filter.
    static FILTER: Cell<*mut raw::RedisModuleCommandFilter> = const { Cell::new(std::ptr::null_mut()) };
    /// A context for the timer that unregisters the filter (the filter
    /// has none of its own), held while the filter is registered.
    static TIMER_CTX: Cell<*mut raw::RedisModuleCtx> = const { Cell::new(std::ptr::null_mut()) };
    /// Whether that timer is armed.
    static QUIETING: Cell<bool> = const { Cell::new(false) };
}

/// Whether the command filter is registered now.
pub fn filtering() -> bool {
    FILTERING.load(Relaxed)
}

/// How many times the filter was registered since the module loaded.
pub fn registrations() -> u64 {
    REGISTRATIONS.load(Relaxed)
}

/// Whether this server needs the filter: it gives waiters a timeout
/// callback (`CLIENT UNBLOCK` ends their wait) and predates the 7.2 API.
fn needed() -> bool {
    // SAFETY: reading (copying) a pointer written by RedisModule_Init.
    let api_7_2 = unsafe { raw::RedisModule_SetCommandACLCategories };
    api_7_2.is_none() && super::client_unblock_allowed()
}

/// Whether this server has what the filter needs (Redis 7.0 has it all).
pub fn available() -> bool {
    macro_rules! present {
        ($($name:ident),*) => {
            // SAFETY: reading (copying) pointers written by RedisModule_Init.
            $(unsafe { raw::$name }.is_some())&&*
        };
    }
    present!(
        RedisModule_RegisterCommandFilter,
        RedisModule_UnregisterCommandFilter,
        RedisModule_CommandFilterArgsCount,
        RedisModule_CommandFilterArgGet,
        RedisModule_GetDetachedThreadSafeContext,
        RedisModule_FreeThreadSafeContext
    )
}

/// An admission's reply is on its way (its private data is with Redis):
/// the filter is registered if this server needs it and it is not. If
/// Redis refuses, the next admission tries again.
pub(super) fn reply_pending(ctx: Ctx) {
    REPLIES_PENDING.fetch_add(1, Relaxed);
    if FILTERING.load(Relaxed) || !needed() || !available() {
        return;
    }
    // SAFETY: ctx is a live context of this module; the callback is a
    // plain function that lives as long as the module, which cannot
    // unload while a reply is pending (the filter goes before it can).
    unsafe {
        // Not `NOSELF`: Redis would test more on every command.
        let filter = api!(RedisModule_RegisterCommandFilter)(ctx.0, Some(on_command), 0);
        if filter.is_null() {
            return;
        }
        FILTER.with(|f| f.set(filter));
        TIMER_CTX.with(|t| t.set(api!(RedisModule_GetDetachedThreadSafeContext)(ctx.0)));
    }
    FILTERING.store(true, Relaxed);
    REGISTRATIONS.fetch_add(1, Relaxed);
}

/// An admission's reply was sent or dropped (its private data is freed):
/// once none is pending, a timer unregisters the filter.
pub(super) fn reply_done() {
    let left = REPLIES_PENDING.fetch_sub(1, Relaxed).saturating_sub(1);
    if left > 0 || !FILTERING.load(Relaxed) || QUIETING.with(Cell::get) {
        return;
    }
    let ctx = TIMER_CTX.with(Cell::get);
    if ctx.is_null() {
        return;
    }
    QUIETING.with(|q| q.set(true));
    // SAFETY: `ctx` is this module's detached context, live while the
    // filter is registered; the callback lives as long as the module.
    unsafe { api!(RedisModule_CreateTimer)(ctx, 0, Some(on_quiet), std::ptr::null_mut()) };
}

extern "C" fn on_quiet(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        QUIETING.with(|q| q.set(false));
        let filter = FILTER.with(Cell::get);
        if REPLIES_PENDING.load(Relaxed) > 0 || filter.is_null() {
            return;
        }
        let detached = TIMER_CTX.with(|t| t.replace(std::ptr::null_mut()));
        // SAFETY: a timer's context of this module (the filter's owner),
        // outside any filter call; the detached context is ours and no
        // timer holds it any more.
        unsafe {
            api!(RedisModule_UnregisterCommandFilter)(ctx, filter);
            if !detached.is_null() {
                api!(RedisModule_FreeThreadSafeContext)(detached);
            }
        }
        FILTER.with(|f| f.set(std::ptr::null_mut()));
        FILTERING.store(false, Relaxed);
    }));
}

/// Sees every command before Redis runs it (while an admitted reply is
/// pending): only `CLIENT` costs more than a look at the name.
extern "C" fn on_command(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: Redis calls this with a live filter context; the argument
    // stays valid during the call.
    let name = unsafe { filter_arg(fctx, 0) };
    // A mark left by an earlier `CLIENT UNBLOCK` that ended no admission
    // (its client was not blocked, or not admitted) concerns that command
    // only.
    super::unblocking_done();
    if name.len() == 6 && name.eq_ignore_ascii_case(b"client") {
        // SAFETY: as above.
        unsafe { client(fctx) };
    }
}

/// `CLIENT UNBLOCK id [TIMEOUT|ERROR]` is told to the wait machinery.
///
/// # Safety
/// `fctx` is the live filter context.
#[cold]
#[inline(never)]
unsafe fn client(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: forwarded from the caller.
    let word = |pos: c_int| unsafe { filter_arg(fctx, pos) };
    // SAFETY: as above.
    let count = unsafe { api!(RedisModule_CommandFilterArgsCount)(fctx) };
    if !(3..=4).contains(&count) || !word(1).eq_ignore_ascii_case(b"UNBLOCK") {
        return;
    }
    let id = std::str::from_utf8(word(2))
        .ok()
        .and_then(|s| s.parse().ok());
    if let Some(id) = id {
        let error = count == 4 && word(3).eq_ignore_ascii_case(b"ERROR");
        super::unblocking(id, error);
    }
}

/// The bytes of the filtered command's argument `pos` (empty if absent).
///
/// # Safety
/// `fctx` is the live filter context; the bytes are used only during the
/// filter call.
#[inline(always)]
unsafe fn filter_arg<'a>(fctx: *mut raw::RedisModuleCommandFilterCtx, pos: c_int) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: forwarded from the caller.
    unsafe {
        let arg = api!(RedisModule_CommandFilterArgGet)(fctx, pos);
        if arg.is_null() {
            return &[];
        }
        let ptr = api!(RedisModule_StringPtrLen)(arg, &mut len);
        if ptr.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(ptr.cast::<u8>(), len)
    }
}
