//! The `INFO ratelimit` section: per command, calls, allowed, denied and
//! errors (see `stats`), the module's version and which clock it runs on.
//!
//! ```text
//! # ratelimit
//! ratelimit_version:0.1.0
//! ratelimit_clock:real
//! ratelimit_client_unblock:yes
//! ratelimit_waiting:0
//! ratelimit_lines:count=0,longest_wait_us=0
//! ratelimit_leases:held=2,granted=5,released=2,expired=1
//! ratelimit_waits:started=3,admitted=2,timed_out=1,abandoned=0,waited_us=1500000
//! ratelimit_policies:defined=2,calls=7,allowed=5,denied=1,shadow_denied=1,waits=0,listed=2,unlisted=0
//! ratelimit_policies_rdb:when_defined
//! ratelimit_policy_1:name=plan:free,calls=6,allowed=4,denied=1,shadow_denied=1,waits=0
//! ratelimit_policy_2:name=a%20b,calls=1,allowed=1,denied=0,shadow_denied=0,waits=0
//! ratelimit_deny_list:keys=1,denials=4,policy_denials=1
//! ratelimit_hot_keys:counters=320
//! ratelimit_penalty_blocks:2
//! ratelimit_penalty_denials:5
//! ratelimit_penalty_charges:0
//! ratelimit_penalty_listed:1
//! ratelimit_rl_gcra:calls=12,allowed=10,denied=2,errors=0
//! ...
//! ```
//!
//! The counters count from the module's load, like a Prometheus counter:
//! `CONFIG RESETSTAT` does not zero them (graph their rate). Redis has no
//! server event for `CONFIG RESETSTAT`; seeing it would take a command
//! filter, which costs every command of the server (at least 2.2 % of a `GET`),
//! for a module that may never be used. Redis's own `INFO commandstats`
//! rows of the module's commands are Redis's, and reset as ever.
//! `ratelimit_hooks` says which per-command hooks are on: the command
//! filter only while an admitted reply is pending, on servers that need it
//! (`wait::watch`), and how often it was registered.

use super::ffi::{api, Ctx};
use super::stats;
use super::{clock, wait};
use crate::bounds::{self, work};
use crate::engine::penalty::listing;
use crate::engine::{deny, hot, registry};
use redis_module::raw;
use std::ffi::{c_int, CStr, CString};

/// Registers the INFO callback at load, and checks the functions of the
/// command filter waiters need (`wait::watch`). The `redis_module!` macro
/// registers a default callback before our init runs; registering again
/// replaces it.
pub fn register(ctx: Ctx) -> Result<(), String> {
    // Check every function the callbacks use now: they run outside the
    // command guard, where a missing one must not panic.
    macro_rules! present {
        ($($name:ident),*) => {
            // SAFETY: reading (copying) pointers written by RedisModule_Init.
            $(unsafe { raw::$name }.is_some())&&*
        };
    }
    let present = present!(
        RedisModule_RegisterInfoFunc,
        RedisModule_InfoAddSection,
        RedisModule_InfoAddFieldCString,
        RedisModule_InfoAddFieldULongLong,
        RedisModule_InfoBeginDictField,
        RedisModule_InfoEndDictField
    );
    if !present || !wait::watch::available() {
        return Err("this server lacks the INFO or command filter API (Redis 7.0 or later)".into());
    }
    // SAFETY: during OnLoad with its context; the callbacks are plain
    // functions that live as long as the module.
    let status = unsafe { api!(RedisModule_RegisterInfoFunc)(ctx.0, Some(info)) };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("cannot register the INFO section".into());
    }
    // A reload starts from zero even where the old copy stayed mapped.
    stats::reset();
    work::reset();
    super::leases::reset();
    Ok(())
}

