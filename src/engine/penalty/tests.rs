//! The penalty box on the core, with the time passed in: both forms on
//! every algorithm that takes them, the writes they make, and the bound on
//! a counted debt (fixed-seed properties).

use super::*;
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::sliding_approx::SlidingApprox;
use crate::algorithm::sliding_log::SlidingLog;
use crate::algorithm::sliding_subwindows::SlidingSubwindows;
use crate::algorithm::token_bucket::TokenBucket;
use crate::engine::decide as engine_decide;
use crate::engine::store::MemoryStore;
use proptest::prelude::*;

const S: u64 = 1_000_000;

/// A memory store that keeps what it was told.
#[derive(Default)]
struct Told {
    inner: MemoryStore,
    events: Vec<(usize, Event)>,
}

impl Store for Told {
    fn value(&self, key: usize) -> Result<Option<&[u8]>, Error> {
        self.inner.value(key)
    }
    fn prepare(&mut self, key: usize, write: &StateWrite) -> Result<(), Error> {
        self.inner.prepare(key, write)
    }
    fn abandon(&mut self, key: usize) {
        self.inner.abandon(key)
    }
    fn commit(&mut self, key: usize, write: &StateWrite, ttl: Micros) {
        self.inner.commit(key, write, ttl)
    }
    fn penalized(&mut self, key: usize, event: Event) {
        self.events.push((key, event));
    }
}

fn told(keys: usize) -> Told {
    Told {
        inner: MemoryStore::new(keys),
        events: Vec::new(),
    }
}

/// Every rate algorithm, `limit` per `secs` seconds.
fn rates(limit: u64, secs: u64) -> Vec<Policy> {
    let w = Micros::from_secs(secs);
    vec![
        Policy::Gcra(Gcra::new(limit, w, limit).unwrap()),
        Policy::Bucket(TokenBucket::new(limit, limit, w).unwrap()),
        Policy::SlidingLog(SlidingLog::new(limit, w)),
        Policy::SlidingApprox(SlidingApprox::new(limit, w)),
        Policy::SlidingSubwindows(SlidingSubwindows::new(limit, w, 4)),
        Policy::Fixed(FixedWindow::new(limit, w, false)),
        Policy::Fixed(FixedWindow::new(limit, w, true)),
    ]
}

fn with(penalty: Penalty) -> Request {
    Request {
        penalty: Some(penalty),
        ..Request::default()
    }
}

fn at(s: u64) -> Micros {
    Micros::new((1 << 40) + s * S)
}

/// A wait as a length (never: the longest).
fn wait(r: RetryAfter) -> Micros {
    match r {
        RetryAfter::After(w) => w,
        RetryAfter::NotNeeded => Micros::ZERO,
        RetryAfter::Never => Micros::MAX,
    }
}

fn ask(store: &mut Told, p: &Policy, now: Micros, request: Request) -> Outcome {
    engine_decide(store, std::slice::from_ref(p), now, &request).unwrap()
}

#[test]
fn a_denial_begins_a_block_that_requests_during_it_do_not_extend() {
    for p in rates(2, 3_600) {
        let mut store = told(1);
        let block = Penalty::Block(Micros::from_secs(30));
        assert!(ask(&mut store, &p, at(0), with(block)).allowed);
        assert!(ask(&mut store, &p, at(0), with(block)).allowed);
        let d = ask(&mut store, &p, at(1), with(block));
        assert!(!d.allowed, "{p:?}");
        // The limit's own wait is an hour: the reply says the later.
        assert!(wait(d.retry_after) >= Micros::from_secs(30));
        assert_eq!(store.events, [(0, Event::Began { end: at(31) })], "{p:?}");
        let value = store.inner.values[0].clone().unwrap();
        assert_eq!(block::decode(&value).unwrap().0, at(31));
        // Denied during it, whatever is asked, and nothing written.
        let before = store.inner.clone();
        for request in [with(block), Request::default()] {
            let d = ask(&mut store, &p, at(20), request);
            assert!(!d.allowed);
            assert_eq!(d.decisions[0].remaining, 0);
        }
        assert_eq!(store.inner, before, "{p:?}");
        assert_eq!(store.events.len(), 3);
        assert_eq!(store.events[1], (0, Event::Held));
    }
}

