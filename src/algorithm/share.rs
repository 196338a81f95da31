//! Borrowing between limits, as Linux HTB does it, in GCRA arithmetic.
//!
//! A *path* of nodes, leaf first and root last. Every node but the root
//! has an assured schedule `A` and a ceiling schedule `C` (a rate at least
//! the assured one, with its own burst); the root has one rate, its `A` and
//! `C` at once. A request of `cost` at the leaf is admitted iff
//! `can_send(leaf, 0)`:
//!
//! ```text
//! can_send(n, e)    = C(n) admits cost and (A(n) admits cost + e or can_send(parent(n), e + margin(n)))
//! can_send(root, e) = its rate admits cost + e
//! ```
//!
//! The *lender* `m` is the lowest node whose `A` admits the cost and its
//! margin: the node whose assured rate the request uses. On admission every
//! node's `C` is charged (a ceiling counts all of its subtree's traffic),
//! and `A` of `m` and of every node above it; above `m` those charges may
//! run past the schedule's tolerance (a debt, at most the node's
//! `max_debt`), which keeps a parent's borrowers out while its children use
//! their assured rates. Nodes below `m` borrowed: their `A` is not charged,
//! so borrowing idle capacity never costs a child its assured rate later;
//! their fair-sharing finishes move instead (see [`margin`]), so that a
//! parent's spare rate goes to its borrowing children in proportion to
//! their assured rates. A denial changes nothing.
//!
//! A denial's wait is exact: the earliest time `can_send(leaf, 0)` becomes
//! true with no other traffic, `w(n) = max(wC(n), min(wA(n), w(parent)))`
//! and `w(root)` its rate's wait, each schedule's wait being the time until
//! it admits the cost (an assured one: and the margin, which moves only
//! with traffic; admission only grows with time, so the earliest time the
//! formula holds is this min/max of the schedules' own times).

use super::schedule::{Schedule, ScheduleError, Tat};
use super::{Decision, Micros, RetryAfter};

/// How a node is defined: its assured rate (`limit` per `period`, bursts of
/// `burst`) and, for every node but the root, its ceiling (`ceil` per the
/// same period, bursts of `cburst`); its debt is never longer than
/// `max_debt` to repay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Definition {
    pub limit: u64,
    pub period: Micros,
    pub burst: u64,
    /// `None` for the root.
    pub ceil: Option<u64>,
    pub cburst: u64,
    pub max_debt: Micros,
}

/// A node of a path: its definition and the schedules made from it. The
/// root's one rate is `assured`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub definition: Definition,
    pub assured: Schedule,
    /// `None` for the root.
    pub ceiling: Option<Schedule>,
}

impl Node {
    pub fn new(definition: Definition) -> Result<Node, ScheduleError> {
        let d = definition;
        Ok(Node {
            definition,
            assured: Schedule::new(d.burst, d.limit, d.period)?,
            ceiling: match d.ceil {
                Some(ceil) => Some(Schedule::new(d.cburst, ceil, d.period)?),
                None => None,
            },
        })
    }
}

/// A node's stored state (`None`: never set). The root keeps its rate's
/// TAT in `ceiling` (its rate is its ceiling) and no assured one.
///
/// `finish` and `round` are the fair sharing of a parent's spare rate (see
/// [`margin`]): `finish` is how far the node has borrowed from its parent, in
/// ns of *virtual time* (each unit borrowed moves it by the node's assured
/// interval, so a node of twice the rate moves half as far); `round` is the
/// node's own virtual time as a parent, the virtual time at which its latest
/// borrowing child that was ahead of it started. A child's finish may be
/// behind its parent's round (a credit). Both wrap around; only differences
/// count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeState {
    pub ceiling: Option<Tat>,
    pub assured: Option<Tat>,
    pub finish: Option<u64>,
    pub round: Option<u64>,
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

/// The wait until `s` lends `cost` with `margin` units to spare (at most
/// half its burst, so that a lone borrower never waits for a full
/// schedule, which loses what it cannot hold): until it admits `cost` and
/// that margin, or its whole burst when that is less.
fn lend_wait(s: &Schedule, tat: Option<Tat>, now: Micros, cost: u64, margin: u64) -> Wait {
    let need = if cost == 0 || cost > s.burst() {
        cost
    } else {
        cost.saturating_add(margin.min(s.burst() / 2))
            .min(s.burst())
    };
    wait_of(s, tat, now, need)
}

/// The most `s` lends now with `margin` units to spare (see [`lend_wait`]).
fn lend_left(s: &Schedule, tat: Option<Tat>, now: Micros, margin: u64) -> u64 {
    let left = s.decide(tat, now, 0).0.remaining;
    if left >= s.burst() {
        left
    } else {
        left.saturating_sub(margin.min(s.burst() / 2))
    }
}

fn retry(w: Wait) -> RetryAfter {
    match w {
        0 => RetryAfter::NotNeeded,
        NEVER => RetryAfter::Never,
        w => RetryAfter::After(Micros::new(w)),
    }
}

