//! Ordered maps and sets for the lines of the queue, most of which hold
//! one entry (a waiter alone on its key, one flow in a line): one entry is
//! held inline; a boxed `BTreeMap` (whose first node has room for eleven;
//! boxed, so that the inline form is as small as its entry) holds two or
//! more, and gives its last entry back inline. Each step costs what the
//! `BTreeMap`'s costs, and going from one form to the other O(1).

use std::collections::btree_map::{self, BTreeMap};
use std::ops::RangeBounds;

/// An ordered map holding one entry without allocating.
#[derive(Debug, Clone, Default)]
pub enum LeanMap<K, V> {
    #[default]
    Empty,
    One(K, V),
    // Boxed: a `BTreeMap` inline would make every map 8 to 16 bytes
    // larger than its one entry needs (measured per waiter).
    #[allow(clippy::box_collection)]
    Many(Box<BTreeMap<K, V>>),
}

impl<K: Ord, V> LeanMap<K, V> {
    pub fn len(&self) -> usize {
        match self {
            LeanMap::Empty => 0,
            LeanMap::One(..) => 1,
            LeanMap::Many(map) => map.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts `value` at `key`; the value it replaces.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self {
            LeanMap::Empty => {
                *self = LeanMap::One(key, value);
                None
            }
            LeanMap::One(k, v) if *k == key => Some(std::mem::replace(v, value)),
            LeanMap::One(..) => {
                if let LeanMap::One(k, v) = std::mem::take(self) {
                    *self = LeanMap::Many(Box::new(BTreeMap::from([(k, v), (key, value)])));
                }
                None
            }
            LeanMap::Many(map) => map.insert(key, value),
        }
    }

    /// Removes `key`'s entry; its value.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        match self {
            LeanMap::One(k, _) if k == key => match std::mem::take(self) {
                LeanMap::One(_, v) => Some(v),
                _ => None,
            },
            LeanMap::Many(map) => {
                let removed = map.remove(key);
                self.settle();
                removed
            }
            _ => None,
        }
    }

    /// Removes the first entry.
    pub fn pop_first(&mut self) -> Option<(K, V)> {
        match self {
            LeanMap::Empty => None,
            LeanMap::One(..) => match std::mem::take(self) {
                LeanMap::One(k, v) => Some((k, v)),
                _ => None,
            },
            LeanMap::Many(map) => {
                let first = map.pop_first();
                self.settle();
                first
            }
        }
    }

    /// A map of one entry or none gives its node up.
    fn settle(&mut self) {
        if let LeanMap::Many(map) = self {
            if map.len() <= 1 {
                *self = match map.pop_first() {
                    Some((k, v)) => LeanMap::One(k, v),
                    None => LeanMap::Empty,
                };
            }
        }
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        match self {
            LeanMap::One(k, v) if k == key => Some(v),
            LeanMap::Many(map) => map.get(key),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        match self {
            LeanMap::One(k, v) if k == key => Some(v),
            LeanMap::Many(map) => map.get_mut(key),
            _ => None,
        }
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    pub fn first_key_value(&self) -> Option<(&K, &V)> {
        match self {
            LeanMap::Empty => None,
            LeanMap::One(k, v) => Some((k, v)),
            LeanMap::Many(map) => map.first_key_value(),
        }
    }

    /// The entries in key order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        self.range(..)
    }

    /// The entries whose keys lie in `range`, in key order (as
    /// `BTreeMap::range`, which panics on a range that ends before it
    /// starts: none of the queue's does).
    pub fn range<R: RangeBounds<K>>(&self, range: R) -> Iter<'_, K, V> {
        match self {
            LeanMap::Empty => Iter::One(None),
            LeanMap::One(k, v) => Iter::One(range.contains(k).then_some((k, v))),
            LeanMap::Many(map) => Iter::Many(map.range(range)),
        }
    }
}

