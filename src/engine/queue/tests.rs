use super::*;
use crate::algorithm::fixed_window::FixedWindow;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::token_bucket::TokenBucket;
use crate::engine::error::Error;
use std::collections::HashMap;

const S: u64 = 1_000_000;
const BUDGET: usize = 1_000;
const T0: Micros = Micros::new(1_000 * S);

fn at(us: u64) -> Micros {
    T0.saturating_add(Micros::new(us))
}

/// One per second, no burst.
fn gcra() -> Policy {
    Policy::Gcra(Gcra::new(1, Micros::new(S), 1).unwrap())
}

/// 10 tokens, one more per second.
fn bucket() -> Policy {
    Policy::Bucket(TokenBucket::new(10, 1, Micros::new(S)).unwrap())
}

type Q = Queues<&'static str, u32>;
type Ks = MemoryKeyspace<&'static str>;

fn req(cost: u64, wait: Option<u64>) -> Request {
    Request {
        cost,
        dryrun: false,
        wait: wait.map(Micros::new),
        ..Request::default()
    }
}

/// What `server::wait` does with an arrival: reply, or enqueue.
fn arrive(
    q: &mut Q,
    ks: &mut Ks,
    keys: &[&'static str],
    policy: Policy,
    now: Micros,
    request: Request,
    token: u32,
) -> Option<Outcome> {
    let policies = vec![policy; keys.len()];
    match q.arrive(ks, keys, &policies, now, request.clone()).unwrap() {
        Arrival::Now(d) => Some(d),
        Arrival::Wait(place) => {
            let deadline = now.saturating_add(request.wait.unwrap());
            q.enqueue(
                ks,
                Waiter {
                    keys: keys.to_vec(),
                    policies,
                    cost: request.cost,
                    costs: None,
                    since: now,
                    deadline,
                    flow: None,
                    token,
                },
                place,
            );
            None
        }
        Arrival::Woken => unreachable!("only arrive_or_wake wakes"),
    }
}

fn admitted(events: &[Ended<&'static str, u32>]) -> Vec<(u32, Micros)> {
    events
        .iter()
        .filter(|e| matches!(e.ending, Ending::Admitted(_)))
        .map(|e| (e.token, e.at))
        .collect()
}

fn retry(d: &Outcome) -> RetryAfter {
    d.retry_after
}

#[test]
fn without_waiters_a_request_is_decided_plainly_or_waits_within_its_timeout() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    let d = arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(S)), 1).unwrap();
    assert!(d.allowed);
    // Denied; the wait (1 s) fits in 1 s: it waits.
    assert_eq!(
        q.arrive(&mut ks, &["k"], &[gcra()], T0, req(1, Some(S))),
        Ok(Arrival::Wait(Place {
            due: at(S),
            planned: at(S)
        }))
    );
    // Not in 999,999 µs: denied at once, as without WAIT.
    let d = arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(S - 1)), 2).unwrap();
    assert!(!d.allowed);
    assert_eq!(retry(&d), RetryAfter::After(Micros::new(S)));
    // Never admittable: denied at once.
    let d = arrive(
        &mut q,
        &mut ks,
        &["k"],
        gcra(),
        T0,
        req(2, Some(100 * S)),
        3,
    )
    .unwrap();
    assert_eq!(retry(&d), RetryAfter::Never);
    assert!(q.is_empty());
}

#[test]
fn a_waiter_is_admitted_exactly_at_its_due_time() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, None), 0);
    assert!(arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(5 * S)), 1).is_none());
    assert_eq!(q.next_event(), Some(at(S)));
    assert!(q.process(&mut ks, T0, at(S - 1), BUDGET).is_empty());
    assert_eq!(q.len(), 1);
    let events = q.process(&mut ks, at(S - 1), at(S), BUDGET);
    assert_eq!(admitted(&events), [(1, at(S))]);
    assert_eq!(events[0].since, T0);
    assert!(q.is_empty());
    assert_eq!(q.next_event(), None);
}

