//! Borrowing between limits, as Linux HTB does it, in GCRA arithmetic.
//!
//! A *path* of nodes, leaf first and root last. Every node but the root
//! has an assured schedule `A` and a ceiling schedule `C` (a rate at least
//! the assured one); the root has one rate, its `A` and `C` at once. A
//! request of `cost` at the leaf is admitted iff `can_send(leaf)`:
//!
//! ```text
//! can_send(n)    = C(n) admits cost and (A(n) admits cost or can_send(parent(n)))
//! can_send(root) = its rate admits cost
//! ```
//!
//! The *lender* `m` is the lowest node whose `A` admits the cost: the node
//! whose assured rate the request uses. On admission every node's `C` is
//! charged (a ceiling counts all of its subtree's traffic), and `A` of `m`
//! and of every node above it; above `m` those charges may run past the
//! schedule's tolerance (a debt), which keeps a parent's borrowers out
//! while its children use their assured rates. Nodes below `m` borrowed:
//! their `A` is not charged, so borrowing idle capacity never costs a
//! child its assured rate later. A denial changes nothing.
//!
//! A denial's wait is exact: the earliest time `can_send(leaf)` becomes
//! true with no other traffic, `w(n) = max(wC(n), min(wA(n), w(parent)))`
//! and `w(root)` its rate's wait, each schedule's wait being the time until
//! it admits the cost (admission only grows with time, so the earliest time
//! the formula holds is this min/max of the schedules' own times).

use super::schedule::{Schedule, Tat};
use super::{Decision, Micros, RetryAfter};

/// A node of a path: its assured schedule and, for every node but the
/// root, its ceiling. The root's one rate is `assured`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub assured: Schedule,
    /// `None` for the root.
    pub ceiling: Option<Schedule>,
}

/// A node's stored TATs (`None`: never charged). The root keeps its rate's
/// TAT in `ceiling` (its rate is its ceiling) and no assured one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeState {
    pub ceiling: Option<Tat>,
    pub assured: Option<Tat>,
}

/// The answer for a whole path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shared {
    pub allowed: bool,
    /// The lowest node whose assured rate admits the cost (admitted only).
    pub lender: Option<usize>,
    /// The wait until `can_send(leaf)`: `NotNeeded` when admitted.
    pub retry_after: RetryAfter,
    /// The node whose schedule decides `retry_after` (denied only).
    pub blocked_by: Option<usize>,
    /// Per node, leaf first: its decision (see [`decide`]) and its new
    /// state when an admission changes it.
    pub nodes: Vec<(Decision, Option<NodeState>)>,
}

/// A wait in µs; `NEVER` for a cost above a schedule's burst.
type Wait = u64;
const NEVER: Wait = u64::MAX;

fn wait_of(s: &Schedule, tat: Option<Tat>, now: Micros, cost: u64) -> Wait {
    match s.decide(tat, now, cost).0.retry_after {
        RetryAfter::NotNeeded => 0,
        RetryAfter::After(w) => w.as_u64().min(NEVER - 1),
        RetryAfter::Never => NEVER,
    }
}

fn retry(w: Wait) -> RetryAfter {
    match w {
        0 => RetryAfter::NotNeeded,
        NEVER => RetryAfter::Never,
        w => RetryAfter::After(Micros::new(w)),
    }
}

impl Node {
    /// The schedule that counts all traffic through this node.
    fn counting(&self) -> &Schedule {
        self.ceiling.as_ref().unwrap_or(&self.assured)
    }

    /// The waits of its ceiling and of its assured rate (the root's rate
    /// is both).
    fn waits(&self, state: &NodeState, now: Micros, cost: u64) -> (Wait, Wait) {
        let c = wait_of(self.counting(), state.ceiling, now, cost);
        match self.ceiling {
            None => (c, c),
            Some(_) => (c, wait_of(&self.assured, state.assured, now, cost)),
        }
    }
}

/// Decides a request of `cost` at the leaf of `nodes` (leaf first, root
/// last; `states` in the same order) at `now`.
///
/// Each node's decision: `allowed` is `can_send` at that node, its
/// `retry_after` that node's `w`; `limit` is its ceiling's (the root's
/// rate's) and `remaining` the most a request through that node could take
/// after this one (see [`remaining`]); `reset_after` is the later of its
/// two schedules' resets, the time its key must live.
pub fn decide(nodes: &[Node], states: &[NodeState], now: Micros, cost: u64) -> Shared {
    let state = |i: usize| states.get(i).copied().unwrap_or_default();
    let waits: Vec<(Wait, Wait)> = (0..nodes.len())
        .map(|i| nodes[i].waits(&state(i), now, cost))
        .collect();
    // w(n) and the node whose schedule gives it, root first.
    let mut w: Vec<(Wait, usize)> = vec![(0, 0); nodes.len()];
    for i in (0..nodes.len()).rev() {
        let (wc, wa) = waits[i];
        w[i] = if i + 1 == nodes.len() {
            // The top of the path (the root, or a node with no parent
            // given: it has nothing to borrow from).
            (wc.max(wa), i)
        } else {
            let via = if wa <= w[i + 1].0 { (wa, i) } else { w[i + 1] };
            if wc >= via.0 {
                (wc, i)
            } else {
                via
            }
        };
    }
    let (leaf_wait, decides) = w.first().copied().unwrap_or((0, 0));
    let allowed = leaf_wait == 0;
    let lender = if allowed && cost > 0 {
        waits.iter().position(|&(_, wa)| wa == 0)
    } else {
        None
    };
    let after: Vec<NodeState> = (0..nodes.len())
        .map(|i| match lender {
            Some(m) => charged(&nodes[i], state(i), now, cost, i, m),
            None => state(i),
        })
        .collect();
    let left = remaining(nodes, &after, now);
    let nodes_out = (0..nodes.len())
        .map(|i| {
            let decision = report(&nodes[i], &after[i], now, w[i].0, left[i]);
            (decision, (after[i] != state(i)).then_some(after[i]))
        })
        .collect();
    Shared {
        allowed,
        lender,
        retry_after: retry(leaf_wait),
        blocked_by: (!allowed).then_some(decides),
        nodes: nodes_out,
    }
}

