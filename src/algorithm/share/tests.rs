use super::*;
use proptest::prelude::*;

const S: u64 = 1_000_000;
const T0: u64 = 1 << 40;

fn sched(rate: u64, burst: u64) -> Schedule {
    Schedule::new(burst, rate, Micros::new(S)).unwrap()
}

/// A non-root node: `a` assured and `c` ceiling per second, bursts of
/// `burst` on both.
fn inner(a: u64, c: u64, burst: u64) -> Node {
    node(a, S, burst, Some((c, burst)))
}

fn root(r: u64, burst: u64) -> Node {
    node(r, S, burst, None)
}

/// `limit` per `period` µs with bursts of `burst`, and a ceiling of
/// `(ceil, cburst)` per the same period (none: the root); debts of 60 s.
pub(super) fn node(limit: u64, period: u64, burst: u64, ceiling: Option<(u64, u64)>) -> Node {
    Node::new(Definition {
        limit,
        period: Micros::new(period),
        burst,
        ceil: ceiling.map(|c| c.0),
        cburst: ceiling.map_or(burst, |c| c.1),
        max_debt: Micros::from_secs(60),
    })
    .unwrap()
}

/// A tree of paths over shared node states: `paths[i]` is leaf `i`'s path
/// as indices into `nodes`.
struct Tree {
    nodes: Vec<Node>,
    states: Vec<NodeState>,
    paths: Vec<Vec<usize>>,
}

impl Tree {
    fn send(&mut self, leaf: usize, now: u64, cost: u64) -> Shared {
        let path = &self.paths[leaf];
        let nodes: Vec<Node> = path.iter().map(|&i| self.nodes[i]).collect();
        let states: Vec<NodeState> = path.iter().map(|&i| self.states[i]).collect();
        let out = decide(&nodes, &states, Micros::new(now), cost);
        for (k, &i) in path.iter().enumerate() {
            if let Some(s) = out.nodes[k].1 {
                self.states[i] = s;
            }
        }
        out
    }

    /// Every leaf in `busy` sends as much as it is admitted every `step`
    /// µs for `secs` seconds, the order rotating; the units each got.
    fn saturate(&mut self, busy: &[usize], step: u64, secs: u64) -> Vec<u64> {
        let mut got = vec![0; self.paths.len()];
        let mut now = T0;
        let mut turn = 0;
        while now < T0 + secs * S {
            for k in 0..busy.len() {
                let leaf = busy[(k + turn) % busy.len()];
                while self.send(leaf, now, 1).allowed {
                    got[leaf] += 1;
                }
            }
            turn += 1;
            now += step;
        }
        got
    }
}

/// What `s` alone admits to a client that sends as much as it may every
/// `step` µs for `secs` seconds.
fn lone(s: &Schedule, step: u64, secs: u64) -> u64 {
    let (mut state, mut n, mut now) = (None, 0, T0);
    while now < T0 + secs * S {
        loop {
            let (d, new) = s.decide(state, Micros::new(now), 1);
            if !d.allowed {
                break;
            }
            state = new;
            n += 1;
        }
        now += step;
    }
    n
}

/// Users assured 10/s with a ceiling of 50/s inside an org of 100/s.
fn org(users: usize, org_rate: u64) -> Tree {
    let mut nodes: Vec<Node> = (0..users).map(|_| inner(10, 50, 10)).collect();
    nodes.push(root(org_rate, 10));
    Tree {
        nodes,
        states: vec![NodeState::default(); users + 1],
        paths: (0..users).map(|u| vec![u, users]).collect(),
    }
}

#[test]
fn a_child_alone_reaches_its_ceiling_while_the_parent_is_idle() {
    let mut t = org(3, 100);
    let got = t.saturate(&[0], 1_000, 100);
    // 50/s for 100 s, plus the first burst.
    assert!((5_000..=5_011).contains(&got[0]), "{got:?}");
}