#[test]
fn waiters_are_admitted_first_come_first_served_whatever_their_costs() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    // Empty the bucket.
    assert!(
        arrive(&mut q, &mut ks, &["k"], bucket(), T0, req(10, None), 0)
            .unwrap()
            .allowed
    );
    // 5 tokens take 5 s; the 1-token waiter behind would fit after 1 s.
    for (token, cost) in [(1, 5), (2, 1), (3, 3)] {
        assert!(arrive(
            &mut q,
            &mut ks,
            &["k"],
            bucket(),
            T0,
            req(cost, Some(60 * S)),
            token
        )
        .is_none());
    }
    let events = q.process(&mut ks, T0, at(4 * S), BUDGET);
    assert!(events.is_empty(), "nobody overtakes the first waiter");
    let events = q.process(&mut ks, at(4 * S), at(100 * S), BUDGET);
    assert_eq!(
        admitted(&events),
        [(1, at(5 * S)), (2, at(6 * S)), (3, at(9 * S))]
    );
}

#[test]
fn a_request_without_wait_is_denied_while_it_would_delay_a_waiter() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, None), 0);
    assert!(arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(5 * S)), 1).is_none());
    // At 1.5 s the waiter is not processed yet (a late timer); the limit
    // alone would admit, but that would take the waiter's place.
    let d = arrive(&mut q, &mut ks, &["k"], gcra(), at(S / 2), req(1, None), 9).unwrap();
    assert!(!d.allowed);
    // After the waiter (admitted at 1 s), the next slot is at 2 s.
    assert_eq!(retry(&d), RetryAfter::After(Micros::new(3 * S / 2)));
    assert_eq!(d.blocked_by, Some(0));
    let events = q.process(&mut ks, at(S / 2), at(2 * S), BUDGET);
    assert_eq!(admitted(&events), [(1, at(S))]);
}

#[test]
fn a_request_without_wait_that_delays_nobody_is_admitted() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    // 5 per 10 s, windows aligned to the epoch: T0 starts one.
    let fixed = Policy::Fixed(FixedWindow::new(5, Micros::new(10 * S), true));
    assert!(
        arrive(&mut q, &mut ks, &["k"], fixed.clone(), T0, req(3, None), 0)
            .unwrap()
            .allowed
    );
    // 5 more only in the next window.
    assert!(arrive(
        &mut q,
        &mut ks,
        &["k"],
        fixed.clone(),
        T0,
        req(5, Some(20 * S)),
        1
    )
    .is_none());
    // One now does not delay it: the window resets first.
    let d = arrive(
        &mut q,
        &mut ks,
        &["k"],
        fixed.clone(),
        at(S),
        req(1, None),
        9,
    )
    .unwrap();
    assert!(d.allowed);
    assert_eq!(d.decisions[0].remaining, 1);
    // Three would not fit this window (4 used): denied, after the queue.
    let d = arrive(
        &mut q,
        &mut ks,
        &["k"],
        fixed.clone(),
        at(S),
        req(3, None),
        9,
    )
    .unwrap();
    assert!(!d.allowed);
    assert_eq!(
        admitted(&q.process(&mut ks, at(S), at(10 * S), BUDGET)),
        [(1, at(10 * S))]
    );
}

#[test]
fn a_waiter_whose_place_in_the_queue_is_past_its_timeout_is_denied_at_once() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, None), 0);
    assert!(arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(5 * S)), 1).is_none());
    // Alone it would wait 1 s; behind the first waiter, 2 s.
    let d = arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(S)), 2).unwrap();
    assert!(!d.allowed);
    assert_eq!(retry(&d), RetryAfter::After(Micros::new(2 * S)));
    assert!(arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(2 * S)), 3).is_none());
    assert_eq!(q.len(), 2);
}

