//! While clients wait, a command filter sees every command before Redis
//! runs it, for two things only a waiter needs:
//!
//! - a command that may change or remove a key with a line (`DEL`,
//!   `UNLINK`, `EXPIRE` and its kin, `PERSIST`, `RENAME`, `MOVE`, `COPY`,
//!   `RESTORE`, `MIGRATE`, `SET`, `SETEX`, `PSETEX`, `GETDEL`, `GETEX`)
//!   wakes the line in the next event-loop iteration (after the command
//!   ran), so its first waiter is decided against the new value. A command
//!   queued in `MULTI` passes the filter when it is queued: the names it
//!   woke are woken again at the next `EXEC` (the last [`QUEUED`] of them).
//!   Commands of a script pass it when they run. A spurious wake costs
//!   one decision; a missed one delays a waiter to its planned time.
//! - `CLIENT UNBLOCK`, which the wait machinery must see before Redis runs
//!   it (`wait::unblocking`), while an admitted client's reply is pending.
//!
//! Redis's own keyspace events would tell the same, but Redis makes a module
//! context for every event of a subscribed class (about 690 instructions on
//! every `DEL`, `EXPIRE` and `SET … PX` of the server, waited key or not);
//! the filter costs most commands a look at their name's length and first
//! byte. It is registered when a client blocks and unregistered (from a
//! timer, never from inside the filter) once nobody waits and no admitted
//! reply is pending, so a server where nobody waits runs no filter.

use super::names::{NameBits, WORDS};
use super::{settle_soon, KeyName, Queues, Token};
use crate::server::ffi::{api, Ctx};
use redis_module::raw;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// How many woken names an `EXEC` wakes again.
const QUEUED: usize = 64;

/// How many woken names wait for the next iteration before every line is
/// woken instead.
const MAX_WAKES: usize = 4096;

/// Whether the filter is registered.
static FILTERING: AtomicBool = AtomicBool::new(false);

/// Admissions unblocked with their reply not yet sent (and their private
/// data not yet freed): `CLIENT UNBLOCK` may still concern them.
static REPLIES_PENDING: AtomicUsize = AtomicUsize::new(0);

/// The names with a line (and some that had one).
static NAMES: NameBits<WORDS> = NameBits::new();

struct Watch {
    filter: *mut raw::RedisModuleCommandFilter,
    /// A context for the filter's timers (the filter has none of its own),
    /// held while the filter is registered.
    ctx: *mut raw::RedisModuleCtx,
    /// Names put in [`NAMES`] since it was last cleared (repeats included).
    inserted: usize,
    /// The databases of those names.
    dbs: Vec<c_int>,
    /// Names to wake in the next iteration.
    wakes: Vec<Vec<u8>>,
    /// Whether every line is to be woken (too many names).
    wake_all: bool,
    /// The last names woken, for `EXEC`.
    queued: VecDeque<Vec<u8>>,
    /// Whether the timer that may unregister the filter is armed.
    quieting: bool,
}

thread_local! {
    // Only Redis's main thread runs commands, filters and callbacks.
    static WATCH: RefCell<Watch> = const { RefCell::new(Watch {
        filter: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
        inserted: 0,
        dbs: Vec::new(),
        wakes: Vec::new(),
        wake_all: false,
        queued: VecDeque::new(),
        quieting: false,
    }) };
}