/// The INFO callback. A section that was not asked for is skipped by Redis
/// (the add calls return an error, which changes nothing).
extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    // SAFETY: Redis calls this with a live INFO context; every string passed
    // is NUL-terminated and lives through the call.
    unsafe {
        // No section name: the section is called after the module.
        if api!(RedisModule_InfoAddSection)(ctx, c"".as_ptr()) != raw::REDISMODULE_OK as c_int {
            return;
        }
        if let Ok(version) = CString::new(crate::server::version::VERSION) {
            api!(RedisModule_InfoAddFieldCString)(ctx, c"version".as_ptr(), version.as_ptr());
        }
        let mode = if clock::is_manual() {
            c"manual"
        } else {
            c"real"
        };
        api!(RedisModule_InfoAddFieldCString)(ctx, c"clock".as_ptr(), mode.as_ptr());
        // Whether CLIENT UNBLOCK ends a wait on this server.
        let unblock = if wait::client_unblock_allowed() {
            c"yes"
        } else {
            c"no"
        };
        api!(RedisModule_InfoAddFieldCString)(ctx, c"client_unblock".as_ptr(), unblock.as_ptr());
        let waiting = u64::try_from(wait::waiting()).unwrap_or(u64::MAX);
        api!(RedisModule_InfoAddFieldULongLong)(ctx, c"waiting".as_ptr(), waiting);
        // The lines (keys with waiters) and the longest wait now: read
        // from the queue here, nothing kept for them on the decision path.
        let (lines, longest) = wait::lines(clock::now());
        dict(
            ctx,
            c"lines",
            &[
                (c"count", lines as u64),
                (c"longest_wait_us", longest.as_u64()),
            ],
        );
        // Leases granted and neither released nor past their deadline.
        let leases = super::leases::counts();
        dict(
            ctx,
            c"leases",
            &[
                (c"held", leases.held),
                (c"granted", leases.granted),
                (c"released", leases.released),
                (c"expired", leases.expired),
            ],
        );
        let heap = u64::try_from(super::heap::bytes()).unwrap_or(u64::MAX);
        api!(RedisModule_InfoAddFieldULongLong)(ctx, c"heap_bytes".as_ptr(), heap);
        dict(
            ctx,
            c"hooks",
            &[
                (c"command_filter", u64::from(wait::watch::filtering())),
                (
                    c"command_filter_registrations",
                    wait::watch::registrations(),
                ),
                (c"keyspace_events", u64::from(wait::subscribed())),
            ],
        );
        let waits = stats::waits();
        dict(
            ctx,
            c"waits",
            &[
                (c"started", waits.started),
                (c"admitted", waits.admitted),
                (c"timed_out", waits.timed_out),
                (c"abandoned", waits.abandoned),
                (c"waited_us", waits.waited_us),
            ],
        );
        let work: Vec<(CString, u64)> = work::ALL
            .iter()
            .filter_map(|&(counter, name)| Some((CString::new(name).ok()?, work::get(counter))))
            .collect();
        let work: Vec<(&CStr, u64)> = work.iter().map(|(f, v)| (f.as_c_str(), *v)).collect();
        dict(ctx, c"work", &work);
        // Named policies: how many, their counts summed, and a line for
        // each of the `info-policies` called most (RL.POLICY STATS has
        // every policy's, with its most denied keys).
        let shown = usize::try_from(bounds::INFO_POLICIES.get()).unwrap_or(usize::MAX);
        registry::with(|r| {
            let (defined, sum) = r.totals();
            let listed = r.most_called(shown);
            let listed_count = listed.len() as u64;
            dict(
                ctx,
                c"policies",
                &[
                    (c"defined", defined as u64),
                    (c"calls", sum.calls),
                    (c"allowed", sum.allowed),
                    (c"denied", sum.denied),
                    (c"shadow_denied", sum.shadow_denied),
                    (c"waits", sum.waits),
                    (c"listed", listed_count),
                    (c"unlisted", (defined as u64).saturating_sub(listed_count)),
                ],
            );
            // Whether an RDB saved with no policy loads without the module.
            let rdb = if super::policies::empty_rdb_needs_no_module() {
                c"when_defined"
            } else {
                c"always"
            };
            if registry::enabled().is_ok() {
                api!(RedisModule_InfoAddFieldCString)(ctx, c"policies_rdb".as_ptr(), rdb.as_ptr());
            }
            for (rank, (name, counts)) in listed.iter().enumerate() {
                let (Ok(field), Ok(name)) = (
                    CString::new(format!("policy_{}", rank + 1)),
                    CString::new(escape_name(name)),
                ) else {
                    continue;
                };
                api!(RedisModule_InfoBeginDictField)(ctx, field.as_ptr());
                api!(RedisModule_InfoAddFieldCString)(ctx, c"name".as_ptr(), name.as_ptr());
                for (field, value) in [
                    (c"calls", counts.calls),
                    (c"allowed", counts.allowed),
                    (c"denied", counts.denied),
                    (c"shadow_denied", counts.shadow_denied),
                    (c"waits", counts.waits),
                ] {
                    api!(RedisModule_InfoAddFieldULongLong)(ctx, field.as_ptr(), value);
                }
                api!(RedisModule_InfoEndDictField)(ctx);
            }
        });
        // The deny list: keys held (ended ones until let go), the
        // decisions it denied, those of calls naming a policy; the hot
        // keys' counters (0: off).
        let keys = deny::with(|l| l.len() as u64);
        let by_policies = registry::with(|r| r.totals().1.deny_listed);
        dict(
            ctx,
            c"deny_list",
            &[
                (c"keys", keys),
                (c"denials", deny::denials()),
                (c"policy_denials", by_policies),
            ],
        );
        dict(ctx, c"hot_keys", &[(c"counters", hot::counters())]);
        // The penalty box: blocks begun, requests a running block denied,
        // denied requests charged (COUNTDENIALS), keys RL.PENALIZED holds.
        let [blocks, held, charges, listed] = listing::counts();
        for (field, n) in [
            (c"penalty_blocks", blocks),
            (c"penalty_denials", held),
            (c"penalty_charges", charges),
            (c"penalty_listed", listed),
        ] {
            api!(RedisModule_InfoAddFieldULongLong)(ctx, field.as_ptr(), n);
        }
        for (i, command) in super::register::table().iter().enumerate() {
            let Ok(name) = CString::new(command.info_field()) else {
                continue;
            };
            let counts = stats::counts(i);
            dict(
                ctx,
                &name,
                &[
                    (c"calls", counts.calls),
                    (c"allowed", counts.allowed),
                    (c"denied", counts.denied),
                    (c"errors", counts.errors),
                ],
            );
        }
    }
}