#[test]
fn a_waiter_times_out_at_its_deadline_behind_another() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    arrive(&mut q, &mut ks, &["k"], bucket(), T0, req(10, None), 0);
    assert!(arrive(
        &mut q,
        &mut ks,
        &["k"],
        bucket(),
        T0,
        req(5, Some(60 * S)),
        1
    )
    .is_none());
    // Enqueued directly with a deadline before its place comes.
    q.enqueue(
        &mut ks,
        Waiter {
            keys: vec!["k"],
            policies: vec![bucket()],
            cost: 1,
            costs: None,
            since: T0,
            deadline: at(3 * S),
            flow: None,
            token: 2,
        },
        Place {
            due: T0,
            planned: at(6 * S),
        },
    );
    let events = q.process(&mut ks, T0, at(3 * S - 1), BUDGET);
    assert!(events.is_empty());
    let events = q.process(&mut ks, at(3 * S - 1), at(3 * S), BUDGET);
    assert_eq!(events.len(), 1);
    let Ending::TimedOut(d) = &events[0].ending else {
        panic!("{events:?}")
    };
    assert_eq!((events[0].token, events[0].at), (2, at(3 * S)));
    assert!(!d.allowed);
    // After the first waiter (5 s) and its own token (6 s).
    assert_eq!(retry(d), RetryAfter::After(Micros::new(3 * S)));
    assert_eq!(
        admitted(&q.process(&mut ks, at(3 * S), at(9 * S), BUDGET)),
        [(1, at(5 * S))]
    );
}

#[test]
fn a_place_given_up_lets_the_next_waiter_in_at_once() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    arrive(&mut q, &mut ks, &["k"], bucket(), T0, req(10, None), 0);
    assert!(arrive(
        &mut q,
        &mut ks,
        &["k"],
        bucket(),
        T0,
        req(8, Some(60 * S)),
        1
    )
    .is_none());
    assert!(arrive(
        &mut q,
        &mut ks,
        &["k"],
        bucket(),
        T0,
        req(2, Some(60 * S)),
        2
    )
    .is_none());
    assert!(q.process(&mut ks, T0, at(3 * S), BUDGET).is_empty());
    assert!(q.abandon(&1, at(3 * S)).is_some());
    assert_eq!(q.next_event(), Some(at(3 * S)));
    assert_eq!(
        admitted(&q.process(&mut ks, at(3 * S), at(3 * S), BUDGET)),
        [(2, at(3 * S))]
    );
    assert!(q.abandon(&1, at(3 * S)).is_none());
}

#[test]
fn a_wait_ended_early_is_a_timeout_with_the_denial_as_of_then() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, None), 0);
    assert!(arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(5 * S)), 1).is_none());
    let event = q.time_out(&mut ks, &1, at(S / 4)).unwrap();
    let Ending::TimedOut(d) = event.ending else {
        panic!()
    };
    assert_eq!(retry(&d), RetryAfter::After(Micros::new(3 * S / 4)));
    assert!(q.is_empty());
}

#[test]
fn several_keys_wait_in_every_line_for_the_slowest_limit() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    // "a" is empty for 5 s, "b" for 2 s.
    arrive(&mut q, &mut ks, &["a"], bucket(), T0, req(10, None), 0);
    arrive(&mut q, &mut ks, &["b"], bucket(), T0, req(10, None), 0);
    assert!(arrive(
        &mut q,
        &mut ks,
        &["b"],
        bucket(),
        T0,
        req(2, Some(60 * S)),
        1
    )
    .is_none());
    assert!(arrive(
        &mut q,
        &mut ks,
        &["a", "b"],
        bucket(),
        T0,
        req(5, Some(60 * S)),
        2
    )
    .is_none());
    // Behind 2 on "b" only: admitted at 2 s, it does not wait for "a".
    assert!(arrive(
        &mut q,
        &mut ks,
        &["b"],
        bucket(),
        T0,
        req(1, Some(60 * S)),
        3
    )
    .is_none());
    let events = q.process(&mut ks, T0, at(60 * S), BUDGET);
    // 1 at 2 s; 2 needs "a" (5 s) and "b" (5 more tokens after 1 took 2:
    // 7 s); 3 behind it on "b": one token, at 8 s.
    assert_eq!(
        admitted(&events),
        [(1, at(2 * S)), (2, at(7 * S)), (3, at(8 * S))]
    );
}

#[test]
fn a_deadline_in_the_same_instant_as_the_due_time_admits() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, None), 0);
    assert!(arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(S)), 1).is_none());
    assert_eq!(
        admitted(&q.process(&mut ks, T0, at(10 * S), BUDGET)),
        [(1, at(S))]
    );
}