/// The margin is `MARGIN_SCALE` × the parent's assured rate × the child's
/// lead (see [`margin`]): wide enough that the sibling of least lead,
/// sending at random times, comes before the schedule reaches the next
/// one's margin (4 keeps the long-run split within 10 % of HTB's in
/// `fairness.rs`; 1 left 15 %).
const MARGIN_SCALE: u128 = 4;

/// Virtual ns per µs.
const NS: u128 = 1_000;

impl Node {
    /// The schedule that counts all traffic through this node.
    fn counting(&self) -> &Schedule {
        self.ceiling.as_ref().unwrap_or(&self.assured)
    }

    /// Virtual ns its finish moves per unit it borrows: its assured interval.
    fn step(&self) -> u64 {
        let d = &self.definition;
        let ns = u128::from(d.period.as_u64()) * NS;
        u64::try_from(ns.div_ceil(u128::from(d.limit.max(1)))).unwrap_or(u64::MAX)
    }

    /// The most virtual time it keeps as a credit behind its parent's
    /// round: its assured burst's worth of steps.
    fn credit(&self) -> u64 {
        self.assured.burst().saturating_mul(self.step())
    }

    /// The most lead a `child` keeps at this node: the lead at which its
    /// margin reaches this node's whole assured burst (no lead counts for
    /// more, see [`margin`]) and one ceiling burst of its steps, so that a
    /// single admission's move (at most its ceiling burst) is never cut.
    fn max_lead(&self, child: &Node) -> u64 {
        let d = &self.definition;
        let ns = u128::from(self.assured.burst()) * u128::from(d.period.as_u64()) * NS;
        let full = ns / (u128::from(d.limit.max(1)) * MARGIN_SCALE);
        let one_burst = u128::from(child.counting().burst()) * u128::from(child.step());
        u64::try_from(full + one_burst)
            .unwrap_or(u64::MAX / 2)
            .min(u64::MAX / 2)
    }
}

/// How far `child`, with `finish`, is ahead of its `parent`'s `round`
/// (at most the parent's `max_lead` for it), or behind it (negative: a
/// credit, at most the child's `credit`). A child that borrowed less than
/// its share keeps that credit to catch up with; idle time earns no more.
fn lead(child: &Node, finish: Option<u64>, parent: &Node, round: Option<u64>) -> i64 {
    match (finish, round) {
        (Some(t), Some(v)) => {
            let d = t.wrapping_sub(v) as i64;
            let credit = i64::try_from(child.credit()).unwrap_or(i64::MAX);
            let max = i64::try_from(parent.max_lead(child)).unwrap_or(i64::MAX);
            d.clamp(-credit, max)
        }
        _ => 0,
    }
}

/// The units a child `lead` ns of virtual time ahead of its parent's
/// round must leave in the lender's assured rate to borrow: the parent's
/// assured rate times the lead (none with a credit). Under contention the
/// lender's schedule stays near empty, so siblings with credit, then the
/// sibling with the least lead, are admitted first, the order start-time
/// fair queuing serves them in. Only borrowers ahead move the round, and
/// every busy borrower stays within its credit and its lead of it, so each
/// takes its assured rate times the round's advance: the spare rate in
/// proportion to the assured rates.
fn margin(parent: &Node, lead: u64) -> u64 {
    let d = &parent.definition;
    let units = u128::from(lead) * u128::from(d.limit) * MARGIN_SCALE
        / (u128::from(d.period.as_u64().max(1)) * NS);
    u64::try_from(units).unwrap_or(u64::MAX)
}

/// Per node, leaf first: the units the leaf's request must leave in that
/// node's assured rate to borrow from it, the sum of the margins of the
/// borrowers below it.
fn margins(nodes: &[Node], states: &[NodeState]) -> Vec<u64> {
    let state = |i: usize| states.get(i).copied().unwrap_or_default();
    let mut e = vec![0u64; nodes.len()];
    for i in 1..nodes.len() {
        let parent = &nodes[i];
        let l = lead(&nodes[i - 1], state(i - 1).finish, parent, state(i).round);
        e[i] = e[i - 1].saturating_add(margin(parent, l.max(0).unsigned_abs()));
    }
    e
}

impl Node {
    /// The waits of its ceiling and of its assured rate lending with
    /// `margin` to spare (the root's rate is both).
    fn waits(&self, state: &NodeState, now: Micros, cost: u64, margin: u64) -> (Wait, Wait) {
        let c = wait_of(self.counting(), state.ceiling, now, cost);
        match self.ceiling {
            None => (
                c,
                c.max(lend_wait(&self.assured, state.ceiling, now, cost, margin)),
            ),
            Some(_) => (
                c,
                lend_wait(&self.assured, state.assured, now, cost, margin),
            ),
        }
    }
}

