use super::*;
use crate::algorithm::sliding_log::Entries;
use crate::codec::sliding_log::encode_sliding_log;
use crate::policy::Policy;
use proptest::prelude::*;

/// The log as a plain list of timestamps, with the rules written out
/// directly: what the stored layout must behave as.
#[derive(Debug, Default)]
struct Model {
    log: Vec<u64>,
}

impl Model {
    /// The index of the first live entry and the log's time (the newest
    /// entry's if the clock went back behind it).
    fn look(&self, now: u64, window: u64) -> (usize, u64) {
        let log_now = self.log.last().map_or(now, |&t| now.max(t));
        let first = self
            .log
            .iter()
            .take_while(|&&t| log_now - t >= window)
            .count();
        (first, log_now)
    }

    fn live(&self, now: u64, window: u64) -> u64 {
        (self.log.len() - self.look(now, window).0) as u64
    }

    /// Whether the newest entry is after `now` (a clock that stepped
    /// back): then nothing is admitted now.
    fn ahead(&self, now: u64) -> bool {
        self.log.last().is_some_and(|&t| t > now)
    }

    /// The units a request could take now.
    fn room(&self, limit: u64, now: u64, window: u64) -> u64 {
        match self.ahead(now) {
            true => 0,
            false => limit.saturating_sub(self.live(now, window)),
        }
    }

    fn keep_newest(&mut self, n: usize) {
        let over = self.log.len().saturating_sub(n);
        self.log.drain(..over);
    }

    /// Charges `cost` if it fits; whether it did.
    fn charge(&mut self, limit: u64, window: u64, now: u64, cost: u64) -> bool {
        let (first, log_now) = self.look(now, window);
        let live = (self.log.len() - first) as u64;
        if cost == 0 || live + cost > limit || self.ahead(now) {
            return cost == 0;
        }
        self.log.drain(..first);
        self.log.extend(std::iter::repeat_n(log_now, cost as usize));
        true
    }

    fn force(&mut self, limit: u64, window: u64, now: u64, cost: u64) {
        if self.charge(limit, window, now, cost) {
            return;
        }
        let (first, log_now) = self.look(now, window);
        self.log.drain(..first);
        self.keep_newest(limit as usize);
        self.log
            .extend(std::iter::repeat_n(log_now, cost.min(limit) as usize));
        self.keep_newest(limit as usize);
    }

    fn refund(&mut self, limit: u64, window: u64, now: u64, n: u64) {
        let (first, _) = self.look(now, window);
        let counted = (self.log.len() - first).min(limit as usize);
        let removed = (n as usize).min(counted);
        if removed == 0 {
            return;
        }
        self.log.drain(..first);
        self.keep_newest(limit as usize);
        self.log.truncate(self.log.len() - removed);
        // Back to full: the key is deleted.
        if self.log.is_empty() {
            self.log.clear();
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Charge(u64),
    Force(u64),
    Partial(u64),
    Refund(u64),
    Peek,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..5).prop_map(Op::Charge),
        1 => (1u64..12).prop_map(Op::Force),
        1 => (1u64..9).prop_map(Op::Partial),
        2 => (1u64..5).prop_map(Op::Refund),
        1 => Just(Op::Peek),
    ]
}

