//! redis-ratelimit: native rate-limit commands for Redis.
//!
//! `algorithm` is the pure core (no Redis types, time passed in); `codec`
//! lays its state out in plain strings; `args` parses arguments; the Redis
//! shell is `server` (API wrappers, keys, clock, replies) and `commands`
//! (one file per command family). This file only registers the module.

pub mod algorithm;
pub mod args;
pub mod codec;
pub mod commands;
pub mod error;
pub mod policy;
pub mod server;
pub mod stats;

mod init;

use init::on_load;
use redis_module::redis_module;

redis_module! {
    name: "ratelimit",
    version: 1,
    // Module state lives in Redis strings, allocated by Redis; the module's
    // own allocations are transient, so the system allocator serves them
    // and the core stays usable outside a server (tests, benches).
    allocator: (std::alloc::System, std::alloc::System),
    data_types: [],
    init: on_load,
}
