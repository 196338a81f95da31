//! Fair turns: start-time fair queuing of flows, with one turn per waiter
//! that every line of the waiter orders it by. In each line the waiters are
//! grouped by flow, first come first served inside a flow. A waiter that is
//! the first of its flow in every one of its lines is given its *turn*: a
//! start tag, the latest over its lines of the line's virtual time (the
//! start of its latest admitted turn) and of where its flow's last
//! admission there finished (an admission uses its cost over its weight),
//! then the order turns are given in. Every line puts its waiters in that
//! one order, so that a flow's share of a line's admitted cost is its
//! weight over the weights of the backlogged flows, and a flow that joins
//! starts at the line's virtual time: it goes within one round of the flows
//! present, however long their lines.
//!
//! Why one turn per waiter rather than one order per line: a waiter of
//! several keys (RL.ALL, RL.SHARE) is decided only when it is at the front
//! of every one of its lines. Were the lines ordered each on its own, two
//! lines could put two such waiters in opposite orders, each waiting for
//! the other for ever. With one order over all turns, and a turn never
//! changed once given, the waiter with the smallest turn is at the front of
//! every one of its lines. A turn given later may be smaller than a line's
//! front (its flow's last admission finished early): it goes first there.
//! Lines that a waiter joins share its virtual time from then on (a line
//! whose virtual time is behind catches up): else a line that lags would
//! put each of its new flows before the waiter, for ever.
//!
//! A flow whose last waiter left after an admission is *remembered* with
//! where that admission finished until the line's virtual time passes it:
//! a client that re-sends as soon as it is answered starts where its flow's
//! last admission finished, behind the turns of the flows that waited
//! meanwhile, so it gets its weight's share and no more; a flow idle for
//! longer than that starts at the virtual time, so it banks no credit.
//! Remembered flows are forgotten once the virtual time passes them (a few
//! at each step, smallest finish first), all at once when the key admits a
//! waiting request at once (it has room: nobody needs turns there), and,
//! past the queue's bound on them, the smallest finish first. A line that
//! empties keeps its turns while they remember flows (several admitted in
//! one tick, their clients re-send after it).
//! Pure: the waiters are ids, their costs and weights are passed in; each
//! step costs O(log) in the waiters and flows of the line.

use super::lean::{LeanMap, LeanSet};

/// A flow's name on a key; `None`: the requests without `FLOW`, one flow.
pub type FlowName = Option<Vec<u8>>;

/// Virtual time: cost over weight, in units of 1 / [`SCALE`]. A `u128`
/// kept as its two halves, aligned as a `u64`: a `u128` would pad every
/// structure holding one (a waiter's turn, a line's flows) to 16 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Virtual {
    // The high half first: the derived order is the number's.
    high: u64,
    low: u64,
}

impl Virtual {
    pub const ZERO: Virtual = Virtual { high: 0, low: 0 };

    fn new(value: u128) -> Virtual {
        Virtual {
            high: (value >> 64) as u64,
            low: value as u64,
        }
    }

    fn get(self) -> u128 {
        (u128::from(self.high) << 64) | u128::from(self.low)
    }

    fn saturating_add(self, other: Virtual) -> Virtual {
        Virtual::new(self.get().saturating_add(other.get()))
    }
}

/// Divisible by every weight up to 16, so that small weights share
/// exactly.
const SCALE: u128 = 720_720 * 1_000_000;

/// A waiter's place in the order of every one of its lines: its start
/// tag, then the order turns were given in (unique).
pub type Turn = (Virtual, u64);

/// A waiter's cost and weight in a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub cost: u64,
    pub weight: u64,
}

impl Share {
    pub fn span(self) -> Virtual {
        Virtual::new(u128::from(self.cost) * SCALE / u128::from(self.weight.max(1)))
    }
}

/// One flow's waiters in a line.
struct Flow {
    /// In arrival order.
    ids: LeanSet<u64>,
    /// Where its last admission in this line finished.
    finish: Virtual,
}

/// Remembered flows forgotten at each step once the virtual time passes
/// them: more than the one a step may remember, so that they drain.
pub const FORGET_PER_STEP: usize = 2;

/// Flows remembered without waiters in a line (most often one: the line's
/// only flow, its last waiter admitted).
#[derive(Default)]
struct Remembered {
    /// Where each one's last admission finished.
    finish: LeanMap<FlowName, Virtual>,
    /// The same, by finish.
    by_finish: LeanSet<(Virtual, FlowName)>,
}

/// The flows of one line and the turns of its waiters.
#[derive(Default)]
pub struct Turns {
    /// The flows with waiters (most lines have one).
    flows: LeanMap<FlowName, Flow>,
    /// The flows without waiters whose last admission finished after the
    /// virtual time (`None` while there are none: most lines never have).
    remembered: Option<Box<Remembered>>,
    /// The waiters that have their turn, in turn order.
    order: LeanSet<(Turn, u64)>,
    /// The line's virtual time: the start of the latest admitted turn.
    now: Virtual,
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

