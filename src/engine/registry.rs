//! Named policies: the server's registry of limits defined once
//! (`RL.POLICY SET`) and decided by name (`RL.CHECK`, `POLICY name` in
//! RL.ALL and RL.PEEK). Pure: the registry keeps each definition's
//! canonical text and its parsed [`Policy`], so a call by name is one hash
//! look-up and no parsing. The server shell saves it in the RDB
//! (`encode`/`decode`) and replicates the commands that change it.

use crate::algorithm::Micros;
use crate::bounds::{MAX_POLICIES, MAX_POLICY_NAME};
use crate::engine::error::{printable, Error};
use crate::engine::topk::TopDenied;
use crate::engine::Verdict;
use crate::policy::Policy;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

/// One named policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The definition as `RL.POLICY GET` returns it: the policy's words,
    /// keywords in upper case, numbers and durations in one form (`60s` is
    /// `1m`), then `SHADOW` if marked: equal policies, equal text.
    pub definition: Vec<u8>,
    pub limits: Limits,
    /// Decides and charges as if enforced, but always admits.
    pub shadow: bool,
    /// Its denials' waits are spread, as with `JITTER`.
    pub jitter: bool,
    /// What its denials cost their keys (`BLOCK` or `COUNTDENIALS`).
    pub penalty: Option<crate::engine::Penalty>,
    /// The algorithm's keyword (`GCRA`), as errors name it.
    pub keyword: &'static str,
    /// Common options the policy's algorithm does not take.
    pub refuses: &'static [&'static str],
}

/// What a name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limits {
    /// One limit (`GCRA 100 1m`), decided on one key (RL.CHECK, `POLICY
    /// name` in RL.ALL and RL.PEEK).
    One(Policy),
    /// A path of RL.SHARE nodes, leaf first (`SHARE node [node ...]`),
    /// decided on as many keys (`RL.SHARE numkeys key ... POLICY name`).
    Path(Arc<[Policy]>),
}

impl Limits {
    /// The nodes of a path; none for one limit.
    pub fn nodes(&self) -> usize {
        match self {
            Limits::One(_) => 0,
            Limits::Path(nodes) => nodes.len(),
        }
    }
}

/// What the calls through one node of a named path did: `allowed` and
/// `denied` as the node's own answer in the reply (whether the leaf's
/// request could pass it), `blocked` the denials whose wait it set
/// (`blocked_by`), `lent` the admissions that used its assured rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    pub allowed: u64,
    pub denied: u64,
    pub blocked: u64,
    pub lent: u64,
}

/// What the calls naming one policy did on this server: RL.CHECK, and
/// `POLICY name` in RL.ALL, once per use (RL.PEEK, a look, is not counted).
/// Not saved, not replicated; kept while the name is defined, across
/// redefinitions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyStats {
    pub calls: u64,
    pub allowed: u64,
    /// Denied calls; in RL.ALL, where all limits answer together, the call
    /// is denied whichever limit denied it.
    pub denied: u64,
    /// Admitted by a SHADOW policy that enforcing would have denied.
    pub shadow_denied: u64,
    /// Calls that waited (`WAIT`): counted here, not as allowed or denied.
    pub waits: u64,
    /// Denied calls the deny list denied (counted in `denied` too).
    pub deny_listed: u64,
    /// The keys this policy's own decision denied most (shadow denials
    /// included).
    pub top_denied: TopDenied,
    /// A path's counts per node, leaf first (empty for one limit); a node
    /// keeps its counts by its place in the path across redefinitions.
    pub nodes: Vec<NodeStats>,
}

impl PolicyStats {
    /// Counts one use: `denied_key` is the key this policy's own decision
    /// denied, counted among the top denied keys.
    pub fn record(&mut self, verdict: Verdict, denied_key: Option<&[u8]>, now: Micros) {
        self.calls += 1;
        match verdict {
            Verdict::Allowed | Verdict::Other => self.allowed += 1,
            Verdict::Waiting => self.waits += 1,
            Verdict::Denied => self.denied += 1,
            Verdict::ShadowDenied => {
                self.allowed += 1;
                self.shadow_denied += 1;
            }
        }
        if let Some(key) = denied_key {
            self.top_denied.add(key, now);
        }
    }

