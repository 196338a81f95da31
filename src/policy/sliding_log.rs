//! RL.SLIDING EXACT as a policy: every call reads the stored log in place
//! (a binary search for its live part) and writes only what its edit
//! changes, so its work is its cost in entries plus O(log n), whatever the
//! log holds. The entries each call reads or writes are counted
//! ([`Work::Entries`]). Its refund and forced charge are edits of the log
//! in place too, so it implements them itself rather than through the
//! [`Limiter`] defaults (which would copy the value).

use super::limiter::{forced, ForceError};
use super::{Limiter, StateWrite, Transition};
use crate::algorithm::sliding_log::{EditedLog, LogEdit, SlidingLog};
use crate::algorithm::{Decision, Micros, RetryAfter};
use crate::bounds::work::{self, Work};
use crate::bounds::MAX_LOG_ENTRIES;
use crate::codec::sliding_log::{self as codec, LogBytes, StoredSlidingLog};
use crate::codec::{Kind, StateError};

impl Limiter for SlidingLog {
    fn interval(&self) -> Option<Micros> {
        Some(SlidingLog::interval(self))
    }

    /// Stamped with the instant its admission starts: a log admits
    /// nothing before its newest entry (see `engine::reserve`).
    fn reserves(&self) -> bool {
        true
    }

    fn kind(&self) -> Kind {
        Kind::SlidingLog
    }

    /// Decides `cost`; an admitted request appends its entries.
    fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError> {
        decide_counted(self, stored, now, cost).map(|(o, _)| o)
    }

    /// Decides `cost` and prepares no write (it would be as long as `cost`).
    fn decision(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Decision, StateError> {
        let loaded = Loaded::new(stored)?;
        let (decision, _) = loaded.decide(self, now, cost);
        count(&loaded, 0);
        Ok(decision)
    }

    /// Gives back `n` units: the newest entries go (a header write).
    fn refund(&self, stored: Option<&[u8]>, now: Micros, n: u64) -> Result<Transition, StateError> {
        refund_counted(self, stored, now, n).map(|(o, _)| o)
    }

    /// Charges `cost` whether or not it fits (at most `limit` entries).
    fn force(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, ForceError> {
        Ok(force_counted(self, stored, now, cost).map(|(o, _)| o)?)
    }
}

/// A stored log, if there is one, read in place.
struct Loaded<'a> {
    log: Option<StoredSlidingLog<'a>>,
}

impl<'a> Loaded<'a> {
    fn new(stored: Option<&'a [u8]>) -> Result<Loaded<'a>, StateError> {
        let log = stored.map(StoredSlidingLog::decode).transpose()?;
        Ok(Loaded { log })
    }

    fn decide(&self, l: &SlidingLog, now: Micros, cost: u64) -> (Decision, Option<LogEdit>) {
        match &self.log {
            Some(log) => l.decide(log, now, cost),
            None => l.decide(&[][..], now, cost),
        }
    }

    /// Decides `cost` on the log as `edit` leaves it (nothing is copied).
    fn decide_after(&self, l: &SlidingLog, edit: &LogEdit, now: Micros, cost: u64) -> Decision {
        match &self.log {
            Some(log) => l.decide(&EditedLog::new(log, edit), now, cost).0,
            None => l.decide(&EditedLog::new(&[][..], edit), now, cost).0,
        }
    }

    /// The write that applies `edit`, counting the entries it writes.
    fn write(&self, l: &SlidingLog, edit: &LogEdit, touched: &mut usize) -> StateWrite {
        let width = codec::stamp_width(l.window());
        let max_cap = MAX_LOG_ENTRIES.get() as usize;
        let w = codec::write_log(self.log.as_ref(), edit, width, max_cap);
        *touched += w.written;
        match w.bytes {
            LogBytes::Patch(p) => StateWrite::Patch(p),
            LogBytes::Whole(v) => StateWrite::Value(v.into()),
        }
    }

    /// Entries read so far.
    fn reads(&self) -> usize {
        self.log.as_ref().map_or(0, StoredSlidingLog::reads)
    }
}

/// Counts the entries a call read and wrote.
fn count(loaded: &Loaded, written: usize) -> usize {
    let n = loaded.reads() + written;
    work::add(Work::Entries, n as u64);
    n
}

/// `decision` with `edit` written (if any), and the entries read and
/// written, counted.
fn transition(
    l: &SlidingLog,
    loaded: &Loaded,
    decision: Decision,
    edit: Option<LogEdit>,
) -> (Transition, usize) {
    let mut written = 0;
    let write = edit.map(|e| loaded.write(l, &e, &mut written));
    let n = count(loaded, written);
    (Transition::of(decision, write), n)
}

fn decide_counted(
    l: &SlidingLog,
    stored: Option<&[u8]>,
    now: Micros,
    cost: u64,
) -> Result<(Transition, usize), StateError> {
    let loaded = Loaded::new(stored)?;
    let (decision, edit) = loaded.decide(l, now, cost);
    Ok(transition(l, &loaded, decision, edit))
}

fn refund_counted(
    l: &SlidingLog,
    stored: Option<&[u8]>,
    now: Micros,
    n: u64,
) -> Result<(Transition, usize), StateError> {
    let loaded = Loaded::new(stored)?;
    let edit = match &loaded.log {
        Some(log) => l.refund(log, now, n),
        None => None,
    };
    let look = match &edit {
        Some(e) => loaded.decide_after(l, e, now, 0),
        None => loaded.decide(l, now, 0).0,
    };
    let decision = Decision {
        allowed: true,
        retry_after: RetryAfter::NotNeeded,
        ..look
    };
    let mut written = 0;
    let write = edit.map(|e| {
        // Back to full: no key says the same, and leaves none to expire.
        if decision.reset_after == Micros::ZERO {
            StateWrite::Delete
        } else {
            loaded.write(l, &e, &mut written)
        }
    });
    let n = count(&loaded, written);
    Ok((Transition::of(decision, write), n))
}

fn force_counted(
    l: &SlidingLog,
    stored: Option<&[u8]>,
    now: Micros,
    cost: u64,
) -> Result<(Transition, usize), StateError> {
    let loaded = Loaded::new(stored)?;
    let (plain, edit) = loaded.decide(l, now, cost);
    if plain.allowed {
        return Ok(transition(l, &loaded, plain, edit));
    }
    let edit = match &loaded.log {
        Some(log) => l.force(log, now, cost),
        None => l.force(&[][..], now, cost),
    };
    let next = loaded.decide_after(l, &edit, now, 1);
    let decision = forced(next, loaded.decide_after(l, &edit, now, 0));
    Ok(transition(l, &loaded, decision, Some(edit)))
}

#[cfg(test)]
mod tests;