#[test]
fn a_block_ends_at_its_end_and_the_limit_answers_again() {
    // A limit whose own wait is short: the block decides the wait.
    for p in rates(1, 1) {
        let mut store = told(1);
        let block = Penalty::Block(Micros::from_secs(60));
        assert!(ask(&mut store, &p, at(0), with(block)).allowed);
        let d = ask(&mut store, &p, at(0), with(block));
        assert_eq!(
            d.retry_after,
            RetryAfter::After(Micros::from_secs(60)),
            "{p:?}"
        );
        assert_eq!(d.decisions[0].reset_after, Micros::from_secs(60));
        assert_eq!(store.inner.ttls[0], Some(Micros::from_secs(60)));
        let d = ask(&mut store, &p, at(59), Request::default());
        assert_eq!(
            d.retry_after,
            RetryAfter::After(Micros::from_secs(1)),
            "{p:?}"
        );
        // At its end, the limit decides: admitted (the window has passed),
        // the stale header dropped by a whole write or kept before a patch.
        let d = ask(&mut store, &p, at(60), with(block));
        assert!(d.allowed, "{p:?}");
        let v = store.inner.values[0].clone().unwrap();
        if let Some((end, _)) = block::decode(&v) {
            assert!(end <= at(60));
        }
        // And still reads as the limit's: a look, then another denial
        // begins a new block.
        let d = ask(&mut store, &p, at(60), with(block));
        assert!(!d.allowed);
        assert_eq!(
            store.events.last(),
            Some(&(0, Event::Began { end: at(120) }))
        );
    }
}

#[test]
fn refund_gives_back_and_leaves_the_block_and_a_peek_sees_it() {
    let p = Policy::Gcra(Gcra::new(2, Micros::from_secs(3_600), 2).unwrap());
    let mut store = told(1);
    let block = Penalty::Block(Micros::from_secs(30));
    for _ in 0..2 {
        ask(&mut store, &p, at(0), with(block));
    }
    assert!(!ask(&mut store, &p, at(0), with(block)).allowed);
    let refund = Request {
        charge: Charge::Refund,
        cost: 2,
        ..Request::default()
    };
    let d = ask(&mut store, &p, at(1), refund);
    assert!(d.allowed);
    let value = store.inner.values[0].clone().unwrap();
    assert_eq!(
        block::decode(&value).map(|(e, i)| (e, i.is_some())),
        Some((at(30), false))
    );
    let peek = Request {
        charge: Charge::Peek,
        ..Request::default()
    };
    let d = ask(&mut store, &p, at(10), peek);
    assert_eq!(d.retry_after, RetryAfter::After(Micros::from_secs(20)));
    assert_eq!(d.decisions[0].remaining, 0);
    // Not counted as a request held.
    assert_eq!(
        store.events.iter().filter(|e| e.1 == Event::Held).count(),
        0
    );
    assert!(ask(&mut store, &p, at(30), Request::default()).allowed);
}

#[test]
fn no_block_for_a_request_no_wait_admits_a_dry_run_or_a_forced_charge() {
    let p = Policy::Gcra(Gcra::new(2, Micros::from_secs(60), 2).unwrap());
    let block = Penalty::Block(Micros::from_secs(30));
    let mut store = told(1);
    let too_big = Request {
        cost: 3,
        ..with(block)
    };
    assert_eq!(
        ask(&mut store, &p, at(0), too_big).retry_after,
        RetryAfter::Never
    );
    ask(&mut store, &p, at(0), with(block));
    ask(&mut store, &p, at(0), with(block));
    let dry = Request {
        dryrun: true,
        ..with(block)
    };
    assert!(!ask(&mut store, &p, at(0), dry).allowed);
    assert!(store.events.is_empty());
    assert!(!block::is_boxed(store.inner.values[0].as_deref().unwrap()));
}

