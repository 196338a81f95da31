//! Hot keys: the keys with the most decisions, over every decision command
//! (named policies or not), in fixed memory: the Space-Saving summaries of
//! [`crate::engine::topk`], over periods of [`PERIOD`] of the limiter
//! clock, the current one and the one before. Keys are spread over
//! *shards* by hash, a summary of [`COUNTERS`] counters each; the operator
//! sets the counters (`ratelimit.hot-key-counters`, rounded up to whole
//! shards; 0 turns the count off). Pure: time is passed in.
//!
//! Sampling: one decision in [`SAMPLE`] on average is counted (the gaps
//! drawn at random by [`Sampler`], so that no order of requests escapes
//! the count), and each counts [`SAMPLE`]: half the work per decision.
//!
//! Bounds: a key's reported count is its sampled count times [`SAMPLE`];
//! the summary over-estimates that by at most its own error, at most
//! N / [`COUNTERS`] where N is the decisions of the shard's keys in the two
//! periods, and sampling moves it by a standard deviation of about
//! sqrt((SAMPLE - 1) * count). The reported `error` is the summary's error
//! plus two of those deviations.
//! Decay: a period's counts are dropped two periods after it began, so a
//! key that cools leaves the list within 2 s, and one that heats up counts
//! from its first decision in the current period.
//!
//! Rates: a count over the window of the current period so far and the
//! whole period before (1 to 2 s), whether or not decisions were counted
//! then, so that a rate is never taken over less than a second.

use crate::algorithm::Micros;
use crate::bounds::HOT_KEY_COUNTERS;
use crate::engine::topk::{Summary, COUNTERS};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// The length of one period: what `decisions per second` is counted over.
pub const PERIOD: Micros = Micros::new(1_000_000);

/// The most shards: what `ratelimit.hot-key-counters` allows.
pub const MAX_SHARDS: u64 = 64;

/// One decision in `SAMPLE` is counted, on average, and counts `SAMPLE`.
pub const SAMPLE: u64 = 2;

/// Which decisions are counted: a countdown to the next, the gaps drawn
/// uniformly from 1 to 2 * [`SAMPLE`] - 1 (a xorshift generator from a
/// fixed seed: the same requests are counted on every run).
#[derive(Debug)]
pub struct Sampler {
    /// Decisions until the next counted one, that one included.
    left: AtomicU32,
    state: AtomicU64,
}

const SEED: u64 = 0x2545_f491_4f6c_dd1d;

impl Sampler {
    pub const fn new() -> Sampler {
        Sampler {
            left: AtomicU32::new(1),
            state: AtomicU64::new(SEED),
        }
    }

    /// Whether this decision is counted.
    #[inline(always)]
    pub fn take(&self) -> bool {
        let left = self.left.load(Relaxed);
        if left > 1 {
            self.left.store(left - 1, Relaxed);
            return false;
        }
        let mut x = self.state.load(Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state.store(x, Relaxed);
        self.left.store(1 + (x % (2 * SAMPLE - 1)) as u32, Relaxed);
        true
    }

    /// Back to the seed.
    fn reset(&self) {
        self.left.store(1, Relaxed);
        self.state.store(SEED, Relaxed);
    }
}

impl Default for Sampler {
    fn default() -> Sampler {
        Sampler::new()
    }
}

/// One shard's two periods.
#[derive(Debug, Default)]
struct Shard {
    current: Option<Box<Summary>>,
    previous: Option<Box<Summary>>,
}

/// The summaries of every shard, and when the current period began.
#[derive(Debug, Default)]
pub struct HotKeys {
    shards: Vec<Shard>,
    since: Micros,
}

/// One reported key: its shown bytes (the first 64), its decisions per
/// second and their error (see the module's bounds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotKey {
    pub key: Vec<u8>,
    pub per_second: u64,
    pub error_per_second: u64,
    /// Decisions over the two periods (sampled count times [`SAMPLE`]),
    /// and their error.
    pub count: u64,
    pub error: u64,
}

impl HotKeys {
    /// `shards` shards, none counted yet.
    pub fn new(shards: usize) -> HotKeys {
        HotKeys {
            shards: (0..shards).map(|_| Shard::default()).collect(),
            since: Micros::ZERO,
        }
    }

    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Counts one sampled decision on `key` at `now`.
    #[inline]
    pub fn add(&mut self, key: &[u8], now: Micros) {
        if now.as_u64().wrapping_sub(self.since.as_u64()) >= PERIOD.as_u64() {
            self.roll(now);
        }
        let n = self.shards.len() as u64;
        if n == 0 {
            return;
        }
        let id = hash(key);
        // The low bits: the summary's index takes the high ones (both are
        // mixed by the hash's finish).
        let shard = &mut self.shards[(id % n) as usize];
        shard.current.get_or_insert_with(Summary::new).add(id, key);
    }