#[test]
fn dryrun_never_waits() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, None), 0);
    let request = Request {
        dryrun: true,
        ..req(1, Some(5 * S))
    };
    let d = q.arrive(&mut ks, &["k"], &[gcra()], T0, request).unwrap();
    assert!(matches!(d, Arrival::Now(d) if !d.allowed));
}

#[test]
fn release_all_denies_everyone_and_writes_nothing() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, None), 0);
    let before = ks.values.clone();
    assert!(arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(5 * S)), 1).is_none());
    assert!(arrive(&mut q, &mut ks, &["k"], gcra(), T0, req(1, Some(5 * S)), 2).is_none());
    let events = q.release(&mut ks, at(S / 2), BUDGET);
    let tokens: Vec<u32> = events.iter().map(|e| e.token).collect();
    assert_eq!(tokens, [1, 2]);
    assert!(events
        .iter()
        .all(|e| matches!(&e.ending, Ending::TimedOut(d) if !d.allowed)));
    assert!(q.is_empty());
    assert_eq!(ks.values, before);
}

/// Two units, leases of an hour.
fn concurrency() -> Policy {
    Policy::Concurrency(crate::algorithm::concurrency::Concurrency::new(
        2,
        Micros::new(3_600 * S),
    ))
}

#[test]
fn a_released_lease_wakes_the_first_waiter_at_once_in_arrival_order() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    let first = arrive(&mut q, &mut ks, &["k"], concurrency(), T0, req(2, None), 0).unwrap();
    assert!(first.allowed);
    let lease = first.leases[0].flatten().unwrap();
    // Both wait although the hour is beyond their timeouts: a release may
    // come first. The second asks for one unit, the first for two.
    assert!(arrive(
        &mut q,
        &mut ks,
        &["k"],
        concurrency(),
        T0,
        req(2, Some(S)),
        1
    )
    .is_none());
    assert!(arrive(
        &mut q,
        &mut ks,
        &["k"],
        concurrency(),
        at(1),
        req(1, Some(S)),
        2
    )
    .is_none());
    // The head is due at the hour; nothing happens before.
    assert!(q.process(&mut ks, at(1), at(10), BUDGET).is_empty());
    // Released behind the queue's back, then the line is woken.
    let value = ks.values.get("k").unwrap().clone();
    let stored = crate::codec::lease::StoredLeases::decode(&value).unwrap();
    let change =
        crate::algorithm::concurrency::release(stored.header, &stored, lease, at(20)).unwrap();
    let mut v = value.clone();
    crate::codec::lease::change_patch(&change).apply_to(&mut v);
    ks.values.insert("k", v);
    q.wake(&"k", at(20));
    let events = q.process(&mut ks, at(20), at(20), BUDGET);
    // First come, first served: 1 (two units) before 2 (one unit, which
    // must then wait for a release or an expiry).
    assert_eq!(admitted(&events), [(1, at(20))]);
    assert_eq!(q.len(), 1);
    // 2 gives up at its deadline.
    let events = q.process(&mut ks, at(20), at(S + 1), BUDGET);
    assert!(matches!(events[0].ending, Ending::TimedOut(_)));
    assert!(q.is_empty());
}

/// A keyspace that counts what the queue asks of it.
struct Counting {
    inner: Ks,
    calls: usize,
}

impl Keyspace<&'static str> for Counting {
    fn value(&mut self, key: &&'static str) -> Result<Option<Vec<u8>>, Error> {
        self.calls += 1;
        self.inner.value(key)
    }

    fn small_value(
        &mut self,
        key: &&'static str,
        max: usize,
    ) -> Result<Option<Option<Vec<u8>>>, Error> {
        self.calls += 1;
        self.inner.small_value(key, max)
    }

    fn decide(
        &mut self,
        keys: &[&'static str],
        policies: &[Policy],
        at: Micros,
        request: Request,
    ) -> Result<Outcome, KeyError> {
        self.calls += 1;
        self.inner.decide(keys, policies, at, request)
    }
}