    /// How many flows without waiters are remembered.
    pub fn remembered(&self) -> usize {
        self.remembered.as_ref().map_or(0, |r| r.finish.len())
    }

    /// Forgets the remembered `flow`; where its last admission finished.
    fn recall(&mut self, flow: &FlowName) -> Option<Virtual> {
        let remembered = self.remembered.as_mut()?;
        let finish = remembered.finish.remove(flow)?;
        remembered.by_finish.remove(&(finish, flow.clone()));
        if remembered.finish.is_empty() {
            self.remembered = None;
        }
        Some(finish)
    }

    /// Waiter `id` (arriving after every other) joins `flow` at its end; a
    /// remembered flow takes up where its last admission finished.
    pub fn join(&mut self, flow: &FlowName, id: u64) {
        if !self.flows.contains_key(flow) {
            let finish = self.recall(flow).unwrap_or_default();
            let ids = LeanSet::default();
            self.flows.insert(flow.clone(), Flow { ids, finish });
        }
        if let Some(f) = self.flows.get_mut(flow) {
            f.ids.insert(id);
        }
    }

    /// Whether `id` is the first of `flow` here.
    pub fn is_first_of_flow(&self, flow: &FlowName, id: u64) -> bool {
        self.flows.get(flow).and_then(|f| f.ids.first()) == Some(&id)
    }

    /// The line's virtual time.
    pub fn virtual_time(&self) -> Virtual {
        self.now
    }

    /// The line's virtual time moves on to `at` if it is behind.
    pub fn catch_up(&mut self, at: Virtual) {
        self.now = self.now.max(at);
        self.forget_passed();
    }

    /// The earliest start of a turn for `flow` here: the line's virtual
    /// time, or where the flow's last admission finished if later (a flow
    /// that waited while others went first saves no idle time up, and one
    /// that re-sends at once gains none).
    pub fn earliest_start(&self, flow: &FlowName) -> Virtual {
        let finish = match self.flows.get(flow) {
            Some(f) => f.finish,
            None => (self.remembered.as_ref())
                .and_then(|r| r.finish.get(flow).copied())
                .unwrap_or_default(),
        };
        self.now.max(finish)
    }

    /// Forgets a few remembered flows the virtual time has passed (they
    /// would start at the virtual time anyway).
    fn forget_passed(&mut self) {
        for _ in 0..FORGET_PER_STEP {
            match self.remembered.as_ref().and_then(|r| r.by_finish.first()) {
                Some((finish, _)) if *finish <= self.now => {
                    self.forget_first();
                }
                _ => break,
            }
        }
    }

    /// Forgets the remembered flow whose admission finished first; whether
    /// there was one.
    pub fn forget_first(&mut self) -> bool {
        let Some(remembered) = self.remembered.as_mut() else {
            return false;
        };
        let Some((_, flow)) = remembered.by_finish.pop_first() else {
            return false;
        };
        remembered.finish.remove(&flow);
        if remembered.finish.is_empty() {
            self.remembered = None;
        }
        true
    }

    /// Waiter `id` takes its `turn` here.
    pub fn take_turn(&mut self, turn: Turn, id: u64) {
        self.order.insert((turn, id));
    }

    /// Waiter `id` of `flow` (with `turn`, if it had one) leaves: admitted
    /// with `share` (its flow has used its cost here), or not (nothing
    /// used). The next of its flow, if `id` was its first: it may now be
    /// given its turn.
    pub fn leave(
        &mut self,
        flow: &FlowName,
        id: u64,
        turn: Option<Turn>,
        admitted: Option<Share>,
    ) -> Option<u64> {
        if let Some(turn) = turn {
            self.order.remove(&(turn, id));
        }
        let f = self.flows.get_mut(flow)?;
        let was_first = f.ids.first() == Some(&id);
        f.ids.remove(&id);
        if let (Some(turn), Some(share)) = (turn, admitted) {
            self.now = self.now.max(turn.0);
            f.finish = f.finish.max(turn.0.saturating_add(share.span()));
        }
        let next = f.ids.first().copied();
        if next.is_none() {
            let finish = f.finish;
            self.flows.remove(flow);
            if finish > self.now {
                let remembered = self.remembered.get_or_insert_with(Box::default);
                remembered.finish.insert(flow.clone(), finish);
                remembered.by_finish.insert((finish, flow.clone()));
            }
        }
        self.forget_passed();
        next.filter(|_| was_first)
    }

