//! `WAIT timeout`: clients blocked until admission, in the order of
//! `crate::engine::queue`.
//!
//! Why this machinery: `RedisModule_BlockClient` with no Redis timeout
//! (Redis's timeouts run on the real clock; ours follow the limiter clock,
//! manual in tests), and the queue kept here. Nothing polls: ONE module
//! timer is armed for the earliest due time or deadline of all waiters
//! (real clock); with `clock manual`, `RL.CLOCK SET/ADVANCE` runs the same
//! processing before it replies. `BlockClientOnKeys` is not used: a key
//! being written says nothing about when a limit admits.
//!
//! Admission is decided where the queue is processed (the timer's context,
//! or RL.CLOCK's), through `engine::decide` on a `RedisStore`, so the state
//! is written and its effects replicated at the moment of admission, in the
//! order of the queue. The blocked client's reply callback only sends the
//! decision made then. A timeout, a disconnect or `CLIENT UNBLOCK` writes
//! nothing. `MODULE UNLOAD` while clients wait is refused by Redis itself
//! (the module has blocked clients, or a timer).

use super::ffi::{self, api, Arg, Ctx};
use super::key::RedisStore;
use super::stats;
use super::{clock, reply};
use crate::algorithm::Micros;
use crate::bounds;
use crate::commands::Shape;
use crate::engine::error::Error;
use crate::engine::gate::{self, Gated, Shell};
use crate::engine::queue::{Charged, Ended, Ending, Queues};
use crate::engine::{KeyError, Outcome, Request};
use crate::policy::Policy;
use keyspace::ServerKeyspace;

mod keyspace;
mod leaving;
#[cfg(test)]
mod memory_tests;
pub mod watch;
use redis_module::raw;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// A key as the queue knows it: database and name.
type KeyName = (c_int, Box<[u8]>);

/// A blocked client: its handle, identity in the queue.
#[derive(Debug, Clone, Copy)]
struct Token {
    bc: *mut raw::RedisModuleBlockedClient,
    /// The command's place in the table, for the statistics (a `u16`: a
    /// token is 16 bytes, and held twice per waiter).
    command: u16,
    shape: Shape,
}

const _: () = assert!(crate::commands::table::COMMAND_COUNT <= u16::MAX as usize);

impl PartialEq for Token {
    fn eq(&self, other: &Token) -> bool {
        self.bc == other.bc
    }
}

impl Eq for Token {}

impl Hash for Token {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.bc.hash(state);
    }
}

impl Token {
    /// The handle's address, as a number (compared, never followed).
    fn address(&self) -> u64 {
        self.bc as usize as u64
    }

    /// The token of handle `bc` (for looking it up).
    fn of(bc: *mut raw::RedisModuleBlockedClient) -> Token {
        Token {
            bc,
            command: 0,
            shape: Shape::One,
        }
    }
}

struct State {
    queues: Queues<KeyName, Token>,
    /// The one timer and the time it was armed for.
    timer: Option<(raw::RedisModuleTimerID, Micros)>,
}

thread_local! {
    // Only Redis's main thread runs commands and callbacks.
    static STATE: RefCell<State> = RefCell::new(State {
        queues: Queues::new(),
        timer: None,
    });
}

/// How many clients wait: 0 lets every decision skip the queue.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Whether the keyspace events are subscribed ([`subscribe`]).
static SUBSCRIBED: AtomicBool = AtomicBool::new(false);

fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> Option<R> {
    STATE.with(|s| {
        let mut state = s.try_borrow_mut().ok()?;
        leaving::settle(&mut state.queues);
        let r = f(&mut state);
        WAITING.store(state.queues.len(), Relaxed);
        Some(r)
    })
}

/// How many clients wait now.
pub fn waiting() -> usize {
    WAITING.load(Relaxed)
}

