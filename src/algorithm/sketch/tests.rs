//! The sketch's properties, run both in memory and on its stored bytes
//! (decoded in place and patched, as the server keeps them).

use super::*;
use crate::algorithm::RetryAfter;
use crate::codec::sketch::{encode, patch, StoredSketch};
use proptest::prelude::*;

const S: u64 = 1_000_000;

/// A sketch kept twice: in memory and as the stored value, which must agree.
struct Both {
    sketch: Sketch,
    state: Option<SketchState>,
    value: Option<Vec<u8>>,
}

impl Both {
    fn new(sketch: Sketch) -> Both {
        Both {
            sketch,
            state: None,
            value: None,
        }
    }

    fn decide(&mut self, item: &[u8], now: u64, cost: u64) -> Decision {
        let now = Micros::new(now);
        let (d, change) = self.sketch.decide(self.state.as_ref(), item, now, cost);
        let stored = self
            .value
            .as_deref()
            .map(|v| StoredSketch::decode(v).unwrap());
        let (d2, change2) = self.sketch.decide(stored.as_ref(), item, now, cost);
        assert_eq!((d, &change), (d2, &change2), "memory and bytes disagree");
        let creating = stored.is_none();
        if let Some(c) = change {
            let value = self.value.get_or_insert_with(Vec::new);
            patch(&self.sketch, &c, creating).apply_to(value);
            let state = self
                .state
                .get_or_insert_with(|| SketchState::new(&self.sketch));
            state.apply(&c);
            assert_eq!(*value, encode(&self.sketch, state));
        }
        d
    }
}

#[test]
fn hashing_is_fixed() {
    // Published FNV-1a 64 test vectors.
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    // The counters of an item are part of the stored layout: pinned.
    let s = Sketch::new(10, Micros::new(S), 2048, 4);
    let counters: Vec<usize> = s.counters_of(b"203.0.113.7").collect();
    assert_eq!(counters, PINNED_CELLS);
    for (r, c) in counters.iter().enumerate() {
        assert!((r * 2048..(r + 1) * 2048).contains(c));
    }
    let empty: Vec<usize> = s.counters_of(b"").collect();
    assert_eq!(empty.len(), 4);
}

const PINNED_CELLS: [usize; 4] = [734, 3121, 5508, 7895];

#[test]
fn one_item_up_to_the_limit_then_denied_then_rolled_over() {
    let mut b = Both::new(Sketch::new(3, Micros::new(60 * S), 64, 3));
    for left in [2, 1, 0] {
        let d = b.decide(b"x", 600 * S, 1);
        assert!(d.allowed);
        assert_eq!(d.remaining, left);
        assert_eq!(d.reset_after, Micros::new(120 * S));
    }
    let d = b.decide(b"x", 600 * S, 1);
    assert!(!d.allowed);
    // 3 in the previous window must weigh at most 2: 20 s into the next.
    assert_eq!(d.retry_after, RetryAfter::After(Micros::new(80 * S)));
    assert!(!b.decide(b"x", 680 * S - 1, 1).allowed);
    assert!(b.decide(b"x", 680 * S, 1).allowed);
    // Another item is not affected in a wide sketch.
    assert!(b.decide(b"y", 680 * S, 3).allowed);
    // Two windows later every count is gone.
    let d = b.decide(b"x", 900 * S, 0);
    assert_eq!((d.remaining, d.reset_after), (3, Micros::ZERO));
}

#[test]
fn one_cell_shares_the_limit_between_all_items() {
    let mut b = Both::new(Sketch::new(4, Micros::new(10 * S), 1, 2));
    assert!(b.decide(b"a", 100 * S, 3).allowed);
    let d = b.decide(b"b", 100 * S, 2);
    assert!(!d.allowed);
    assert_eq!(d.remaining, 1);
    // The estimate is b's: 3 then in the previous window, weighing 3 × (1 −
    // e/10) ≤ 2 from e = 10/3 s.
    assert_eq!(d.retry_after, RetryAfter::After(Micros::new(13_333_334)));
    assert!(b.decide(b"b", 100 * S, 1).allowed);
}

