//! The operator's commands on the deny list (`RL.DENY`, `RL.UNDENY`,
//! `RL.DENIED`, `RL.DENYLIST`), the hot keys (`RL.HOTKEYS`) and the
//! penalty box (`RL.PENALIZED`).
//!
//! The deny list lives with the named policies: the server keeps it, saves
//! it in the RDB and needs `policies on` for both. A denial is replicated
//! with the instant it ends (`UNTIL`), so that a replica, and an AOF
//! replayed later, end it when the primary does.

use super::args::{self, Options};
use super::definition::CommandDef;
use super::{Host, Item, Reply};
use crate::algorithm::Micros;
use crate::bounds::MAX_DENIED_KEYS;
use crate::engine::deny::{self, Listed};
use crate::engine::error::{printable, Error};
use crate::engine::penalty::listing;
use crate::engine::{hot, registry};

/// The most entries one RL.DENYLIST or RL.HOTKEYS call returns.
pub const MAX_COUNT: u64 = 1_000;
/// What they return without COUNT.
const DEFAULT_COUNT: u64 = 10;

fn enabled() -> Result<(), Error> {
    registry::enabled().map_err(|_| Error::DenyListOff)
}

/// `RL.DENY key (duration | FOREVER | UNTIL instant) [REASON text]`.
pub fn deny<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let [_, key, end, rest @ ..] = args else {
        return Err(Error::Arity(command.name));
    };
    enabled()?;
    let now = host.now();
    let mut rest = Options::new(rest);
    let word = end.as_ref();
    let until = if word.eq_ignore_ascii_case(b"FOREVER") {
        None
    } else if word.eq_ignore_ascii_case(b"UNTIL") {
        let at = args::integer(rest.value("UNTIL")?, "UNTIL", 0, i64::MAX as u64)?;
        Some(Micros::new(at))
    } else {
        Some(now.saturating_add(args::duration(word, "duration")?))
    };
    let mut reason: &[u8] = b"";
    while let Some(option) = rest.next_keyword() {
        if option.eq_ignore_ascii_case(b"REASON") && reason.is_empty() {
            reason = rest.value("REASON")?;
        } else {
            return Err(Error::UnknownOption(printable(option)));
        }
    }
    let max = MAX_DENIED_KEYS.get();
    deny::with(|l| l.deny(key.as_ref(), until, reason, now, max))?;
    let instant = until.map(|u| u.as_u64().to_string());
    let mut effect: Vec<&[u8]> = vec![key.as_ref()];
    match &instant {
        Some(at) => effect.extend([&b"UNTIL"[..], at.as_bytes()]),
        None => effect.push(b"FOREVER"),
    }
    if !reason.is_empty() {
        effect.extend([&b"REASON"[..], reason]);
    }
    host.replicate("RL.DENY", &effect);
    Ok(Reply::Ok)
}

/// `RL.UNDENY key`: 1 if the key was denied, else 0.
pub fn undeny<H: Host>(
    command: &CommandDef,
    host: &mut H,
    args: &[H::Arg],
) -> Result<Reply, Error> {
    let [_, key] = args else {
        return Err(Error::Arity(command.name));
    };
    enabled()?;
    let now = host.now();
    let removed = deny::with(|l| {
        let in_force = l.get(key.as_ref(), now).is_some();
        l.remove(key.as_ref()) && in_force
    });
    host.replicate_verbatim();
    Ok(Reply::Int(i64::from(removed)))
}

/// A denial's time left in milliseconds, rounded up; -1 until removed.
fn left_ms(until: Option<Micros>, now: Micros) -> i64 {
    until.map_or(-1, |end| {
        i64::try_from(end.saturating_sub(now).ceil_millis()).unwrap_or(i64::MAX)
    })
}

/// `RL.DENIED key`: `[ms left (-1 until removed), reason]`, or nil.
pub fn denied<H: Host>(
    command: &CommandDef,
    host: &mut H,
    args: &[H::Arg],
) -> Result<Reply, Error> {
    let [_, key] = args else {
        return Err(Error::Arity(command.name));
    };
    enabled()?;
    let now = host.now();
    let found = deny::with(|l| {
        l.get(key.as_ref(), now)
            .map(|d| (d.until, d.reason.clone()))
    });
    Ok(Reply::Items(match found {
        Some((until, reason)) => {
            Item::Array(vec![Item::Int(left_ms(until, now)), Item::Bulk(reason)])
        }
        None => Item::Nil,
    }))
}