/// How many keys have waiters, and how long the longest waiting of the
/// waiters has waited at `now` (0 when nobody waits). Read for INFO only:
/// O(log n), nothing on the decision path.
pub fn lines(now: Micros) -> (usize, Micros) {
    STATE.with(|s| {
        let Ok(state) = s.try_borrow() else {
            return (0, Micros::ZERO);
        };
        let longest = state
            .queues
            .first_since()
            .map_or(Micros::ZERO, |since| now.saturating_sub(since));
        (state.queues.lines(), longest)
    })
}

/// The gate ([`gate::decide`]) for one call of command `command`: decided
/// at once when nobody waits and the call cannot wait, without touching
/// the queue; otherwise through it.
pub fn decide(
    ctx: Ctx,
    command: usize,
    shape: Shape,
    keys: &[Arg],
    policies: &[Policy],
    now: Micros,
    request: &Request,
) -> Result<Gated, KeyError> {
    let mut shell = CallShell {
        ctx,
        keys,
        command,
        shape,
    };
    if request.wait.is_none() && WAITING.load(Relaxed) == 0 {
        return gate::decide(&mut shell, None, policies, now, request);
    }
    let gated = with_state(|state| {
        let gated = gate::decide(&mut shell, Some(&mut state.queues), policies, now, request);
        if let Ok(Gated::Blocked) = gated {
            stats::wait_started();
        }
        // A refund or a forced charge may have moved the line's due times.
        arm(ctx, state);
        gated
    });
    gated.unwrap_or_else(|| Err(internal()))
}

/// One call as the gate sees the server.
struct CallShell<'a> {
    ctx: Ctx,
    keys: &'a [Arg],
    command: usize,
    shape: Shape,
}

impl Shell for CallShell<'_> {
    type Key = KeyName;
    type Token = Token;
    type Store<'s>
        = RedisStore
    where
        Self: 's;
    type Keyspace<'s>
        = ServerKeyspace
    where
        Self: 's;

    fn may_block(&self) -> bool {
        may_block(self.ctx)
    }

    fn open(&mut self) -> RedisStore {
        RedisStore::open(self.ctx, self.keys)
    }

    fn names(&self) -> Vec<KeyName> {
        let db = selected_db(self.ctx);
        self.keys.iter().map(|k| (db, k.as_ref().into())).collect()
    }

    fn keyspace(&mut self) -> ServerKeyspace {
        ServerKeyspace::new(self.ctx)
    }

    fn block(&mut self) -> Option<Token> {
        let bc = block(self.ctx);
        (!bc.is_null()).then_some(Token {
            bc,
            command: u16::try_from(self.command).unwrap_or(u16::MAX),
            shape: self.shape,
        })
    }

    fn may_admit(&self) -> bool {
        !is_replica(self.ctx)
    }

    fn ended(&mut self, events: Vec<Ended<KeyName, Token>>) {
        for event in events {
            resolve(self.ctx, event);
        }
    }
}

/// What a request on `keys` answers behind their lines (`None`: nobody
/// waits on them): RL.PEEK's look as a new request would see it.
pub fn behind_line(
    ctx: Ctx,
    keys: &[Arg],
    policies: &[Policy],
    now: Micros,
    request: Request,
) -> Option<Result<Outcome, KeyError>> {
    if WAITING.load(Relaxed) == 0 {
        return None;
    }
    let db = selected_db(ctx);
    let names: Vec<KeyName> = keys.iter().map(|k| (db, k.as_ref().into())).collect();
    with_state(|state| {
        let mut keyspace = ServerKeyspace::new(ctx);
        gate::behind_line(
            &mut state.queues,
            &mut keyspace,
            &names,
            policies,
            now,
            request,
        )
    })
    .flatten()
}

fn internal() -> KeyError {
    KeyError {
        key: 0,
        error: Error::Internal("WAIT"),
    }
}

