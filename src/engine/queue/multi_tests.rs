//! Fair waiting over several keys (RL.ALL, RL.SHARE): every waiter is
//! admitted or times out, whatever the flows and the orders of the keys;
//! first come first served inside a flow; flows share the capacity their
//! keys have in common by weight.

use super::*;
use crate::algorithm::gcra::Gcra;
use crate::algorithm::share::{Definition, Node};
use proptest::prelude::*;

const S: u64 = 1_000_000;
const T0: Micros = Micros::new(1_000 * S);
const LONG: Micros = Micros::new(100_000 * S);

type Q = Queues<&'static str, u32>;
type Ks = MemoryKeyspace<&'static str>;

fn gcra(per_second: u64) -> Policy {
    Policy::Gcra(Gcra::new(per_second, Micros::new(S), 1).unwrap())
}

/// An RL.SHARE node of `limit` a second (ceiling `ceil`; none: the root).
fn node(limit: u64, ceil: Option<u64>) -> Policy {
    share_node(limit, S, ceil.map(|c| (c, c)))
}

/// An RL.SHARE node of `limit` per `period` µs (bursts of `limit`), with
/// a ceiling of `(ceil, cburst)` per the same period (none: the root).
fn share_node(limit: u64, period: u64, ceiling: Option<(u64, u64)>) -> Policy {
    let definition = Definition {
        limit,
        period: Micros::new(period),
        burst: limit,
        ceil: ceiling.map(|c| c.0),
        cburst: ceiling.map_or(limit, |c| c.1),
        max_debt: Micros::from_secs(60),
    };
    Policy::Share(Node::new(definition).unwrap())
}

fn flow(name: &str, weight: u64) -> Option<Flow> {
    (!name.is_empty()).then(|| Flow {
        name: name.as_bytes().to_vec(),
        weight,
    })
}

/// Requests over several keys, offered with `WAIT` and admitted as time
/// goes.
struct Keys {
    q: Q,
    ks: Ks,
    next_token: u32,
    /// Each token's flow and keys, in arrival order.
    offered: Vec<(Option<Flow>, Vec<&'static str>)>,
    admitted: Vec<u32>,
    timed_out: Vec<u32>,
    now: Micros,
}

impl Keys {
    fn new() -> Keys {
        Keys {
            q: Q::new(),
            ks: Ks::default(),
            next_token: 0,
            offered: Vec::new(),
            admitted: Vec::new(),
            timed_out: Vec::new(),
            now: T0,
        }
    }

