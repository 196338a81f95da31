use super::*;
use proptest::prelude::*;
use std::cell::RefCell;
use std::collections::HashSet;

fn s(n: u64) -> Micros {
    Micros::from_secs(n)
}

/// A key in memory: header and slots, changed as the server would.
#[derive(Default, Clone)]
struct Key {
    header: Option<Header>,
    slots: Vec<Slot>,
}

impl Key {
    fn write(&mut self, header: Header, slots: &[(usize, Slot)]) {
        self.header = Some(header);
        for &(i, s) in slots {
            if i >= self.slots.len() {
                self.slots.resize(i + 1, Slot::default());
            }
            self.slots[i] = s;
        }
    }

    fn acquire(&mut self, c: &Concurrency, now: Micros, cost: u64) -> (Decision, Option<LeaseId>) {
        let (d, grant) = c.acquire(self.header, &self.slots[..], now, cost);
        let Some(g) = grant else {
            return (d, None);
        };
        self.write(g.header, &g.slots);
        (d, Some(g.lease))
    }

    fn apply(&mut self, change: Option<SlotChange>) -> bool {
        let Some(c) = change else { return false };
        self.write(c.header, &c.slots);
        true
    }

    fn release(&mut self, id: LeaseId, now: Micros) -> bool {
        let Some(h) = self.header else { return false };
        let change = release(h, &self.slots[..], id, now);
        self.apply(change)
    }

    fn renew(&mut self, id: LeaseId, ttl: Micros, now: Micros) -> bool {
        let Some(h) = self.header else { return false };
        let change = renew(h, &self.slots[..], id, ttl, now);
        self.apply(change)
    }

    /// The tree is a search tree by (deadline, number) with correct links,
    /// sums and heights, AVL-balanced, and holds every slot not free.
    fn check(&self) {
        let Some(h) = self.header else { return };
        let at = |l: u32| self.slots[l as usize - 1];
        let mut seen = 0;
        // (link, parent, lower bound, upper bound)
        let mut stack = vec![(h.root, 0u32)];
        while let Some((l, parent)) = stack.pop() {
            if l == 0 {
                continue;
            }
            seen += 1;
            let s = at(l);
            assert!(s.cost > 0);
            assert_eq!(s.parent, parent);
            let sum = |c: u32| if c == 0 { 0 } else { at(c).sum };
            assert_eq!(s.sum, s.cost + sum(s.left) + sum(s.right));
            let height = |c: u32| if c == 0 { 0 } else { i32::from(at(c).height) };
            let (lh, rh) = (height(s.left), height(s.right));
            assert_eq!(i32::from(s.height), 1 + lh.max(rh));
            assert!((lh - rh).abs() <= 1, "balanced");
            if s.left != 0 {
                assert!((at(s.left).expiry, at(s.left).seq) < (s.expiry, s.seq));
            }
            if s.right != 0 {
                assert!((at(s.right).expiry, at(s.right).seq) > (s.expiry, s.seq));
            }
            stack.push((s.left, l));
            stack.push((s.right, l));
        }
        let mut free = 0;
        let mut f = h.free;
        while f != 0 {
            free += 1;
            assert_eq!(at(f).cost, 0);
            f = at(f).left;
        }
        assert_eq!(
            seen + free,
            self.slots.len(),
            "every slot in the tree or free"
        );
    }
}

#[test]
fn acquire_to_the_limit_then_wait_for_the_earliest_expiry() {
    let c = Concurrency::new(2, s(30));
    let mut k = Key::default();
    let (d, a) = k.acquire(&c, s(100), 1);
    assert_eq!((d.allowed, d.remaining, d.reset_after), (true, 1, s(30)));
    let (d, b) = k.acquire(&c, s(110), 1);
    assert_eq!((d.allowed, d.remaining, d.reset_after), (true, 0, s(30)));
    assert_ne!(a, b);
    let (d, none) = k.acquire(&c, s(115), 1);
    assert!(!d.allowed && none.is_none());
    // The first lease expires at 130 s.
    assert_eq!(d.retry_after, RetryAfter::After(s(15)));
    assert_eq!(d.reset_after, s(25));
    // Two units: both leases must go, the second at 140 s.
    assert_eq!(
        k.acquire(&c, s(115), 2).0.retry_after,
        RetryAfter::After(s(25))
    );
    assert_eq!(k.acquire(&c, s(115), 3).0.retry_after, RetryAfter::Never);
    // Released, a unit is free at once; a second release finds nothing.
    assert!(k.release(a.unwrap(), s(116)));
    assert!(!k.release(a.unwrap(), s(116)));
    let (d, c3) = k.acquire(&c, s(116), 1);
    assert!(d.allowed);
    assert_eq!(c3.unwrap().seq, 3);
    assert_eq!(k.slots.len(), 2, "the released slot was reused");
}