/// Whether this call may block: not inside MULTI, a script or function,
/// a command replayed from the AOF or a primary, or a caller that forbids
/// blocking (`RM_Call` without the blocking flag).
fn may_block(ctx: Ctx) -> bool {
    let never = raw::REDISMODULE_CTX_FLAGS_MULTI
        | raw::REDISMODULE_CTX_FLAGS_LUA
        | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING
        | raw::REDISMODULE_CTX_FLAGS_REPLICATED
        | raw::REDISMODULE_CTX_FLAGS_LOADING;
    // SAFETY: ctx is the live command context.
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx.0) } as u32;
    flags & never == 0
}

fn is_replica(ctx: Ctx) -> bool {
    // SAFETY: ctx is a live context.
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx.0) } as u32;
    flags & raw::REDISMODULE_CTX_FLAGS_SLAVE != 0
}

fn selected_db(ctx: Ctx) -> c_int {
    // SAFETY: ctx is a live context with a client.
    unsafe { api!(RedisModule_GetSelectedDb)(ctx.0) }
}

/// Whether `CLIENT UNBLOCK` may end a wait: the server calls the timeout
/// callback for it, and so only where it is given one. Servers of the 7.2
/// line (which have the 7.2 API `SetCommandACLCategories` but not the 7.4
/// one `AddACLCategory`) abort when a client unblocked that way was admitted
/// in the same event-loop turn (`c->duration == 0` in `networking.c`, fixed
/// in 7.4): there, waiters get no timeout callback and `CLIENT UNBLOCK`
/// answers 0 for them. Redis 7.0 predates the fault, Redis 7.4+ and Valkey
/// 8 have the fix.
pub fn client_unblock_allowed() -> bool {
    // SAFETY: reading pointers written by RedisModule_Init.
    let (api_7_2, api_7_4) = unsafe {
        (
            raw::RedisModule_SetCommandACLCategories,
            raw::RedisModule_AddACLCategory,
        )
    };
    api_7_2.is_none() || api_7_4.is_some()
}

/// Blocks the calling client with no Redis timeout (ours run on the
/// limiter clock) and a disconnect callback; with a timeout callback for
/// `CLIENT UNBLOCK` where that is safe ([`client_unblock_allowed`]).
fn block(ctx: Ctx) -> *mut raw::RedisModuleBlockedClient {
    let on_unblock: raw::RedisModuleCmdFunc = if client_unblock_allowed() {
        Some(on_timeout)
    } else {
        None
    };
    // SAFETY: ctx is the live command context, which may block (checked by
    // `may_block`); the callbacks are plain functions living as long as
    // the module.
    unsafe {
        let bc = api!(RedisModule_BlockClient)(
            ctx.0,
            Some(on_reply),
            on_unblock,
            Some(free_privdata),
            0,
        );
        if !bc.is_null() {
            api!(RedisModule_SetDisconnectCallback)(bc, Some(on_disconnect));
            if !SUBSCRIBED.load(Relaxed) {
                subscribe(ctx);
            }
        }
        bc
    }
}

/// A release freed units of `key`: whoever is first in its line is
/// decided now, before the release replies.
pub fn key_freed(ctx: Ctx, key: &Arg) {
    if WAITING.load(Relaxed) == 0 {
        return;
    }
    let name: KeyName = (selected_db(ctx), key.as_ref().into());
    with_state(|state| {
        let now = clock::now();
        state.queues.wake(&name, now);
        process(ctx, state, now, now);
    });
}

/// The limiter clock moved from `from` to `to` (manual mode): admits and
/// times out whoever is due, before RL.CLOCK replies.
pub fn clock_moved(ctx: Ctx, from: Micros, to: Micros) {
    if WAITING.load(Relaxed) == 0 {
        return;
    }
    with_state(|state| process(ctx, state, from, to));
}

