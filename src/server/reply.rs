//! The decision reply, the same for every RL.* command.
//!
//! RESP2: `[allowed (1|0), limit, remaining, retry_after_ms, reset_after_ms]`.
//! RESP3: a map with those names, `allowed` a boolean.

use super::ffi::{self, Ctx};
use crate::algorithm::{ceil_ms, Decision, RetryAfter};

/// A decision in reply units: milliseconds, -1 for "no wait" and "never".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    pub allowed: bool,
    pub limit: i64,
    pub remaining: i64,
    pub retry_after_ms: i64,
    pub reset_after_ms: i64,
}

fn to_i64(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

impl From<&Decision> for Fields {
    fn from(d: &Decision) -> Fields {
        Fields {
            allowed: d.allowed,
            limit: to_i64(d.limit),
            remaining: to_i64(d.remaining),
            retry_after_ms: match d.retry_after {
                RetryAfter::After(us) => to_i64(ceil_ms(us)),
                RetryAfter::NotNeeded | RetryAfter::Never => -1,
            },
            reset_after_ms: to_i64(ceil_ms(d.reset_after_us)),
        }
    }
}

/// Writes one decision as the reply (or as one element of a larger reply).
pub fn decision(ctx: Ctx, resp3: bool, d: &Decision) {
    let f = Fields::from(d);
    if resp3 {
        ffi::reply_map(ctx, 5);
        ffi::reply_name(ctx, c"allowed");
        ffi::reply_bool(ctx, f.allowed);
        ffi::reply_name(ctx, c"limit");
        ffi::reply_int(ctx, f.limit);
        ffi::reply_name(ctx, c"remaining");
        ffi::reply_int(ctx, f.remaining);
        ffi::reply_name(ctx, c"retry_after_ms");
        ffi::reply_int(ctx, f.retry_after_ms);
        ffi::reply_name(ctx, c"reset_after_ms");
        ffi::reply_int(ctx, f.reset_after_ms);
    } else {
        ffi::reply_array(ctx, 5);
        ffi::reply_int(ctx, i64::from(f.allowed));
        ffi::reply_int(ctx, f.limit);
        ffi::reply_int(ctx, f.remaining);
        ffi::reply_int(ctx, f.retry_after_ms);
        ffi::reply_int(ctx, f.reset_after_ms);
    }
}