/// The entries of a [`LeanMap`], in key order.
pub enum Iter<'a, K, V> {
    One(Option<(&'a K, &'a V)>),
    Many(btree_map::Range<'a, K, V>),
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::One(one) => one.take(),
            Iter::Many(range) => range.next(),
        }
    }
}

impl<K, V> DoubleEndedIterator for Iter<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::One(one) => one.take(),
            Iter::Many(range) => range.next_back(),
        }
    }
}

/// An ordered set holding one element without allocating.
#[derive(Debug, Clone)]
pub struct LeanSet<T>(LeanMap<T, ()>);

impl<T> Default for LeanSet<T> {
    fn default() -> Self {
        LeanSet(LeanMap::Empty)
    }
}

impl<T: Ord> LeanSet<T> {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `value` was not in the set.
    pub fn insert(&mut self, value: T) -> bool {
        self.0.insert(value, ()).is_none()
    }

    /// Whether `value` was in the set.
    pub fn remove(&mut self, value: &T) -> bool {
        self.0.remove(value).is_some()
    }

    pub fn first(&self) -> Option<&T> {
        self.0.first_key_value().map(|(k, _)| k)
    }

    /// Removes the first element.
    pub fn pop_first(&mut self) -> Option<T> {
        self.0.pop_first().map(|(k, _)| k)
    }

    /// The elements in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The elements in `range`, in order.
    pub fn range<R: RangeBounds<T>>(&self, range: R) -> impl Iterator<Item = &T> {
        self.0.range(range).map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Whatever the steps, it holds what a `BTreeMap` holds, and
        /// allocates nothing for one entry.
        #[test]
        fn it_is_a_btree_map(steps in proptest::collection::vec((0u8..4, 0u64..6), 0..60)) {
            let (mut lean, mut map) = (LeanMap::default(), BTreeMap::new());
            for (op, key) in steps {
                match op {
                    0 => prop_assert_eq!(lean.insert(key, key * 10), map.insert(key, key * 10)),
                    1 => prop_assert_eq!(lean.remove(&key), map.remove(&key)),
                    2 => prop_assert_eq!(lean.pop_first(), map.pop_first()),
                    _ => {
                        if let Some(v) = lean.get_mut(&key) {
                            *v += 1;
                        }
                        if let Some(v) = map.get_mut(&key) {
                            *v += 1;
                        }
                    }
                }
                prop_assert_eq!(lean.len(), map.len());
                prop_assert_eq!(lean.is_empty(), map.is_empty());
                prop_assert_eq!(lean.first_key_value(), map.first_key_value());
                prop_assert_eq!(lean.get(&key), map.get(&key));
                prop_assert_eq!(lean.contains_key(&key), map.contains_key(&key));
                prop_assert!(lean.iter().eq(map.iter()));
                prop_assert!(lean.range(key..).eq(map.range(key..)));
                prop_assert_eq!(lean.range(..=key).next_back(), map.range(..=key).next_back());
                prop_assert_eq!(matches!(lean, LeanMap::Many(_)), map.len() > 1);
            }
        }

        #[test]
        fn the_set_is_a_btree_set(steps in proptest::collection::vec((0u8..3, 0u64..6), 0..60)) {
            let (mut lean, mut set) = (LeanSet::default(), BTreeSet::new());
            for (op, value) in steps {
                match op {
                    0 => prop_assert_eq!(lean.insert(value), set.insert(value)),
                    1 => prop_assert_eq!(lean.remove(&value), set.remove(&value)),
                    _ => prop_assert_eq!(lean.pop_first(), set.pop_first()),
                }
                prop_assert_eq!(lean.len(), set.len());
                prop_assert_eq!(lean.is_empty(), set.is_empty());
                prop_assert_eq!(lean.first(), set.first());
                prop_assert!(lean.iter().eq(set.iter()));
                prop_assert!(lean.range(..=value).eq(set.range(..=value)));
            }
        }
    }
}