#[test]
fn busy_children_each_get_their_assured_rate_and_together_not_more_than_the_parent() {
    // Assured 3 × 10 ≤ 30, the parent's rate; ceilings 50 each.
    let mut t = org(3, 30);
    let got = t.saturate(&[0, 1, 2], 1_000, 100);
    for &g in &got {
        assert!(g >= 10 * 100, "{got:?}");
    }
    let total: u64 = got.iter().sum();
    // The parent's rate and its burst, plus each child's assured burst.
    assert!(total <= 30 * 100 + 10 + 3 * 10, "{got:?}");
}

#[test]
fn a_child_never_exceeds_its_ceiling() {
    let mut t = org(2, 1_000);
    let got = t.saturate(&[0, 1], 1_000, 50);
    for &g in &got {
        assert!(g <= 50 * 50 + 10, "{got:?}");
        assert!(g >= 50 * 50, "{got:?}");
    }
}

#[test]
fn a_three_level_tree() {
    // Two teams of an org (60/s), each assured 30/s up to 60/s; in team 0
    // two users assured 10/s up to 60/s, in team 1 one such user.
    let nodes = vec![
        inner(10, 60, 10), // 0: user of team 0
        inner(10, 60, 10), // 1: user of team 0
        inner(10, 60, 10), // 2: user of team 1
        inner(30, 60, 10), // 3: team 0
        inner(30, 60, 10), // 4: team 1
        root(60, 10),      // 5: org
    ];
    let mut t = Tree {
        states: vec![NodeState::default(); nodes.len()],
        nodes,
        paths: vec![vec![0, 3, 5], vec![1, 3, 5], vec![2, 4, 5]],
    };
    // A user alone takes the whole org.
    let alone = t.saturate(&[0], 1_000, 100);
    assert!((6_000..=6_011).contains(&alone[0]), "{alone:?}");
    let mut t = Tree {
        states: vec![NodeState::default(); t.nodes.len()],
        ..t
    };
    let got = t.saturate(&[0, 1, 2], 1_000, 100);
    let total: u64 = got.iter().sum();
    assert!(total <= 60 * 100 + 10 + 3 * 10 + 2 * 10, "{got:?}");
    // Each user its assured rate; team 1's user borrows its team's unused
    // assured rate, so it gets the team's 30/s.
    assert!(got[0] >= 1_000 && got[1] >= 1_000, "{got:?}");
    assert!(got[2] >= 3_000, "{got:?}");
}

#[test]
fn a_denial_writes_nothing_and_waits_for_the_earliest_alternative() {
    let mut t = org(2, 30);
    // User 1's assured burst of 10 uses the org's burst of 10 up too:
    // it has nothing left to borrow.
    let mut n = 0;
    while t.send(1, T0, 1).allowed {
        n += 1;
    }
    assert_eq!(n, 10);
    // User 0 still has its assured burst (the org goes into debt).
    for _ in 0..10 {
        let out = t.send(0, T0, 1);
        assert!(out.allowed);
        assert_eq!(out.lender, Some(0));
    }
    let out = t.send(0, T0, 1);
    assert!(!out.allowed);
    assert!(out.nodes.iter().all(|(_, w)| w.is_none()));
    // Its own assured rate frees a unit in 100 ms; the org is in debt.
    assert_eq!(out.retry_after, RetryAfter::After(Micros::new(100_000)));
    assert_eq!(out.blocked_by, Some(0));
    assert!(!t.send(0, T0 + 99_999, 1).allowed);
    assert_eq!(t.send(0, T0 + 100_000, 1).lender, Some(0));
}

#[test]
fn zero_cost_and_a_cost_above_every_burst() {
    let mut t = org(1, 30);
    let out = t.send(0, T0, 0);
    assert!(out.allowed && out.lender.is_none());
    assert!(out.nodes.iter().all(|(_, w)| w.is_none()));
    let out = t.send(0, T0, 11);
    assert_eq!(out.retry_after, RetryAfter::Never);
}

