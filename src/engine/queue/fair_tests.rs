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