    /// A request over `keys` arrives now; its token if it waits.
    fn offer(
        &mut self,
        keys: &[&'static str],
        policies: &[Policy],
        flow: Option<Flow>,
        wait: Micros,
    ) -> Option<u32> {
        let request = Request {
            wait: Some(wait),
            flow: flow.clone(),
            ..Request::default()
        };
        let arrival = self
            .q
            .arrive(&mut self.ks, keys, policies, self.now, request)
            .unwrap();
        let Arrival::Wait(place) = arrival else {
            return None;
        };
        let token = self.next_token;
        self.next_token += 1;
        self.offered.push((flow.clone(), keys.to_vec()));
        let waiter = Waiter {
            keys: keys.to_vec(),
            policies: policies.to_vec(),
            cost: 1,
            costs: None,
            since: self.now,
            deadline: self.now.saturating_add(wait),
            flow,
            token,
        };
        self.q.enqueue(&mut self.ks, waiter, place);
        Some(token)
    }

    /// Time moves to `to`; what is due by then happens.
    fn run_to(&mut self, to: Micros) {
        let events = self.q.process(&mut self.ks, self.now, to, 100_000);
        for e in events {
            match e.ending {
                Ending::Admitted(_) => self.admitted.push(e.token),
                _ => self.timed_out.push(e.token),
            }
        }
        self.now = to;
    }

    /// The share of the admissions from the `from`-th on that went to
    /// flow `name`.
    fn share(&self, name: &str, from: usize) -> f64 {
        let window = &self.admitted[from..];
        let of = window
            .iter()
            .filter(|&&t| {
                let f = &self.offered[t as usize].0;
                f.as_ref().map(|f| &f.name[..]) == Some(name.as_bytes())
            })
            .count();
        of as f64 / window.len() as f64
    }

    /// No deadlock: while anyone waits, the waiter with the smallest turn
    /// is a head (at the front of every one of its lines), due to be
    /// decided.
    fn check_progress(&self) {
        if self.q.is_empty() {
            return;
        }
        let first = self
            .q
            .entries
            .iter()
            .filter_map(|(id, e)| e.turn.map(|t| (t, *id)))
            .min();
        let Some((_, id)) = first else {
            panic!("nobody has a turn");
        };
        assert!(
            self.q.entries[&id].due.is_some(),
            "the first turn is no head"
        );
    }
}

/// Two waiters over the same two keys named in opposite orders, each in a
/// flow that has gone ahead on one key: both are admitted.
#[test]
fn waiters_over_keys_in_opposite_orders_are_all_admitted() {
    let mut keys = Keys::new();
    let (a, b) = (gcra(1), gcra(1));
    // Fill both keys' seconds, then build lines where flow x is ahead on
    // "a" and flow y ahead on "b".
    for _ in 0..3 {
        keys.offer(&["a"], std::slice::from_ref(&a), flow("x", 1), LONG);
        keys.offer(&["b"], std::slice::from_ref(&b), flow("y", 1), LONG);
    }
    let ab = keys.offer(&["a", "b"], &[a.clone(), b.clone()], flow("y", 1), LONG);
    let ba = keys.offer(&["b", "a"], &[b.clone(), a.clone()], flow("x", 1), LONG);
    for s in 1..=20 {
        keys.run_to(T0.saturating_add(Micros::new(s * S)));
        keys.check_progress();
    }
    assert!(keys.q.is_empty());
    assert!(keys.admitted.contains(&ab.unwrap()));
    assert!(keys.admitted.contains(&ba.unwrap()));
    assert!(keys.timed_out.is_empty());
}

/// Two tenants' leaves under one root, offered 10:1 with equal weights:
/// half the root's admissions each while both wait; 3:1 weights: three
/// quarters to one.
#[test]
fn share_paths_offered_10_to_1_share_the_root_by_weight() {
    for (weights, light_share) in [((1, 1), 0.5), ((3, 1), 0.25)] {
        let mut keys = Keys::new();
        let heavy_path = [node(1, Some(10)), node(10, None)];
        let light_path = [node(1, Some(10)), node(10, None)];
        for s in 0..120 {
            for _ in 0..100 {
                keys.offer(
                    &["heavy", "org"],
                    &heavy_path,
                    flow("heavy", weights.0),
                    LONG,
                );
            }
            for _ in 0..10 {
                keys.offer(
                    &["light", "org"],
                    &light_path,
                    flow("light", weights.1),
                    LONG,
                );
            }
            keys.run_to(T0.saturating_add(Micros::new((s + 1) * S)));
            keys.check_progress();
        }
        let share = keys.share("light", 50);
        assert!(
            (light_share - 0.05..=light_share + 0.05).contains(&share),
            "{weights:?}: light share {share}"
        );
        assert!(keys.admitted.len() >= 1_100, "{}", keys.admitted.len());
    }
}

/// The same through RL.ALL: a per-tenant limit and the shared one, last.
#[test]
fn all_keys_offered_10_to_1_share_the_last_key_half_and_half() {
    let mut keys = Keys::new();
    let policies = [gcra(100), gcra(10)];
    for s in 0..120 {
        for _ in 0..100 {
            keys.offer(&["heavy", "org"], &policies, flow("heavy", 1), LONG);
        }
        for _ in 0..10 {
            keys.offer(&["light", "org"], &policies, flow("light", 1), LONG);
        }
        keys.run_to(T0.saturating_add(Micros::new((s + 1) * S)));
        keys.check_progress();
    }
    let share = keys.share("light", 50);
    assert!((0.45..=0.55).contains(&share), "light share {share}");
}

/// Over a path, disconnects and timeouts (the oldest heavy waiters, fronts
/// among them, and light ones ended at once) keep the half-and-half
/// shares; a tenant that starts waiting behind long lines is admitted
/// within one round.
#[test]
fn departures_keep_the_shares_and_a_new_flow_goes_within_a_round() {
    let mut keys = Keys::new();
    let path = [node(1, Some(10)), node(10, None)];
    let mut heavy = Vec::new();
    for s in 0..120u64 {
        for _ in 0..100 {
            heavy.extend(keys.offer(&["heavy", "org"], &path, flow("heavy", 1), LONG));
        }
        for _ in 0..10 {
            keys.offer(&["light", "org"], &path, flow("light", 1), LONG);
        }
        let now = keys.now;
        if s % 2 == 0 {
            let light = keys.offer(&["light", "org"], &path, flow("light", 1), LONG);
            light.and_then(|t| keys.q.time_out(&mut keys.ks, &t, now));
            for _ in 0..30 {
                let oldest = heavy.iter().position(|t| keys.q.by_token.contains_key(t));
                if let Some(i) = oldest {
                    keys.q.abandon(&heavy.remove(i), now);
                }
            }
        }
        keys.run_to(T0.saturating_add(Micros::new((s + 1) * S)));
        keys.check_progress();
    }
    let share = keys.share("light", 50);
    assert!((0.45..=0.55).contains(&share), "light share {share}");
    // A third tenant: one of the next three admissions (the turn of each
    // flow present, then its own) whatever the lines.
    let before = keys.admitted.len();
    let token = keys.offer(&["new", "org"], &path, flow("new", 1), LONG);
    let to = keys.now.saturating_add(Micros::new(S / 10 * 3));
    keys.run_to(to);
    assert!(keys.admitted[before..].contains(&token.unwrap()));
    assert!(keys.admitted.len() - before <= 3);
}

/// A waiter over a busy key (its virtual time far on) and a quiet one
/// where a new flow starts every second: the quiet key catches up with the
/// busy one's virtual time, so the new flows do not go before it for ever.
#[test]
fn a_key_behind_in_virtual_time_catches_up_with_a_waiter_over_both() {
    let mut keys = Keys::new();
    let (busy, quiet) = (gcra(10), gcra(1));
    // Flow x keeps the busy key's line going: 12 a second, 10 admitted.
    let second = |keys: &mut Keys, s: u64| {
        for _ in 0..12 {
            keys.offer(&["busy"], std::slice::from_ref(&busy), flow("x", 1), LONG);
        }
        keys.run_to(T0.saturating_add(Micros::new((s + 1) * S)));
        keys.check_progress();
    };
    for s in 0..20 {
        second(&mut keys, s);
    }
    keys.offer(&["quiet"], std::slice::from_ref(&quiet), flow("q", 1), LONG);
    let policies = [quiet.clone(), busy.clone()];
    let both = keys.offer(&["quiet", "busy"], &policies, flow("w", 1), LONG);
    let names = ["n0", "n1", "n2", "n3", "n4", "n5"];
    for (s, name) in names.into_iter().enumerate() {
        keys.offer(
            &["quiet"],
            std::slice::from_ref(&quiet),
            flow(name, 1),
            LONG,
        );
        second(&mut keys, 20 + s as u64);
    }
    assert!(keys.admitted.contains(&both.unwrap()));
}

/// Waiters of one flow over keys that overlap are admitted in arrival
/// order wherever they share a key.
#[test]
fn inside_a_flow_waiters_sharing_a_key_are_admitted_in_arrival_order() {
    let mut keys = Keys::new();
    let p = gcra(2);
    let shapes: [&[&'static str]; 4] = [&["a"], &["a", "b"], &["b", "c"], &["c", "a"]];
    for i in 0..200 {
        let shape = shapes[i % 4];
        let policies = vec![p.clone(); shape.len()];
        let name = ["x", "y", ""][i % 3];
        keys.offer(shape, &policies, flow(name, 1 + (i % 2) as u64), LONG);
    }
    keys.run_to(T0.saturating_add(Micros::new(1_000 * S)));
    assert!(keys.q.is_empty());
    assert_eq!(keys.admitted.len(), keys.offered.len());
    assert!(keys.offered.len() >= 190, "{}", keys.offered.len());
    assert_in_flow_order(&keys);
}

/// For every two admissions of one flow that share a key: the earlier
/// arrival first.
fn assert_in_flow_order(keys: &Keys) {
    for (i, &t) in keys.admitted.iter().enumerate() {
        for &u in &keys.admitted[i + 1..] {
            let (ft, kt) = &keys.offered[t as usize];
            let (fu, ku) = &keys.offered[u as usize];
            let name = |f: &Option<Flow>| f.as_ref().map(|f| f.name.clone());
            let shared = kt.iter().any(|k| ku.contains(k));
            if name(ft) == name(fu) && shared {
                assert!(t < u, "{t} admitted before {u}, which came first");
            }
        }
    }
}

const KEYS: [&str; 4] = ["a", "b", "c", "d"];

/// One random request: its keys (distinct, in any order), flow, weight,
/// timeout in seconds, and the seconds before the next.
fn request() -> impl Strategy<Value = (Vec<usize>, usize, u64, u64, u64)> {
    (
        proptest::sample::subsequence(vec![0, 1, 2, 3], 1..=3).prop_shuffle(),
        0..4usize,
        1..4u64,
        1..60u64,
        0..2u64,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random waiters over random keys with flows, and some disconnects:
    /// at every moment the first turn is a head, and in the end everyone
    /// was admitted or timed out, first come first served inside a flow.
    #[test]
    fn every_waiter_is_admitted_or_times_out(
        requests in proptest::collection::vec(request(), 1..80),
        abandon_every in 3..20usize,
    ) {
        let mut keys = Keys::new();
        let rates = [gcra(1), gcra(2), gcra(3), gcra(1)];
        let mut waited = Vec::new();
        let mut abandons = 0;
        for (i, (shape, name, weight, timeout, pause)) in requests.into_iter().enumerate() {
            let ks: Vec<&'static str> = shape.iter().map(|&k| KEYS[k]).collect();
            let policies: Vec<Policy> = shape.iter().map(|&k| rates[k].clone()).collect();
            let name = ["", "x", "y", "z"][name];
            let wait = Micros::new(timeout * S);
            waited.extend(keys.offer(&ks, &policies, flow(name, weight), wait));
            keys.check_progress();
            if i % abandon_every == 0 {
                if let Some(&t) = waited.first() {
                    let now = keys.now;
                    keys.q.abandon(&t, now);
                    abandons += 1;
                    waited.remove(0);
                    keys.check_progress();
                }
            }
            let to = keys.now.saturating_add(Micros::new(pause * S));
            keys.run_to(to);
            keys.check_progress();
        }
        for _ in 0..70 {
            let to = keys.now.saturating_add(Micros::new(S));
            keys.run_to(to);
            keys.check_progress();
        }
        prop_assert!(keys.q.is_empty());
        let ended = keys.admitted.len() + keys.timed_out.len();
        let abandoned = keys.offered.len() - ended;
        // Only those given up left unended (a request decided at once is
        // never offered, so the offers alone do not bound them).
        prop_assert!(abandoned <= abandons);
        assert_in_flow_order(&keys);
    }
}

/// A waiter on a three-level path that leaves before its admission frees
/// its units in the line of every node (the plans keep its charge, the
/// assured rate it borrowed from the middle node too): a request behind
/// the line is told what it would be had the waiter never come.
#[test]
fn a_waiter_leaving_frees_its_units_on_every_node() {
    let (mut q, mut ks) = (Q::new(), Ks::default());
    let node = |rate: u64, period_s: u64, ceil: Option<u64>| {
        // A ceiling of `c` a second over a period of `period_s` seconds.
        share_node(rate, period_s * S, ceil.map(|c| (c * period_s, c)))
    };
    // A user assured 1 per 100 s up to 1 a second, in a team assured 10 a
    // second, in an org of 100 a second: the user waits on its ceiling, and
    // beyond its own unit borrows the team's assured rate.
    let keys = ["u", "t", "o"];
    let path = [
        node(1, 100, Some(1)),
        node(10, 1, Some(100)),
        node(100, 1, None),
    ];
    // Requests without WAIT until one is denied.
    let use_up = |q: &mut Q, ks: &mut Ks| {
        while let Arrival::Now(d) = q.arrive(ks, &keys, &path, T0, Request::default()).unwrap() {
            if !d.allowed {
                break;
            }
        }
    };
    use_up(&mut q, &mut ks);
    let waiting = Request {
        wait: Some(LONG),
        ..Request::default()
    };
    let join = |q: &mut Q, ks: &mut Ks, token: u32| {
        let Arrival::Wait(place) = q.arrive(ks, &keys, &path, T0, waiting.clone()).unwrap() else {
            panic!("waits");
        };
        let waiter = Waiter {
            keys: keys.to_vec(),
            policies: path.to_vec(),
            cost: 1,
            costs: None,
            since: T0,
            deadline: T0.saturating_add(LONG),
            flow: None,
            token,
        };
        q.enqueue(ks, waiter, place);
        place.planned
    };
    // What a request without WAIT is told.
    let told = |q: &mut Q, ks: &mut Ks| match q.arrive(ks, &keys, &path, T0, Request::default()) {
        Ok(Arrival::Now(d)) if !d.allowed => d.retry_after,
        other => panic!("{other:?}"),
    };
    join(&mut q, &mut ks, 0);
    join(&mut q, &mut ks, 1);
    assert!(q.abandon(&1, T0).is_some());
    // The same line with the first waiter alone.
    let (mut alone, mut ks_alone) = (Q::new(), Ks::default());
    use_up(&mut alone, &mut ks_alone);
    join(&mut alone, &mut ks_alone, 0);
    assert_eq!(told(&mut q, &mut ks), told(&mut alone, &mut ks_alone));
}