fn process(ctx: Ctx, state: &mut State, from: Micros, to: Micros) {
    if state.queues.is_empty() {
        stop_timer(ctx, state);
        return;
    }
    let budget = bounds::WAIT_EVENTS_PER_TICK.get() as usize;
    let mut keyspace = ServerKeyspace::new(ctx);
    let replica = is_replica(ctx);
    let events = if replica {
        // A primary turned replica (failover) must not write: every wait
        // ends with its denial.
        state.queues.release(&mut keyspace, to, budget)
    } else {
        state.queues.process(&mut keyspace, from, to, budget)
    };
    drop(keyspace);
    for event in events {
        resolve(ctx, event);
    }
    if replica && !state.queues.is_empty() {
        // The rest in the next event-loop iteration.
        stop_timer(ctx, state);
        start_timer(ctx, state, 0, clock::now());
        return;
    }
    arm(ctx, state);
}

/// What the reply callback sends.
struct Resolved {
    shape: Shape,
    command: usize,
    result: Result<Outcome, KeyError>,
    /// What the admission charged (taken back if the reply cannot be sent).
    charged: Option<Charged<KeyName>>,
}

/// Ends a wait: counts it and unblocks the client with its reply.
fn resolve(ctx: Ctx, event: Ended<KeyName, Token>) {
    let waited = event.at.saturating_sub(event.since);
    let token = event.token;
    let result = match event.ending {
        Ending::Admitted(d) => {
            stats::wait_admitted(waited);
            Ok(d)
        }
        Ending::TimedOut(d) => {
            stats::wait_timed_out(waited);
            Ok(d)
        }
        // An error reply (the key changed type meanwhile): the wait ended
        // without admission, counted with the timeouts.
        Ending::Failed(e) => {
            stats::wait_timed_out(waited);
            Err(e)
        }
    };
    let resolved = Box::new(Resolved {
        shape: token.shape,
        command: usize::from(token.command),
        result,
        charged: event.charged,
    });
    watch::reply_pending(ctx);
    // SAFETY: `bc` is a handle from BlockClient that was still in the queue,
    // so it has not been unblocked; Redis hands the pointer to `on_reply`
    // and then to `free_privdata`, which takes the box back.
    unsafe { api!(RedisModule_UnblockClient)(token.bc, Box::into_raw(resolved).cast::<c_void>()) };
}

/// Arms the one timer for the earliest event (real clock), or for now
/// when something is due at once (manual clock, which RL.CLOCK drives).
fn arm(ctx: Ctx, state: &mut State) {
    let Some(next) = state.queues.next_event() else {
        // Nobody waits: no timer left behind (it would hold MODULE UNLOAD).
        stop_timer(ctx, state);
        return;
    };
    let now = clock::now();
    if clock::is_manual() && next > now {
        return;
    }
    if let Some((_, armed)) = state.timer {
        if armed <= next {
            return;
        }
    }
    stop_timer(ctx, state);
    let delay_ms = next.saturating_sub(now).ceil_millis();
    start_timer(ctx, state, delay_ms, next);
}

fn start_timer(ctx: Ctx, state: &mut State, delay_ms: u64, at: Micros) {
    let delay = i64::try_from(delay_ms).unwrap_or(i64::MAX);
    // SAFETY: ctx is a live context; the callback lives as long as the
    // module and takes no data.
    let id = unsafe {
        api!(RedisModule_CreateTimer)(ctx.0, delay, Some(on_timer), std::ptr::null_mut())
    };
    state.timer = Some((id, at));
}

fn stop_timer(ctx: Ctx, state: &mut State) {
    if let Some((id, _)) = state.timer.take() {
        // SAFETY: ctx is a live context; `id` is our timer, which may have
        // fired already (then this fails harmlessly).
        unsafe { api!(RedisModule_StopTimer)(ctx.0, id, std::ptr::null_mut()) };
    }
}

extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        with_state(|state| {
            state.timer = None;
            // While writes are paused nothing may be written.
            if ffi::writes_paused() {
                let now = clock::now();
                start_timer(ctx, state, ffi::PAUSED_RETRY_MS, now);
                return;
            }
            let now = clock::now();
            process(ctx, state, now, now);
        });
    }));
}

