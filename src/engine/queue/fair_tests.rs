//! Fair waiting: flows on one key share its admissions by weight.

use super::*;
use crate::algorithm::gcra::Gcra;
use crate::bounds;

const S: u64 = 1_000_000;
const T0: Micros = Micros::new(1_000 * S);
const LONG: Micros = Micros::new(100_000 * S);

type Q = Queues<&'static str, u32>;
type Ks = MemoryKeyspace<&'static str>;

/// One per second, no burst: one admission a second.
fn gcra() -> Policy {
    Policy::Gcra(Gcra::new(1, Micros::new(S), 1).unwrap())
}

fn secs(n: u64) -> Micros {
    T0.saturating_add(Micros::new(n * S))
}

/// A key where flows offer requests with `WAIT` and the queue admits them.
struct Key {
    q: Q,
    ks: Ks,
    next_token: u32,
    /// The flow of each token.
    flows: HashMap<u32, &'static str>,
    /// Admissions so far: token and flow, in order.
    admitted: Vec<(u32, &'static str)>,
    now: Micros,
}

impl Key {
    fn new() -> Key {
        let mut key = Key {
            q: Q::new(),
            ks: Ks::default(),
            next_token: 0,
            flows: HashMap::new(),
            admitted: Vec::new(),
            now: T0,
        };
        // The one admission of this second goes to nobody: every request
        // after it waits.
        let d = key
            .q
            .arrive(&mut key.ks, &["k"], &[gcra()], T0, Request::default())
            .unwrap();
        assert!(matches!(d, Arrival::Now(d) if d.allowed));
        key
    }

    /// A request of `flow` (weight `weight`; `""`: without FLOW) arrives
    /// now with `WAIT` of `wait`; its token, or `None` if it was answered
    /// at once.
    fn offer(&mut self, flow: &'static str, weight: u64, wait: Micros) -> Option<u32> {
        let flow_of = (!flow.is_empty()).then(|| Flow {
            name: flow.as_bytes().to_vec(),
            weight,
        });
        let request = Request {
            wait: Some(wait),
            flow: flow_of.clone(),
            ..Request::default()
        };
        let arrival = self
            .q
            .arrive(&mut self.ks, &["k"], &[gcra()], self.now, request)
            .unwrap();
        let Arrival::Wait(place) = arrival else {
            return None;
        };
        let token = self.next_token;
        self.next_token += 1;
        self.flows.insert(token, flow);
        let waiter = Waiter {
            keys: vec!["k"],
            policies: vec![gcra()],
            cost: 1,
            costs: None,
            since: self.now,
            deadline: self.now.saturating_add(wait),
            flow: flow_of,
            token,
        };
        self.q.enqueue(&mut self.ks, waiter, place);
        Some(token)
    }

    /// Time moves to `to`; the admissions due by then happen.
    fn run_to(&mut self, to: Micros) {
        let events = self.q.process(&mut self.ks, self.now, to, 10_000);
        for e in events {
            if matches!(e.ending, Ending::Admitted(_)) {
                self.admitted.push((e.token, self.flows[&e.token]));
            }
        }
        self.now = to;
    }

    fn waiting(&self, flow: &'static str) -> usize {
        let name = (!flow.is_empty()).then(|| flow.as_bytes().to_vec());
        self.q.flow_len(&"k", &name)
    }

