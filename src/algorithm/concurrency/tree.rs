//! The held leases of a key as an AVL tree ordered by deadline, stored in
//! the key's own slots: each slot links to its parent and children and
//! keeps the height and the units of its subtree. The units held at a
//! time, the time by which a given number of units will have expired, the
//! earliest and latest deadlines are then each one walk from the root, and
//! an insertion or removal one walk back up: O(height), at most
//! 1.44·log2(n + 2) for n slots, whatever deadlines the clients choose,
//! and the same on every server given the same commands.
//!
//! A [`Tree`] reads slots through [`Leases`] and keeps the slots it touched
//! in memory; a write takes exactly those it changed.

use super::{Header, Leases, Slot};
use crate::algorithm::Micros;

/// A link to a slot: its index plus one; 0 is none.
pub type Link = u32;

pub fn link(index: usize) -> Link {
    index as Link + 1
}

pub struct Tree<'a, L: Leases + ?Sized> {
    base: &'a L,
    pub header: Header,
    /// Slots read or written: the value and whether it changed.
    touched: Touched,
    /// Reads left before every read answers an empty leaf: a corrupt value
    /// whose links loop still ends every walk.
    budget: u64,
}

/// The slots a call touched, by link: a small open-addressing table (a
/// call touches some tens of slots).
#[derive(Default)]
struct Touched {
    /// Link, value, changed.
    slots: Vec<(Link, Slot, bool)>,
    /// Positions in `slots` plus one, 0 for empty; a power of two long.
    table: Vec<u32>,
}

impl Touched {
    fn home(&self, at: Link) -> usize {
        (at.wrapping_mul(0x9E37_79B1) as usize) & (self.table.len() - 1)
    }

    /// Where `at` is in `slots`, or the empty table cell it would take.
    fn find(&self, at: Link) -> Result<usize, usize> {
        if self.table.is_empty() {
            return Err(usize::MAX);
        }
        let mut cell = self.home(at);
        loop {
            match self.table[cell] {
                0 => return Err(cell),
                i if self.slots[i as usize - 1].0 == at => return Ok(i as usize - 1),
                _ => cell = (cell + 1) & (self.table.len() - 1),
            }
        }
    }

    fn add(&mut self, cell: usize, at: Link, slot: Slot, changed: bool) {
        self.slots.push((at, slot, changed));
        if self.slots.len() * 2 > self.table.len() {
            self.table = vec![0; (self.table.len() * 2).max(64)];
            for (i, s) in self.slots.iter().enumerate() {
                let mut c = self.home(s.0);
                while self.table[c] != 0 {
                    c = (c + 1) & (self.table.len() - 1);
                }
                self.table[c] = i as u32 + 1;
            }
        } else {
            self.table[cell] = self.slots.len() as u32;
        }
    }
}

/// Whether `a` comes before `b`: by deadline, then lease number (unique).
fn before(a: &Slot, b: &Slot) -> bool {
    (a.expiry, a.seq) < (b.expiry, b.seq)
}

impl<'a, L: Leases + ?Sized> Tree<'a, L> {
    pub fn new(header: Header, base: &'a L) -> Self {
        Tree {
            base,
            header,
            touched: Touched::default(),
            budget: 64 * (base.slots() as u64 + 16),
        }
    }

    pub fn get(&mut self, at: Link) -> Slot {
        if at == 0 || self.budget == 0 {
            return Slot::default();
        }
        self.budget -= 1;
        match self.touched.find(at) {
            Ok(i) => self.touched.slots[i].1,
            Err(hole) => {
                let slot = self.base.slot(at as usize - 1);
                self.touched.add(hole, at, slot, false);
                slot
            }
        }
    }

