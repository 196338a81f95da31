//! redis-ratelimit: native rate-limit commands for Redis and Valkey.
//!
//! Layers, each using only those below it:
//! - `algorithm`: the pure core, every algorithm in plain Rust with the
//!   time passed in, in exact integer arithmetic; no Redis types.
//! - `codec`: the core's state laid out in plain strings (versioned tags).
//! - `policy`: any limit as one value, bytes in, decision and write out.
//! - `store` and `engine`: the one decision path of every decision command
//!   over a store of keys (the server's, or one in memory).
//! - `commands`: each command defined once as data, and what is derived
//!   from it (parsers, COMMAND DOCS), and the handlers.
//! - `server`: everything that touches the Redis module API, the only
//!   place with `unsafe` code (denied everywhere else by this attribute).
#![deny(unsafe_code)]

mod algorithm;
mod args;
mod bounds;
mod cluster_nodes;
mod codec;
mod commands;
#[cfg(test)]
mod core_properties;
mod engine;
mod error;
mod limits;
mod policy;
mod registry;
#[allow(unsafe_code)]
mod server;
mod stats;
mod store;
mod topk;
mod version;
mod waitqueue;
mod work;

pub mod api;
