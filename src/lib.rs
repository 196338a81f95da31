//! redis-ratelimit: native rate-limit commands for Redis and Valkey.
//!
//! # Layers
//!
//! Each folder is a layer and uses only those below it (`tests/layers.rs`
//! checks it), from the bottom:
//! - `bounds`: the sizes the operator bounds (module configurations) and
//!   the work counted against them.
//! - `algorithm`: every algorithm in plain Rust with the time passed in,
//!   in exact integer arithmetic.
//! - `codec`: the algorithms' state laid out in plain strings (a tag byte
//!   per layout).
//! - `policy`: any limit as one value: stored bytes in, transition out;
//!   each algorithm one `Limiter` implementation, in a file of its own.
//! - `engine`: the decision path of every decision command over a store of
//!   keys, the waiting queue and the gate in front of both, and the
//!   registry of named policies.
//! - `commands`: each command defined once as data (`table`), what is
//!   derived from it (parsers, COMMAND DOCS) and the handlers, which reach
//!   the server through a `Host` and answer a `Reply`.
//! - `server`: the shell around the rest, and the only place that touches
//!   the Redis module API or has `unsafe` code (denied everywhere else by
//!   the attribute below). It is given the command table at load.
//!
//! Everything below `server` is plain Rust, tested without a server.
//!
//! # Words
//!
//! One meaning each, the same in code, tests and docs:
//! - *request*: what one call asks: its cost, its charge (`FORCE`,
//!   `PARTIAL`, `REFUND`, or a look), `DRYRUN`, `WAIT`, `RESERVE`, `JITTER`
//!   (`engine::Request`).
//! - *policy*: one limit, an algorithm with its parameters
//!   (`policy::Policy`); a *named policy* is one kept in the registry.
//! - *state*: a limiter's bytes in one Redis string.
//! - *decision*: one limit's answer at one instant: allowed, limit,
//!   remaining, retry after, reset after (`algorithm::Decision`).
//! - *transition*: a decision and the write to the state that makes it
//!   (`policy::Transition`).
//! - *outcome*: a request's answer over all its limits (`engine::Outcome`).
//! - *waiter*: a request blocked in its keys' *lines* until admitted or
//!   its deadline; the *gate* decides a request at once or queues it.
//! - *flow*: the waiters of a line that share a `FLOW` name (those without
//!   one are one flow); flows take *turns* by weight (fair waiting).
//! - *reply*: what the client is sent (`commands::Reply`); its *verdict*
//!   is what the statistics count it as, INFO's and a named policy's
//!   (allowed, denied, shadow-denied, waiting, other: `engine::Verdict`).
//! - *lease*: a unit of a CONCURRENCY limit held until released
//!   (RL.ACQUIRE); taking several units ahead in a client is *block
//!   leasing*.
//! - *cell*: redis-cell's state (CL.THROTTLE); a count-min sketch holds
//!   *counters*.
//! - *reservation*: a request admitted now whose admission *starts* after a
//!   delay (`RESERVE`); its *start* is the instant `WAIT` would admit it.
//! - *herd*: the clients a key denied recently, as a schedule of one
//!   emission interval each; a jittered wait is spread over it (`JITTER`).
#![deny(unsafe_code)]

mod algorithm;
mod bounds;
mod codec;
mod commands;
#[cfg(test)]
mod core_properties;
mod engine;
mod policy;
#[allow(unsafe_code)]
mod server;

pub mod api;