#[test]
fn a_lease_is_lost_exactly_at_its_deadline() {
    let c = Concurrency::new(1, Micros::new(1_000));
    let mut k = Key::default();
    let id = k.acquire(&c, Micros::new(10), 1).1.unwrap();
    assert!(!k.acquire(&c, Micros::new(1_009), 1).0.allowed);
    assert!(k.renew(id, Micros::new(1_000), Micros::new(1_009)));
    assert!(!k.acquire(&c, Micros::new(2_008), 1).0.allowed);
    assert!(k.acquire(&c, Micros::new(2_009), 1).0.allowed);
    assert!(!k.renew(id, Micros::new(1_000), Micros::new(2_009)));
    assert!(!k.release(id, Micros::new(2_009)));
}

#[test]
fn a_lease_of_an_earlier_life_of_the_key_names_nothing() {
    let c = Concurrency::new(3, s(1));
    let mut old = Key::default();
    let id = old.acquire(&c, s(5), 1).1.unwrap();
    let mut new = Key::default();
    let fresh = new.acquire(&c, s(7), 1).1.unwrap();
    assert_eq!((id.seq, fresh.seq), (1, 1));
    assert_ne!(id, fresh);
    assert!(!new.release(id, s(7)));
    assert!(new.release(fresh, s(7)));
}

#[test]
fn cost_zero_looks_and_the_counter_runs_out() {
    let c = Concurrency::new(1, s(1));
    let mut k = Key::default();
    let (d, id) = k.acquire(&c, s(1), 0);
    assert!(d.allowed && id.is_none() && k.header.is_none());
    k.header = Some(Header {
        epoch: s(1),
        next_seq: MAX_SEQ + 1,
        last: s(1),
        ..Header::default()
    });
    let (d, id) = k.acquire(&c, s(1), 1);
    assert!(!d.allowed && id.is_none());
}

#[derive(Debug, Clone)]
enum Op {
    Acquire(u64),
    Release(usize),
    Renew(usize, u64),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..4).prop_map(Op::Acquire),
        any::<usize>().prop_map(Op::Release),
        (any::<usize>(), 1u64..50).prop_map(|(i, t)| Op::Renew(i, t)),
        (0u64..30).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Against a model (a list of leases with deadlines): the same
    /// admissions, releases and renewals; never more than `limit` held;
    /// every identifier distinct; a denial's wait is exact for every cost
    /// (for cost 1, the earliest deadline); the tree stays well formed.
    #[test]
    fn matches_a_list_of_leases(
        limit in prop_oneof![1u64..6, 6u64..60],
        ttl in 1u64..40,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let c = Concurrency::new(limit, Micros::new(ttl));
        let mut k = Key::default();
        let mut model: Vec<(LeaseId, u64, u64)> = Vec::new(); // id, cost, expiry
        let mut issued: Vec<LeaseId> = Vec::new();
        let mut seen = HashSet::new();
        let mut now = 1_000u64;
        for op in ops {
            let t = Micros::new(now);
            model.retain(|m| now < m.2);
            let held: u64 = model.iter().map(|m| m.1).sum();
            match op {
                Op::Acquire(cost) => {
                    let (d, id) = k.acquire(&c, t, cost);
                    prop_assert_eq!(d.allowed, held + cost <= limit);
                    prop_assert_eq!(d.remaining, limit - held - if d.allowed { cost } else { 0 });
                    if let Some(id) = id {
                        prop_assert!(seen.insert(id));
                        model.push((id, cost, now + ttl));
                        issued.push(id);
                    }
                    if !d.allowed && cost == 1 && cost <= limit {
                        let earliest = model.iter().map(|m| m.2).min().unwrap();
                        prop_assert_eq!(d.retry_after, RetryAfter::After(Micros::new(earliest - now)));
                    }
                    if !d.allowed && cost <= limit {
                        prop_assert!(matches!(d.retry_after, RetryAfter::After(_)));
                    }
                    if let RetryAfter::After(w) = d.retry_after {
                        let mut later = k.clone();
                        let at = t.saturating_add(w);
                        prop_assert!(later.clone().acquire(&c, at, cost).0.allowed);
                        prop_assert!(!later.acquire(&c, Micros::new(at.as_u64() - 1), cost).0.allowed);
                    }
                    let expected_reset = model.iter().map(|m| m.2).max().unwrap_or(now) - now;
                    prop_assert_eq!(d.reset_after, Micros::new(expected_reset));
                }
                Op::Release(i) if !issued.is_empty() => {
                    let id = issued[i % issued.len()];
                    let held_now = model.iter().any(|m| m.0 == id);
                    prop_assert_eq!(k.release(id, t), held_now);
                    model.retain(|m| m.0 != id);
                }
                Op::Renew(i, extra) if !issued.is_empty() => {
                    let id = issued[i % issued.len()];
                    let held_now = model.iter().any(|m| m.0 == id);
                    prop_assert_eq!(k.renew(id, Micros::new(extra), t), held_now);
                    for m in model.iter_mut().filter(|m| m.0 == id) {
                        m.2 = now + extra;
                    }
                }
                Op::Advance(dt) => now += dt,
                _ => {}
            }
            prop_assert!(k.slots.len() as u64 <= limit);
            k.check();
        }
    }
}