    /// The waiter at the front: the smallest turn.
    pub fn front(&self) -> Option<u64> {
        self.order.first().map(|(_, id)| *id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::limits::MAX_COUNT;
    use std::collections::HashMap;

    fn name(s: &str) -> FlowName {
        Some(s.as_bytes().to_vec())
    }

    /// One line on its own: gives each first of a flow its turn, as the
    /// queue does.
    struct Line {
        turns: Turns,
        next_turn: u64,
        turns_of: HashMap<u64, Turn>,
    }

    impl Line {
        fn new() -> Line {
            Line {
                turns: Turns::default(),
                next_turn: 0,
                turns_of: HashMap::new(),
            }
        }

        fn give(&mut self, flow: &FlowName, id: u64) {
            if self.turns.is_first_of_flow(flow, id) && !self.turns_of.contains_key(&id) {
                let turn = (self.turns.earliest_start(flow), self.next_turn);
                self.next_turn += 1;
                self.turns.take_turn(turn, id);
                self.turns_of.insert(id, turn);
            }
        }

        fn join(&mut self, flow: &FlowName, id: u64) {
            self.turns.join(flow, id);
            self.give(flow, id);
        }

        fn leave(&mut self, flow: &FlowName, id: u64, admitted: Option<Share>) {
            let turn = self.turns_of.remove(&id);
            if let Some(next) = self.turns.leave(flow, id, turn, admitted) {
                self.give(flow, next);
            }
        }

        /// Admits `n` in turn; the flow of each.
        fn admit(
            &mut self,
            n: usize,
            flow_of: impl Fn(u64) -> FlowName,
            share_of: impl Fn(u64) -> Share,
        ) -> Vec<FlowName> {
            (0..n)
                .map(|_| {
                    let id = self.turns.front().expect("a waiter");
                    let flow = flow_of(id);
                    self.leave(&flow, id, Some(share_of(id)));
                    flow
                })
                .collect()
        }
    }

    #[test]
    fn shares_follow_the_weights_even_at_the_largest_costs() {
        for cost in [1, 1_000, MAX_COUNT] {
            let mut line = Line::new();
            let (a, b) = (name("a"), name("b"));
            // Ids below 1,000 are a's (weight 3), the others b's (weight 1).
            for id in 0..100 {
                line.join(&a, id);
                line.join(&b, 1_000 + id);
            }
            let flow_of = |id: u64| if id < 1_000 { name("a") } else { name("b") };
            let share_of = |id: u64| Share {
                cost,
                weight: if id < 1_000 { 3 } else { 1 },
            };
            let order = line.admit(80, flow_of, share_of);
            let of_a = order.iter().filter(|f| **f == a).count();
            assert!((59..=61).contains(&of_a), "cost {cost}: {of_a}");
        }
    }

    #[test]
    fn shares_are_of_the_cost_admitted() {
        let mut line = Line::new();
        let (a, b) = (name("a"), name("b"));
        let cost_of = |id: u64| if id < 1_000 { 1 } else { 3 };
        for id in 0..100 {
            line.join(&a, id);
            line.join(&b, 1_000 + id);
        }
        let flow_of = |id: u64| if id < 1_000 { name("a") } else { name("b") };
        let order = line.admit(40, flow_of, |id| Share {
            cost: cost_of(id),
            weight: 1,
        });
        let cost_a = order.iter().filter(|f| **f == a).count() as u64;
        let cost_b = 3 * order.iter().filter(|f| **f == b).count() as u64;
        // Three of a's for each of b's: the same cost each.
        assert!(cost_a.abs_diff(cost_b) <= 3, "{cost_a} {cost_b}");
    }

    #[test]
    fn a_waiter_that_leaves_unadmitted_uses_nothing() {
        let mut line = Line::new();
        let (a, b) = (name("a"), name("b"));
        let one = Share { cost: 1, weight: 1 };
        for id in 0..10 {
            line.join(&a, id);
            line.join(&b, 100 + id);
        }
        // a's first three give up: b gains nothing from it.
        for id in 0..3 {
            line.leave(&a, id, None);
        }
        let flow_of = |id: u64| if id < 100 { name("a") } else { name("b") };
        let order = line.admit(10, flow_of, |_| one);
        assert_eq!(order.iter().filter(|f| **f == a).count(), 5);
        assert_eq!(line.turns.flow_len(&a), 2);
        assert_eq!(line.turns.flows(), 2);
    }

    #[test]
    fn a_flow_that_joins_starts_at_the_virtual_time() {
        let mut line = Line::new();
        let (a, b) = (name("a"), name("b"));
        line.join(&a, 0);
        line.join(&a, 1);
        line.leave(&a, 0, Some(Share { cost: 5, weight: 1 }));
        // a's next starts where its admission finished; b joins at the
        // start of that admission, and goes first.
        assert_eq!(line.turns.front(), Some(1));
        line.join(&b, 2);
        assert_eq!(line.turns.front(), Some(2));
        line.leave(&b, 2, Some(Share { cost: 5, weight: 1 }));
        assert_eq!(line.turns.front(), Some(1));
    }
}