#[test]
fn remaining_is_the_ceilings_below_an_idle_parent_and_the_assured_below_a_spent_one() {
    let mut t = org(2, 30);
    // Idle org: user 0 may take its ceiling's burst of 10 (the org's too).
    let out = t.send(0, T0, 1);
    assert_eq!(out.nodes[0].0.remaining, 9);
    // User 1 spends the org; user 0 keeps 9 of its assured burst.
    while t.send(1, T0, 1).allowed {}
    let look = peek(
        &t.nodes[..1]
            .iter()
            .chain(&t.nodes[2..])
            .copied()
            .collect::<Vec<_>>(),
        &[t.states[0], t.states[2]],
        Micros::new(T0),
    );
    assert_eq!(
        look.nodes[0].0.remaining, 9,
        "the assured remaining, not the ceiling's"
    );
    assert_eq!(look.nodes[0].0.limit, 10, "the ceiling's burst");
    assert_eq!(look.nodes[1].0.remaining, 0);
    assert!(look.allowed, "its assured rate still admits");
}

#[test]
fn a_peek_charges_nothing_and_reports_the_state_as_it_is() {
    let mut t = org(1, 30);
    t.send(0, T0, 4);
    let before = t.states.clone();
    let look = peek(&t.nodes, &t.states, Micros::new(T0));
    assert!(look.allowed && look.lender.is_none());
    assert!(look.nodes.iter().all(|(_, w)| w.is_none()));
    assert_eq!(look.nodes[0].0.remaining, 6);
    assert_eq!(t.states, before);
    while t.send(0, T0, 1).allowed {}
    let look = peek(&t.nodes, &t.states, Micros::new(T0));
    assert!(!look.allowed);
    // The org frees a unit first (1/30 s), and the leaf may borrow it.
    assert_eq!(look.retry_after, RetryAfter::After(Micros::new(33_334)));
    assert_eq!(look.blocked_by, Some(1));
    assert_eq!(look.nodes[0].0.remaining, 0);
}

#[test]
fn taking_back_an_admission_gives_back_what_its_lender_was_charged() {
    let nodes = [inner(10, 50, 10), root(30, 10)];
    let fresh = [NodeState::default(); 2];
    let out = decide(&nodes, &fresh, Micros::new(T0), 3);
    assert_eq!(out.lender, Some(0));
    let charged: Vec<NodeState> = out.nodes.iter().map(|(_, s)| s.unwrap()).collect();
    // With the lender: the leaf's assured rate is whole again.
    let back = refund(&nodes, &charged, Micros::new(T0), 3, Some(0));
    assert_eq!(remaining(&nodes, &back, Micros::new(T0)), [10, 10]);
    // Without: the ceilings only; the assured rate keeps the charge.
    let ceilings_only = refund(&nodes, &charged, Micros::new(T0), 3, None);
    assert_eq!(ceilings_only[0].assured, charged[0].assured);
}

fn arb_node(last: bool) -> impl Strategy<Value = Node> {
    (1u64..20, 0u64..20, 1u64..6, 1u64..6, 1u64..4).prop_map(move |(a, extra, ba, bc, p)| {
        node(a, p * S / 3, ba, (!last).then_some((a + extra, bc)))
    })
}

