//! The count-min sketch limiter (`RL.SKETCH`): at most `limit` per `window`
//! for each item, counted in `depth` rows of `width` counters whatever the
//! number of distinct items.
//!
//! Each counter holds the counts of two aligned windows, as `RL.SLIDING
//! APPROX` does, with the window they belong to (a tag): a counter is rolled
//! forward when it is read, so a new window clears nothing. An item's count
//! in a window is the minimum over its `depth` counters, which over-estimates
//! its true count and never under-estimates it; the decision is then
//! exactly [`SlidingApprox`]'s on those two minima. An item is therefore
//! never admitted beyond what its own APPROX limiter, fed the same admitted
//! requests, would admit; a collision can only deny.
//!
//! Hashing is fixed and seedless, so that every server agrees: FNV-1a 64 of
//! the item's bytes, finalised with MurmurHash3's `fmix64`, gives `h1`;
//! `h2 = fmix64(h1) | 1`; row `r` uses column `(h1 + r × h2) mod width`
//! (double hashing).

use super::sliding_approx::{ApproxState, SlidingApprox};
use super::{Decision, Micros, RetryAfter};

/// Counts are 32-bit: the largest limit a sketch takes.
pub const MAX_SKETCH_LIMIT: u64 = u32::MAX as u64;
/// Counters per row: 262,144.
pub const MAX_WIDTH: u64 = 1 << 18;
/// Rows.
pub const MAX_DEPTH: u64 = 8;
/// ε = e / 2048 ≈ 0.13% of a window's traffic.
pub const DEFAULT_WIDTH: u64 = 2048;
/// δ = e^−4 ≈ 1.8%.
pub const DEFAULT_DEPTH: u64 = 4;

/// One counter: the counts of window `tag` (mod 2^32) and of the one before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter {
    pub tag: u32,
    pub prev: u32,
    pub cur: u32,
}

impl Counter {
    /// The counts `(prev, cur)` as of window `index`: a counter last written
    /// one window before has its current count become the previous one;
    /// older counters are empty.
    pub fn rolled(self, index: u64) -> (u32, u32) {
        match (index as u32).wrapping_sub(self.tag) {
            0 => (self.prev, self.cur),
            1 => (self.cur, 0),
            _ => (0, 0),
        }
    }

    fn at(self, index: u64) -> Counter {
        let (prev, cur) = self.rolled(index);
        Counter {
            tag: index as u32,
            prev,
            cur,
        }
    }
}

/// A stored sketch as the decision reads it.
pub trait SketchCounters {
    /// The latest window index written.
    fn index(&self) -> u64;
    /// The next counter the sweep rolls forward.
    fn sweep(&self) -> usize;
    /// Counter `i` (`row × width + column`).
    fn counter(&self, i: usize) -> Counter;
}

/// What an admitted request changes: the header fields and the counters
/// (index, new counter), in index order, each once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SketchChange {
    pub index: u64,
    pub sweep: usize,
    pub counters: Vec<(usize, Counter)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sketch {
    approx: SlidingApprox,
    window: Micros,
    width: usize,
    depth: usize,
    conservative: bool,
}

impl Sketch {
    /// The time in which it admits one unit of an item on average.
    pub fn interval(&self) -> Micros {
        self.approx.interval()
    }

    /// `width` and `depth` are clamped to `1..=MAX_*`, `limit` to
    /// `1..=MAX_SKETCH_LIMIT` (the parser rejects anything outside).
    pub fn new(limit: u64, window: Micros, width: u64, depth: u64) -> Sketch {
        let window = window.max(Micros::new(1));
        Sketch {
            approx: SlidingApprox::new(limit.min(MAX_SKETCH_LIMIT), window),
            window,
            width: width.clamp(1, MAX_WIDTH) as usize,
            depth: depth.clamp(1, MAX_DEPTH) as usize,
            conservative: true,
        }
    }

    /// The same sketch with plain updates (every counter of the item raised by
    /// the cost) instead of conservative ones: for measurements.
    pub fn plain(self) -> Sketch {
        Sketch {
            conservative: false,
            ..self
        }
    }