    /// Counts one decided call through a path's nodes: each node's answer
    /// (`allowed[i]`), the node that set a denial's wait, the node that
    /// lent an admission's rate.
    pub fn record_nodes(
        &mut self,
        allowed: impl Iterator<Item = bool>,
        blocked_by: Option<usize>,
        lender: Option<usize>,
    ) {
        for (node, allowed) in self.nodes.iter_mut().zip(allowed) {
            if allowed {
                node.allowed += 1;
            } else {
                node.denied += 1;
            }
        }
        if let Some(node) = blocked_by.and_then(|i| self.nodes.get_mut(i)) {
            node.blocked += 1;
        }
        if let Some(node) = lender.and_then(|i| self.nodes.get_mut(i)) {
            node.lent += 1;
        }
    }

    /// Adds `other`'s counts (not its keys): the server's totals.
    fn add_counts(&mut self, other: &PolicyStats) {
        self.calls += other.calls;
        self.allowed += other.allowed;
        self.denied += other.denied;
        self.shadow_denied += other.shadow_denied;
        self.waits += other.waits;
        self.deny_listed += other.deny_listed;
    }
}

/// FNV-1a: a call by name hashes the name once or twice, and SipHash
/// (the default) would cost more than the rest of the look-up. Not keyed:
/// only an administrator chooses the names stored, so callers cannot fill
/// the map with colliding ones.
#[derive(Debug, Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type ByName<V> = HashMap<Vec<u8>, V, BuildHasherDefault<Fnv>>;

/// One defined policy and the counts of its calls.
#[derive(Debug)]
struct Slot {
    name: Vec<u8>,
    entry: Entry,
    stats: PolicyStats,
}

impl Slot {
    /// Defines the slot's name again: its counts stay (a path's per node,
    /// by place: nodes added start at zero, nodes cut lose theirs).
    fn define(&mut self, entry: Entry) {
        self.stats
            .nodes
            .resize(entry.limits.nodes(), NodeStats::default());
        self.entry = entry;
    }
}

/// The policies in slots (at most `ratelimit.max-policies`), found by name
/// through one hash map: a call looks its policy up by name once and
/// counts itself by the slot ([`Handle`]).
#[derive(Debug, Default)]
pub struct Registry {
    by_name: ByName<usize>,
    slots: Vec<Slot>,
}

/// Where a policy looked up sits, to count the call that used it. Valid
/// until the registry next changes: within the command that looked it up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle(usize);

/// The format of [`Registry::encode`] (its first byte).
const ENCODING_VERSION: u8 = 1;

impl Registry {
    pub fn get(&self, name: &[u8]) -> Option<&Entry> {
        self.find(name).map(|(_, entry)| entry)
    }

    /// The policy `name` and where it sits, to count the call that uses it.
    pub fn find(&self, name: &[u8]) -> Option<(Handle, &Entry)> {
        self.slot_of(name)
            .map(|i| (Handle(i), &self.slots[i].entry))
    }

    fn slot_of(&self, name: &[u8]) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Checks that `name` may be defined now: its length, and room for it
    /// if it is new. Nothing changes.
    pub fn check(&self, name: &[u8]) -> Result<(), Error> {
        self.check_within(name, MAX_POLICIES.get(), MAX_POLICY_NAME.get())
    }

    fn check_within(&self, name: &[u8], max: u64, max_name: u64) -> Result<(), Error> {
        if name.is_empty() || name.len() as u64 > max_name {
            return Err(Error::PolicyName { max: max_name });
        }
        if self.slot_of(name).is_none() && self.slots.len() as u64 >= max {
            return Err(Error::TooManyPolicies { max });
        }
        Ok(())
    }

    /// Defines or redefines `name` (after [`Registry::check`]).
    pub fn set(&mut self, name: &[u8], entry: Entry) -> Result<(), Error> {
        self.check(name)?;
        match self.slot_of(name) {
            Some(i) => self.slots[i].define(entry),
            None => self.push(name.to_vec(), entry, PolicyStats::default()),
        }
        Ok(())
    }