fn stored_entries(value: &Option<Vec<u8>>) -> Vec<u64> {
    value.as_deref().map_or_else(Vec::new, |v| {
        let log = StoredSlidingLog::decode(v).expect("own state");
        (0..log.count()).map(|i| log.stamp(i).as_u64()).collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Charges, refunds, forced and partial charges with limits that go up
    /// and down and a clock that steps back: the stored log holds exactly
    /// the model's entries and every decision is the model's.
    #[test]
    fn the_stored_log_behaves_as_a_list_of_timestamps(
        ops in proptest::collection::vec(
            (op(), 1u64..9, prop_oneof![Just(60u64), Just(150), Just(1 << 33)], -40i64..120),
            1..80,
        ),
    ) {
        let mut model = Model::default();
        let mut value: Option<Vec<u8>> = None;
        let mut now: u64 = (1 << 34) + 7;
        for (op, limit, window, dt) in ops {
            now = now.saturating_add_signed(dt);
            let l = SlidingLog::new(limit, Micros::new(window));
            let p = Policy::SlidingLog(l);
            let at = Micros::new(now);
            let room = model.room(limit, now, window);
            let out = match op {
                Op::Charge(cost) => {
                    let out = p.decide(value.as_deref(), at, cost).unwrap();
                    let fits = model.charge(limit, window, now, cost);
                    prop_assert_eq!(out.decision.allowed, fits);
                    out
                }
                Op::Force(cost) => {
                    let out = p.force(value.as_deref(), at, cost).unwrap();
                    prop_assert_eq!(out.decision.allowed, cost <= room);
                    model.force(limit, window, now, cost);
                    out
                }
                Op::Partial(most) => {
                    let k = p.admittable(value.as_deref(), at, most).unwrap();
                    prop_assert_eq!(k, most.min(room));
                    let out = p.decide(value.as_deref(), at, k).unwrap();
                    prop_assert!(out.decision.allowed);
                    model.charge(limit, window, now, k);
                    out
                }
                Op::Refund(n) => {
                    let out = p.refund(value.as_deref(), at, n).unwrap();
                    model.refund(limit, window, now, n);
                    out
                }
                Op::Peek => {
                    let out = p.decide(value.as_deref(), at, 0).unwrap();
                    prop_assert!(out.write.is_none());
                    out
                }
            };
            if let Some(w) = &out.write {
                w.apply_to(&mut value);
            }
            prop_assert_eq!(stored_entries(&value), model.log.clone(), "{:?}", op);
            let after = model.room(limit, now, window);
            prop_assert_eq!(out.decision.remaining, after);
            let look = p.decide(value.as_deref(), at, 0).unwrap().decision;
            prop_assert_eq!(look.remaining, after);
        }
    }
}

const BOUND: usize = 100_000;
const HOUR: u64 = 3_600_000_000;

/// A log at the bound: `BOUND` entries 10 µs apart, the newest at `now`.
fn full_log() -> (Vec<u8>, Micros) {
    let base = 1u64 << 40;
    let entries: Vec<Micros> = (0..BOUND as u64)
        .map(|i| Micros::new(base + 10 * i))
        .collect();
    let now = entries[BOUND - 1];
    (encode_sliding_log(BOUND, 4, &entries), now)
}

/// Entries touched by one call: its cost plus a few binary searches (a
/// forced charge decides before and after, each a search).
fn at_most(cost: usize) -> usize {
    let log_n = (usize::BITS - BOUND.leading_zeros()) as usize;
    cost + 5 * (log_n + 2)
}

fn written(write: &Option<StateWrite>) -> usize {
    match write {
        Some(StateWrite::Patch(p)) => p.ranges().iter().map(|r| r.1.len()).sum(),
        Some(StateWrite::Value(v)) => v.len(),
        Some(StateWrite::Delete) | None => 0,
    }
}

#[test]
fn a_call_on_a_full_log_touches_its_cost_plus_log_n_entries() {
    let (mut value, now) = full_log();
    let window = Micros::new(HOUR);
    let l = SlidingLog::new(BOUND as u64, window);
    // A denial (the log is full), a dry look.
    let (out, n) = decide_counted(&l, Some(&value), now, 1).unwrap();
    assert!(!out.decision.allowed);
    assert!(n <= at_most(0), "{n}");
    // REFUND 1: the header only.
    let (out, n) = refund_counted(&l, Some(&value), now, 1).unwrap();
    assert!(n <= at_most(0), "{n}");
    assert!(written(&out.write) <= 20, "{:?}", out.write);
    let mut v = Some(value.clone());
    out.write.unwrap().apply_to(&mut v);
    value = v.unwrap();
    // A charge: one entry.
    let (out, n) = decide_counted(&l, Some(&value), now, 1).unwrap();
    assert!(out.decision.allowed);
    assert!(n <= at_most(1), "{n}");
    assert!(written(&out.write) <= 20 + 4);
    // A forced charge of 50: 50 entries.
    let (out, n) = force_counted(&l, Some(&value), now, 50).unwrap();
    assert!(!out.decision.allowed);
    assert!(n <= at_most(50), "{n}");
    assert!(written(&out.write) <= 20 + 4 * 50);
    // A lower limit: a denial reads, a refund trims in the header.
    let cut = SlidingLog::new(BOUND as u64 / 2, window);
    let (out, n) = decide_counted(&cut, Some(&value), now, 1).unwrap();
    assert!(!out.decision.allowed);
    assert!(n <= at_most(0), "{n}");
    let (out, n) = refund_counted(&cut, Some(&value), now, 3).unwrap();
    assert!(n <= at_most(0), "{n}");
    assert!(written(&out.write) <= 20);
    let mut v = Some(value.clone());
    out.write.unwrap().apply_to(&mut v);
    let halved = v.unwrap();
    assert_eq!(stored_entries(&Some(halved.clone())).len(), BOUND / 2 - 3);
    // Back up to the full limit: 3 fit, written in place.
    let (out, n) = decide_counted(&l, Some(&halved), now, 3).unwrap();
    assert!(out.decision.allowed);
    assert!(n <= at_most(3), "{n}");
    assert!(written(&out.write) <= 20 + 4 * 3);
}

#[test]
fn growing_a_ring_moves_at_most_half_of_it_once_per_doubling() {
    let window = Micros::new(HOUR);
    let small = SlidingLog::new(1_000, window);
    let mut value: Option<Vec<u8>> = None;
    let mut now = Micros::new(1 << 40);
    // Fill 1,000 slots, then let 600 expire and wrap the ring.
    for _ in 0..10 {
        let (o, _) = decide_counted(&small, value.as_deref(), now, 100).unwrap();
        o.write.unwrap().apply_to(&mut value);
        now = now.saturating_add(Micros::new(1_000));
    }
    now = now
        .saturating_add(window)
        .saturating_sub(Micros::new(4_500));
    let (o, _) = decide_counted(&small, value.as_deref(), now, 500).unwrap();
    o.write.unwrap().apply_to(&mut value);
    // A higher limit needs more slots than the ring has: it doubles,
    // moving (reading and writing) the 400 entries at the old end, the
    // smaller part of the wrapped ring, to the new end.
    let large = SlidingLog::new(10_000, window);
    let (o, n) = decide_counted(&large, value.as_deref(), now, 600).unwrap();
    assert!(o.decision.allowed);
    assert!(n <= at_most(600 + 2 * 400), "{n}");
    o.write.unwrap().apply_to(&mut value);
    let log = StoredSlidingLog::decode(value.as_deref().unwrap()).unwrap();
    assert_eq!((log.cap(), log.count()), (2_000, 1_500));
}