#[test]
fn rl_all_blocks_the_keys_that_denied_all_or_nothing() {
    let policies = [
        Policy::Gcra(Gcra::new(10, Micros::from_secs(60), 10).unwrap()),
        Policy::Fixed(FixedWindow::new(1, Micros::from_secs(1), false)),
    ];
    let mut store = told(2);
    let block = Penalty::Block(Micros::from_secs(30));
    assert!(
        engine_decide(&mut store, &policies, at(0), &with(block))
            .unwrap()
            .allowed
    );
    let d = engine_decide(&mut store, &policies, at(0), &with(block)).unwrap();
    assert_eq!((d.allowed, d.blocked_by), (false, Some(1)));
    assert_eq!(d.retry_after, RetryAfter::After(Micros::from_secs(30)));
    assert!(d.decisions[0].allowed);
    assert!(!block::is_boxed(store.inner.values[0].as_deref().unwrap()));
    assert!(block::is_boxed(store.inner.values[1].as_deref().unwrap()));
    // A key that cannot be written leaves both as they were.
    let mut failing = told(2);
    engine_decide(&mut failing, &policies, at(0), &Request::default()).unwrap();
    let before = failing.inner.values.clone();
    failing.inner.fail_prepare = Some(1);
    assert!(engine_decide(&mut failing, &policies, at(0), &with(block)).is_err());
    assert_eq!(failing.inner.values, before);
    assert!(failing.events.is_empty());
}

#[test]
fn a_patch_behind_a_running_block_lands_after_its_header() {
    // The sliding log writes patches: its state behind the header stays
    // its own.
    let p = Policy::SlidingLog(SlidingLog::new(3, Micros::from_secs(10)));
    let mut store = told(1);
    let block = Penalty::Block(Micros::from_secs(5));
    for _ in 0..3 {
        assert!(ask(&mut store, &p, at(0), with(block)).allowed);
    }
    assert!(!ask(&mut store, &p, at(0), with(block)).allowed);
    // A refund during the block: written behind the header.
    let refund = Request {
        charge: Charge::Refund,
        cost: 1,
        ..Request::default()
    };
    assert_eq!(ask(&mut store, &p, at(1), refund).decisions[0].remaining, 1);
    let v = store.inner.values[0].clone().unwrap();
    let (end, inner) = block::decode(&v).unwrap();
    assert_eq!(end, at(5));
    let fresh = p.decide(inner, at(6), 1).unwrap();
    assert!(fresh.decision.allowed);
    assert!(ask(&mut store, &p, at(6), Request::default()).allowed);
    assert!(!ask(&mut store, &p, at(6), Request::default()).allowed);
}

#[test]
fn counted_denials_dig_deeper_up_to_the_bound() {
    let p = Policy::Gcra(Gcra::new(10, Micros::from_secs(10), 10).unwrap());
    let count = Penalty::Count(Micros::from_secs(5));
    let mut store = told(1);
    for _ in 0..10 {
        assert!(ask(&mut store, &p, at(0), with(count)).allowed);
    }
    // Each denial charged: 1 s more each, up to the 5 s bound.
    let mut waits = Vec::new();
    for _ in 0..8 {
        let d = ask(&mut store, &p, at(0), with(count));
        assert!(!d.allowed);
        waits.push(d.retry_after);
    }
    let s = |n| RetryAfter::After(Micros::from_secs(n));
    assert_eq!(waits, [s(2), s(3), s(4), s(5), s(5), s(5), s(5), s(5)]);
    assert_eq!(store.events.len(), 4);
    assert_eq!(store.events[3], (0, Event::Charged { end: at(5) }));
    // A client that stops is admitted at the bound.
    assert!(
        !ask(
            &mut store,
            &p,
            Micros::new(at(5).as_u64() - 1),
            Request::default()
        )
        .allowed
    );
    assert!(ask(&mut store, &p, at(5), Request::default()).allowed);
}