    /// Starts a new period when the current one is over (both, after two,
    /// or when the clock went back).
    fn roll(&mut self, now: Micros) {
        let Some(elapsed) = now.checked_sub(self.since) else {
            for s in &mut self.shards {
                *s = Shard::default();
            }
            self.since = now;
            return;
        };
        let periods = elapsed.as_u64() / PERIOD.as_u64();
        for s in &mut self.shards {
            s.previous = if periods == 1 { s.current.take() } else { None };
            s.current = None;
        }
        self.since = Micros::new(self.since.as_u64() + periods * PERIOD.as_u64());
    }

    /// The `n` keys with the most decisions at `now`, most first (ties by
    /// key), with their rates over the window: the current period so far
    /// and the whole one before.
    pub fn top(&self, now: Micros, n: usize) -> Vec<HotKey> {
        let elapsed = now.as_u64().saturating_sub(self.since.as_u64());
        let periods = elapsed / PERIOD.as_u64();
        let into_current = elapsed % PERIOD.as_u64();
        let mut out = Vec::new();
        for s in &self.shards {
            let (current, previous) = match periods {
                0 => (s.current.as_deref(), s.previous.as_deref()),
                1 => (None, s.current.as_deref()),
                _ => (None, None),
            };
            // (id, count, error, shown) per key of the shard's two periods.
            let mut merged: Vec<(u64, u64, u64, &[u8])> = Vec::new();
            for summary in [current, previous].into_iter().flatten() {
                for (id, count, error, shown) in summary.counted() {
                    match merged.iter_mut().find(|m| m.0 == id) {
                        Some(m) => {
                            m.1 += count;
                            m.2 += error;
                        }
                        None => merged.push((id, count, error, shown)),
                    }
                }
            }
            out.extend(merged.into_iter().map(|(_, count, error, shown)| {
                let count = count.saturating_mul(SAMPLE);
                HotKey {
                    key: shown.to_vec(),
                    per_second: 0,
                    error_per_second: 0,
                    count,
                    error: error
                        .saturating_mul(SAMPLE)
                        .saturating_add(2 * ((SAMPLE - 1).saturating_mul(count)).isqrt()),
                }
            }));
        }
        // 1 to 2 s: never a rate over less than a second, so that a count
        // just begun (or a clock that stands still) is not magnified.
        let span = u128::from(into_current + PERIOD.as_u64());
        let rate = |c: u64| (u128::from(c) * 1_000_000 / span) as u64;
        for k in &mut out {
            k.per_second = rate(k.count);
            k.error_per_second = rate(k.error).min(k.per_second);
        }
        out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        out.truncate(n);
        out
    }
}

/// A 64-bit hash of `key`, eight bytes a step (FNV, a byte a step, costs
/// about four instructions a byte on every decision): each word mixed in
/// by a multiply and a rotation, the length and the finish of MurmurHash3
/// (`fmix64`) at the end. Not keyed: a caller who makes keys collide only
/// merges their counts, within the error bound.
#[inline]
fn hash(key: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = key.len() as u64;
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(word))
            .wrapping_mul(K)
            .rotate_left(31);
    }
    let rest = words.remainder();
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(last)).wrapping_mul(K);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The shards `counters` counters make, whole shards, at most
/// [`MAX_SHARDS`].
pub fn shards_for(counters: u64) -> usize {
    counters.div_ceil(COUNTERS as u64).min(MAX_SHARDS) as usize
}

static HOT: Mutex<Option<HotKeys>> = Mutex::new(None);
static SAMPLER: Sampler = Sampler::new();
/// Whether decisions are counted: `ratelimit.hot-key-counters` above 0.
static ON: AtomicBool = AtomicBool::new(false);

/// Whether decisions are counted: a decision's one look when off.
#[inline(always)]
pub fn is_on() -> bool {
    ON.load(Relaxed)
}

/// The operator changed `ratelimit.hot-key-counters`: starts over with as
/// many shards (none: off).
pub fn configure(counters: u64) {
    let shards = shards_for(counters);
    let mut hot = lock();
    *hot = (shards > 0).then(|| HotKeys::new(shards));
    SAMPLER.reset();
    ON.store(shards > 0, Relaxed);
}

fn lock() -> MutexGuard<'static, Option<HotKeys>> {
    // Each change to it is whole: a poisoned lock is usable.
    HOT.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts one decision on each of `keys` at `now` if the decision is