/// Whether the command filter is registered now.
pub fn filtering() -> bool {
    FILTERING.load(Relaxed)
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

/// A client blocks: the filter is registered if it is not. If Redis
/// refuses, the next block tries again; meanwhile the waiters' own timers
/// still decide them when due.
pub(super) fn start(ctx: Ctx) {
    if FILTERING.load(Relaxed) || !available() {
        return;
    }
    WATCH.with(|w| {
        let Ok(mut w) = w.try_borrow_mut() else {
            return;
        };
        // SAFETY: ctx is a live context of this module; the callback is a
        // plain function that lives as long as the module, which cannot
        // unload while clients are blocked (and the filter goes with them).
        unsafe {
            // Not `NOSELF`: Redis would test more on every command, and
            // the module's own calls (`CLUSTER …`) are not watched.
            let filter = api!(RedisModule_RegisterCommandFilter)(ctx.0, Some(on_command), 0);
            if filter.is_null() {
                return;
            }
            w.filter = filter;
            w.ctx = api!(RedisModule_GetDetachedThreadSafeContext)(ctx.0);
        }
        FILTERING.store(true, Relaxed);
    });
}

/// A client blocked on `name` in database `db`.
pub(super) fn waiting_on(db: c_int, name: &[u8]) {
    WATCH.with(|w| {
        if let Ok(mut w) = w.try_borrow_mut() {
            insert(&mut w, db, name);
        }
    });
}

fn insert(w: &mut Watch, db: c_int, name: &[u8]) {
    NAMES.insert(name);
    w.inserted += 1;
    if !w.dbs.contains(&db) {
        w.dbs.push(db);
    }
}

/// After each use of the queue: the names are forgotten when nobody waits
/// (and the filter leaves once no reply is pending), and rebuilt from the
/// waiters when they hold many more insertions than waiters (so a rebuild
/// costs O(1) per insertion).
pub(super) fn tidy(queues: &Queues<KeyName, Token>) {
    WATCH.with(|w| {
        let Ok(mut w) = w.try_borrow_mut() else {
            return;
        };
        if queues.is_empty() {
            if w.inserted > 0 {
                forget(&mut w);
            }
            quiet_soon(&mut w);
            return;
        }
        if w.inserted > 2 * queues.len() + 64 {
            forget(&mut w);
            for waiter in queues.waiters() {
                for (db, name) in &waiter.keys {
                    insert(&mut w, *db, name);
                }
            }
        }
    });
}

fn forget(w: &mut Watch) {
    NAMES.clear();
    w.inserted = 0;
    w.dbs.clear();
    w.queued.clear();
}

/// An admission's reply is on its way (its private data is with Redis).
pub(super) fn reply_pending() {
    REPLIES_PENDING.fetch_add(1, Relaxed);
}

/// An admission's reply was sent or dropped (its private data is freed).
pub(super) fn reply_done() {
    let left = REPLIES_PENDING.fetch_sub(1, Relaxed).saturating_sub(1);
    if left == 0 {
        WATCH.with(|w| {
            if let Ok(mut w) = w.try_borrow_mut() {
                quiet_soon(&mut w);
            }
        });
    }
}

/// The names woken since the last call, whether every line is to be woken,
/// and the databases that have lines.
pub(super) fn take_wakes() -> (Vec<Vec<u8>>, bool, Vec<c_int>) {
    WATCH.with(|w| {
        let Ok(mut w) = w.try_borrow_mut() else {
            return (Vec::new(), false, Vec::new());
        };
        let dbs = w.dbs.clone();
        let all = std::mem::take(&mut w.wake_all);
        (std::mem::take(&mut w.wakes), all, dbs)
    })
}

/// Arms (once) the timer that unregisters the filter if, when it runs,
/// nobody waits and no reply is pending.
fn quiet_soon(w: &mut Watch) {
    if w.quieting || w.ctx.is_null() || super::waiting() > 0 {
        return;
    }
    if REPLIES_PENDING.load(Relaxed) > 0 {
        return;
    }
    w.quieting = true;
    // SAFETY: `w.ctx` is this module's detached context, live while the
    // filter is registered; the callback lives as long as the module.
    unsafe { api!(RedisModule_CreateTimer)(w.ctx, 0, Some(on_quiet), std::ptr::null_mut()) };
}

extern "C" fn on_quiet(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        WATCH.with(|w| {
            let Ok(mut w) = w.try_borrow_mut() else {
                return;
            };
            w.quieting = false;
            let busy = super::waiting() > 0 || REPLIES_PENDING.load(Relaxed) > 0;
            if busy || w.filter.is_null() {
                return;
            }
            // SAFETY: a timer's context of this module (the filter's
            // owner), outside any filter call; the detached context is
            // ours and no timer holds it.
            unsafe {
                api!(RedisModule_UnregisterCommandFilter)(ctx, w.filter);
                api!(RedisModule_FreeThreadSafeContext)(w.ctx);
            }
            w.filter = std::ptr::null_mut();
            w.ctx = std::ptr::null_mut();
            w.wakes.clear();
            w.wake_all = false;
            w.queued.clear();
            FILTERING.store(false, Relaxed);
        });
    }));
}