#[test]
fn an_arrival_asks_the_keyspace_the_same_behind_3_and_3000_waiters() {
    let (mut q, mut ks) = (
        Q::new(),
        Counting {
            inner: Ks::default(),
            calls: 0,
        },
    );
    // Past the default bound on one key's line (no other test comes near).
    crate::bounds::MAX_WAITERS_PER_KEY.set(10_000).unwrap();
    let policy = gcra();
    let cost_at = |q: &mut Q, ks: &mut Counting, n: u32| {
        while q.len() < n as usize {
            let token = q.len() as u32 + 1;
            let request = req(1, Some(100_000 * S));
            match q
                .arrive(
                    ks,
                    &["k"],
                    std::slice::from_ref(&policy),
                    T0,
                    request.clone(),
                )
                .unwrap()
            {
                Arrival::Wait(place) => {
                    let waiter = Waiter {
                        keys: vec!["k"],
                        policies: vec![policy.clone()],
                        cost: 1,
                        costs: None,
                        since: T0,
                        deadline: T0.saturating_add(Micros::new(100_000 * S)),
                        flow: None,
                        token,
                    };
                    q.enqueue(ks, waiter, place);
                }
                Arrival::Now(d) => assert!(d.allowed, "{d:?}"),
                Arrival::Woken => unreachable!("only arrive_or_wake wakes"),
            }
        }
        let before = ks.calls;
        let d = q
            .arrive(ks, &["k"], std::slice::from_ref(&policy), T0, req(1, None))
            .unwrap();
        assert!(matches!(d, Arrival::Now(ref d) if !d.allowed));
        ks.calls - before
    };
    let at_3 = cost_at(&mut q, &mut ks, 3);
    let at_3000 = cost_at(&mut q, &mut ks, 3_000);
    assert_eq!(at_3, at_3000);
    // Admitting all of them touches each once, in order.
    let events = q.process(&mut ks.inner, T0, at(4_000 * S), 10_000);
    let tokens: Vec<u32> = admitted(&events).iter().map(|e| e.0).collect();
    assert_eq!(tokens, (1..=3_000).collect::<Vec<_>>());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Whatever the arrivals, waits, departures and clock moves: waiters
    /// are admitted in arrival order, never after their deadline, and
    /// each admission is one the limit itself allows.
    #[test]
    fn waiters_are_admitted_in_order_by_their_deadlines(
        ops in proptest::collection::vec((0u8..4, 0u64..3, 0u64..4_000_000), 1..80),
    ) {
        let (mut q, mut ks) = (Q::new(), Ks::default());
        let policy = bucket();
        let mut now = T0;
        let mut next = 1u32;
        let mut deadlines = HashMap::new();
        let mut last_admitted = 0u32;
        for (op, cost, dt) in ops {
            match op {
                0 | 1 => {
                    let wait = (op == 0).then_some(dt.max(1));
                    let token = next;
                    next += 1;
                    if arrive(&mut q, &mut ks, &["k"], policy.clone(), now, req(cost, wait), token).is_none() {
                        deadlines.insert(token, now.saturating_add(Micros::new(dt.max(1))));
                    }
                }
                2 => {
                    if let Some(&token) = deadlines.keys().next() {
                        q.abandon(&token, now);
                        deadlines.remove(&token);
                    }
                }
                _ => {
                    let to = now.saturating_add(Micros::new(dt));
                    for e in q.process(&mut ks, now, to, 10_000) {
                        let deadline = deadlines.remove(&e.token).unwrap();
                        proptest::prop_assert!(e.at <= deadline);
                        if matches!(e.ending, Ending::Admitted(_)) {
                            proptest::prop_assert!(e.token > last_admitted);
                            last_admitted = e.token;
                        }
                    }
                    now = to;
                }
            }
        }
    }
}

