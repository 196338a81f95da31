//! Writes a handler's [`Reply`]. The decision reply is the same for every
//! RL.* command:
//!
//! RESP2: `[allowed (1|0), limit, remaining, retry_after_ms, reset_after_ms]`.
//! RESP3: a map with those names, `allowed` a boolean. A concurrency
//! limit's adds `lease` (a bulk string, nil when none is held), PARTIAL
//! `granted`, and a request with `RESERVE` `delay_ms` (when its admission
//! starts; -1 when denied).

use super::ffi::{self, Ctx};
use crate::algorithm::cell::CellReply;
use crate::algorithm::concurrency::LeaseId;
use crate::algorithm::{Decision, RetryAfter};
use crate::codec::lease::format_lease;
use crate::commands::{Item, Reply};
use crate::engine::registry::PolicyStats;
use crate::engine::topk::TopKey;
use crate::engine::{Outcome, Reservation};

/// Writes `reply` (nothing for a blocked caller: its reply comes later).
pub fn write(ctx: Ctx, reply: &Reply) {
    match reply {
        Reply::Decision(d) | Reply::Peek(d) => decision(ctx, d),
        Reply::Shadow(d) => shadow_decision(ctx, d),
        Reply::All(d) | Reply::PeekAll(d) => all(ctx, d),
        Reply::Blocked => {}
        Reply::Throttle(r) => throttle(ctx, r),
        Reply::Int(n) => ffi::reply_int(ctx, *n),
        Reply::Ok => ffi::reply_ok(ctx),
        Reply::Bulk(bytes) => ffi::reply_bulk(ctx, bytes),
        Reply::Bulks(items) => {
            ffi::reply_array(ctx, items.len());
            for item in items {
                ffi::reply_bulk(ctx, item);
            }
        }
        Reply::Lines(lines) => {
            ffi::reply_array(ctx, lines.len());
            for line in lines {
                ffi::reply_simple(ctx, line);
            }
        }
        Reply::PolicyStats(stats, top) => policy_stats(ctx, stats, top),
        Reply::Items(item) => items(ctx, item),
    }
}

fn items(ctx: Ctx, item: &Item) {
    match item {
        Item::Int(n) => ffi::reply_int(ctx, *n),
        Item::Bulk(b) => ffi::reply_bulk(ctx, b),
        Item::Nil => ffi::reply_null(ctx),
        Item::Array(list) => {
            ffi::reply_array(ctx, list.len());
            for i in list {
                items(ctx, i);
            }
        }
    }
}

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

/// A wait in reply units: whole milliseconds rounded up (acting on it is
/// never early), -1 for "no wait" and "never".
fn retry_ms(retry: RetryAfter) -> i64 {
    match retry {
        RetryAfter::After(wait) => to_i64(wait.ceil_millis()),
        RetryAfter::NotNeeded | RetryAfter::Never => -1,
    }
}

impl From<&Decision> for Fields {
    fn from(d: &Decision) -> Fields {
        Fields {
            allowed: d.allowed,
            limit: to_i64(d.limit),
            remaining: to_i64(d.remaining),
            retry_after_ms: retry_ms(d.retry_after),
            reset_after_ms: to_i64(d.reset_after.ceil_millis()),
        }
    }
}