#[test]
fn an_exact_log_holds_no_debt_and_counting_its_denials_is_refused() {
    let p = Policy::SlidingLog(SlidingLog::new(1, Micros::from_secs(10)));
    assert!(!p.holds_debt());
    let mut store = told(1);
    let count = Penalty::Count(Micros::from_secs(60));
    ask(&mut store, &p, at(0), Request::default());
    let before = store.inner.clone();
    let err = engine_decide(&mut store, std::slice::from_ref(&p), at(1), &with(count)).unwrap_err();
    assert_eq!(
        err.error.to_string(),
        "ERR syntax error: COUNTDENIALS cannot be combined with RL.SLIDING EXACT"
    );
    assert_eq!(store.inner, before);
    // Every other rate algorithm holds one.
    assert!(rates(1, 1).iter().filter(|p| !p.holds_debt()).count() == 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever a client sends with `COUNTDENIALS maxdebt`, no denial
    /// charged leaves a wait beyond `maxdebt`, a denial never waits longer
    /// than the bound or the limit's own wait, and a client that stops is
    /// admitted once that wait has passed.
    #[test]
    fn a_counted_debt_stays_within_its_bound(
        limit in 1u64..10, secs in 1u64..120, most_ms in 1u64..200_000,
        steps in proptest::collection::vec((0u64..3_000, 1u64..4), 1..60),
    ) {
        let most = Micros::from_millis(most_ms);
        for p in rates(limit, secs).into_iter().filter(Policy::holds_debt) {
            let mut store = told(1);
            let mut now = at(0);
            let mut last_wait = RetryAfter::NotNeeded;
            for &(gap_ms, cost) in &steps {
                now = now.saturating_add(Micros::from_millis(gap_ms));
                let plain = p.decide(store.inner.values[0].as_deref(), now, cost).unwrap().decision;
                let request = Request { cost, ..with(Penalty::Count(most)) };
                let charged = store.events.len();
                let d = ask(&mut store, &p, now, request);
                if store.events.len() > charged {
                    let Event::Charged { end } = store.events[charged].1 else { panic!() };
                    prop_assert!(end.saturating_sub(now) <= most, "{:?}", p);
                }
                if let (RetryAfter::After(w), RetryAfter::After(own)) = (d.retry_after, plain.retry_after) {
                    prop_assert!(w <= most.max(own), "{:?}: {:?} > {:?}", p, w, most.max(own));
                }
                last_wait = d.retry_after;
            }
            // The client stops: a request of one unit is admitted once the
            // last wait (for its cost) and the bound have passed.
            if let RetryAfter::After(w) = last_wait {
                let later = now.saturating_add(w.max(most)).saturating_add(Micros::from_secs(secs));
                prop_assert!(ask(&mut store, &p, later, Request::default()).allowed, "{:?}", p);
            }
        }
    }

    /// A block holds for exactly its duration from the denial that began
    /// it, however many requests come during it.
    #[test]
    fn a_block_lasts_its_duration_from_the_denial(
        limit in 1u64..5, block_s in 1u64..100, gaps in proptest::collection::vec(0u64..5_000, 1..40),
    ) {
        let p = Policy::Gcra(Gcra::new(limit, Micros::from_secs(3_600), limit).unwrap());
        let block = Penalty::Block(Micros::from_secs(block_s));
        let mut store = told(1);
        let mut now = at(0);
        for _ in 0..limit {
            ask(&mut store, &p, now, with(block));
        }
        let d = ask(&mut store, &p, now, with(block));
        prop_assert!(!d.allowed);
        let end = now.saturating_add(Micros::from_secs(block_s));
        for gap in gaps {
            now = now.saturating_add(Micros::from_millis(gap));
            if now >= end {
                break;
            }
            let d = ask(&mut store, &p, now, with(block));
            prop_assert!(!d.allowed);
            prop_assert!(wait(d.retry_after) >= end.saturating_sub(now));
        }
        prop_assert_eq!(store.events.iter().filter(|e| matches!(e.1, Event::Began { .. })).count(), 1);
    }
}

#[test]
fn a_header_cut_short_or_behind_another_is_corrupt_and_changes_nothing() {
    let p = Policy::Gcra(Gcra::new(2, Micros::from_secs(60), 2).unwrap());
    for value in [
        vec![block::TAG, 1, 2],
        block::encode(at(100), Some(&block::encode(at(100), None))).to_vec(),
    ] {
        let mut store = told(1);
        store.inner.values[0] = Some(value.clone());
        for request in [
            Request::default(),
            with(Penalty::Block(Micros::from_secs(1))),
        ] {
            let err =
                engine_decide(&mut store, std::slice::from_ref(&p), at(0), &request).unwrap_err();
            assert_eq!(err.error.to_string(), "ERR key holds corrupt RL.GCRA state");
        }
        assert_eq!(store.inner.values[0], Some(value));
    }
}
