//! The bounds every argument is held to, written once: parsers check them
//! and error messages quote them.

use crate::algorithm::Micros;

/// The largest integer any count, limit or cost may take, so that every
/// reply field fits a signed 64-bit integer.
pub const MAX_COUNT: u64 = i64::MAX as u64;

/// The longest duration an argument may give: 36,500 days (100 years).
pub const MAX_DURATION: Micros = Micros::from_secs(36_500 * 86_400);

/// The latest time the limiter clock may show: the largest `i64`, so every
/// time fits a signed 64-bit reply.
pub const MAX_US: u64 = i64::MAX as u64;