/// What the filter does with a command it watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watched {
    /// Its arguments `first..=last` (or to the end) may name keys, when
    /// it has `min` arguments or more (its name included).
    Keys {
        first: c_int,
        last: Option<c_int>,
        min: c_int,
    },
    /// `EXEC`: the commands it runs passed the filter when queued.
    Exec,
    /// `CLIENT`, which may be `CLIENT UNBLOCK`.
    Client,
}

const FIRST: Watched = Watched::Keys {
    first: 1,
    last: Some(1),
    min: 2,
};
const TWO: Watched = Watched::Keys {
    first: 1,
    last: Some(2),
    min: 3,
};
const ALL: Watched = Watched::Keys {
    first: 1,
    last: None,
    min: 2,
};
/// `SET key value` alone is the commonest write of a server and changes
/// no expiry: left to the waiter's planned time (as a change by `APPEND`
/// or `SETRANGE` is), so that it costs no key read. With an option (`EX`,
/// `PX`, `KEEPTTL`, `GET`…) it is watched.
const SET: Watched = Watched::Keys {
    first: 1,
    last: Some(1),
    min: 4,
};
/// `MIGRATE host port key|"" db timeout … [KEYS key …]`: every argument
/// from the key on (the others match a name with a line by chance only).
const MIGRATE: Watched = Watched::Keys {
    first: 3,
    last: None,
    min: 6,
};

/// The watched commands, lower case (each a word of letters only, which
/// [`ends`] relies on).
const WATCHED: [(&[u8], Watched); 20] = [
    (b"del", ALL),
    (b"unlink", ALL),
    (b"set", SET),
    (b"setex", FIRST),
    (b"psetex", FIRST),
    (b"getdel", FIRST),
    (b"getex", FIRST),
    (b"expire", FIRST),
    (b"pexpire", FIRST),
    (b"expireat", FIRST),
    (b"pexpireat", FIRST),
    (b"persist", FIRST),
    (b"restore", FIRST),
    (b"move", FIRST),
    (b"rename", TWO),
    (b"renamenx", TWO),
    (b"copy", TWO),
    (b"migrate", MIGRATE),
    (b"exec", Watched::Exec),
    (b"client", Watched::Client),
];

/// The shortest and longest watched names.
const SHORTEST: usize = 3;
const LONGEST: usize = 9;

/// Per name length from [`SHORTEST`], the first letters (their low 5
/// bits, the same in either case) of the watched names of that length:
/// most commands are let through on their name's length and first byte.
const MAYBE: [u32; LONGEST - SHORTEST + 1] = maybe();

const fn maybe() -> [u32; LONGEST - SHORTEST + 1] {
    let mut masks = [0u32; LONGEST - SHORTEST + 1];
    let mut i = 0;
    while i < WATCHED.len() {
        let word = WATCHED[i].0;
        assert!(word.len() >= SHORTEST && word.len() <= LONGEST);
        masks[word.len() - SHORTEST] |= 1 << (word[0] & 31);
        i += 1;
    }
    masks
}

/// Whether a command named `name` may be watched, from its length and
/// first byte alone.
#[inline(always)]
fn may_be_watched(name: &[u8]) -> bool {
    let Some(&first) = name.first() else {
        return false;
    };
    let Some(&mask) = MAYBE.get(name.len().wrapping_sub(SHORTEST)) else {
        return false;
    };
    mask & (1 << (first & 31)) != 0
}