/// Sends the decision made at admission or timeout.
extern "C" fn on_reply(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: ctx is the reply context of a client we unblocked.
        let data = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx.0) };
        if data.is_null() {
            return;
        }
        // SAFETY: every non-NULL private data is a `Resolved` from
        // `resolve`, owned by Redis until `free_privdata`.
        let resolved = unsafe { &*data.cast::<Resolved>() };
        send(ctx, resolved.shape, resolved.command, &resolved.result);
    }));
    raw::REDISMODULE_OK as c_int
}

fn send(ctx: Ctx, shape: Shape, command: usize, result: &Result<Outcome, KeyError>) {
    match (result, shape) {
        (Ok(d), Shape::One) => reply::decision(ctx, d),
        (Ok(d), Shape::All) => reply::all(ctx, d),
        (Err(e), Shape::One) => ffi::reply_error(ctx, &e.error.to_string()),
        (Err(e), Shape::All) => {
            let error = Error::InKey {
                position: e.key + 1,
                error: Box::new(e.error.clone()),
            };
            ffi::reply_error(ctx, &error.to_string());
        }
    }
    match result {
        Ok(d) => stats::resolved(command, d.allowed),
        Err(_) => stats::record_error_only(command),
    }
}

extern "C" fn free_privdata(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: made by Box::into_raw in `resolve`; Redis frees it once.
        drop(unsafe { Box::from_raw(data.cast::<Resolved>()) });
        watch::reply_done();
    }
}

/// `CLIENT UNBLOCK id` (Redis's only timeout for us: we pass none): the
/// timeout's denial, as of now.
extern "C" fn on_timeout(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: ctx is the timeout context of a client we blocked.
        let bc = unsafe { api!(RedisModule_GetBlockedClientHandle)(ctx.0) };
        with_state(|state| {
            let now = clock::now();
            let mut keyspace = ServerKeyspace::new(ctx);
            let event = state.queues.time_out(&mut keyspace, &Token::of(bc), now);
            drop(keyspace);
            let Some(event) = event else {
                // Admitted in this same event-loop turn, before its reply
                // was sent: Redis will not call `on_reply` now, so the
                // admission's reply goes here (it was charged).
                // SAFETY: ctx is the timeout context; its private data is
                // the `Resolved` given to UnblockClient, or NULL.
                let data = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx.0) };
                if !data.is_null() {
                    // SAFETY: every non-NULL private data is a `Resolved`
                    // from `resolve`, freed by Redis after this call.
                    let resolved = unsafe { &*data.cast::<Resolved>() };
                    send(ctx, resolved.shape, resolved.command, &resolved.result);
                }
                return;
            };
            let waited = now.saturating_sub(event.since);
            stats::wait_timed_out(waited);
            let result = match event.ending {
                Ending::TimedOut(d) | Ending::Admitted(d) => Ok(d),
                Ending::Failed(e) => Err(e),
            };
            let command = usize::from(event.token.command);
            send(ctx, event.token.shape, command, &result);
            // SAFETY: the handle is ours and was in the queue; after a
            // timeout Redis leaves freeing it to the module.
            unsafe { api!(RedisModule_UnblockClient)(bc, std::ptr::null_mut()) };
            // Those behind it may go now.
            arm(ctx, state);
        });
    }));
    raw::REDISMODULE_OK as c_int
}