    fn push(&mut self, name: Vec<u8>, entry: Entry, stats: PolicyStats) {
        self.by_name.insert(name.clone(), self.slots.len());
        let mut slot = Slot { name, entry, stats };
        slot.stats
            .nodes
            .resize(slot.entry.limits.nodes(), NodeStats::default());
        self.slots.push(slot);
    }

    /// Whether there was such a policy.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        let Some(i) = self.by_name.remove(name) else {
            return false;
        };
        self.slots.swap_remove(i);
        if let Some(moved) = self.slots.get(i) {
            self.by_name.insert(moved.name.clone(), i);
        }
        true
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn clear(&mut self) {
        self.by_name.clear();
        self.slots.clear();
    }

    /// Replaces every policy with `entries` (as saved: not checked against
    /// bounds lowered since, so that no saved policy is lost). The counts
    /// of names still defined stay.
    pub fn replace(&mut self, entries: Vec<(Vec<u8>, Entry)>) {
        let mut old = std::mem::take(self);
        for (name, entry) in entries {
            let stats = old
                .slot_of(&name)
                .map(|i| std::mem::take(&mut old.slots[i].stats))
                .unwrap_or_default();
            match self.slot_of(&name) {
                Some(i) => self.slots[i].define(entry),
                None => self.push(name, entry, stats),
            }
        }
    }

    /// Counts one use of the policy found at `handle`
    /// ([`PolicyStats::record`]).
    pub fn record_at(
        &mut self,
        handle: Handle,
        verdict: Verdict,
        denied_key: Option<&[u8]>,
        now: Micros,
    ) {
        if let Some(slot) = self.slots.get_mut(handle.0) {
            slot.stats.record(verdict, denied_key, now);
        }
    }

    /// The counts of the policy found at `handle`, to count a call
    /// through a path's nodes ([`PolicyStats::record_nodes`]).
    pub fn stats_at(&mut self, handle: Handle) -> Option<&mut PolicyStats> {
        self.slots.get_mut(handle.0).map(|s| &mut s.stats)
    }

    /// The counts of a defined policy (zero before its first call).
    pub fn stats(&self, name: &[u8]) -> Option<PolicyStats> {
        self.slot_of(name).map(|i| self.slots[i].stats.clone())
    }

    /// How many policies there are, and their counts summed.
    pub fn totals(&self) -> (usize, PolicyStats) {
        let mut sum = PolicyStats::default();
        for slot in &self.slots {
            sum.add_counts(&slot.stats);
        }
        (self.slots.len(), sum)
    }

    /// The `n` policies called most, most first, equal counts in name
    /// order, with their counts (not their keys): `INFO ratelimit`'s lines.
    /// Defined policies never called count 0 calls. O(policies) time and
    /// O(n) memory: candidates gather in a buffer of 2n, cut back to the
    /// best n (`select_nth_unstable_by`, O(n)) each time it fills; then the
    /// n are sorted.
    pub fn most_called(&self, n: usize) -> Vec<(&[u8], PolicyStats)> {
        if n == 0 {
            return Vec::new();
        }
        type Candidate<'a> = (u64, &'a [u8]);
        let order = |a: &Candidate, b: &Candidate| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1));
        let keep_best = |best: &mut Vec<Candidate>| {
            if best.len() > n {
                best.select_nth_unstable_by(n - 1, order);
                best.truncate(n);
            }
        };
        let cap = n.saturating_mul(2);
        let mut best: Vec<Candidate> = Vec::with_capacity(cap.min(self.slots.len()));
        for slot in &self.slots {
            best.push((slot.stats.calls, slot.name.as_slice()));
            if best.len() >= cap {
                keep_best(&mut best);
            }
        }
        keep_best(&mut best);
        best.sort_unstable_by(order);
        best.into_iter()
            .map(|(_, name)| {
                let mut counts = PolicyStats::default();
                if let Some(i) = self.slot_of(name) {
                    counts.add_counts(&self.slots[i].stats);
                }
                (name, counts)
            })
            .collect()
    }

    /// The names matching the glob `pattern` (all without one), sorted.
    pub fn names(&self, pattern: Option<&[u8]>) -> Vec<&[u8]> {
        let mut names: Vec<&[u8]> = self
            .slots
            .iter()
            .map(|s| s.name.as_slice())
            .filter(|n| pattern.is_none_or(|p| glob_match(p, n)))
            .collect();
        names.sort_unstable();
        names
    }

    /// The definitions in name order: what the digest and the RDB hold.
    fn sorted(&self) -> Vec<(&[u8], &Entry)> {
        let mut all: Vec<(&[u8], &Entry)> = self
            .slots
            .iter()
            .map(|s| (s.name.as_slice(), &s.entry))
            .collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all
    }

    /// A 64-bit FNV-1a hash of the canonical form (every name and
    /// definition, in name order), in 16 hex digits: equal on two servers
    /// when they hold the same policies, however they were written.
    pub fn digest(&self) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for b in bytes {
                hash ^= u64::from(*b);
                hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        for (name, entry) in self.sorted() {
            feed(&(name.len() as u64).to_be_bytes());
            feed(name);
            feed(&(entry.definition.len() as u64).to_be_bytes());
            feed(&entry.definition);
        }
        format!("{hash:016x}")
    }

    /// Every name, in no order (a copy: O(policies), no sorting).
    pub fn owned_names(&self) -> Vec<Vec<u8>> {
        self.slots.iter().map(|s| s.name.clone()).collect()
    }

    /// Every name and definition in a versioned byte string (the RDB's
    /// auxiliary data): version, then per policy the name and definition,
    /// each a 4-byte big-endian length and the bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![ENCODING_VERSION];
        for (name, entry) in self.sorted() {
            for part in [name, entry.definition.as_slice()] {
                out.extend_from_slice(&(part.len() as u32).to_be_bytes());
                out.extend_from_slice(part);
            }
        }
        out
    }
}

