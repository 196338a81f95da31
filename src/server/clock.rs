//! The limiter's clock: microseconds since the Unix epoch, read once per
//! command, never going backwards while the server runs.
//!
//! Real mode uses `RedisModule_Microseconds` where the server has it (7.2+).
//! On older servers it anchors `RedisModule_MonotonicMicroseconds` to the
//! wall clock `RedisModule_Milliseconds` at load, and re-anchors when the
//! wall clock moves more than a second away from that estimate (an NTP step).
//! Manual mode (`clock manual` at load) starts at the server's time and moves
//! only with `RL.CLOCK SET` and `RL.CLOCK ADVANCE`: exact timelines for tests.

use super::ffi::api;
use crate::algorithm::limits::MAX_US;
use crate::algorithm::Micros;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

static MANUAL: AtomicBool = AtomicBool::new(false);
/// Manual mode: the time. Real mode: the last time returned.
static NOW_US: AtomicU64 = AtomicU64::new(0);
static ANCHOR_WALL_US: AtomicU64 = AtomicU64::new(0);
static ANCHOR_MONO_US: AtomicU64 = AtomicU64::new(0);

/// Re-anchor when the wall clock and the monotonic estimate differ by more.
const MAX_SKEW_US: u64 = 1_000_000;
/// The monotonic time at which the wall clock was last compared.
static WALL_CHECKED_MONO_US: AtomicU64 = AtomicU64::new(0);
const WALL_CHECK_EVERY_US: u64 = 1_000;

fn wall_ms_as_us() -> u64 {
    // SAFETY: no arguments.
    let ms = unsafe { api!(RedisModule_Milliseconds)() };
    u64::try_from(ms).unwrap_or(0).saturating_mul(1_000)
}

fn monotonic_us() -> u64 {
    // SAFETY: no arguments.
    unsafe { api!(RedisModule_MonotonicMicroseconds)() }
}

/// Called once at load.
pub fn init(manual: bool) {
    let wall = wall_ms_as_us();
    ANCHOR_WALL_US.store(wall, Relaxed);
    let mono = monotonic_us();
    ANCHOR_MONO_US.store(mono, Relaxed);
    WALL_CHECKED_MONO_US.store(mono, Relaxed);
    NOW_US.store(wall, Relaxed);
    MANUAL.store(manual, Relaxed);
}

pub fn is_manual() -> bool {
    MANUAL.load(Relaxed)
}

/// The current time. All commands run on Redis's main thread; the atomics
/// only make the statics safe to declare.
pub fn now() -> Micros {
    if is_manual() {
        return Micros::new(NOW_US.load(Relaxed));
    }
    let now = real_now_us().min(MAX_US);
    let last = NOW_US.load(Relaxed);
    if now > last {
        NOW_US.store(now, Relaxed);
        Micros::new(now)
    } else {
        Micros::new(last)
    }
}

fn real_now_us() -> u64 {
    // SAFETY: reading a function pointer set at init.
    if let Some(micros) = unsafe { redis_module::raw::RedisModule_Microseconds } {
        // SAFETY: no arguments.
        return u64::try_from(unsafe { micros() }).unwrap_or(0);
    }
    let mono = monotonic_us();
    let estimate = ANCHOR_WALL_US
        .load(Relaxed)
        .saturating_add(mono.saturating_sub(ANCHOR_MONO_US.load(Relaxed)));
    // Reading the wall clock costs as much as the monotonic one; a step is
    // looked for at most once per millisecond, not on every request.
    if mono.saturating_sub(WALL_CHECKED_MONO_US.load(Relaxed)) < WALL_CHECK_EVERY_US {
        return estimate;
    }
    WALL_CHECKED_MONO_US.store(mono, Relaxed);
    let wall = wall_ms_as_us();
    // The estimate has µs resolution but only the ms wall clock tells of
    // steps; within a millisecond of each other, they agree.
    if estimate.abs_diff(wall) > MAX_SKEW_US {
        ANCHOR_WALL_US.store(wall, Relaxed);
        ANCHOR_MONO_US.store(mono, Relaxed);
        return wall;
    }
    estimate
}

/// Manual mode only: sets the time.
pub fn set(time: Micros) {
    NOW_US.store(time.as_u64().min(MAX_US), Relaxed);
}