/// A waiting client went away (or `CLIENT UNBLOCK id ERROR`, or a role
/// change ended every wait): its place is given up before the queue's
/// next use ([`leaving`]), and a timer (this context belongs to a client
/// being freed) lets those behind it move up at once.
///
/// A client admitted in this event-loop turn, whose reply is not sent yet,
/// also passes here when it is unblocked or disconnects before the reply:
/// Redis will not send that reply. After `CLIENT UNBLOCK id` (no `ERROR`,
/// no reply sent by Redis) the admission's reply is sent here; otherwise
/// the admission is taken back, so that nothing is charged without a reply.
extern "C" fn on_disconnect(ctx: *mut raw::RedisModuleCtx, bc: *mut raw::RedisModuleBlockedClient) {
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: ctx is the disconnect context; its private data is the
        // `Resolved` given to UnblockClient, or NULL while it still waits
        // (a timeout or CLIENT UNBLOCK without ERROR does not come here).
        let data = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx.0) };
        if data.is_null() {
            leaving::went(Token::of(bc), clock::now());
            // SAFETY: the handle is ours and still waiting.
            unsafe { api!(RedisModule_UnblockClient)(bc, std::ptr::null_mut()) };
            settle_soon(ctx);
            return;
        }
        with_state(|state| {
            let now = clock::now();
            // SAFETY: every non-NULL private data is a `Resolved` from
            // `resolve`, owned by Redis until `free_privdata`.
            let resolved = unsafe { &mut *data.cast::<Resolved>() };
            let Some(charged) = resolved.charged.take() else {
                return;
            };
            if unblocked_without_reply(ctx) {
                send(ctx, resolved.shape, resolved.command, &resolved.result);
                return;
            }
            if let Ok(decided) = &resolved.result {
                let mut keyspace = ServerKeyspace::new(ctx);
                let _ = keyspace.undo(&charged, now, decided);
                drop(keyspace);
                // What was taken back may admit the next waiters now: they
                // are decided in the next event-loop iteration.
                for key in &charged.keys {
                    state.queues.wake(key, now);
                }
                arm(ctx, state);
            }
        });
    }));
}

thread_local! {
    /// Whether the timer of [`settle_soon`] is armed.
    static SETTLING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Arms (once) a timer for the next event-loop iteration that takes the
/// waiters that went away out of the queue and decides who is due.
fn settle_soon(ctx: Ctx) {
    if SETTLING.with(|s| s.replace(true)) {
        return;
    }
    // SAFETY: ctx is a live context; the callback lives as long as the
    // module and takes no data.
    unsafe { api!(RedisModule_CreateTimer)(ctx.0, 0, Some(on_settle), std::ptr::null_mut()) };
}

extern "C" fn on_settle(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    SETTLING.with(|s| s.set(false));
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // `with_state` settles; then whoever moved up is due now.
        with_state(|state| {
            let now = clock::now();
            if ffi::writes_paused() {
                arm(ctx, state);
                return;
            }
            process(ctx, state, now, now);
        });
    }));
}

/// The server became a replica or a primary: after a role change that
/// ended every wait, the queue is dropped at once.
extern "C" fn on_role_change(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    leaving::set_replica(subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA);
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        with_state(|state| arm(ctx, state));
    }));
}

thread_local! {
    /// The client `CLIENT UNBLOCK` is unblocking now, and whether Redis
    /// replies to it itself (`ERROR`), set by the command filter.
    static UNBLOCKING: std::cell::Cell<Option<(u64, bool)>> = const { std::cell::Cell::new(None) };
}

/// `CLIENT UNBLOCK id [TIMEOUT|ERROR]` is about to run (from the command
/// filter).
pub fn unblocking(id: u64, error: bool) {
    UNBLOCKING.with(|u| u.set(Some((id, error))));
}

/// The next command runs: the mark of [`unblocking`] is dropped.
pub fn unblocking_done() {
    UNBLOCKING.with(|u| u.set(None));
}

/// Whether the client of `ctx` is being unblocked by `CLIENT UNBLOCK`
/// without `ERROR` (Redis then sends it nothing).
fn unblocked_without_reply(ctx: Ctx) -> bool {
    let Some((id, error)) = UNBLOCKING.with(|u| u.take()) else {
        return false;
    };
    // SAFETY: ctx is the disconnect context, with the client.
    let client = unsafe { api!(RedisModule_GetClientId)(ctx.0) };
    client == id && !error
}