/// RL.ALL's reply. RESP2: `[allowed, blocked_by, retry_after_ms, reply_1,
/// ..., reply_n]`; RESP3: a map with `allowed`, `blocked_by`,
/// `retry_after_ms` and `limits` (the single-key maps).
pub fn all(ctx: Ctx, decided: &Outcome) {
    let resp3 = ffi::is_resp3(ctx);
    let allowed = decided.allowed;
    let blocked_by = decided.blocked_by.map_or(-1, |i| to_i64(i as u64));
    let retry_after_ms = retry_ms(decided.reported_retry_after());
    let decisions = &decided.decisions;
    if resp3 {
        ffi::reply_map(ctx, 4);
        ffi::reply_name(ctx, c"allowed");
        ffi::reply_bool(ctx, allowed);
        ffi::reply_name(ctx, c"blocked_by");
        ffi::reply_int(ctx, blocked_by);
        ffi::reply_name(ctx, c"retry_after_ms");
        ffi::reply_int(ctx, retry_after_ms);
        ffi::reply_name(ctx, c"limits");
        ffi::reply_array(ctx, decisions.len());
    } else {
        ffi::reply_array(ctx, 3 + decisions.len());
        ffi::reply_int(ctx, i64::from(allowed));
        ffi::reply_int(ctx, blocked_by);
        ffi::reply_int(ctx, retry_after_ms);
    }
    for i in 0..decisions.len() {
        if let Some(d) = decided.reported(i) {
            decision_in(ctx, resp3, &d, Extra::of(decided, i));
        }
    }
}

fn lease_of(decided: &Outcome, i: usize) -> Option<Option<LeaseId>> {
    decided.leases.get(i).copied().flatten()
}

/// `delay_ms` of a request with `RESERVE`: when its admission starts, in
/// whole milliseconds rounded up (acting on it is never early); -1 when
/// denied.
fn delay_of(decided: &Outcome) -> Option<i64> {
    decided.reservation.map(|r| match r {
        Reservation::Starts(delay) => to_i64(delay.ceil_millis()),
        Reservation::Denied => -1,
    })
}

/// What a decision adds to the five fields.
#[derive(Debug, Clone, Copy)]
struct Extra {
    granted: Option<u64>,
    delay: Option<i64>,
    lease: Option<Option<LeaseId>>,
}

impl Extra {
    #[inline(always)]
    fn of(decided: &Outcome, i: usize) -> Extra {
        Extra {
            granted: decided.granted,
            delay: delay_of(decided),
            lease: lease_of(decided, i),
        }
    }

    fn fields(&self) -> usize {
        usize::from(self.granted.is_some())
            + usize::from(self.delay.is_some())
            + usize::from(self.lease.is_some())
    }
}

/// Replies with a single-key command's decision in the caller's protocol:
/// PARTIAL adds the units `granted`, RESERVE the delay, a concurrency limit
/// its lease.
pub fn decision(ctx: Ctx, decided: &Outcome) {
    if let Some(d) = decided.reported(0) {
        decision_in(ctx, ffi::is_resp3(ctx), &d, Extra::of(decided, 0));
    }
}

/// A shadow policy's decision: admitted whatever it decided, the decision's
/// other fields as they are, then `shadow_denied` (RESP3 a boolean, RESP2
/// 1 or 0 as the last element): whether enforcing it would have denied.
pub fn shadow_decision(ctx: Ctx, decided: &Outcome) {
    let Some(d) = decided.decisions.first() else {
        return;
    };
    let resp3 = ffi::is_resp3(ctx);
    let admitted = Decision {
        allowed: true,
        ..*d
    };
    let extra = Extra::of(decided, 0);
    decision_with(ctx, resp3, &admitted, extra, 6 + extra.fields());
    if resp3 {
        ffi::reply_name(ctx, c"shadow_denied");
        ffi::reply_bool(ctx, !d.allowed);
    } else {
        ffi::reply_int(ctx, i64::from(!d.allowed));
    }
}

/// CL.THROTTLE's reply: five integers, as redis-cell sends them.
pub fn throttle(ctx: Ctx, reply: &CellReply) {
    ffi::reply_array(ctx, 5);
    ffi::reply_int(ctx, i64::from(reply.limited));
    ffi::reply_int(ctx, reply.limit);
    ffi::reply_int(ctx, reply.remaining);
    ffi::reply_int(ctx, reply.retry_after_s);
    ffi::reply_int(ctx, reply.reset_after_s);
}