    /// Writes the slot at `at`: one of the key's, or the next one past
    /// them (links elsewhere, in a corrupt value, write nothing).
    pub fn set(&mut self, at: Link, slot: Slot) {
        if at == 0 || at as usize > self.base.slots() + 1 {
            return;
        }
        match self.touched.find(at) {
            Ok(i) => self.touched.slots[i] = (at, slot, true),
            Err(hole) => self.touched.add(hole, at, slot, true),
        }
    }

    /// Distinct slots read or written so far.
    pub fn touched(&self) -> u64 {
        self.touched.slots.len() as u64
    }

    /// The changed slots, by index, in the order first touched.
    pub fn changes(&self) -> Vec<(usize, Slot)> {
        self.touched
            .slots
            .iter()
            .filter(|t| t.2)
            .map(|&(at, slot, _)| (at as usize - 1, slot))
            .collect()
    }

    fn sum(&mut self, at: Link) -> u64 {
        self.get(at).sum
    }

    /// Units of every lease in the tree, expired ones included.
    pub fn total(&mut self) -> u64 {
        self.sum(self.header.root)
    }

    /// Units of the leases whose deadline is at or before `now`.
    pub fn expired_units(&mut self, now: Micros) -> u64 {
        let (mut at, mut units) = (self.header.root, 0u64);
        while at != 0 {
            let s = self.get(at);
            if s.expiry <= now {
                units = units
                    .saturating_add(s.cost)
                    .saturating_add(self.sum(s.left));
                at = s.right;
            } else {
                at = s.left;
            }
        }
        units
    }

    /// The deadline by which `units` units (counting in deadline order)
    /// will have expired; `None` if the tree holds fewer.
    pub fn expiry_of_unit(&mut self, units: u64) -> Option<Micros> {
        let (mut at, mut before_at) = (self.header.root, 0u64);
        while at != 0 {
            let s = self.get(at);
            let left = before_at.saturating_add(self.sum(s.left));
            if left >= units {
                at = s.left;
            } else if left.saturating_add(s.cost) >= units {
                return Some(s.expiry);
            } else {
                before_at = left.saturating_add(s.cost);
                at = s.right;
            }
        }
        None
    }

    /// The slot with the earliest deadline, or the latest.
    pub fn edge(&mut self, latest: bool) -> Link {
        self.edge_under(self.header.root, latest)
    }

    /// Puts the lease `slot` into the tree at `at` (a free or new slot).
    pub fn insert(&mut self, at: Link, mut slot: Slot) {
        slot.left = 0;
        slot.right = 0;
        slot.sum = slot.cost;
        slot.height = 1;
        let (mut parent, mut cur) = (0, self.header.root);
        while cur != 0 {
            let s = self.get(cur);
            parent = cur;
            cur = if before(&slot, &s) { s.left } else { s.right };
        }
        slot.parent = parent;
        self.set(at, slot);
        self.replace_child(parent, 0, at, &slot);
        self.settle_up(parent);
    }

    /// Takes the lease at `at` out of the tree; the slot itself is left
    /// for the caller to free or to insert again.
    pub fn remove(&mut self, at: Link) -> Slot {
        let s = self.get(at);
        let start = if s.left == 0 || s.right == 0 {
            // One child or none: it takes the place of `at`.
            let child = s.left | s.right;
            if child != 0 {
                let mut c = self.get(child);
                c.parent = s.parent;
                self.set(child, c);
            }
            self.replace_child(s.parent, at, child, &s);
            s.parent
        } else {
            // Two children: the next lease in order takes its place.
            let next = self.edge_under(s.right, false);
            let mut n = self.get(next);
            let start = if n.parent == at {
                next
            } else {
                let up = n.parent;
                let mut p = self.get(up);
                p.left = n.right;
                self.set(up, p);
                self.reparent(n.right, up);
                n.right = s.right;
                self.reparent(s.right, next);
                up
            };
            n.left = s.left;
            n.parent = s.parent;
            self.set(next, n);
            self.reparent(s.left, next);
            self.replace_child(s.parent, at, next, &s);
            start
        };
        self.settle_up(start);
        s
    }