/// The names and definitions of an [`Registry::encode`]d registry; `None`
/// when the bytes are not one.
pub fn decode(mut bytes: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let (&version, rest) = bytes.split_first()?;
    if version != ENCODING_VERSION {
        return None;
    }
    bytes = rest;
    let mut take = || -> Option<Vec<u8>> {
        let len = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        let part = bytes.get(4..4 + len)?.to_vec();
        bytes = &bytes[4 + len..];
        Some(part)
    };
    let mut out = Vec::new();
    while let Some(name) = take() {
        out.push((name, take()?));
    }
    bytes.is_empty().then_some(out)
}

/// Redis-style glob: `*`, `?`, `[abc]`, `[^a-z]` and `\\` escapes.
/// Iterative, returning to the last `*` on a mismatch: at most
/// (pattern + 1) × (text + 1) steps and no recursion, whatever the pattern
/// (a caller's `*a*a*a…b` or a million `*`).
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    glob_steps(pattern, text).0
}

/// [`glob_match`] and the steps it took.
fn glob_steps(pattern: &[u8], text: &[u8]) -> (bool, usize) {
    let (mut p, mut t, mut steps) = (0, 0, 0);
    // Where the pattern goes on after the last `*`, and the text position
    // that `*` has swallowed up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        steps += 1;
        if pattern.get(p) == Some(&b'*') {
            p += 1;
            star = Some((p, t));
            continue;
        }
        if let Some(next) = one_char(pattern, p, text[t]) {
            p = next;
            t += 1;
            continue;
        }
        match star {
            Some((after, swallowed)) => {
                star = Some((after, swallowed + 1));
                p = after;
                t = swallowed + 1;
            }
            None => return (false, steps),
        }
    }
    (pattern[p..].iter().all(|&b| b == b'*'), steps)
}

/// Where the pattern token at `p` ends if it matches the character `c`.
fn one_char(pattern: &[u8], p: usize, c: u8) -> Option<usize> {
    let rest = pattern.get(p + 1..)?;
    match pattern[p] {
        b'?' => Some(p + 1),
        b'[' => {
            let Some(end) = rest.iter().position(|&b| b == b']') else {
                return (c == b'[').then_some(p + 1);
            };
            let class = &rest[..end];
            let (negate, class) = match class.split_first() {
                Some((b'^', inner)) => (true, inner),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == b'-' {
                    hit |= class[i] <= c && c <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == c;
                    i += 1;
                }
            }
            (hit != negate).then_some(p + 1 + end + 1)
        }
        b'\\' if !rest.is_empty() => (rest[0] == c).then_some(p + 2),
        literal => (literal == c).then_some(p + 1),
    }
}