#[test]
fn the_sweep_rolls_stale_cells_forward() {
    let sketch = Sketch::new(5, Micros::new(1), 2, 1);
    let mut state = SketchState::new(&sketch);
    state.counters[1] = Counter {
        tag: 3,
        prev: 0,
        cur: 5,
    };
    state.index = 3;
    state.sweep = 1;
    // Item 'a' lands in counter 0 or 1; either way counter 1 ends at window 10.
    let (_, change) = sketch.decide(Some(&state), b"a", Micros::new(10), 1);
    state.apply(&change.unwrap());
    assert_eq!(state.counters[1].tag, 10);
    assert_eq!(state.counters[1].rolled(10).0, 0);
    assert_eq!(state.sweep, 0);
}

/// Requests: (item, time step in µs, cost).
fn workload() -> impl Strategy<Value = Vec<(u8, u64, u64)>> {
    proptest::collection::vec((0u8..12, 0u64..40, 0u64..4), 1..300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// With one item the sketch is exactly RL.SLIDING APPROX.
    #[test]
    fn one_item_decides_as_approx(
        steps in proptest::collection::vec((0u64..300, 0u64..5), 1..100),
        limit in 1u64..6, window in 1u64..200, width in 1u64..8, depth in 1u64..4,
        plain in any::<bool>(),
    ) {
        let mut sketch = Sketch::new(limit, Micros::new(window), width, depth);
        if plain {
            sketch = sketch.plain();
        }
        let mut b = Both::new(sketch);
        let approx = SlidingApprox::new(limit, Micros::new(window));
        let mut state = None;
        let mut now = 1u64 << 40;
        for (dt, cost) in steps {
            now += dt;
            let d = b.decide(b"only", now, cost);
            let (want, new) = approx.decide(state, Micros::new(now), cost);
            prop_assert_eq!(d, want);
            if new.is_some() {
                state = new;
            }
        }
    }

    /// Over-admission is exactly 0: the requests a sketch admits for any
    /// item, replayed alone through that item's own APPROX limiter, are
    /// all admitted — whatever the collisions, with either update rule.
    #[test]
    fn no_item_is_ever_admitted_beyond_its_own_limit(
        reqs in workload(),
        limit in 1u64..8, window in 1u64..100, width in 1u64..6, depth in 1u64..4,
        plain in any::<bool>(),
    ) {
        let mut sketch = Sketch::new(limit, Micros::new(window), width, depth);
        if plain {
            sketch = sketch.plain();
        }
        let mut b = Both::new(sketch);
        let approx = SlidingApprox::new(limit, Micros::new(window));
        let mut own = [None; 12];
        let mut now = 1u64 << 30;
        for (item, dt, cost) in reqs {
            now += dt;
            let d = b.decide(&[item], now, cost);
            if d.allowed && cost > 0 {
                let (replayed, new) = approx.decide(own[item as usize], Micros::new(now), cost);
                prop_assert!(replayed.allowed, "item {} over-admitted at {}", item, now);
                own[item as usize] = new;
                // The sketch never reports more room than the item has.
                prop_assert!(d.remaining <= replayed.remaining);
            }
        }
    }

    /// A clock that goes back never fails and never admits beyond the limit
    /// within the window it stays in.
    #[test]
    fn a_clock_going_back_is_safe(
        steps in proptest::collection::vec((0u8..3, 0u64..2000, 1u64..3), 1..60),
    ) {
        let mut b = Both::new(Sketch::new(3, Micros::new(500), 4, 2));
        for (item, t, cost) in steps {
            let d = b.decide(&[item], (1 << 20) + t, cost);
            prop_assert!(d.remaining <= 3);
        }
    }
}

/// A clock stepped back 120 ms across a window boundary the sketch had
/// crossed (another item wrote in the new window): the item decides as its
/// own APPROX limiter does at that time, never more permissively.
#[test]
fn a_clock_stepped_back_across_a_boundary_decides_as_approx() {
    let window = S;
    let mut b = Both::new(Sketch::new(10, Micros::new(window), 2048, 4));
    let approx = SlidingApprox::new(10, Micros::new(window));
    let k = 1_900_000;
    assert!(b.decide(b"x", (k - 1) * window + window / 2, 10).allowed);
    assert!(b.decide(b"x", k * window + window / 2, 5).allowed);
    assert!(b.decide(b"y", (k + 1) * window + 100_000, 1).allowed);
    // The item's own limiter at k + 0.98 s: 10 × 0.02 + 5 = 5.2 counted.
    let own = Some(ApproxState {
        index: k,
        prev: 10,
        cur: 5,
    });
    let back = (k + 1) * window + 100_000 - 120_000;
    let (want, _) = approx.decide(own, Micros::new(back), 5);
    assert!(!want.allowed);
    assert_eq!(b.decide(b"x", back, 5), want);
    assert_eq!(b.decide(b"x", back, 4).remaining, 0);
}

/// An item whose counters were written in a window after now is denied until
/// that window starts, exactly.
#[test]
fn an_item_written_in_a_later_window_waits_for_it() {
    let window = 1_000;
    let mut b = Both::new(Sketch::new(3, Micros::new(window), 64, 2));
    assert!(b.decide(b"x", 10 * window + 5, 1).allowed);
    let d = b.decide(b"x", 10 * window - 7, 1);
    assert!(!d.allowed);
    assert_eq!(d.remaining, 0);
    assert_eq!(d.retry_after, RetryAfter::After(Micros::new(7)));
    assert!(b.decide(b"x", 10 * window, 1).allowed);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The clock steps back (a failover to a replica whose clock lags) by
    /// anything from 1 µs to one window, in any order: an item is admitted
    /// only where its own APPROX limiter, fed the same admitted requests at
    /// the same times, admits it too, and never reports more room; a
    /// denial's wait is exact if the clock then runs on.
    #[test]
    fn no_item_is_admitted_beyond_its_own_limit_when_the_clock_steps_back(
        reqs in proptest::collection::vec((0u8..6, 0u64..1_000, any::<bool>(), 0u64..4), 1..150),
        limit in 1u64..8, window in 1u64..100, width in 1u64..6, depth in 1u64..4,
        plain in any::<bool>(),
    ) {
        let mut sketch = Sketch::new(limit, Micros::new(window), width, depth);
        if plain {
            sketch = sketch.plain();
        }
        let mut b = Both::new(sketch);
        let approx = SlidingApprox::new(limit, Micros::new(window));
        let mut own = [None; 6];
        let mut now = 1u64 << 30;
        for (item, step, back, cost) in reqs {
            if back {
                now -= 1 + step % window;
            } else {
                now += step % (3 * window);
            }
            let d = b.decide(&[item], now, cost);
            let at = Micros::new(now);
            let (replayed, new) = approx.decide(own[item as usize], at, if d.allowed { cost } else { 0 });
            prop_assert!(d.remaining <= replayed.remaining, "more room than its own limiter");
            if d.allowed && cost > 0 {
                prop_assert!(replayed.allowed, "item {} over-admitted at {}", item, now);
                own[item as usize] = new;
            }
            if let RetryAfter::After(wait) = d.retry_after {
                let probe = |t: u64| {
                    let (d, _) = b.sketch.decide(b.state.as_ref(), &[item], Micros::new(t), cost);
                    d.allowed
                };
                prop_assert!(probe(now + wait.as_u64()), "not admitted after its wait");
                prop_assert!(!probe(now + wait.as_u64() - 1), "admitted before its wait");
            }
        }
    }
}