/// Whether the wake-ups are subscribed to keyspace events.
pub fn subscribed() -> bool {
    SUBSCRIBED.load(Relaxed)
}

/// Subscribes the line's wake-ups to the changes that may admit sooner
/// and that no command of the module sees: a key expired or evicted,
/// `FLUSHDB`/`FLUSHALL` and `SWAPDB`, and the role changes ([`leaving`]).
/// Done when the first client blocks, not at load. Redis makes a module
/// context only for an event of a subscribed class: an expiry or an
/// eviction, never one of the commands a server runs most (a `DEL`, an
/// `EXPIRE` or a `SET … PX` fire the generic class, which is not
/// subscribed: a waiter whose key such a command changed is decided at its
/// planned time, or sooner when the module's next command on the key finds
/// it admissible, see `engine::gate`); every other event costs a look at
/// the subscribers' list.
/// Redis 7.0 has no way to unsubscribe, so the subscription stays once
/// made. If Redis refuses it, the next block tries again, and the
/// waiters' timers still admit them when due.
fn subscribe(ctx: Ctx) {
    let types = raw::REDISMODULE_NOTIFY_EXPIRED | raw::REDISMODULE_NOTIFY_EVICTED;
    // SAFETY: ctx is a live context of this module; the callback lives as
    // long as the module (which cannot unload while clients wait).
    let status = unsafe {
        api!(RedisModule_SubscribeToKeyspaceEvents)(ctx.0, types as c_int, Some(on_key_event))
    };
    if status != raw::REDISMODULE_OK as c_int {
        ffi::log_warning(ctx, "cannot subscribe to keyspace events");
        return;
    }
    let flush = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_FLUSHDB,
        dataver: 1,
    };
    // SAFETY: as above.
    let status = unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.0, flush, Some(on_flush)) };
    if status != raw::REDISMODULE_OK as c_int {
        ffi::log_warning(ctx, "cannot subscribe to FLUSHDB");
    }
    let swap = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_SWAPDB,
        dataver: 1,
    };
    // SAFETY: as above.
    let status = unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.0, swap, Some(on_swap)) };
    if status != raw::REDISMODULE_OK as c_int {
        ffi::log_warning(ctx, "cannot subscribe to SWAPDB");
    }
    leaving::set_replica(is_replica(ctx));
    let role = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        dataver: 1,
    };
    // SAFETY: as above.
    let status =
        unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.0, role, Some(on_role_change)) };
    if status != raw::REDISMODULE_OK as c_int {
        ffi::log_warning(ctx, "cannot subscribe to role changes");
    }
    SUBSCRIBED.store(true, Relaxed);
}

/// A key expired or was evicted: the first in its line is decided at once
/// (from a timer: no write happens inside a notification).
extern "C" fn on_key_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    _event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    if WAITING.load(Relaxed) == 0 || key.is_null() {
        return raw::REDISMODULE_OK as c_int;
    }
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let name: KeyName = (selected_db(ctx), Arg(key).as_ref().into());
        with_state(|state| {
            if state.queues.has_waiters(&name) {
                state.queues.wake(&name, clock::now());
                arm(ctx, state);
            }
        });
    }));
    raw::REDISMODULE_OK as c_int
}

extern "C" fn on_flush(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    // After the flush (the end sub-event), when the keys are gone.
    if WAITING.load(Relaxed) == 0 || subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
        return;
    }
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        with_state(|state| {
            state.queues.wake_all(clock::now());
            arm(ctx, state);
        });
    }));
}

/// `SWAPDB`: every line sees another database's keys now.
extern "C" fn on_swap(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    if WAITING.load(Relaxed) == 0 {
        return;
    }
    let ctx = Ctx(ctx);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        with_state(|state| {
            state.queues.wake_all(clock::now());
            arm(ctx, state);
        });
    }));
}