fn arb_path() -> impl Strategy<Value = Vec<Node>> {
    (1usize..4).prop_flat_map(|inner| {
        let mut v: Vec<BoxedStrategy<Node>> = (0..inner).map(|_| arb_node(false).boxed()).collect();
        v.push(arb_node(true).boxed());
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever the history, a denial's wait is exact: denied 1 µs
    /// before it, admitted at it; and a denial changes nothing.
    #[test]
    fn retry_after_is_the_earliest_admission(
        path in arb_path(),
        steps in proptest::collection::vec((0u64..400_000, 1u64..4, 0usize..3), 1..60),
        cost in 1u64..4,
    ) {
        let mut states = vec![NodeState::default(); path.len()];
        let mut now = T0;
        for (dt, c, from) in steps {
            now += dt;
            // Traffic entering at any node of the path (a sibling's).
            let from = from.min(path.len() - 1);
            let out = decide(&path[from..], &states[from..], Micros::new(now), c);
            for (k, (_, new)) in out.nodes.iter().enumerate() {
                if let Some(s) = new {
                    states[from + k] = *s;
                }
            }
        }
        let out = decide(&path, &states, Micros::new(now), cost);
        if !out.allowed {
            prop_assert!(out.nodes.iter().all(|(_, w)| w.is_none()));
            if let RetryAfter::After(w) = out.retry_after {
                let at = now + w.as_u64();
                prop_assert!(!decide(&path, &states, Micros::new(at - 1), cost).allowed);
                prop_assert!(decide(&path, &states, Micros::new(at), cost).allowed);
            }
        }
    }

    /// A leaf's ceiling bounds it, whatever its ancestors allow.
    #[test]
    fn a_leaf_never_passes_its_ceiling(path in arb_path(), step in 1_000u64..200_000) {
        let mut states = vec![NodeState::default(); path.len()];
        let mut admitted = 0u64;
        let secs = 20;
        let mut now = T0;
        while now < T0 + secs * S {
            while decide(&path, &states, Micros::new(now), 1).allowed {
                let out = decide(&path, &states, Micros::new(now), 1);
                for (k, (_, new)) in out.nodes.iter().enumerate() {
                    if let Some(s) = new {
                        states[k] = *s;
                    }
                }
                admitted += 1;
            }
            now += step;
        }
        let c = path[0].ceiling.unwrap_or(path[0].assured);
        // At most the ceiling's rate over the span, plus its burst.
        let (_, probe) = c.decide(None, Micros::new(0), 1);
        prop_assert!(probe.is_some());
        let d = c.decide(None, Micros::new(0), 0).0;
        let bound = |span_us: u64| {
            // Units the schedule admits over `span_us` from full.
            let mut st = None;
            let mut n = 0u64;
            let mut t = 0u64;
            while t <= span_us {
                loop {
                    let (dd, new) = c.decide(st, Micros::new(t), 1);
                    if !dd.allowed { break; }
                    st = new;
                    n += 1;
                }
                t += step;
            }
            n
        };
        prop_assert!(admitted <= bound(secs * S) , "{} > bound, limit {}", admitted, d.limit);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// HTB's promise under its precondition (the children's assured rates
    /// sum to at most the parent's): busy children each get at least their
    /// assured rate and at most their ceiling, and together no more than
    /// the parent's rate beyond the bursts.
    #[test]
    fn busy_children_share_the_parent_as_promised(
        children in proptest::collection::vec((1u64..20, 0u64..40, 1u64..5, 1u64..5), 1..4),
        spare in 0u64..20, root_burst in 1u64..5, step_ms in 1u64..40,
    ) {
        let secs = 20;
        let assured_sum: u64 = children.iter().map(|c| c.0).sum();
        let rate = assured_sum + spare;
        let mut nodes: Vec<Node> = children
            .iter()
            .map(|&(a, extra, ba, bc)| node(a, S, ba, Some((a + extra, bc.max(ba)))))
            .collect();
        nodes.push(root(rate, root_burst));
        let n = children.len();
        let mut t = Tree {
            states: vec![NodeState::default(); n + 1],
            nodes,
            paths: (0..n).map(|u| vec![u, n]).collect(),
        };
        let busy: Vec<usize> = (0..n).collect();
        let got = t.saturate(&busy, step_ms * 1_000, secs);
        let bursts: u64 = children.iter().map(|c| c.2).sum::<u64>() + root_burst;
        for (i, &(a, extra, ba, bc)) in children.iter().enumerate() {
            // At least what its assured rate alone admits, polled alike (a
            // schedule polled late loses what it could not take in time).
            let alone = lone(&sched(a, ba), step_ms * 1_000, secs);
            prop_assert!(got[i] >= alone, "child {}: {:?} < {}", i, got, alone);
            prop_assert!(got[i] <= (a + extra) * secs + bc.max(ba), "child {}: {:?}", i, got);
        }
        prop_assert!(got.iter().sum::<u64>() <= rate * secs + bursts, "{:?}", got);
    }

    /// A node's `remaining` is the most one request through it could take:
    /// that cost is admitted and one unit more is not.
    #[test]
    fn remaining_is_the_most_the_path_admits(
        path in arb_path(),
        steps in proptest::collection::vec((0u64..400_000, 1u64..4, 0usize..3), 1..60),
    ) {
        let (states, now) = history(&path, &steps);
        let left = peek(&path, &states, now).nodes[0].0.remaining;
        prop_assert!(left == 0 || decide(&path, &states, now, left).allowed);
        prop_assert!(!decide(&path, &states, now, left + 1).allowed);
    }

    /// Taken back at once with its lender, an admission leaves the path
    /// deciding every request as if it had never been; one that borrowed,
    /// as if it had never been or more leniently (its parents' fair-sharing
    /// rounds keep their move).
    #[test]
    fn an_admission_taken_back_with_its_lender_leaves_no_trace(
        path in arb_path(),
        steps in proptest::collection::vec((0u64..400_000, 1u64..4, 0usize..3), 1..60),
        cost in 1u64..4,
    ) {
        let (states, now) = history(&path, &steps);
        let out = decide(&path, &states, now, cost);
        if out.allowed {
            let charged: Vec<NodeState> = (out.nodes.iter().zip(&states))
                .map(|((_, new), old)| new.unwrap_or(*old))
                .collect();
            let back = refund(&path, &charged, now, cost, out.lender);
            for c in 1..5 {
                let (a, b) = (decide(&path, &states, now, c), decide(&path, &back, now, c));
                if out.lender == Some(0) {
                    // Nothing borrowed: no round moved.
                    prop_assert_eq!((a.allowed, a.retry_after, a.lender), (b.allowed, b.retry_after, b.lender));
                } else {
                    // The parents' rounds keep their move: never stricter.
                    prop_assert!(b.allowed || !a.allowed);
                    prop_assert!(wait_us(&b.retry_after) <= wait_us(&a.retry_after));
                }
            }
        }
    }

}

/// The states and the time after `steps` of traffic entering at any node
/// of `path` (a sibling's), as in the property tests.
fn history(path: &[Node], steps: &[(u64, u64, usize)]) -> (Vec<NodeState>, Micros) {
    let mut states = vec![NodeState::default(); path.len()];
    let mut now = T0;
    for &(dt, c, from) in steps {
        now += dt;
        let from = from.min(path.len() - 1);
        let out = decide(&path[from..], &states[from..], Micros::new(now), c);
        for (k, (_, new)) in out.nodes.iter().enumerate() {
            if let Some(s) = new {
                states[from + k] = *s;
            }
        }
    }
    (states, Micros::new(now))
}

fn wait_us(r: &RetryAfter) -> u64 {
    match r {
        RetryAfter::NotNeeded => 0,
        RetryAfter::After(w) => w.as_u64(),
        RetryAfter::Never => u64::MAX,
    }
}

/// Children whose assured rates sum past the parent's (60 + 60 under 100)
/// drive it into debt; capped at `max_debt`, the debt is repaid once the
/// load falls, at the parent's rate less what the child left sends on its
/// assured rate (100 - 60 a second: in 2.5 × `max_debt`), and that child
/// borrows again.
#[test]
fn a_capped_debt_lets_an_overcommitted_child_borrow_again_within_the_cap() {
    for max_debt_s in [1u64, 10] {
        let child = || {
            let mut n = node(60, S, 60, Some((100, 60)));
            n.definition.max_debt = Micros::from_secs(max_debt_s);
            n
        };
        let mut top = root(100, 100);
        top.definition.max_debt = Micros::from_secs(max_debt_s);
        let mut t = Tree {
            nodes: vec![child(), child(), top],
            states: vec![NodeState::default(); 3],
            paths: vec![vec![0, 2], vec![1, 2]],
        };
        // Both busy for 100 s: each its 60 a second, the root 20 a second
        // past its rate (2,000 units uncapped).
        let both = t.saturate(&[0, 1], 1_000, 100);
        assert!(both.iter().all(|&g| g >= 6_000), "{both:?}");
        // Then child 0 alone, second by second from T0 + 100 s.
        let mut now = T0 + 100 * S;
        let mut per_second = Vec::new();
        let repaid_s = max_debt_s * 5 / 2;
        for _ in 0..(repaid_s + 3) {
            let mut n = 0;
            let end = now + S;
            while now < end {
                while t.send(0, now, 1).allowed {
                    n += 1;
                }
                now += 1_000;
            }
            per_second.push(n);
        }
        // Once repaid, it borrows up to its ceiling; before, its own 60.
        let last = per_second[per_second.len() - 1];
        assert!(last >= 99, "max_debt {max_debt_s} s: {per_second:?}");
        let before = &per_second[..repaid_s as usize - 1];
        assert!(before.iter().all(|&n| n <= 61), "{per_second:?}");
    }
}

/// A ceiling's burst is its own (CBURST): an idle child takes at most
/// that at once, then its ceiling's rate.
#[test]
fn a_ceiling_burst_bounds_what_an_idle_child_takes_at_once() {
    let leaf = node(10, S, 10, Some((50, 5)));
    let mut t = Tree {
        nodes: vec![leaf, root(100, 100)],
        states: vec![NodeState::default(); 2],
        paths: vec![vec![0, 1]],
    };
    let mut n = 0;
    while t.send(0, T0, 1).allowed {
        n += 1;
    }
    assert_eq!(n, 5, "the ceiling's burst, though its assured burst is 10");
    // Then 50 a second.
    let got = t.saturate(&[0], 1_000, 10);
    assert!((495..=506).contains(&got[0]), "{got:?}");
}

/// A child behind its parent's round keeps at most its assured burst's
/// worth of virtual time as a credit, and borrows from it with no margin
/// and without moving the round; a child ahead moves the round to where it
/// started.
#[test]
fn a_child_behind_the_round_keeps_a_credit_of_its_assured_burst() {
    let nodes = [inner(10, 100, 5), root(100, 100)];
    let (step, v) = (nodes[0].step(), 1u64 << 50);
    let at = |finish: u64, round: u64| {
        [
            NodeState {
                finish: Some(finish),
                ..NodeState::default()
            },
            NodeState {
                round: Some(round),
                ..NodeState::default()
            },
        ]
    };
    let behind = |finish| lead(&nodes[0], Some(finish), &nodes[1], Some(v));
    assert_eq!(behind(v - 2 * step), -2 * step as i64);
    assert_eq!(behind(v - 1_000 * step), -5 * step as i64);
    assert_eq!(margins(&nodes, &at(v - 2 * step, v)), vec![0, 0]);
    assert!(margins(&nodes, &at(v + step, v))[1] > 0);

    let mut after = at(v - 1_000 * step, v);
    borrow(&nodes, &mut after, 1, 1);
    assert_eq!(
        (after[0].finish, after[1].round),
        (Some(v - 4 * step), Some(v))
    );
    let mut after = at(v + 2 * step, v);
    borrow(&nodes, &mut after, 1, 1);
    assert_eq!(
        (after[0].finish, after[1].round),
        (Some(v + 3 * step), Some(v + 2 * step))
    );
}
