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