/// A policy name as an INFO value: every byte outside `A-Za-z0-9_.:-` as
/// `%XX` (upper-case hex), so that no `,` `=` `%`, space or line break
/// reaches the line; parsers split a line at its first `:`, so a `:` in the
/// value is kept. Decoding `%XX` gives the name back.
pub fn escape_name(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len());
    for &b in name {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One INFO dict field: `name:field=value,…`.
fn dict(ctx: *mut raw::RedisModuleInfoCtx, name: &CStr, fields: &[(&CStr, u64)]) {
    // SAFETY: `ctx` is the live INFO context of the callback that calls
    // this; every string is NUL-terminated and outlives the call.
    unsafe {
        api!(RedisModule_InfoBeginDictField)(ctx, name.as_ptr());
        for (field, value) in fields {
            api!(RedisModule_InfoAddFieldULongLong)(ctx, field.as_ptr(), *value);
        }
        api!(RedisModule_InfoEndDictField)(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::escape_name;

    #[test]
    fn escaped_names_hold_no_separator_and_decode_back() {
        let hostile = b"a:b,c=d e\n%\xff\x00Z_.-9";
        let escaped = escape_name(hostile);
        assert_eq!(escaped, "a:b%2Cc%3Dd%20e%0A%25%FF%00Z_.-9");
        let mut decoded = Vec::new();
        let mut rest = escaped.as_bytes();
        while let Some((&b, tail)) = rest.split_first() {
            if b == b'%' {
                let hex = std::str::from_utf8(&tail[..2]).unwrap();
                decoded.push(u8::from_str_radix(hex, 16).unwrap());
                rest = &tail[2..];
            } else {
                decoded.push(b);
                rest = tail;
            }
        }
        assert_eq!(decoded, hostile);
    }
}