    /// The share of `flow` in the admissions from the `from`-th on.
    fn share(&self, flow: &str, from: usize) -> f64 {
        let window = &self.admitted[from..];
        let of = window.iter().filter(|(_, f)| *f == flow).count();
        of as f64 / window.len() as f64
    }
}

/// Offers `heavy` requests of flow "heavy" and `light` of flow "light" a
/// second for `seconds` (weights as given), admitting as time goes; the
/// light flow's share of the admissions once both are backlogged.
fn offered(heavy: (usize, u64), light: (usize, u64), seconds: u64) -> (Key, f64) {
    let mut key = Key::new();
    for s in 0..seconds {
        for _ in 0..heavy.0 {
            key.offer("heavy", heavy.1, LONG);
        }
        for _ in 0..light.0 {
            key.offer("light", light.1, LONG);
        }
        key.run_to(secs(s + 1));
        if s > 5 {
            assert!(key.waiting("heavy") > 0 && key.waiting("light") > 0);
        }
    }
    let share = key.share("light", 5);
    (key, share)
}

#[test]
fn two_flows_offered_10_to_1_with_equal_weights_share_half_and_half() {
    let (key, share) = offered((10, 1), (1, 1), 120);
    assert!((0.45..=0.55).contains(&share), "light share {share}");
    assert!(key.admitted.len() >= 110, "{}", key.admitted.len());
}

#[test]
fn weights_3_to_1_share_three_quarters_to_one_quarter() {
    let (_, share) = offered((10, 3), (1, 1), 120);
    assert!((0.20..=0.30).contains(&share), "light share {share}");
    let (_, share) = offered((10, 1), (1, 3), 120);
    assert!((0.70..=0.80).contains(&share), "light share {share}");
}

#[test]
fn a_lone_flow_gets_the_whole_rate_first_come_first_served() {
    let mut key = Key::new();
    let tokens: Vec<u32> = (0..30).filter_map(|_| key.offer("a", 5, LONG)).collect();
    assert_eq!(tokens.len(), 30);
    key.run_to(secs(30));
    let order: Vec<u32> = key.admitted.iter().map(|a| a.0).collect();
    assert_eq!(order, tokens, "one a second, in arrival order");
}

#[test]
fn inside_a_flow_waiters_are_admitted_in_arrival_order() {
    let mut key = Key::new();
    for i in 0..60 {
        key.offer(if i % 3 == 0 { "b" } else { "a" }, 1 + i % 2, LONG);
    }
    key.run_to(secs(60));
    assert_eq!(key.admitted.len(), 60);
    for flow in ["a", "b"] {
        let order: Vec<u32> = key
            .admitted
            .iter()
            .filter(|a| a.1 == flow)
            .map(|a| a.0)
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{flow}: {order:?}");
    }
}

#[test]
fn a_new_flow_is_admitted_within_one_round_however_long_the_lines() {
    let mut key = Key::new();
    for _ in 0..90 {
        key.offer("a", 1, LONG);
        key.offer("b", 1, LONG);
        key.offer("", 1, LONG);
    }
    key.run_to(secs(40));
    let before = key.admitted.len();
    let token = key.offer("new", 1, LONG).expect("waits");
    // One round of the three flows present, and the head already chosen.
    key.run_to(secs(44));
    let firsts: Vec<u32> = key.admitted[before..].iter().map(|a| a.0).collect();
    assert!(firsts.contains(&token), "{firsts:?}");
    // The same with a weight of 1 against flows of weight 1,000.
    let mut key = Key::new();
    for _ in 0..90 {
        key.offer("a", 1_000, LONG);
        key.offer("b", 1_000, LONG);
    }
    key.run_to(secs(20));
    let before = key.admitted.len();
    let token = key.offer("new", 1, LONG).expect("waits");
    key.run_to(secs(20 + 1_000));
    let position = key.admitted[before..].iter().position(|a| a.0 == token);
    assert!(position.is_some_and(|p| p <= 2_001), "{position:?}");
}

#[test]
fn without_flow_everyone_is_one_flow_first_come_first_served() {
    let mut key = Key::new();
    let tokens: Vec<u32> = (0..20).filter_map(|_| key.offer("", 1, LONG)).collect();
    key.run_to(secs(20));
    let order: Vec<u32> = key.admitted.iter().map(|a| a.0).collect();
    assert_eq!(order, tokens);
}

#[test]
fn abandons_and_timeouts_keep_the_shares() {
    let mut key = Key::new();
    let mut heavy = Vec::new();
    for s in 0..120u64 {
        for _ in 0..10 {
            heavy.extend(key.offer("heavy", 1, LONG));
        }
        key.offer("light", 1, LONG);
        // Every other second a light waiter gives up at once (CLIENT
        // UNBLOCK) and three heavy ones disconnect, the oldest first:
        // their fronts among them.
        let now = key.now;
        if s % 2 == 0 {
            key.offer("light", 1, LONG)
                .and_then(|t| key.q.time_out(&mut key.ks, &t, now));
            for _ in 0..3 {
                let oldest = heavy.iter().position(|t| key.q.by_token.contains_key(t));
                if let Some(i) = oldest {
                    key.q.abandon(&heavy.remove(i), now);
                }
            }
        }
        key.run_to(secs(s + 1));
    }
    let share = key.share("light", 5);
    assert!((0.45..=0.55).contains(&share), "light share {share}");
}

#[test]
fn a_flow_past_its_bound_is_denied_at_once_with_its_wait() {
    let mut key = Key::new();
    let bound = bounds::MAX_WAITERS_PER_FLOW.get() as usize;
    for _ in 0..bound {
        assert!(key.offer("a", 1, LONG).is_some());
    }
    let request = Request {
        wait: Some(LONG),
        flow: Some(Flow {
            name: b"a".to_vec(),
            weight: 1,
        }),
        ..Request::default()
    };
    let arrival = key.q.arrive(&mut key.ks, &["k"], &[gcra()], T0, request);
    let Ok(Arrival::Now(d)) = arrival else {
        panic!("{arrival:?}");
    };
    assert!(!d.allowed);
    assert_eq!(
        d.retry_after,
        RetryAfter::After(Micros::new(bound as u64 * S + S))
    );
    // Another flow still waits.
    assert!(key.offer("b", 1, LONG).is_some());
    assert!(key.offer("", 1, LONG).is_some());
}

#[test]
fn a_flow_waits_out_its_timeout_where_other_flows_wait() {
    let mut key = Key::new();
    for _ in 0..50 {
        key.offer("a", 1, LONG);
    }
    // The plan puts it after the 50: 51 s; its turn comes in 2.
    let token = key.offer("b", 1, Micros::new(5 * S)).expect("waits");
    key.run_to(secs(5));
    assert!(key.admitted.iter().any(|a| a.0 == token));
    // Alone in its flow's line, a wait past the plan is denied at once.
    assert!(key.offer("a", 1, Micros::new(5 * S)).is_none());
}

/// A client that re-sends as soon as it is answered: `clients` of them in
/// flow `flow` of weight `weight`.
#[derive(Debug, Clone, Copy)]
struct ClosedLoop {
    flow: &'static str,
    weight: u64,
    clients: usize,
}

impl Key {
    /// Time moves to `to` one event at a time; each admitted client of a
    /// closed-loop flow re-sends at the instant it is answered.
    fn run_closed_loop(&mut self, to: Micros, loops: &[ClosedLoop]) {
        while let Some(next) = self.q.next_event().filter(|&t| t <= to) {
            let at = next.max(self.now);
            for e in self.q.process(&mut self.ks, self.now, at, 1) {
                let flow = self.flows[&e.token];
                if matches!(e.ending, Ending::Admitted(_)) {
                    self.admitted.push((e.token, flow));
                }
                self.now = at;
                if let Some(l) = loops.iter().find(|l| l.flow == flow) {
                    self.offer(l.flow, l.weight, LONG);
                }
            }
            self.now = at;
        }
        self.now = to;
    }

