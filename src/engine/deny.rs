//! The deny list: keys an operator holds out (`RL.DENY`), each until an
//! instant of the limiter clock or until removed, with a reason. Every
//! decision command looks here before its limit: a denied key is answered
//! denied and nothing is charged. Pure: the server shell saves the list in
//! the RDB (`encode`/`decode`) and replicates the commands that change it,
//! each with the instant it ends (`UNTIL`), so that a replica, an AOF
//! replayed later and the primary end a denial at the same instant.
//!
//! Cost: with no key denied a decision reads one counter ([`is_empty`]);
//! otherwise one hash look-up per key. Memory: at most
//! `ratelimit.max-denied-keys` entries, each with its key and a reason of
//! at most [`MAX_REASON`] bytes.

use crate::algorithm::{Decision, Micros, RetryAfter};
use crate::engine::error::Error;
use crate::engine::{Outcome, PerLimit};
use crate::policy::Policy;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// Ended denials let go by each RL.DENY: more than one, so that they go
/// faster than they come.
const EXPIRE_PER_CALL: usize = 16;
/// Ended denials let go, at most, before RL.DENY refuses a key at the
/// bound.
const EXPIRE_AT_BOUND: usize = 1_000;

/// The longest reason, in bytes.
pub const MAX_REASON: usize = 256;

/// One denied key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The instant it ends; `None`: until removed.
    pub until: Option<Micros>,
    pub reason: Vec<u8>,
    /// Its place in the listing: later denials list later.
    seq: u64,
}

/// The denied keys, by key, by place in the listing and by end.
#[derive(Debug, Default)]
pub struct DenyList {
    by_key: HashMap<Vec<u8>, Denial>,
    by_seq: BTreeMap<u64, Vec<u8>>,
    by_end: BTreeSet<(Micros, u64)>,
    next_seq: u64,
}

/// One listed key: the key, its end (`None`: until removed), its reason.
pub type Listed = (Vec<u8>, Option<Micros>, Vec<u8>);

impl DenyList {
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Denies `key` until `until` (`None`: until removed) for `reason`,
    /// replacing a denial it had. Past `max` keys (the operator's
    /// `ratelimit.max-denied-keys`) a new key is refused, after the ended
    /// denials are let go.
    pub fn deny(
        &mut self,
        key: &[u8],
        until: Option<Micros>,
        reason: &[u8],
        now: Micros,
        max: u64,
    ) -> Result<(), Error> {
        if reason.len() > MAX_REASON {
            return Err(Error::DenyReason { max: MAX_REASON });
        }
        self.expire(now, EXPIRE_PER_CALL);
        let full = |l: &DenyList| !l.by_key.contains_key(key) && l.by_key.len() as u64 >= max;
        if full(self) {
            self.expire(now, EXPIRE_AT_BOUND);
            if full(self) {
                return Err(Error::TooManyDenied { max });
            }
        }
        self.remove(key);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_seq.insert(seq, key.to_vec());
        if let Some(end) = until {
            self.by_end.insert((end, seq));
        }
        let denial = Denial {
            until,
            reason: reason.to_vec(),
            seq,
        };
        self.by_key.insert(key.to_vec(), denial);
        Ok(())
    }

    /// Removes `key`'s denial; whether it had one.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        let Some(d) = self.by_key.remove(key) else {
            return false;
        };
        self.by_seq.remove(&d.seq);
        if let Some(end) = d.until {
            self.by_end.remove(&(end, d.seq));
        }
        true
    }

    /// Lets go of up to `most` denials ended at `now`, the earliest first.
    pub fn expire(&mut self, now: Micros, most: usize) {
        for _ in 0..most {
            let Some(&(end, seq)) = self.by_end.first() else {
                break;
            };
            if end > now {
                break;
            }
            self.by_end.pop_first();
            if let Some(key) = self.by_seq.remove(&seq) {
                self.by_key.remove(&key);
            }
        }
    }

    /// `key`'s denial in force at `now`.
    pub fn get(&self, key: &[u8], now: Micros) -> Option<&Denial> {
        self.by_key
            .get(key)
            .filter(|d| d.until.is_none_or(|end| end > now))
    }

    /// The denials in force at `now` among `count` places from `cursor` on
    /// in the listing (ended ones take a place but are not listed), and
    /// the cursor that goes on (0: the end). A key denied all through a
    /// scan is listed once; one denied again meanwhile may be listed twice,
    /// as Redis's SCAN may.
    pub fn scan(&self, cursor: u64, count: usize, now: Micros) -> (u64, Vec<Listed>) {
        let mut out = Vec::new();
        let mut places = self.by_seq.range(cursor..);
        for (_, key) in places.by_ref().take(count) {
            if let Some(d) = self.get(key, now) {
                out.push((key.clone(), d.until, d.reason.clone()));
            }
        }
        let next = places.next().map_or(0, |(&seq, _)| seq);
        (next, out)
    }

    /// Every denial, in listing order, for the RDB: per entry the key's
    /// length (u32 LE) and bytes, the end (u64 LE µs, `u64::MAX` for until
    /// removed), the reason's length (u16 LE) and bytes; a version byte
    /// first.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![ENCODING];
        for key in self.by_seq.values() {
            let Some(d) = self.by_key.get(key) else {
                continue;
            };
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
            let end = d.until.map_or(u64::MAX, Micros::as_u64);
            out.extend_from_slice(&end.to_le_bytes());
            out.extend_from_slice(&(d.reason.len() as u16).to_le_bytes());
            out.extend_from_slice(&d.reason);
        }
        out
    }
}