/// Decides a request of `cost` at the leaf of `nodes` (leaf first, root
/// last; `states` in the same order) at `now`.
///
/// Each node's decision: `allowed` is `can_send` at that node, its
/// `retry_after` that node's `w`; `limit` is its ceiling's (the root's
/// rate's) and `remaining` the most the leaf's request could take through
/// that node after this one (see [`remaining`]); `reset_after` is the later
/// of its two schedules' resets, the time its key must live.
pub fn decide(nodes: &[Node], states: &[NodeState], now: Micros, cost: u64) -> Shared {
    let state = |i: usize| states.get(i).copied().unwrap_or_default();
    let e = margins(nodes, states);
    let waits: Vec<(Wait, Wait)> = (0..nodes.len())
        .map(|i| nodes[i].waits(&state(i), now, cost, e[i]))
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
    let mut after: Vec<NodeState> = (0..nodes.len())
        .map(|i| match lender {
            Some(m) => charged(&nodes[i], state(i), now, cost, i, m),
            None => state(i),
        })
        .collect();
    if let Some(m) = lender {
        borrow(nodes, &mut after, cost, m);
    }
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

/// Node `i`'s rates after an admission whose lender is `m`: below `m` its
/// ceiling is charged (it admits), at `m` both (both admit), above `m` both
/// whether they fit or not (a debt, never longer than its `max_debt` to
/// repay; one beyond the schedule's horizon is left where it is).
fn charged(node: &Node, s: NodeState, now: Micros, cost: u64, i: usize, m: usize) -> NodeState {
    let max_debt = node.definition.max_debt;
    let charge = |sch: &Schedule, tat: Option<Tat>, must_fit: bool| {
        if must_fit {
            sch.decide(tat, now, cost).1.or(tat)
        } else {
            sch.force_capped(tat, now, cost, max_debt).or(tat)
        }
    };
    let fits = i <= m;
    let ceiling = charge(node.counting(), s.ceiling, fits);
    let assured = match node.ceiling {
        Some(_) if i >= m => charge(&node.assured, s.assured, i == m),
        _ => s.assured,
    };
    NodeState {
        ceiling,
        assured,
        ..s
    }
}

/// The fair-sharing rounds after the nodes below `m` borrowed `cost`: each
/// borrower starts at its finish (but never more than its credit behind its
/// parent's round, nor more than its parent's `max_lead` ahead), moves its
/// finish on by `cost` of its own steps, and the parent's round moves to
/// that start if it is ahead.
fn borrow(nodes: &[Node], after: &mut [NodeState], cost: u64, m: usize) {
    for i in 0..m.min(nodes.len().saturating_sub(1)) {
        let (parent, round) = (&nodes[i + 1], after[i + 1].round);
        let start = match (after[i].finish, round) {
            (_, None) => after[i].finish.unwrap_or(0),
            (finish, Some(v)) => v.wrapping_add_signed(lead(&nodes[i], finish, parent, round)),
        };
        let step = cost.saturating_mul(nodes[i].step());
        after[i].finish = Some(start.wrapping_add(step));
        let moves = round.is_none_or(|v| start.wrapping_sub(v) as i64 > 0);
        if moves {
            after[i + 1].round = Some(start);
        }
    }
}

/// Per node, leaf first: the most the leaf's request could take through
/// that node now, `r(n) = min(rC(n), max(rA(n), r(parent)))` and `r(root)`
/// its rate's, each schedule's own remaining, an assured rate's less the
/// margin the request must leave in it to borrow from it (`can_send` holds
/// for a cost iff it is at most this, as every schedule admits a cost iff
/// it is at most its remaining). Below a spent parent it is the node's
/// assured remaining; below an idle one, its ceiling's.
pub fn remaining(nodes: &[Node], states: &[NodeState], now: Micros) -> Vec<u64> {
    let own = |s: &Schedule, tat: Option<Tat>| s.decide(tat, now, 0).0.remaining;
    let e = margins(nodes, states);
    let mut left = vec![0; nodes.len()];
    for i in (0..nodes.len()).rev() {
        let s = states.get(i).copied().unwrap_or_default();
        let node = &nodes[i];
        let ceiling = own(node.counting(), s.ceiling);
        left[i] = match (node.ceiling, left.get(i + 1)) {
            (None, _) => ceiling.min(lend_left(&node.assured, s.ceiling, now, e[i])),
            // The top of the path: both of its rates must admit.
            (Some(_), None) => ceiling.min(lend_left(&node.assured, s.assured, now, e[i])),
            (Some(_), Some(&parent)) => {
                ceiling.min(lend_left(&node.assured, s.assured, now, e[i]).max(parent))
            }
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
/// ones it charged, and the finishes of the borrowers below it. Without the
/// lender the assured rates and finishes are kept, which errs on the strict
/// side by at most `cost` units of them. The parents' rounds keep their
/// move, which errs on the lenient side: a borrower taken back is not
/// ahead of its siblings for it.
pub fn refund(
    nodes: &[Node],
    states: &[NodeState],
    now: Micros,
    cost: u64,
    lender: Option<usize>,
) -> Vec<NodeState> {
    let lent_from = |i: usize| lender.is_some_and(|m| i >= m);
    let borrowed = |i: usize| lender.is_some_and(|m| i < m);
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
            finish: match s.finish {
                Some(t) if borrowed(i) => Some(t.wrapping_sub(cost.saturating_mul(node.step()))),
                t => t,
            },
            round: s.round,
        })
        .collect()
}

#[cfg(test)]
mod fairness;
#[cfg(test)]
mod tests;