/// The first of `names` that is defined: its entry and where it sits. The
/// error names the one name, or all of them.
pub fn first_defined<'r, A: AsRef<[u8]>>(
    registry: &'r Registry,
    names: &[A],
) -> Result<(Handle, &'r Entry), Error> {
    if let Some(found) = names.iter().find_map(|n| registry.find(n.as_ref())) {
        return Ok(found);
    }
    let quoted: Vec<String> = names
        .iter()
        .map(|n| format!("'{}'", printable(n.as_ref())))
        .collect();
    Err(match quoted.as_slice() {
        [one] => Error::NoSuchPolicy(one.trim_matches('\'').to_string()),
        _ => Error::NoPolicyOfChain(quoted.join(", ")),
    })
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns named policies on (the server saves them: `policies on`).
pub fn enable() {
    ENABLED.store(true, Relaxed);
}

/// Whether named policies are on; an error saying how to turn them on.
pub fn enabled() -> Result<(), Error> {
    if ENABLED.load(Relaxed) {
        Ok(())
    } else {
        Err(Error::PoliciesOff)
    }
}

/// The server's registry (commands run one at a time: never contended).
pub fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut guard: MutexGuard<Option<Registry>> =
        REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(Registry::default))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::fixed_window::FixedWindow;

    fn entry(text: &str) -> Entry {
        Entry {
            definition: text.as_bytes().to_vec(),
            limits: Limits::One(Policy::Fixed(FixedWindow::new(
                10,
                Micros::new(1_000_000),
                false,
            ))),
            shadow: false,
            jitter: false,
            penalty: None,
            keyword: "FIXED",
            refuses: &[],
        }
    }

    #[test]
    fn set_get_remove_and_list() {
        let mut r = Registry::default();
        r.set(b"plan:free", entry("FIXED 10 1s")).unwrap();
        r.set(b"plan:pro", entry("FIXED 100 1s")).unwrap();
        r.set(b"cust:1", entry("FIXED 5 1s")).unwrap();
        assert_eq!(r.get(b"plan:pro").unwrap().definition, b"FIXED 100 1s");
        assert_eq!(r.names(None), [&b"cust:1"[..], b"plan:free", b"plan:pro"]);
        assert_eq!(r.names(Some(b"plan:*")), [&b"plan:free"[..], b"plan:pro"]);
        assert_eq!(r.names(Some(b"cust:?")), [&b"cust:1"[..]]);
        assert!(r.remove(b"cust:1"));
        assert!(!r.remove(b"cust:1"));
        assert_eq!(r.slots.len(), 2);
    }

    #[test]
    fn bounds_refuse_and_change_nothing() {
        let mut r = Registry::default();
        let check = |r: &Registry, name: &[u8]| r.check_within(name, 1, 4);
        assert_eq!(
            check(&r, b"toolong").unwrap_err().to_string(),
            "ERR policy name must be 1 to 4 bytes (ratelimit.max-policy-name)"
        );
        assert!(check(&r, b"").is_err());
        r.set(b"a", entry("x")).unwrap();
        assert_eq!(
            check(&r, b"b").unwrap_err().to_string(),
            "ERR too many policies: at most 1 (ratelimit.max-policies)"
        );
        // Redefining an existing name needs no room.
        assert!(check(&r, b"a").is_ok());
    }

    #[test]
    fn encoding_round_trips_and_digest_follows_content() {
        let mut r = Registry::default();
        r.set(b"b", entry("FIXED 1 1s")).unwrap();
        r.set(b"a", entry("GCRA 2 1s")).unwrap();
        let decoded = decode(&r.encode()).unwrap();
        assert_eq!(
            decoded,
            [
                (b"a".to_vec(), b"GCRA 2 1s".to_vec()),
                (b"b".to_vec(), b"FIXED 1 1s".to_vec())
            ]
        );
        assert_eq!(decode(&[ENCODING_VERSION]), Some(vec![]));
        assert_eq!(decode(&[9]), None);
        assert_eq!(decode(&r.encode()[..5]), None);
        let before = r.digest();
        assert_eq!(before.len(), 16);
        r.set(b"b", entry("FIXED 2 1s")).unwrap();
        assert_ne!(r.digest(), before);
        r.set(b"b", entry("FIXED 1 1s")).unwrap();
        assert_eq!(r.digest(), before);
    }

    #[test]
    fn the_first_defined_name_of_a_chain_applies() {
        let mut r = Registry::default();
        r.set(b"plan", entry("FIXED 1 1s")).unwrap();
        let (handle, entry) = first_defined(&r, &["cust", "plan"]).unwrap();
        assert_eq!(entry.definition, b"FIXED 1 1s");
        r.record_at(handle, Verdict::Allowed, None, Micros::new(1));
        assert_eq!(r.stats(b"plan").unwrap().calls, 1);
        assert_eq!(
            first_defined(&r, &["x"]).unwrap_err().to_string(),
            "ERR no policy named 'x'"
        );
        assert_eq!(
            first_defined(&r, &["x", "y"]).unwrap_err().to_string(),
            "ERR none of the policies 'x', 'y' is defined"
        );
    }

    /// Counts one use of `name`, if it is defined.
    fn record(r: &mut Registry, name: &[u8], verdict: Verdict, key: Option<&[u8]>, now: Micros) {
        if let Some((handle, _)) = r.find(name) {
            r.record_at(handle, verdict, key, now);
        }
    }

    #[test]
    fn counts_follow_the_name() {
        let mut r = Registry::default();
        let now = Micros::new(1);
        r.set(b"p", entry("FIXED 1 1s")).unwrap();
        record(&mut r, b"p", Verdict::Allowed, None, now);
        record(&mut r, b"p", Verdict::Denied, Some(b"k"), now);
        record(&mut r, b"p", Verdict::ShadowDenied, Some(b"j"), now);
        record(&mut r, b"p", Verdict::Waiting, None, now);
        // Denied in RL.ALL by another limit: not among this one's keys.
        record(&mut r, b"p", Verdict::Denied, None, now);
        record(&mut r, b"gone", Verdict::Allowed, None, now);
        let s = r.stats(b"p").unwrap();
        let counts = (s.calls, s.allowed, s.denied, s.shadow_denied, s.waits);
        assert_eq!(counts, (5, 2, 2, 1, 1));
        assert_eq!(s.top_denied.top(now, 10).len(), 2);
        assert_eq!(r.stats(b"gone"), None);
        // Redefined, the counts stay; deleted and defined again, they start over.
        r.set(b"p", entry("FIXED 2 1s")).unwrap();
        assert_eq!(r.stats(b"p").unwrap().calls, 5);
        assert_eq!(r.totals().1.calls, 5);
        r.remove(b"p");
        r.set(b"p", entry("FIXED 2 1s")).unwrap();
        assert_eq!(r.stats(b"p").unwrap().calls, 0);
    }

    /// An entry standing for a path of `n` nodes.
    fn path(n: usize) -> Entry {
        let Limits::One(node) = entry("x").limits else {
            unreachable!()
        };
        Entry {
            limits: Limits::Path(vec![node; n].into()),
            ..entry("SHARE ...")
        }
    }

    #[test]
    fn a_path_counts_per_node_by_place() {
        let mut r = Registry::default();
        r.set(b"p", path(2)).unwrap();
        let (handle, _) = r.find(b"p").unwrap();
        let stats = r.stats_at(handle).unwrap();
        // Admitted on the leaf's own rate; denied with the root's wait.
        stats.record_nodes([true, false].into_iter(), None, Some(0));
        stats.record_nodes([false, false].into_iter(), Some(1), None);
        let node = |allowed, denied, blocked, lent| NodeStats {
            allowed,
            denied,
            blocked,
            lent,
        };
        assert_eq!(
            r.stats(b"p").unwrap().nodes,
            [node(1, 1, 0, 1), node(0, 2, 1, 0)]
        );
        // Redefined with three nodes: the first two keep theirs.
        r.set(b"p", path(3)).unwrap();
        let nodes = r.stats(b"p").unwrap().nodes;
        assert_eq!(nodes[..2], [node(1, 1, 0, 1), node(0, 2, 1, 0)]);
        assert_eq!(nodes[2], NodeStats::default());
        // A single limit has none.
        r.set(b"p", entry("FIXED 1 1s")).unwrap();
        assert!(r.stats(b"p").unwrap().nodes.is_empty());
        r.set(b"q", path(2)).unwrap();
        // Loaded from a save, the counts of a path still defined stay.
        let (handle, _) = r.find(b"q").unwrap();
        if let Some(stats) = r.stats_at(handle) {
            stats.record_nodes([true, true].into_iter(), None, Some(1));
        }
        r.replace(vec![(b"q".to_vec(), path(2))]);
        assert_eq!(r.stats(b"q").unwrap().nodes[1], node(1, 0, 0, 1));
    }

    #[test]
    fn most_called_are_the_true_top_n_in_order() {
        let mut r = Registry::default();
        let now = Micros::new(1);
        // 1,000 policies, policy i called (i * 7919) % 101 times: many ties.
        let calls = |i: u64| (i * 7919) % 101;
        for i in 0..1_000u64 {
            let name = format!("p{i:04}");
            r.set(name.as_bytes(), entry("FIXED 1 1s")).unwrap();
            for _ in 0..calls(i) {
                record(&mut r, name.as_bytes(), Verdict::Denied, None, now);
            }
        }
        let mut want: Vec<(u64, String)> =
            (0..1_000).map(|i| (calls(i), format!("p{i:04}"))).collect();
        want.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for n in [0, 1, 7, 100, 999, 1_000, 5_000] {
            let got: Vec<(u64, String)> = r
                .most_called(n)
                .into_iter()
                .map(|(name, s)| {
                    assert_eq!(s.denied, s.calls);
                    (s.calls, String::from_utf8(name.to_vec()).unwrap())
                })
                .collect();
            assert_eq!(got, want[..n.min(1_000)], "n = {n}");
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"a[bc]d", b"acd"));
        assert!(!glob_match(b"a[^bc]d", b"acd"));
        assert!(glob_match(b"a[0-9]", b"a5"));
        assert!(glob_match(b"a\\*", b"a*"));
        assert!(!glob_match(b"a\\*", b"ab"));
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"a*b?c", b"axxbyc"));
        assert!(!glob_match(b"a*b?c", b"axxbc"));
        assert!(glob_match(b"[", b"["));
        assert!(glob_match(b"\\", b"\\"));
    }

    /// The recursive definition the iterative match must agree with.
    fn reference(pattern: &[u8], text: &[u8]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some((b'*', rest)) => (0..=text.len()).any(|i| reference(rest, &text[i..])),
            Some(_) => match text.split_first() {
                Some((&c, tail)) => {
                    one_char(pattern, 0, c).is_some_and(|next| reference(&pattern[next..], tail))
                }
                None => false,
            },
        }
    }

    #[test]
    fn globs_agree_with_the_recursive_definition() {
        let alphabet = [b'a', b'b', b'*', b'?', b'[', b']', b'^', b'-', b'\\'];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..20_000 {
            let pattern: Vec<u8> = (0..next(8))
                .map(|_| alphabet[next(alphabet.len())])
                .collect();
            let text: Vec<u8> = (0..next(8)).map(|_| alphabet[next(4)]).collect();
            assert_eq!(
                glob_match(&pattern, &text),
                reference(&pattern, &text),
                "{:?} {:?}",
                String::from_utf8_lossy(&pattern),
                String::from_utf8_lossy(&text)
            );
        }
    }

    #[test]
    fn a_hostile_glob_takes_at_most_pattern_times_text_steps() {
        let name = [b'a'; 256];
        let mut stars = b"*a".repeat(40);
        stars.push(b'b');
        let (hit, steps) = glob_steps(&stars, &name);
        assert!(!hit);
        assert!(steps <= (stars.len() + 1) * (name.len() + 1), "{steps}");
        // A million stars: no recursion, so no stack to run out of.
        let many = vec![b'*'; 1_000_000];
        let (hit, steps) = glob_steps(&many, &name);
        assert!(hit);
        assert!(steps <= many.len() + name.len(), "{steps}");
    }
}