/// The layout version of [`DenyList::encode`].
const ENCODING: u8 = 1;

/// The entries of an encoded list (key, end, reason); `None` if corrupt.
pub fn decode(bytes: &[u8]) -> Option<Vec<Listed>> {
    let (&version, mut rest) = bytes.split_first()?;
    if version != ENCODING {
        return None;
    }
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, tail) = rest.split_at_checked(n)?;
        rest = tail;
        Some(head)
    };
    let mut out = Vec::new();
    while let Some(len) = take(4) {
        let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
        let key = take(len)?.to_vec();
        let end = u64::from_le_bytes(take(8)?.try_into().ok()?);
        let reason_len = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
        let reason = take(reason_len)?.to_vec();
        let until = (end != u64::MAX).then_some(Micros::new(end));
        out.push((key, until, reason));
    }
    Some(out)
}

static LIST: Mutex<Option<DenyList>> = Mutex::new(None);
/// Keys in the list (ended ones included until let go): 0 lets every
/// decision skip it.
static LEN: AtomicUsize = AtomicUsize::new(0);
/// Decisions the list denied.
static DENIALS: AtomicU64 = AtomicU64::new(0);

/// Whether no key is denied: a decision's one look at the list.
#[inline(always)]
pub fn is_empty() -> bool {
    LEN.load(Relaxed) == 0
}

/// The server's deny list (commands run one at a time: never contended).
pub fn with<R>(f: impl FnOnce(&mut DenyList) -> R) -> R {
    let mut guard: MutexGuard<Option<DenyList>> = LIST.lock().unwrap_or_else(|e| e.into_inner());
    let list = guard.get_or_insert_with(DenyList::default);
    let r = f(list);
    LEN.store(list.len(), Relaxed);
    r
}

/// Replaces the whole list (an RDB loaded), ended denials included: they
/// are let go as time passes.
pub fn replace(entries: Vec<Listed>) {
    with(|l| {
        *l = DenyList::default();
        for (key, until, reason) in entries {
            // The list was saved within its bounds; a smaller bound now
            // keeps what was saved rather than lose denials.
            let seq = l.next_seq;
            l.next_seq += 1;
            l.by_seq.insert(seq, key.clone());
            if let Some(end) = until {
                l.by_end.insert((end, seq));
            }
            l.by_key.insert(key, Denial { until, reason, seq });
        }
    });
}

/// Decisions denied by the list since the module loaded.
pub fn denials() -> u64 {
    DENIALS.load(Relaxed)
}

/// The denial of the first denied of `keys` at `now`, as the outcome of a
/// decision under `policies` (policy `i` over key `i`): denied, nothing
/// charged, `remaining` 0, `retry_after` the denial's end (`Never` until
/// removed), `reset_after` 0; the limits are the policies' own. `None`
/// when no key is denied. Callers check [`is_empty`] first.
pub fn screen<K: AsRef<[u8]>>(keys: &[K], policies: &[Policy], now: Micros) -> Option<Outcome> {
    let (index, until) = with(|l| {
        keys.iter()
            .enumerate()
            .find_map(|(i, k)| l.get(k.as_ref(), now).map(|d| (i, d.until)))
    })?;
    DENIALS.store(DENIALS.load(Relaxed).wrapping_add(1), Relaxed);
    let retry_after = match until {
        Some(end) => RetryAfter::After(end.saturating_sub(now)),
        None => RetryAfter::Never,
    };
    let decisions: PerLimit<Decision> = policies
        .iter()
        .map(|p| Decision {
            allowed: false,
            limit: p.decision(None, now, 0).map_or(0, |d| d.limit),
            remaining: 0,
            retry_after,
            reset_after: Micros::ZERO,
        })
        .collect();
    Some(Outcome {
        allowed: false,
        blocked_by: Some(index.min(policies.len().saturating_sub(1))),
        retry_after,
        units: policies.iter().map(|_| 0).collect(),
        leases: policies
            .iter()
            .map(|p| p.holds_leases().then_some(None))
            .collect(),
        decisions,
        granted: None,
        lender: None,
        reservation: None,
    })
}

