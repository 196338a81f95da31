//! A client for the redis-ratelimit module: every command as a typed call,
//! a tower layer that limits HTTP requests and tells clients what the
//! README's client contract says, a local cache of denials, and block
//! leasing for hot keys.
//!
//! ```no_run
//! # async fn f() -> Result<(), redis_ratelimit_client::Error> {
//! use redis_ratelimit_client::{connect, All, Client, Gcra, Sliding};
//! use std::time::Duration;
//! let client = Client::new(connect("redis://127.0.0.1/")?); // a 300 ms timeout per call
//! let second = Duration::from_secs(1);
//! let decision = client
//!     .send(&All::new()
//!         .limit("{org:7}:user:42", Gcra::new(10, second))
//!         .limit("{org:7}", Sliding::new(1000, 60 * second).approx()))
//!     .await?;
//! if !decision.allowed {
//!     println!("denied by limit {:?}, retry after {:?}", decision.blocked_by, decision.retry_after);
//! }
//! # Ok(()) }
//! ```
//!
//! The [`http`] module has the tower layer (with axum) and its
//! tower_governor side-by-side.

#![warn(missing_docs)]

pub mod blocks;
mod circuit;
mod client;
mod command;
mod degraded;
pub mod deny_cache;
mod error;
pub mod http;
mod landing;
mod leasing;
mod line;
mod policy;
mod reply;

pub use blocks::{Admission, BlockLease, BlockingLeasedLimit, LeasePlan, LeasedLimit};
pub use circuit::PROBE_INTERVAL;
pub use client::{
    connect, Client, LeaseGuard, CONNECT_TIMEOUT, DEFAULT_TIMEOUT, RECONNECT_MAX_DELAY,
    RECONNECT_MIN_DELAY,
};
pub use command::{
    acquire, All, Charge, Command, Decide, HotKey, HotKeys, Peek, Release, Renew, Reserve, Sketch,
    Throttle,
};
pub use deny_cache::DenyCache;
pub use error::Error;
pub use landing::{Undo, ORPHAN_WAIT};
pub use policy::{
    parse_duration, Bucket, Concurrency, Fixed, Gcra, ParsePolicyError, Policy, Quota, Sliding,
    SlidingMode, MAX_COUNT, MAX_DURATION,
};
/// The redis crate this client is built on (its connections, `Client`,
/// `ConnectionManager`), so that callers use the same version.
pub use redis;
pub use reply::{AllDecision, Decision, LeaseId, Reservation, ThrottleDecision};