    fn reparent(&mut self, child: Link, parent: Link) {
        if child != 0 {
            let mut c = self.get(child);
            c.parent = parent;
            self.set(child, c);
        }
    }

    /// The first (or last) slot of the subtree at `at`.
    fn edge_under(&mut self, mut at: Link, latest: bool) -> Link {
        loop {
            let s = self.get(at);
            let next = if latest { s.right } else { s.left };
            if next == 0 {
                return at;
            }
            at = next;
        }
    }

    fn height(&mut self, at: Link) -> i64 {
        i64::from(self.get(at).height)
    }

    /// Recomputes the height and units of `at` from its children; returns
    /// by how much its left side is taller than its right.
    fn update(&mut self, at: Link) -> i64 {
        let mut s = self.get(at);
        let (l, r) = (self.get(s.left), self.get(s.right));
        s.height = 1 + l.height.max(r.height);
        s.sum = s.cost.saturating_add(l.sum).saturating_add(r.sum);
        self.set(at, s);
        i64::from(l.height) - i64::from(r.height)
    }

    /// From `at` to the root: heights and units recomputed, and every
    /// subtree whose sides differ in height by two rotated back to balance.
    fn settle_up(&mut self, mut at: Link) {
        while at != 0 {
            let lean = self.update(at);
            if lean.abs() > 1 {
                let s = self.get(at);
                let (tall, left) = if lean > 0 {
                    (s.left, true)
                } else {
                    (s.right, false)
                };
                let t = self.get(tall);
                let (outer, inner) = if left {
                    (t.left, t.right)
                } else {
                    (t.right, t.left)
                };
                if self.height(inner) > self.height(outer) {
                    self.rotate_up(inner);
                }
                let z = self.get(at);
                let top = if left { z.left } else { z.right };
                self.rotate_up(top);
                at = top;
            }
            at = self.get(at).parent;
        }
    }

    /// Adds a free slot to the free list (linked through `left`).
    pub fn free(&mut self, at: Link) {
        let next = self.header.free;
        self.set(
            at,
            Slot {
                left: next,
                ..Slot::default()
            },
        );
        self.header.free = at;
    }

    /// Takes a slot off the free list.
    pub fn take_free(&mut self) -> Option<Link> {
        let at = self.header.free;
        if at == 0 {
            return None;
        }
        self.header.free = self.get(at).left;
        Some(at)
    }

    /// In `parent` (the root when 0), the child `old` becomes `new`
    /// (`old` 0: `new` goes where its key `slot` belongs).
    fn replace_child(&mut self, parent: Link, old: Link, new: Link, slot: &Slot) {
        if parent == 0 {
            self.header.root = new;
            return;
        }
        let mut p = self.get(parent);
        let left = if old == 0 {
            before(slot, &p)
        } else {
            p.left == old
        };
        if left {
            p.left = new;
        } else {
            p.right = new;
        }
        self.set(parent, p);
    }

    /// Rotates `child` above its parent, keeping the order, the heights
    /// and the sums.
    fn rotate_up(&mut self, child: Link) {
        let mut c = self.get(child);
        let up = c.parent;
        let mut p = self.get(up);
        let moved = if p.left == child {
            p.left = c.right;
            c.right = up;
            p.left
        } else {
            p.right = c.left;
            c.left = up;
            p.right
        };
        if moved != 0 {
            let mut m = self.get(moved);
            m.parent = up;
            self.set(moved, m);
        }
        let grand = p.parent;
        p.parent = child;
        c.parent = grand;
        self.set(up, p);
        self.set(child, c);
        self.update(up);
        self.update(child);
        if grand == 0 {
            self.header.root = child;
        } else {
            let mut g = self.get(grand);
            if g.left == up {
                g.left = child;
            } else {
                g.right = child;
            }
            self.set(grand, g);
        }
    }
}