/// The slots of a key, counting the distinct slots a call reads.
struct Counting<'a> {
    slots: &'a Vec<Slot>,
    read: RefCell<HashSet<usize>>,
}

impl Leases for Counting<'_> {
    fn slots(&self) -> usize {
        self.slots.len()
    }
    fn slot(&self, i: usize) -> Slot {
        self.read.borrow_mut().insert(i);
        self.slots.slot(i)
    }
}

impl Counting<'_> {
    /// Slots read or written by the call, and reset.
    fn touched(&self, written: &[(usize, Slot)]) -> usize {
        let mut all = self.read.take();
        all.extend(written.iter().map(|w| w.0));
        all.len()
    }
}

/// At 100,000 leases every call reads and writes at most 4·log2(n) + 8
/// slots: acquires (admitted, denied for one unit or many), releases,
/// renewals, looks, and acquires among many expired leases.
#[test]
fn every_call_touches_o_log_n_slots_at_100_000_leases() {
    let n = 100_000u64;
    let bound = 4 * 17 + 8;
    let c = Concurrency::new(n, s(3_600));
    let mut k = Key::default();
    let mut ids = Vec::new();
    for i in 0..n {
        // Deadlines out of order: renewals below move them about.
        ids.push(
            k.acquire(&c, Micros::new(1_000 + (i * 7_919) % n), 1)
                .1
                .unwrap(),
        );
    }
    let mut now = Micros::new(1_000 + n);
    let mut most = 0;
    let mut rng = 12_345u64;
    for round in 0..2_000u64 {
        rng = crate::algorithm::sketch::fmix64(rng + round);
        let header = k.header.unwrap();
        let view = Counting {
            slots: &k.slots,
            read: RefCell::default(),
        };
        let id = ids[(rng % n) as usize];
        let touched = match round % 5 {
            0 => {
                let (d, g) = c.acquire(Some(header), &view, now, 1 + rng % 3);
                let written = g.map(|g| g.slots).unwrap_or_default();
                let t = view.touched(&written);
                if d.allowed {
                    k.write(header, &[]);
                }
                t
            }
            1 => {
                let change = release(header, &view, id, now);
                let t = view.touched(change.as_ref().map_or(&[][..], |c| &c.slots));
                k.apply(change);
                t
            }
            2 => {
                let change = renew(header, &view, id, s(1 + rng % 5_000), now);
                let t = view.touched(change.as_ref().map_or(&[][..], |c| &c.slots));
                k.apply(change);
                t
            }
            3 => {
                let (_, g) = c.acquire(Some(header), &view, now, 1);
                let t = view.touched(g.as_ref().map_or(&[][..], |g| &g.slots));
                if let Some(g) = g {
                    k.write(g.header, &g.slots);
                    ids.push(g.lease);
                }
                t
            }
            _ => {
                now = now.saturating_add(Micros::new(rng % 2_000_000));
                let (_, g) = c.acquire(Some(header), &view, now, 1 + rng % 1_000);
                view.touched(g.as_ref().map_or(&[][..], |g| &g.slots))
            }
        };
        most = most.max(touched);
        assert!(touched <= bound, "round {round}: {touched} slots");
    }
    assert!(k.slots.len() as u64 <= n);
    assert!(most >= 17, "the tree is walked: {most}");
    k.check();
}