    pub fn window(&self) -> Micros {
        self.window
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn depth(&self) -> usize {
        self.depth
    }

    pub fn counters(&self) -> usize {
        self.width * self.depth
    }

    /// The item's counter in each row.
    pub fn counters_of(&self, item: &[u8]) -> impl Iterator<Item = usize> {
        let h1 = fmix64(fnv1a64(item));
        let h2 = fmix64(h1) | 1;
        let (width, depth) = (self.width as u64, self.depth);
        (0..depth).map(move |r| {
            let column = h1.wrapping_add((r as u64).wrapping_mul(h2)) % width;
            r * width as usize + column as usize
        })
    }

    /// Decides `cost` for `item` at `now` against the stored sketch (`None`:
    /// no key). The change is `Some` only when an admitted request changes
    /// the sketch.
    pub fn decide<C: SketchCounters>(
        &self,
        stored: Option<&C>,
        item: &[u8],
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<SketchChange>) {
        let index = now.as_u64() / self.window.as_u64();
        let header = stored.map_or(index, |s| s.index());
        let counter = |i: usize| stored.map_or(Counter::default(), |s| s.counter(i));
        let rows: Vec<(usize, Counter)> = self.counters_of(item).map(|i| (i, counter(i))).collect();
        // The newest window any of the item's counters was written or rolled
        // in (a zero-filled counter never was). A clock that went back before
        // it (a failover to a replica whose clock lags) cannot decide as
        // the item's own APPROX limiter would: rolling a counter forward drops
        // counts that limiter still weighs. The item is denied until that
        // window comes round again.
        let newest = rows
            .iter()
            .filter(|(_, c)| *c != Counter::default())
            .map(|(_, c)| header.saturating_sub(u64::from((header as u32).wrapping_sub(c.tag))))
            .max();
        if let Some(newest) = newest.filter(|&n| n > index) {
            return (self.behind(stored, rows, now, newest, cost), None);
        }
        self.decide_at(stored, rows, index, now, cost)
    }

    /// The decision in window `index`, where every count of the item's
    /// counters (`rows`) was written.
    fn decide_at<C: SketchCounters>(
        &self,
        stored: Option<&C>,
        rows: Vec<(usize, Counter)>,
        index: u64,
        now: Micros,
        cost: u64,
    ) -> (Decision, Option<SketchChange>) {
        let w = self.window.as_u64();
        let header = stored.map_or(index, |s| s.index());
        let counter = |i: usize| stored.map_or(Counter::default(), |s| s.counter(i));
        // Every count of the item is from this window or before: rolled
        // to now's window they are exactly what its APPROX limiter reads.
        let counts = rows.iter().map(|(_, c)| c.rolled(index));
        let prev = counts.clone().map(|(p, _)| p).min().unwrap_or(0);
        let cur = counts.map(|(_, c)| c).min().unwrap_or(0);
        let state = ApproxState {
            index,
            prev: u64::from(prev),
            cur: u64::from(cur),
        };
        let (mut decision, admitted) = self.approx.decide(Some(state), now, cost);
        let Some(admitted) = admitted else {
            return (decision, None);
        };
        // Admitted: cur + cost ≤ limit ≤ u32::MAX.
        let raised = u32::try_from(admitted.cur).unwrap_or(u32::MAX);
        let add = u32::try_from(cost).unwrap_or(u32::MAX);
        let mut counters: Vec<(usize, Counter)> = rows
            .into_iter()
            .map(|(i, c)| {
                let mut c = c.at(index);
                c.cur = if self.conservative {
                    c.cur.max(raised)
                } else {
                    c.cur.saturating_add(add)
                };
                (i, c)
            })
            .collect();
        // Every write in the newest window also rolls one more counter
        // forward, in turn, so that no counter's 32-bit tag is ever 2^32
        // windows stale. (A write behind it, after the clock went back,
        // rolls nothing: other items' newer counts must stay.)
        let header = header.max(index);
        let mut sweep = stored.map_or(0, |s| s.sweep()) % self.counters();
        if header == index {
            if !counters.iter().any(|(i, _)| *i == sweep) {
                let c = counter(sweep);
                if c.at(index) != c {
                    counters.push((sweep, c.at(index)));
                }
            }
            sweep = (sweep + 1) % self.counters();
        }
        counters.sort_unstable_by_key(|(i, _)| *i);
        // The key lives until the newest window it holds has weighed out.
        let end = Micros::new(header.saturating_add(2).saturating_mul(w));
        decision.reset_after = decision.reset_after.max(end.saturating_sub(now));
        let change = SketchChange {
            index: header,
            sweep,
            counters,
        };
        (decision, Some(change))
    }

    /// The decision for an item whose counts lie in window `newest`, after
    /// `now`: denied (nothing remains) until that window starts, then as
    /// the sketch decides there; a cost of 0 is admitted and changes
    /// nothing.
    fn behind<C: SketchCounters>(
        &self,
        stored: Option<&C>,
        rows: Vec<(usize, Counter)>,
        now: Micros,
        newest: u64,
        cost: u64,
    ) -> Decision {
        let from = Micros::new(newest.saturating_mul(self.window.as_u64()));
        let lag = from.saturating_sub(now);
        let (there, _) = self.decide_at(stored, rows, newest, from, cost);
        let retry_after = match there.retry_after {
            _ if cost == 0 => RetryAfter::NotNeeded,
            RetryAfter::NotNeeded => RetryAfter::After(lag),
            RetryAfter::After(wait) => RetryAfter::After(lag.saturating_add(wait)),
            RetryAfter::Never => RetryAfter::Never,
        };
        Decision {
            allowed: cost == 0,
            remaining: 0,
            retry_after,
            reset_after: there.reset_after.saturating_add(lag),
            ..there
        }
    }
}

/// A sketch held in memory: for tests.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SketchState {
    pub index: u64,
    pub sweep: usize,
    pub counters: Vec<Counter>,
}

#[cfg(test)]
impl SketchState {
    pub fn new(sketch: &Sketch) -> SketchState {
        SketchState {
            index: 0,
            sweep: 0,
            counters: vec![Counter::default(); sketch.counters()],
        }
    }

    pub fn apply(&mut self, change: &SketchChange) {
        self.index = change.index;
        self.sweep = change.sweep;
        for &(i, c) in &change.counters {
            self.counters[i] = c;
        }
    }
}

#[cfg(test)]
impl SketchCounters for SketchState {
    fn index(&self) -> u64 {
        self.index
    }

    fn sweep(&self) -> usize {
        self.sweep
    }

    fn counter(&self, i: usize) -> Counter {
        self.counters.get(i).copied().unwrap_or_default()
    }
}

/// FNV-1a, 64-bit.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// MurmurHash3's 64-bit finaliser: every input bit affects every output bit.
pub fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

#[cfg(test)]
mod tests;