/// A key deleted behind the queue's back (a command outside the module):
/// a request never goes ahead of its line; `arrive_or_wake` makes the
/// waiters its value admits due now, so that they go first, in order,
/// and the request is decided after them. Only when the keys alone admit
/// the request, and one decision per line.
#[test]
fn a_key_changed_behind_the_queues_back_lets_its_waiters_go_first() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    let policy = bucket();
    arrive(
        &mut q,
        &mut ks,
        &["k"],
        policy.clone(),
        T0,
        req(10, None),
        0,
    )
    .unwrap();
    for token in 1..=3 {
        let waited = arrive(
            &mut q,
            &mut ks,
            &["k"],
            policy.clone(),
            T0,
            req(4, Some(100 * S)),
            token,
        );
        assert!(waited.is_none());
    }
    ks.values.remove("k");
    let policies = [policy];
    // Without waking: denied behind the line.
    match q.arrive(&mut ks, &["k"], &policies, T0, req(1, None)) {
        Ok(Arrival::Now(d)) => assert!(!d.allowed, "{d:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        q.arrive_or_wake(&mut ks, &["k"], &policies, T0, req(1, None)),
        Ok(Arrival::Woken)
    );
    let events = q.process(&mut ks, T0, T0, BUDGET);
    // The full bucket of 10 takes the first two waiters of 4, in order.
    assert_eq!(admitted(&events), vec![(1, T0), (2, T0)]);
    assert_eq!(q.len(), 1);
    // Then the request: 2 left, but the third waiter's 4 come first.
    match q.arrive_or_wake(&mut ks, &["k"], &policies, T0, req(1, None)) {
        Ok(Arrival::Now(d)) => assert!(!d.allowed, "{d:?}"),
        other => panic!("{other:?}"),
    }
    // A request the key alone denies wakes nothing.
    match q.arrive_or_wake(&mut ks, &["k"], &policies, T0, req(5, None)) {
        Ok(Arrival::Now(d)) => assert!(!d.allowed, "{d:?}"),
        other => panic!("{other:?}"),
    }
}

/// A request without `WAIT` behind a line is told when the line, played
/// out, admits it: at most `FORESEE_WAITERS` waiters are played out,
/// whatever the line's length (10 and 10,000 waiters), and a request
/// hammering a line that has not changed plays nothing out again.
#[test]
fn a_told_request_plays_out_as_much_behind_10_and_10_000_waiters() {
    use super::foresee::FORESEE_WAITERS;
    use super::place::ATTEMPTS;
    // Past the default bound on one key's line (as the test above).
    crate::bounds::MAX_WAITERS_PER_KEY.set(10_000).unwrap();
    // Per waiter played out: its decisions, the request's, and the
    // queue's rule for going ahead.
    let most = (FORESEE_WAITERS as u64 + 1) * (2 * ATTEMPTS as u64 + 4);
    let fixed = Policy::Fixed(FixedWindow::new(5, Micros::new(10 * S), true));
    let mut played = Vec::new();
    for n in [10u32, 10_000] {
        let (mut q, mut ks) = (Q::new(), Ks::default());
        for _ in 0..5 {
            let d = arrive(&mut q, &mut ks, &["k"], fixed.clone(), T0, req(1, None), 0);
            assert!(d.unwrap().allowed);
        }
        // Costs 2, 1, 2, 1, …; the first of cost 1 leaves.
        for token in 1..=n {
            let wait = req(1 + u64::from(token % 2), Some(100_000 * S));
            assert!(arrive(&mut q, &mut ks, &["k"], fixed.clone(), T0, wait, token).is_none());
        }
        q.abandon(&2, T0);
        let before = q.played();
        let told = arrive(&mut q, &mut ks, &["k"], fixed.clone(), T0, req(1, None), 0).unwrap();
        assert!(!told.allowed);
        let first = q.played() - before;
        assert!(first > 0 && first <= most, "{n}: {first} > {most}");
        if n == 10 {
            // Windows of 2+2+1, 2+1+2 and 1+2+1: one unit is left in the
            // third, and nobody waits after it.
            assert_eq!(retry(&told), RetryAfter::After(Micros::new(30 * S)));
        }
        // Again, a millisecond later: the figure kept.
        let later = at(1_000);
        let mut ask_again = |q: &mut Q| {
            let again = arrive(q, &mut ks, &["k"], fixed.clone(), later, req(1, None), 0);
            assert!(!again.unwrap().allowed);
        };
        ask_again(&mut q);
        assert_eq!(q.played(), before + first);
        // A waiter leaves: played out again.
        q.abandon(&3, later);
        ask_again(&mut q);
        assert!(q.played() > before + first);
        played.push(first);
    }
    println!("decisions played out behind 10 and 10,000 waiters: {played:?}");
}