/// A name of 3 to 9 bytes as its first and last 4 (the 3 bytes twice for
/// a name of 3), each byte with its 0x20 bit set: for a word of letters,
/// as the [`WATCHED`] are, equal ends mean the same word in any case, but
/// for the middle byte of a name of 9 (which a command `PEXPIxEAT` would
/// pass, to cost a spurious look at its key).
const fn ends(name: &[u8]) -> (u32, u32) {
    const FOLD: u32 = 0x2020_2020;
    let n = name.len();
    if n < 4 {
        let mut word = 0u32;
        let mut i = 0;
        while i < n {
            word |= (name[i] as u32) << (8 * i);
            i += 1;
        }
        return (word | FOLD, word | FOLD);
    }
    let head = u32::from_le_bytes([name[0], name[1], name[2], name[3]]);
    let tail = u32::from_le_bytes([name[n - 4], name[n - 3], name[n - 2], name[n - 1]]);
    (head | FOLD, tail | FOLD)
}

/// The [`ends`] of each of the [`WATCHED`], in order.
const ENDS: [(u32, u32); WATCHED.len()] = {
    let mut all = [(0, 0); WATCHED.len()];
    let mut i = 0;
    while i < WATCHED.len() {
        all[i] = ends(WATCHED[i].0);
        i += 1;
    }
    all
};

/// Per name length from [`SHORTEST`] and first letter (its low 5 bits),
/// the places in [`WATCHED`] of the names that begin so, plus one (0: none).
const SLOTS: [[[u8; 2]; 32]; LONGEST - SHORTEST + 1] = slots();

const fn slots() -> [[[u8; 2]; 32]; LONGEST - SHORTEST + 1] {
    let mut slots = [[[0u8; 2]; 32]; LONGEST - SHORTEST + 1];
    let mut i = 0;
    while i < WATCHED.len() {
        let word = WATCHED[i].0;
        let slot = &mut slots[word.len() - SHORTEST][(word[0] & 31) as usize];
        if slot[0] == 0 {
            slot[0] = i as u8 + 1;
        } else {
            // At most two names share a length and a first letter.
            assert!(slot[1] == 0);
            slot[1] = i as u8 + 1;
        }
        i += 1;
    }
    slots
}

/// The watched command named `name`, if any.
fn watched(name: &[u8]) -> Option<Watched> {
    let first = *name.first()?;
    let slot = SLOTS.get(name.len().wrapping_sub(SHORTEST))?[usize::from(first & 31)];
    let ends = ends(name);
    slot.iter()
        .filter_map(|&place| usize::from(place).checked_sub(1))
        .find(|&i| ENDS.get(i) == Some(&ends))
        .and_then(|i| WATCHED.get(i))
        .map(|&(_, w)| w)
}

/// Sees every command before Redis runs it (while clients wait): the
/// command's name, then only for a watched one its keys.
extern "C" fn on_command(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: Redis calls this with a live filter context; the argument
    // stays valid during the call.
    let name = unsafe { filter_arg(fctx, 0) };
    if may_be_watched(name) {
        look(fctx, name);
    }
}

/// A command that may be watched: its keys that may have a line are woken.
#[inline(never)]
fn look(fctx: *mut raw::RedisModuleCommandFilterCtx, name: &[u8]) {
    let Some(command) = watched(name) else {
        return;
    };
    match command {
        Watched::Keys { first, last, min } => {
            // A command with too few arguments for its keys is refused by
            // Redis; only SET's count decides (the loop stops at the last
            // argument).
            // SAFETY: `fctx` is the live filter context of this call.
            let absent =
                || unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, min - 1) }.is_null();
            if min > first + 1 && absent() {
                return;
            }
            // SAFETY: as above.
            unsafe { keys(fctx, first, last.unwrap_or(c_int::MAX)) };
        }
        Watched::Exec => exec(),
        // SAFETY: as above.
        Watched::Client => unsafe { client(fctx) },
    }
}

/// The arguments `first..=last` of a watched command: each that may have
/// a line is [`seen`].
///
/// # Safety
/// `fctx` is the live filter context.
#[inline(never)]
unsafe fn keys(fctx: *mut raw::RedisModuleCommandFilterCtx, first: c_int, last: c_int) {
    let mut pos = first;
    while pos <= last {
        // SAFETY: forwarded from the caller.
        let arg = unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, pos) };
        if arg.is_null() {
            return;
        }
        // SAFETY: as above; `arg` is the filtered command's.
        let name = unsafe { string_bytes(arg) };
        if NAMES.may_hold(name) {
            seen(name);
        }
        pos += 1;
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