/// sampled (callers check [`is_on`] first).
#[inline]
pub fn count<K: AsRef<[u8]>>(keys: &[K], now: Micros) {
    if SAMPLER.take() {
        count_sampled(keys, now);
    }
}

#[inline(never)]
fn count_sampled<K: AsRef<[u8]>>(keys: &[K], now: Micros) {
    if let Some(hot) = lock().as_mut() {
        for k in keys {
            hot.add(k.as_ref(), now);
        }
    }
}

/// The `n` hottest keys at `now`, and the shards counting (0: off).
pub fn top(now: Micros, n: usize) -> (Vec<HotKey>, usize) {
    let hot = lock();
    match hot.as_ref() {
        Some(h) => (h.top(now, n), h.shards()),
        None => (Vec::new(), 0),
    }
}

/// The counters in force, for INFO: `ratelimit.hot-key-counters` as
/// whole shards.
pub fn counters() -> u64 {
    shards_for(HOT_KEY_COUNTERS.get()) as u64 * COUNTERS as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    const T: Micros = Micros::new(1_000_000_000);

    /// Ranks 1..=n drawn with probability proportional to rank^-s, seeded.
    struct Zipf {
        cumulative: Vec<f64>,
        rng: rand::rngs::StdRng,
    }

    impl Zipf {
        fn new(n: usize, s: f64, seed: u64) -> Zipf {
            let mut total = 0.0;
            let cumulative = (1..=n)
                .map(|rank| {
                    total += (rank as f64).powf(-s);
                    total
                })
                .collect();
            Zipf {
                cumulative,
                rng: rand::rngs::StdRng::seed_from_u64(seed),
            }
        }

        fn draw(&mut self) -> usize {
            let total = *self.cumulative.last().unwrap();
            let u = self.rng.gen::<f64>() * total;
            self.cumulative
                .partition_point(|&c| c < u)
                .min(self.cumulative.len() - 1)
                + 1
        }
    }

    /// Counts `key` at `now` if the sampler takes the decision.
    fn decide(hot: &mut HotKeys, sampler: &Sampler, key: &[u8], now: Micros) {
        if sampler.take() {
            hot.add(key, now);
        }
    }

    #[test]
    fn the_top_ten_of_a_zipf_stream_over_100000_keys_are_exact() {
        // 1,000,000 decisions over 1 s at the default 320 counters, for
        // several seeds of the stream.
        for seed in [7, 8, 9] {
            let mut zipf = Zipf::new(100_000, 1.1, seed);
            let mut hot = HotKeys::new(shards_for(320));
            let sampler = Sampler::new();
            let mut truth = std::collections::HashMap::<usize, u64>::new();
            for i in 0..1_000_000u64 {
                let rank = zipf.draw();
                *truth.entry(rank).or_default() += 1;
                let now = T.saturating_add(Micros::new(i));
                decide(&mut hot, &sampler, format!("user:{rank}").as_bytes(), now);
            }
            let now = T.saturating_add(Micros::new(999_999));
            let mut exact: Vec<(usize, u64)> = truth.into_iter().collect();
            exact.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let reported = hot.top(now, 10);
            assert_eq!(reported.len(), 10);
            for (r, (rank, count)) in reported.iter().zip(&exact) {
                assert_eq!(r.key, format!("user:{rank}").into_bytes(), "{seed}: {r:?}");
                assert!(r.count.abs_diff(*count) <= r.error, "{seed}: {r:?} {count}");
                // Over the window of this period and the one before: 2 s.
                assert_eq!(r.per_second, r.count * 1_000_000 / 1_999_999, "{r:?}");
            }
        }
    }

    #[test]
    fn a_key_taking_one_percent_is_listed_within_a_second() {
        // 100,000 decisions a second of a Zipf stream; from 2.5 s on, one
        // new key takes 1 % of them. At every 100 ms after that, once it
        // has been hot for 1 s, it is among the top 20 at the default.
        for offset_ms in [0u64, 130, 500, 870] {
            let mut zipf = Zipf::new(100_000, 1.1, 11 + offset_ms);
            let mut hot = HotKeys::new(shards_for(320));
            let sampler = Sampler::new();
            let start = T.saturating_add(Micros::from_millis(offset_ms));
            let hot_from = start.saturating_add(Micros::from_millis(2_500));
            for i in 0..400_000u64 {
                // One decision every 10 µs.
                let now = start.saturating_add(Micros::new(i * 10));
                if now >= hot_from && i % 100 == 0 {
                    decide(&mut hot, &sampler, b"new:hot", now);
                } else {
                    let key = format!("user:{}", zipf.draw());
                    decide(&mut hot, &sampler, key.as_bytes(), now);
                }
                let since = now.as_u64().saturating_sub(hot_from.as_u64());
                if now >= hot_from && since >= 1_000_000 && since.is_multiple_of(100_000) {
                    let listed = hot.top(now, 20);
                    let found = listed.iter().find(|k| k.key == b"new:hot");
                    let found = found.unwrap_or_else(|| panic!("{offset_ms} ms, {since} µs"));
                    // 1,000 a second, averaged over the 1 to 2 s counted,
                    // of which it was hot at least 1 s.
                    assert!(
                        found.per_second + found.error_per_second >= 500
                            && found.per_second <= 1_000 + found.error_per_second,
                        "{found:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn rates_are_taken_over_at_least_a_second_even_on_a_clock_that_stands_still() {
        // The count begins on a whole second and the clock does not move:
        // 1,000 decisions at one instant are 1,000 a second at most.
        let mut hot = HotKeys::new(1);
        let sampler = Sampler::new();
        for _ in 0..1_000 {
            decide(&mut hot, &sampler, b"k", T);
        }
        let [k] = &hot.top(T, 10)[..] else {
            panic!("one key")
        };
        assert_eq!(k.per_second, k.count);
        assert!(k.count.abs_diff(1_000) <= k.error, "{k:?}");
        // Half a second on, the same count over 1.5 s.
        let half = T.saturating_add(Micros::from_millis(500));
        assert_eq!(hot.top(half, 1)[0].per_second, k.count * 2 / 3);
        // Steady at 1,000 a second: 1,000 a second in the next period.
        for i in 0..1_500u64 {
            let now = T
                .saturating_add(PERIOD)
                .saturating_add(Micros::new(i * 1_000));
            decide(&mut hot, &sampler, b"k", now);
        }
        let later = T
            .saturating_add(PERIOD)
            .saturating_add(Micros::from_millis(1_499));
        let k = &hot.top(later, 1)[0];
        assert!(k.per_second.abs_diff(1_000) <= k.error_per_second, "{k:?}");
    }

    #[test]
    fn the_sampler_takes_one_decision_in_sample_with_bounded_gaps() {
        let sampler = Sampler::new();
        let (mut taken, mut gap, mut widest) = (0u64, 0u64, 0u64);
        for _ in 0..1_000_000 {
            gap += 1;
            if sampler.take() {
                taken += 1;
                widest = widest.max(gap);
                gap = 0;
            }
        }
        assert!(taken.abs_diff(1_000_000 / SAMPLE) < 2_000, "{taken}");
        assert_eq!(widest, 2 * SAMPLE - 1);
        // Reset: the same decisions again.
        sampler.reset();
        let first: Vec<bool> = (0..20).map(|_| sampler.take()).collect();
        sampler.reset();
        assert_eq!(first, (0..20).map(|_| sampler.take()).collect::<Vec<_>>());
    }

    #[test]
    fn cold_keys_leave_after_two_periods_and_the_clock_going_back_starts_over() {
        let mut hot = HotKeys::new(1);
        hot.add(b"a", T);
        hot.add(b"b", T.saturating_add(PERIOD));
        assert_eq!(hot.top(T.saturating_add(PERIOD), 10).len(), 2);
        let two = T.saturating_add(PERIOD).saturating_add(PERIOD);
        let left: Vec<Vec<u8>> = hot.top(two, 10).into_iter().map(|k| k.key).collect();
        assert_eq!(left, [b"b".to_vec()]);
        hot.add(b"c", Micros::new(5));
        let after: Vec<Vec<u8>> = hot
            .top(Micros::new(5), 10)
            .into_iter()
            .map(|k| k.key)
            .collect();
        assert_eq!(after, [b"c".to_vec()]);
    }

    #[test]
    fn the_hash_tells_keys_apart_and_spreads_them_over_shards() {
        let keys: Vec<String> = (0..100_000).map(|i| format!("user:{i}")).collect();
        let mut ids: Vec<u64> = keys.iter().map(|k| hash(k.as_bytes())).collect();
        let mut shards = [0u32; 4];
        for id in &ids {
            shards[(id % 4) as usize] += 1;
        }
        assert!(
            shards.iter().all(|&n| n.abs_diff(25_000) < 1_000),
            "{shards:?}"
        );
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 100_000);
        assert_ne!(hash(b""), hash(b"\0"));
        assert_ne!(hash(b"12345678"), hash(b"12345678\0"));
    }

    #[test]
    fn counters_round_up_to_whole_shards() {
        assert_eq!(shards_for(0), 0);
        assert_eq!(shards_for(1), 1);
        assert_eq!(shards_for(80), 1);
        assert_eq!(shards_for(81), 2);
        assert_eq!(shards_for(u64::MAX), MAX_SHARDS as usize);
    }
}