/// Writes one decision (the whole reply, or one element of a larger one):
/// five fields, then `granted` (PARTIAL), `delay_ms` (RESERVE) and `lease`
/// (a concurrency limit's, nil if none) where they apply.
fn decision_in(ctx: Ctx, resp3: bool, d: &Decision, extra: Extra) {
    decision_with(ctx, resp3, d, extra, 5 + extra.fields());
}

/// [`decision_in`] in a map or array of `fields` (more than it writes when
/// the caller adds some).
fn decision_with(ctx: Ctx, resp3: bool, d: &Decision, extra: Extra, fields: usize) {
    let Extra {
        granted,
        delay,
        lease,
    } = extra;
    let f = Fields::from(d);
    if resp3 {
        ffi::reply_map(ctx, fields);
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
        if let Some(granted) = granted {
            ffi::reply_name(ctx, c"granted");
            ffi::reply_int(ctx, to_i64(granted));
        }
        if let Some(delay) = delay {
            ffi::reply_name(ctx, c"delay_ms");
            ffi::reply_int(ctx, delay);
        }
    } else {
        ffi::reply_array(ctx, fields);
        ffi::reply_int(ctx, i64::from(f.allowed));
        ffi::reply_int(ctx, f.limit);
        ffi::reply_int(ctx, f.remaining);
        ffi::reply_int(ctx, f.retry_after_ms);
        ffi::reply_int(ctx, f.reset_after_ms);
        if let Some(granted) = granted {
            ffi::reply_int(ctx, to_i64(granted));
        }
        if let Some(delay) = delay {
            ffi::reply_int(ctx, delay);
        }
    }
    if let Some(lease) = lease {
        if resp3 {
            ffi::reply_name(ctx, c"lease");
        }
        match lease {
            Some(id) => ffi::reply_bulk(ctx, format_lease(&id).as_bytes()),
            None => ffi::reply_null(ctx),
        }
    }
}

/// RL.POLICY STATS: the counts, then `top_denied`, the keys denied most,
/// each `[key, count, error]`. RESP3 a map; RESP2 the same as a flat array
/// of names and values.
pub fn policy_stats(ctx: Ctx, stats: &PolicyStats, top: &[TopKey]) {
    let resp3 = ffi::is_resp3(ctx);
    let counts = [
        (c"calls", stats.calls),
        (c"allowed", stats.allowed),
        (c"denied", stats.denied),
        (c"shadow_denied", stats.shadow_denied),
        (c"waits", stats.waits),
        (c"deny_listed", stats.deny_listed),
    ];
    // A path's counts per node follow, as a last field.
    let fields = counts.len() + 1 + usize::from(!stats.nodes.is_empty());
    if resp3 {
        ffi::reply_map(ctx, fields);
    } else {
        ffi::reply_array(ctx, 2 * fields);
    }
    for (name, value) in counts {
        ffi::reply_name(ctx, name);
        ffi::reply_int(ctx, to_i64(value));
    }
    ffi::reply_name(ctx, c"top_denied");
    ffi::reply_array(ctx, top.len());
    for t in top {
        ffi::reply_array(ctx, 3);
        ffi::reply_bulk(ctx, &t.key);
        ffi::reply_int(ctx, to_i64(t.count));
        ffi::reply_int(ctx, to_i64(t.error));
    }
    if stats.nodes.is_empty() {
        return;
    }
    ffi::reply_name(ctx, c"nodes");
    ffi::reply_array(ctx, stats.nodes.len());
    for node in &stats.nodes {
        let counts = [
            (c"calls", node.allowed + node.denied),
            (c"allowed", node.allowed),
            (c"denied", node.denied),
            (c"blocked", node.blocked),
            (c"lent", node.lent),
        ];
        if resp3 {
            ffi::reply_map(ctx, counts.len());
        } else {
            ffi::reply_array(ctx, 2 * counts.len());
        }
        for (name, value) in counts {
            ffi::reply_name(ctx, name);
            ffi::reply_int(ctx, to_i64(value));
        }
    }
}
