//! The names of the keys that have a line, as a fixed bit set of their
//! hashes: the command filter asks it about every key a key-changing
//! command names, and only a name it may hold costs more (a look in the
//! queue, in the next event-loop iteration). A name it holds by chance
//! (another name on the same bits) costs that look; a name with a line is
//! never missed. The database is not part of the hash (the filter does not
//! know the client's). Its bits are atomics only so that it can be a
//! `static` the filter reads without a thread-local look-up: only Redis's
//! main thread uses it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bits of the set the module uses: 65,536 (8 KB). Two bits per name: with
/// 100 names about 1 other name in 100,000 passes, with 1,000 about 1 in
/// 1,000, with 10,000 about 7 in 100.
pub(super) const WORDS: usize = 1024;

pub(super) struct NameBits<const N: usize> {
    bits: [AtomicU64; N],
}

impl<const N: usize> NameBits<N> {
    /// An empty set. `N` is a power of two.
    pub(super) const fn new() -> Self {
        assert!(N.is_power_of_two());
        NameBits {
            bits: [const { AtomicU64::new(0) }; N],
        }
    }

    pub(super) fn insert(&self, name: &[u8]) {
        for (word, bit) in Self::places(name) {
            let w = &self.bits[word];
            w.store(w.load(Relaxed) | bit, Relaxed);
        }
    }

    /// Whether `name` may have a line.
    pub(super) fn may_hold(&self, name: &[u8]) -> bool {
        let [(a, x), (b, y)] = Self::places(name);
        self.bits[a].load(Relaxed) & x != 0 && self.bits[b].load(Relaxed) & y != 0
    }

    pub(super) fn clear(&self) {
        for w in &self.bits {
            w.store(0, Relaxed);
        }
    }

    /// The two bits of `name`: (word, mask of the bit) each.
    fn places(name: &[u8]) -> [(usize, u64); 2] {
        let h = hash(name);
        let at = |x: u64| {
            let i = x as usize & (N * 64 - 1);
            (i / 64, 1u64 << (i % 64))
        };
        [at(h), at(h >> 32)]
    }
}

/// A fast hash of a key name, 8 bytes at a time (names are not chosen to
/// collide here: a collision costs one look in the queue).
fn hash(name: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mix = |h: u64, w: u64| (h ^ w).wrapping_mul(K).rotate_left(31);
    let read = |at: usize| {
        name.get(at..at + 8)
            .and_then(|s| <[u8; 8]>::try_from(s).ok())
            .map_or(0, u64::from_le_bytes)
    };
    let n = name.len();
    let mut h = (n as u64).wrapping_mul(K);
    if n < 8 {
        let mut w = 0u64;
        for (i, &b) in name.iter().enumerate() {
            w |= u64::from(b) << (8 * i);
        }
        h = mix(h, w);
    } else {
        let mut at = 0;
        while at + 8 <= n {
            h = mix(h, read(at));
            at += 8;
        }
        if at < n {
            // The last 8 bytes, overlapping the previous word.
            h = mix(h, read(n - 8));
        }
    }
    h ^ (h >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_inserted_name_is_held_and_few_others_pass() {
        let set = NameBits::<WORDS>::new();
        for i in 0..1000 {
            set.insert(format!("rl:user:{i}").as_bytes());
        }
        for i in 0..1000 {
            assert!(set.may_hold(format!("rl:user:{i}").as_bytes()), "{i}");
        }
        let passed = (0..100_000)
            .filter(|i| set.may_hold(format!("other:{i}").as_bytes()))
            .count();
        // Two bits of 65,536, 1,000 names: about 0.1 %.
        assert!(passed < 300, "{passed} of 100,000 passed");
        set.clear();
        assert!(!set.may_hold(b"rl:user:1"));
    }

    #[test]
    fn names_of_every_length_hash_apart_and_an_empty_set_holds_nothing() {
        let set = NameBits::<4>::new();
        assert!(!set.may_hold(b""));
        assert!(!set.may_hold(b"k"));
        set.insert(b"");
        assert!(set.may_hold(b""));
        let names: Vec<Vec<u8>> = (0..40).map(|n| vec![b'a'; n]).collect();
        let hashes: std::collections::HashSet<u64> = names.iter().map(|n| hash(n)).collect();
        assert_eq!(hashes.len(), names.len());
        // Names that differ in one byte anywhere.
        let long = b"rl:tenant:0000000000000:user".to_vec();
        for i in 0..long.len() {
            let mut other = long.clone();
            other[i] ^= 1;
            assert_ne!(hash(&other), hash(&long), "{i}");
        }
    }
}
