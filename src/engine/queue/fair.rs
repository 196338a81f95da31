//! Fair turns in one line: its waiters grouped by flow, first come first
//! served inside a flow, and the flows taking turns by weighted deficit
//! round robin by cost, kept as virtual times so that each turn costs
//! O(log flows) whatever the costs: a flow's head is due its turn at the
//! virtual time its flow has used so far plus its cost over its weight, and
//! the earliest due head goes next. A backlogged flow's share of the
//! admitted cost is its weight over the weights of the backlogged flows; a
//! flow that joins starts at the line's virtual time (what the last
//! admitted head had used), so it gets its turn within one round of the
//! flows present, however long their lines. Pure: the waiters are ids, their
//! costs and weights are passed in.

use std::collections::{BTreeSet, HashMap};

/// A flow's name on a key; `None`: the requests without `FLOW`, one flow.
pub type FlowName = Option<Vec<u8>>;

/// Virtual time: cost over weight, in units of 1 / [`SCALE`].
type Virtual = u128;

/// Divisible by every weight up to 16, so that small weights share
/// exactly.
const SCALE: Virtual = 720_720 * 1_000_000;

/// A waiter's cost and weight in its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub cost: u64,
    pub weight: u64,
}

impl Share {
    fn span(self) -> Virtual {
        Virtual::from(self.cost) * SCALE / Virtual::from(self.weight.max(1))
    }
}

/// One flow's waiters in a line.
struct Flow {
    ids: BTreeSet<u64>,
    /// The virtual time its head's turn starts at.
    start: Virtual,
    /// Its head's place in the turns.
    turn: (Virtual, u64),
}

/// The flows of one line and their turns.
#[derive(Default)]
pub struct Turns {
    flows: HashMap<FlowName, Flow>,
    /// Each flow's head by its due virtual time, then the order its turn
    /// was set in.
    order: BTreeSet<(Virtual, u64, FlowName)>,
    /// What the last admitted head had used when its turn began.
    now: Virtual,
    next_seq: u64,
}

impl Turns {
    /// How many of `flow` wait in the line.
    pub fn flow_len(&self, flow: &FlowName) -> usize {
        self.flows.get(flow).map_or(0, |f| f.ids.len())
    }

    /// How many flows have waiters.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Waiter `id` (arriving after every other) joins `flow` at its end;
    /// `share` is its own.
    pub fn join(&mut self, flow: &FlowName, id: u64, share: Share) {
        if let Some(f) = self.flows.get_mut(flow) {
            f.ids.insert(id);
            return;
        }
        let start = self.now;
        let mut f = Flow {
            ids: BTreeSet::from([id]),
            start,
            turn: (0, 0),
        };
        self.set_turn(flow, &mut f, share);
        self.flows.insert(flow.clone(), f);
    }

    fn set_turn(&mut self, name: &FlowName, flow: &mut Flow, head: Share) {
        let due = flow.start.saturating_add(head.span());
        flow.turn = (due, self.next_seq);
        self.next_seq += 1;
        self.order.insert((flow.turn.0, flow.turn.1, name.clone()));
    }

    /// Waiter `id` leaves `flow`: admitted (its flow has used its cost) or
    /// not (nothing used). `share_of` gives a waiter's share, for the
    /// flow's next head.
    pub fn leave(
        &mut self,
        flow: &FlowName,
        id: u64,
        admitted: bool,
        share_of: impl Fn(u64) -> Share,
    ) {
        let Some(mut f) = self.flows.remove(flow) else {
            return;
        };
        let was_head = f.ids.first() == Some(&id);
        f.ids.remove(&id);
        if was_head {
            self.order.remove(&(f.turn.0, f.turn.1, flow.clone()));
            if admitted {
                self.now = self.now.max(f.start);
                f.start = f.turn.0;
            }
            // A flow that waited while others went first starts no earlier
            // than the line's virtual time: idle time is not saved up.
            f.start = f.start.max(self.now);
        }
        let Some(&head) = f.ids.first() else {
            return;
        };
        if was_head {
            self.set_turn(flow, &mut f, share_of(head));
        }
        self.flows.insert(flow.clone(), f);
    }

    /// The waiter whose turn is next: the head of the flow due first.
    pub fn next(&self) -> Option<u64> {
        let (_, _, name) = self.order.first()?;
        self.flows.get(name)?.ids.first().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::limits::MAX_COUNT;

    fn name(s: &str) -> FlowName {
        Some(s.as_bytes().to_vec())
    }

    /// Admits `n` waiters in turn; the flow of each.
    fn admit(
        turns: &mut Turns,
        n: usize,
        flow_of: impl Fn(u64) -> FlowName,
        share: Share,
    ) -> Vec<FlowName> {
        (0..n)
            .map(|_| {
                let id = turns.next().expect("a waiter");
                let flow = flow_of(id);
                turns.leave(&flow, id, true, |_| share);
                flow
            })
            .collect()
    }

    #[test]
    fn shares_follow_the_weights_even_at_the_largest_costs() {
        for cost in [1, 1_000, MAX_COUNT] {
            let mut turns = Turns::default();
            let (a, b) = (name("a"), name("b"));
            // Ids below 1,000 are a's (weight 3), the others b's (weight 1).
            for id in 0..100 {
                turns.join(&a, id, Share { cost, weight: 3 });
                turns.join(&b, 1_000 + id, Share { cost, weight: 1 });
            }
            let weight = |id: u64| if id < 1_000 { 3 } else { 1 };
            let mut order = Vec::new();
            for _ in 0..80 {
                let id = turns.next().expect("a waiter");
                let flow = if id < 1_000 { a.clone() } else { b.clone() };
                turns.leave(&flow, id, true, |next| Share {
                    cost,
                    weight: weight(next),
                });
                order.push(flow);
            }
            let of_a = order.iter().filter(|f| **f == a).count();
            assert_eq!(of_a, 60, "cost {cost}");
        }
    }

    #[test]
    fn shares_are_of_the_cost_admitted() {
        let mut turns = Turns::default();
        let (a, b) = (name("a"), name("b"));
        let cost_of = |id: u64| if id < 1_000 { 1 } else { 3 };
        for id in 0..100 {
            turns.join(&a, id, Share { cost: 1, weight: 1 });
            turns.join(&b, 1_000 + id, Share { cost: 3, weight: 1 });
        }
        let mut cost = [0, 0];
        for _ in 0..40 {
            let id = turns.next().expect("a waiter");
            let (flow, i) = if id < 1_000 { (&a, 0) } else { (&b, 1) };
            turns.leave(flow, id, true, |next| Share {
                cost: cost_of(next),
                weight: 1,
            });
            cost[i] += cost_of(id);
        }
        // Three of a's for each of b's: the same cost each.
        assert!(cost[0].abs_diff(cost[1]) <= 3, "{cost:?}");
    }

    #[test]
    fn a_waiter_that_leaves_unadmitted_uses_nothing() {
        let mut turns = Turns::default();
        let (a, b) = (name("a"), name("b"));
        let one = Share { cost: 1, weight: 1 };
        for id in 0..10 {
            turns.join(&a, id, one);
            turns.join(&b, 100 + id, one);
        }
        // a's first three give up: b gains nothing from it.
        for id in 0..3 {
            turns.leave(&a, id, false, |_| one);
        }
        let flow_of = |id: u64| if id < 100 { name("a") } else { name("b") };
        let order = admit(&mut turns, 10, flow_of, one);
        assert_eq!(order.iter().filter(|f| **f == a).count(), 5);
        assert_eq!(turns.flow_len(&a), 2);
        assert_eq!(turns.flows(), 2);
    }
}