    /// Each flow's share of the admissions from the `from`-th on, against
    /// its weight over the weights of all (every flow wants service).
    fn shares_against_weights(
        &self,
        weights: &[(&'static str, u64)],
        from: usize,
    ) -> Vec<(f64, f64)> {
        let total: u64 = weights.iter().map(|w| w.1).sum();
        weights
            .iter()
            .map(|&(flow, w)| (self.share(flow, from), w as f64 / total as f64))
            .collect()
    }
}

/// `loops` closed-loop flows and `backlogged` flows (flow, weight), each of
/// the latter offered `per_second` requests a second, for `seconds`; each
/// flow's measured share against its ideal one.
fn mixed(
    loops: &[ClosedLoop],
    backlogged: &[(&'static str, u64)],
    seconds: u64,
) -> Vec<(f64, f64)> {
    let mut key = Key::new();
    for l in loops {
        for _ in 0..l.clients {
            key.offer(l.flow, l.weight, LONG);
        }
    }
    for s in 0..seconds {
        for &(flow, weight) in backlogged {
            // Enough to stay backlogged, within the flow's bound.
            while key.waiting(flow) < 20 {
                key.offer(flow, weight, LONG);
            }
        }
        key.run_closed_loop(secs(s + 1), loops);
    }
    let mut weights: Vec<(&'static str, u64)> = loops.iter().map(|l| (l.flow, l.weight)).collect();
    weights.extend_from_slice(backlogged);
    key.shares_against_weights(&weights, 20)
}

fn within_5_percent(shares: &[(f64, f64)]) -> bool {
    shares
        .iter()
        .all(|&(got, ideal)| (got - ideal).abs() <= 0.05 * ideal)
}

#[test]
fn a_one_client_flow_that_re_sends_at_once_gets_its_weights_share_and_no_more() {
    let one = |flow, weight| ClosedLoop {
        flow,
        weight,
        clients: 1,
    };
    // Against a backlogged flow of 100 waiters, weights 1:1 and 8:1.
    let shares = mixed(&[one("b", 1)], &[("a", 1)], 400);
    assert!(within_5_percent(&shares), "{shares:?}");
    let shares = mixed(&[one("b", 1)], &[("a", 8)], 900);
    assert!(within_5_percent(&shares), "{shares:?}");
    // One client per flow, weights 1:4: the weights count.
    let shares = mixed(&[one("a", 1), one("b", 4)], &[], 500);
    assert!(within_5_percent(&shares), "{shares:?}");
    // Five backlogged flows (1, 1, 2, 4, 8) and a sixth of one client.
    let five = [("f1", 1), ("f2", 1), ("f3", 2), ("f4", 4), ("f5", 8)];
    let shares = mixed(&[one("six", 1)], &five, 1_700);
    assert!(within_5_percent(&shares), "{shares:?}");
}

#[test]
fn a_flow_idle_for_a_while_banks_no_credit() {
    let mut key = Key::new();
    for _ in 0..30 {
        key.offer("a", 1, LONG);
    }
    // b is admitted once, then stays away for 10 s while a goes on.
    key.offer("b", 1, LONG);
    key.run_to(secs(12));
    assert_eq!(key.waiting("b"), 0);
    let before = key.admitted.len();
    for _ in 0..10 {
        key.offer("b", 1, LONG);
    }
    key.run_to(secs(22));
    // Back, b alternates with a: it saved nothing up.
    let b = key.admitted[before..].iter().filter(|a| a.1 == "b").count();
    assert_eq!(b, 5, "{:?}", &key.admitted[before..]);
    // Nothing is remembered past the virtual time.
    assert!(key.q.remembered_flows() <= 1);
}

#[test]
fn remembered_flows_are_forgotten_past_the_bound() {
    // One backlogged flow and 10,000 one-shot flows (1,000 times a happy
    // path's ten), each remembered after its admission: each joins at the
    // virtual time and goes before a, so none is passed while they come.
    // Other tests here use fewer flows than this bound.
    bounds::MAX_REMEMBERED_FLOWS.set(5_000).unwrap();
    let mut key = Key::new();
    for _ in 0..20 {
        key.offer("a", 1, LONG);
    }
    for i in 0..10_000 {
        key.offer(Box::leak(format!("o{i}").into_boxed_str()), 1_000, LONG);
        key.run_to(secs(i + 1));
    }
    assert!(key.waiting("a") >= 19);
    let remembered = key.q.remembered_flows();
    bounds::MAX_REMEMBERED_FLOWS.reset();
    assert!((4_900..=5_000).contains(&remembered), "{remembered}");
    // Once a's turns pass them, a few are forgotten at each step.
    key.run_to(secs(10_019));
    assert!(key.q.remembered_flows() <= remembered - 2 * 19);
    // Here, not in a test of its own: the bound is the server's, shared
    // by the tests running beside this one.
    keys_resting_longest_forget_first();
}

/// Past the bound, the flows of the keys that have rested longest (nobody
/// waiting) are forgotten first: 5,010 keys come to rest in turn, each
/// remembering the flow of its one waiter, under a bound of 5,000; the 10
/// first forget theirs, and each key that rested last keeps its flow
/// (where a client re-sending at once takes up).
fn keys_resting_longest_forget_first() {
    bounds::MAX_REMEMBERED_FLOWS.set(5_000).unwrap();
    let (mut q, mut ks) = (Q::new(), Ks::default());
    let flow = Flow {
        name: b"f".to_vec(),
        weight: 1,
    };
    let names: Vec<&'static str> = (0..5_010)
        .map(|i| &*Box::leak(format!("r{i}").into_boxed_str()))
        .collect();
    for (token, &name) in (0u32..).zip(&names) {
        let now = secs(u64::from(token));
        let used = q.arrive(&mut ks, &[name], &[gcra()], now, Request::default());
        assert!(matches!(used, Ok(Arrival::Now(d)) if d.allowed));
        let request = Request {
            wait: Some(LONG),
            flow: Some(flow.clone()),
            ..Request::default()
        };
        let Ok(Arrival::Wait(place)) = q.arrive(&mut ks, &[name], &[gcra()], now, request) else {
            panic!("{name} did not wait");
        };
        let waiter = Waiter {
            keys: vec![name],
            policies: vec![gcra()],
            cost: 1,
            costs: None,
            since: now,
            deadline: now.saturating_add(LONG),
            flow: Some(flow.clone()),
            token,
        };
        q.enqueue(&mut ks, waiter, place);
        let admitted = q.process(&mut ks, now, secs(u64::from(token) + 1), 10);
        assert_eq!(admitted.len(), 1, "{name}");
    }
    let remembered = q.remembered_flows();
    bounds::MAX_REMEMBERED_FLOWS.reset();
    assert_eq!(remembered, 5_000);
    let resting = |name: &&'static str| q.resting.contains_key(name);
    assert!(!names[..10].iter().any(resting));
    assert!(names[10..].iter().all(resting));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Closed-loop flows of one to three clients and backlogged flows, any
    /// weights from 1 to 8: every flow's share is its weight over the
    /// weights of all, within 5 %.
    #[test]
    fn closed_loop_and_backlogged_flows_share_by_weight(
        loop_weights in proptest::collection::vec((1u64..=8, 1usize..=3), 1..4),
        backlog_weights in proptest::collection::vec(1u64..=8, 0..3),
    ) {
        const LOOPS: [&str; 3] = ["l0", "l1", "l2"];
        const BACKLOGS: [&str; 3] = ["b0", "b1", "b2"];
        let loops: Vec<ClosedLoop> = loop_weights
            .iter()
            .enumerate()
            .map(|(i, &(weight, clients))| ClosedLoop { flow: LOOPS[i], weight, clients })
            .collect();
        let backlogged: Vec<(&'static str, u64)> = backlog_weights
            .iter()
            .enumerate()
            .map(|(i, &w)| (BACKLOGS[i], w))
            .collect();
        let total: u64 = loop_weights.iter().map(|w| w.0).sum::<u64>() + backlog_weights.iter().sum::<u64>();
        // Enough admissions for the smallest share to count 100 of them.
        let seconds = 100 * total + 40;
        let shares = mixed(&loops, &backlogged, seconds);
        proptest::prop_assert!(within_5_percent(&shares), "{:?}", shares);
    }
}