/// `EXEC`: the names woken lately are woken again (the commands it runs
/// passed the filter when they were queued).
#[cold]
#[inline(never)]
fn exec() {
    let _ = catch_unwind(|| {
        WATCH.with(|w| {
            let Ok(mut w) = w.try_borrow_mut() else {
                return;
            };
            let queued: Vec<Vec<u8>> = w.queued.drain(..).collect();
            for name in queued {
                wake(&mut w, name);
            }
        })
    });
}

/// A watched command names `name`, which may have a line: woken in the
/// next event-loop iteration, and again at the next `EXEC`.
#[cold]
#[inline(never)]
fn seen(name: &[u8]) {
    let _ = catch_unwind(|| {
        WATCH.with(|w| {
            let Ok(mut w) = w.try_borrow_mut() else {
                return;
            };
            if w.queued.len() == QUEUED {
                w.queued.pop_front();
            }
            w.queued.push_back(name.to_vec());
            wake(&mut w, name.to_vec());
        })
    });
}

/// Wakes the lines of `name` in the next event-loop iteration.
fn wake(w: &mut Watch, name: Vec<u8>) {
    if w.wakes.len() < MAX_WAKES {
        w.wakes.push(name);
    } else {
        w.wakes.clear();
        w.wake_all = true;
    }
    if !w.ctx.is_null() {
        settle_soon(Ctx(w.ctx));
    }
}

/// The bytes of the filtered command's argument `pos` (empty if absent).
///
/// # Safety
/// `fctx` is the live filter context; the bytes are used only during the
/// filter call.
#[inline(always)]
unsafe fn filter_arg<'a>(fctx: *mut raw::RedisModuleCommandFilterCtx, pos: c_int) -> &'a [u8] {
    // SAFETY: forwarded from the caller.
    unsafe {
        let arg = api!(RedisModule_CommandFilterArgGet)(fctx, pos);
        if arg.is_null() {
            return &[];
        }
        string_bytes(arg)
    }
}

/// The bytes of a filtered command's argument.
///
/// # Safety
/// `arg` is an argument of the live filter context; the bytes are used
/// only during the filter call.
#[inline(always)]
unsafe fn string_bytes<'a>(arg: *mut raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: forwarded from the caller.
    unsafe {
        let ptr = api!(RedisModule_StringPtrLen)(arg, &mut len);
        if ptr.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(ptr.cast::<u8>(), len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_changing_commands_are_watched_in_any_case_and_others_not() {
        for (name, expected) in [
            (&b"del"[..], ALL),
            (b"UNLINK", ALL),
            (b"Set", SET),
            (b"SETEX", FIRST),
            (b"psetex", FIRST),
            (b"GETDEL", FIRST),
            (b"getex", FIRST),
            (b"EXPIRE", FIRST),
            (b"pexpire", FIRST),
            (b"EXPIREAT", FIRST),
            (b"PEXPIREAT", FIRST),
            (b"persist", FIRST),
            (b"RESTORE", FIRST),
            (b"MOVE", FIRST),
            (b"RENAME", TWO),
            (b"renamenx", TWO),
            (b"COPY", TWO),
            (b"MIGRATE", MIGRATE),
            (b"exec", Watched::Exec),
            (b"client", Watched::Client),
        ] {
            assert_eq!(watched(name), Some(expected), "{name:?}");
        }
        for name in [
            &b"GET"[..],
            b"INCR",
            b"LPUSH",
            b"HSET",
            b"SETNX",
            b"EXISTS",
            b"RL.GCRA",
            b"EXPIRETIME",
            b"DELX",
            b"",
            b"\xff\xfe",
            b"D\x05L",
            b"@et",
            b"DE",
            b"PEXPIREATX",
        ] {
            assert_eq!(watched(name), None, "{name:?}");
        }
        // Most names leave on their length and first byte.
        for name in [&b"GET"[..], b"INCR", b"LPUSH", b"HGETALL", b"ZADD", b"PING"] {
            assert!(!may_be_watched(name), "{name:?}");
        }
    }
}