/// `COUNT n` alone, or nothing.
fn count<A: AsRef<[u8]>>(rest: &[A]) -> Result<usize, Error> {
    let mut options = Options::new(rest);
    let mut count = None;
    while let Some(option) = options.next_keyword() {
        if option.eq_ignore_ascii_case(b"COUNT") && count.is_none() {
            count = Some(args::integer(
                options.value("COUNT")?,
                "COUNT",
                1,
                MAX_COUNT,
            )?);
        } else {
            return Err(Error::UnknownOption(printable(option)));
        }
    }
    Ok(count.unwrap_or(DEFAULT_COUNT) as usize)
}

/// `RL.DENYLIST cursor [COUNT n]`: `[next cursor, [[key, ms left,
/// reason], ...]]`, as SCAN pages; a next cursor of 0 ends the scan.
pub fn list<H: Host>(command: &CommandDef, host: &mut H, args: &[H::Arg]) -> Result<Reply, Error> {
    let [_, cursor, rest @ ..] = args else {
        return Err(Error::Arity(command.name));
    };
    enabled()?;
    let cursor = args::integer(cursor.as_ref(), "cursor", 0, u64::MAX)?;
    let count = count(rest)?;
    let now = host.now();
    let (next, page) = deny::with(|l| l.scan(cursor, count, now));
    let entries = page
        .into_iter()
        .map(|(key, until, reason): Listed| {
            Item::Array(vec![
                Item::Bulk(key),
                Item::Int(left_ms(until, now)),
                Item::Bulk(reason),
            ])
        })
        .collect();
    Ok(Reply::Items(Item::Array(vec![
        Item::Bulk(next.to_string().into_bytes()),
        Item::Array(entries),
    ])))
}

/// `RL.HOTKEYS [COUNT n]`: `[[key, decisions per second, error per
/// second], ...]`, most first; empty while `ratelimit.hot-key-counters`
/// is 0.
pub fn hot_keys<H: Host>(
    command: &CommandDef,
    host: &mut H,
    args: &[H::Arg],
) -> Result<Reply, Error> {
    let as_int = |n: u64| Item::Int(i64::try_from(n).unwrap_or(i64::MAX));
    rows(
        command,
        args,
        |count| hot::top(host.now(), count).0,
        |k| {
            vec![
                Item::Bulk(k.key),
                as_int(k.per_second),
                as_int(k.error_per_second),
            ]
        },
    )
}

/// `RL.PENALIZED [COUNT n]`: `[[key, ms_left, form], ...]`, the keys
/// whose block (`block`) or counted debt (`count`) still runs, the most
/// recent first; the time left in whole milliseconds, rounded up.
pub fn penalized<H: Host>(
    command: &CommandDef,
    host: &mut H,
    args: &[H::Arg],
) -> Result<Reply, Error> {
    rows(
        command,
        args,
        |count| listing::list(host.now(), count),
        |(key, left, form)| {
            let ms = i64::try_from(left.ceil_millis()).unwrap_or(i64::MAX);
            vec![
                Item::Bulk(key),
                Item::Int(ms),
                Item::Bulk(form.as_bytes().to_vec()),
            ]
        },
    )
}

/// A listing command's reply: its `[COUNT n]` read, then at most `n`
/// entries from `list`, each an array made by `row`.
fn rows<A: AsRef<[u8]>, T>(
    command: &CommandDef,
    args: &[A],
    list: impl FnOnce(usize) -> Vec<T>,
    row: impl Fn(T) -> Vec<Item>,
) -> Result<Reply, Error> {
    let [_, rest @ ..] = args else {
        return Err(Error::Arity(command.name));
    };
    let count = count(rest)?;
    Ok(Reply::Items(Item::Array(
        list(count)
            .into_iter()
            .map(|t| Item::Array(row(t)))
            .collect(),
    )))
}