/// Node `i`'s state after an admission whose lender is `m`: below `m` its
/// ceiling is charged (it admits), at `m` both (both admit), above `m` both
/// whether they fit or not (a debt; one beyond the schedule's horizon is
/// left where it is).
fn charged(node: &Node, s: NodeState, now: Micros, cost: u64, i: usize, m: usize) -> NodeState {
    let charge = |sch: &Schedule, tat: Option<Tat>, must_fit: bool| {
        if must_fit {
            sch.decide(tat, now, cost).1.or(tat)
        } else {
            sch.force(tat, now, cost).or(tat)
        }
    };
    let fits = i <= m;
    let ceiling = charge(node.counting(), s.ceiling, fits);
    let assured = match node.ceiling {
        Some(_) if i >= m => charge(&node.assured, s.assured, i == m),
        _ => s.assured,
    };
    NodeState { ceiling, assured }
}

/// Per node, leaf first: the most one request through that node could
/// take now, `r(n) = min(rC(n), max(rA(n), r(parent)))` and `r(root)` its
/// rate's, each schedule's own remaining (`can_send` holds for a cost iff
/// it is at most this, as every schedule admits a cost iff it is at most
/// its remaining). Below a spent parent it is the node's assured
/// remaining; below an idle one, its ceiling's.
pub fn remaining(nodes: &[Node], states: &[NodeState], now: Micros) -> Vec<u64> {
    let own = |s: &Schedule, tat: Option<Tat>| s.decide(tat, now, 0).0.remaining;
    let mut left = vec![0; nodes.len()];
    for i in (0..nodes.len()).rev() {
        let s = states.get(i).copied().unwrap_or_default();
        let node = &nodes[i];
        let ceiling = own(node.counting(), s.ceiling);
        left[i] = match (node.ceiling, left.get(i + 1)) {
            (None, _) => ceiling,
            // The top of the path: both of its rates must admit.
            (Some(_), None) => ceiling.min(own(&node.assured, s.assured)),
            (Some(_), Some(&parent)) => ceiling.min(own(&node.assured, s.assured).max(parent)),
        };
    }
    left
}

/// A look at the path (RL.PEEK of a path): whether a request of one unit
/// would be admitted now and its wait, each node's `remaining` the most a
/// request through it could take now (see [`remaining`]); nothing charged.
pub fn peek(nodes: &[Node], states: &[NodeState], now: Micros) -> Shared {
    let one = decide(nodes, states, now, 1);
    let mut look = decide(nodes, states, now, 0);
    for ((d, _), (unit, _)) in look.nodes.iter_mut().zip(&one.nodes) {
        d.allowed = unit.allowed;
        d.retry_after = unit.retry_after;
    }
    Shared {
        allowed: one.allowed,
        lender: None,
        retry_after: one.retry_after,
        blocked_by: one.blocked_by,
        nodes: look.nodes,
    }
}

/// What node `n` reports: see [`decide`].
fn report(node: &Node, s: &NodeState, now: Micros, wait: Wait, remaining: u64) -> Decision {
    let (look, _) = node.counting().decide(s.ceiling, now, 0);
    let reset_after = match node.ceiling {
        Some(_) => look
            .reset_after
            .max(node.assured.decide(s.assured, now, 0).0.reset_after),
        None => look.reset_after,
    };
    Decision {
        allowed: wait == 0,
        retry_after: retry(wait),
        remaining,
        reset_after,
        ..look
    }
}

/// Gives back `cost` of an admission (a waiter whose client went away):
/// every node's ceiling and the root's rate; and, when its `lender` is
/// known, the assured rates of the lender and of every node above it, the
/// ones it charged. Without the lender the assured rates are kept, which
/// errs on the strict side by at most `cost` units of them.
pub fn refund(
    nodes: &[Node],
    states: &[NodeState],
    now: Micros,
    cost: u64,
    lender: Option<usize>,
) -> Vec<NodeState> {
    let lent_from = |i: usize| lender.is_some_and(|m| i >= m);
    nodes
        .iter()
        .zip(states)
        .enumerate()
        .map(|(i, (node, s))| NodeState {
            ceiling: node.counting().refund(s.ceiling, now, cost).or(s.ceiling),
            assured: match node.ceiling {
                Some(_) if lent_from(i) => node.assured.refund(s.assured, now, cost).or(s.assured),
                _ => s.assured,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests;
