//! The line of each key with waiters, by key: a hash table of one pointer
//! per slot, the key kept beside its line (a table's slots are about half
//! empty after it grows, so a slot holding the key and a pointer would
//! cost five times as much). The table is given back when the last line
//! leaves.

use super::Line;
use hashbrown::HashTable;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash};

/// A key and its line.
struct Keyed<K> {
    key: K,
    line: Line,
}

pub struct Lines<K> {
    table: HashTable<Box<Keyed<K>>>,
    hasher: RandomState,
}

impl<K> Default for Lines<K> {
    fn default() -> Self {
        Lines {
            table: HashTable::new(),
            hasher: RandomState::new(),
        }
    }
}

impl<K: Eq + Hash> Lines<K> {
    pub fn get(&self, key: &K) -> Option<&Line> {
        let hash = self.hasher.hash_one(key);
        self.table.find(hash, |k| k.key == *key).map(|k| &k.line)
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut Line> {
        let hash = self.hasher.hash_one(key);
        self.table
            .find_mut(hash, |k| k.key == *key)
            .map(|k| &mut k.line)
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// Puts `line` in as `key`'s (in place of the one it had).
    pub fn insert(&mut self, key: K, line: Line) {
        if let Some(had) = self.get_mut(&key) {
            *had = line;
            return;
        }
        let hash = self.hasher.hash_one(&key);
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, Box::new(Keyed { key, line }), |k| {
                hasher.hash_one(&k.key)
            });
    }

    /// Takes `key`'s line out.
    pub fn remove(&mut self, key: &K) -> Option<Line> {
        let hash = self.hasher.hash_one(key);
        let entry = self.table.find_entry(hash, |k| k.key == *key).ok()?;
        let (keyed, _) = entry.remove();
        if self.table.is_empty() {
            // Frees the table: as many lines joined as it has room for.
            let hasher = &self.hasher;
            self.table.shrink_to_fit(|k| hasher.hash_one(&k.key));
        }
        Some(keyed.line)
    }
}