/// When `key`'s denial in force at `now` ends (`Some(None)`: until
/// removed), counted as a decision the list denied; `None` if the key is
/// not denied. For the commands that do not decide through
/// [`screen`] (CL.THROTTLE).
pub fn ends(key: &[u8], now: Micros) -> Option<Option<Micros>> {
    if is_empty() {
        return None;
    }
    let until = with(|l| l.get(key, now).map(|d| d.until))?;
    DENIALS.store(DENIALS.load(Relaxed).wrapping_add(1), Relaxed);
    Some(until)
}

/// Whether `key` is denied at `now`, without counting a denial.
pub fn holds(key: &[u8], now: Micros) -> bool {
    !is_empty() && with(|l| l.get(key, now).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Micros = Micros::new(1_000_000);

    #[test]
    fn a_denial_ends_at_its_instant_or_when_removed() {
        let mut l = DenyList::default();
        l.deny(b"a", Some(Micros::new(2_000_000)), b"abuse", T, 2)
            .unwrap();
        l.deny(b"b", None, b"", T, 2).unwrap();
        assert!(l.get(b"a", T).is_some());
        assert!(l.get(b"a", Micros::new(2_000_000)).is_none());
        assert!(l.get(b"b", Micros::MAX).is_some());
        assert!(l.remove(b"b"));
        assert!(!l.remove(b"b"));
        l.expire(Micros::new(2_000_000), 10);
        assert!(l.is_empty());
        assert!(l.by_seq.is_empty() && l.by_end.is_empty());
    }

    #[test]
    fn the_bound_refuses_a_new_key_after_ended_ones_go() {
        let mut l = DenyList::default();
        l.deny(b"a", Some(Micros::new(1_500_000)), b"", T, 2)
            .unwrap();
        l.deny(b"b", None, b"", T, 2).unwrap();
        assert_eq!(
            l.deny(b"c", None, b"", T, 2),
            Err(Error::TooManyDenied { max: 2 })
        );
        // Denying a listed key again replaces it, within the bound.
        l.deny(b"b", None, b"again", T, 2).unwrap();
        // Once `a` has ended there is room.
        l.deny(b"c", None, b"", Micros::new(1_500_000), 2).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(
            l.deny(b"d", None, &[b'x'; MAX_REASON + 1], T, 2),
            Err(Error::DenyReason { max: MAX_REASON })
        );
    }

    #[test]
    fn a_scan_lists_each_key_once_in_pages() {
        let mut l = DenyList::default();
        for i in 0..25u32 {
            l.deny(format!("k{i}").as_bytes(), None, b"r", T, 100)
                .unwrap();
        }
        // One ended: not listed.
        l.deny(b"gone", Some(T), b"", T, 100).unwrap();
        let (mut cursor, mut seen) = (0, Vec::new());
        loop {
            let (next, page) = l.scan(cursor, 10, T);
            assert!(page.len() <= 10);
            seen.extend(page.into_iter().map(|e| e.0));
            if next == 0 {
                break;
            }
            cursor = next;
        }
        assert_eq!(seen.len(), 25);
        let (_, first) = l.scan(0, 10, T);
        assert_eq!(first.len(), 10);
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 25);
    }

    #[test]
    fn the_encoding_round_trips_and_refuses_corruption() {
        let mut l = DenyList::default();
        l.deny(b"a", Some(Micros::new(5)), b"why", Micros::ZERO, 9)
            .unwrap();
        l.deny(b"", None, b"", Micros::ZERO, 9).unwrap();
        let bytes = l.encode();
        let back = decode(&bytes).unwrap();
        assert_eq!(
            back,
            vec![
                (b"a".to_vec(), Some(Micros::new(5)), b"why".to_vec()),
                (Vec::new(), None, Vec::new()),
            ]
        );
        assert!(decode(&bytes[..bytes.len() - 1]).is_none());
        assert!(decode(&[2]).is_none());
        assert_eq!(decode(&[ENCODING]), Some(Vec::new()));
    }
}
