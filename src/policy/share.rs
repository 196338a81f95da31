//! An RL.SHARE node as a policy. The decision of a path spans its keys, so
//! it is made in the engine (`engine::decide`, through
//! [`crate::algorithm::share::decide`]); a node as a [`Limiter`] is a path
//! of that node alone, with nothing to borrow from, for what looks at one
//! key at a time (a refund gives back both of its rates).

use super::{Limiter, StateWrite, Transition};
use crate::algorithm::schedule::Schedule;
use crate::algorithm::share::{self, Definition, Node, NodeState};
use crate::algorithm::Micros;
use crate::codec::share as layout;
use crate::codec::{Kind, StateError};

/// A node's stored state and the definition it was written with (`None`:
/// no key, or a layout that kept none).
pub fn read_stored(stored: Option<&[u8]>) -> Result<(NodeState, Option<Definition>), StateError> {
    Ok(match stored.map(layout::decode).transpose()? {
        Some(s) => (s.state, s.definition),
        None => (NodeState::default(), None),
    })
}

/// A node's stored state (`None`: no key).
pub fn read(stored: Option<&[u8]>) -> Result<NodeState, StateError> {
    Ok(read_stored(stored)?.0)
}

/// A node's state written under the definition `from`, as the node `to`
/// reads it once a named path changed ([`crate::policy::Policy::Named`]'s
/// rule): each rate's units used carry, rescaled to the new rate
/// ([`crate::algorithm::schedule::Schedule::carry`]), so a raise admits
/// the difference at once and a cut admits nothing until the used units
/// drain under the new limit. A root's one rate stands for both of an
/// inner node's rates and an inner node's ceiling (all of its subtree's
/// traffic) for a root's rate. The fair-sharing finish and round are kept
/// as they are (virtual times: only differences count). A definition that
/// makes no node (none ever does) restarts the node.
pub fn carry(state: NodeState, from: &Definition, to: &Node, now: Micros) -> NodeState {
    let Ok(old) = Node::new(*from) else {
        return NodeState::default();
    };
    // The old rates' TATs, each with its schedule: the one counting all
    // traffic (a root's rate), and the assured one (a root's: the same).
    let counting = (state.ceiling, old.ceiling.unwrap_or(old.assured).pace());
    let assured = match old.ceiling {
        Some(_) => (state.assured, old.assured.pace()),
        None => counting,
    };
    let rescale = |to: &Schedule, (tat, pace): (Option<_>, _)| tat.map(|t| to.carry(t, pace, now));
    match &to.ceiling {
        Some(ceiling) => NodeState {
            ceiling: rescale(ceiling, counting),
            assured: rescale(&to.assured, assured),
            ..state
        },
        None => NodeState {
            ceiling: rescale(&to.assured, counting),
            assured: None,
            ..state
        },
    }
}

/// The write that stores `state` for `node`, with its definition.
pub fn write(node: &Node, state: &NodeState) -> StateWrite {
    StateWrite::Value(layout::encode(state, &node.definition).into())
}

impl Limiter for Node {
    fn interval(&self) -> Option<Micros> {
        Some(self.assured.interval())
    }

    fn kind(&self) -> Kind {
        Kind::Share
    }

    /// Every rate on the path is a TAT: a charge at a later start reads
    /// before it as the admission then would leave it.
    fn reserves(&self) -> bool {
        true
    }

    fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError> {
        let state = read(stored)?;
        let shared = share::decide(std::slice::from_ref(self), &[state], now, cost);
        let (decision, new) = shared.nodes[0];
        Ok(Transition::of(decision, new.map(|s| write(self, &s))))
    }

    fn refund_write(
        &self,
        value: &[u8],
        now: Micros,
        n: u64,
    ) -> Result<Option<StateWrite>, StateError> {
        let state = read(Some(value))?;
        // Alone, a node admits on its own assured rate: it is the lender.
        let after = share::refund(std::slice::from_ref(self), &[state], now, n, Some(0));
        Ok((after[0] != state).then(|| write(self, &after[0])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(limit: u64, ceil: Option<u64>) -> Node {
        Node::new(Definition {
            limit,
            period: Micros::from_secs(3_600),
            burst: limit,
            ceil,
            cburst: ceil.unwrap_or(limit),
            max_debt: Micros::from_secs(60),
        })
        .unwrap()
    }

    /// Charges `n` units at `now` to each of the node's rates.
    fn used(node: &Node, n: u64, now: Micros) -> NodeState {
        let tat = |s: &Schedule| s.decide(None, now, n).1;
        NodeState {
            ceiling: tat(node.ceiling.as_ref().unwrap_or(&node.assured)),
            assured: node.ceiling.and_then(|_| tat(&node.assured)),
            finish: Some(7),
            round: Some(9),
        }
    }

    #[test]
    fn a_change_carries_each_rates_units_used() {
        let now = Micros::from_secs(1_000_000);
        let remaining = |n: &Node, s: &NodeState| {
            let counting = n.ceiling.as_ref().unwrap_or(&n.assured);
            let c = counting.decide(s.ceiling, now, 0).0.remaining;
            let a = n
                .ceiling
                .map(|_| n.assured.decide(s.assured, now, 0).0.remaining);
            (c, a)
        };
        // An inner node with 2 used of 2 assured and 4 at once: raised to
        // 4 and 8, 2 and 6 are left; the fair-sharing times are kept.
        let (from, to) = (node(2, Some(4)), node(4, Some(8)));
        let state = used(&from, 2, now);
        let carried = carry(state, &from.definition, &to, now);
        assert_eq!(remaining(&to, &carried), (6, Some(2)));
        assert_eq!((carried.finish, carried.round), (Some(7), Some(9)));
        // Cut to 1 and 2: nothing left.
        let cut = carry(state, &from.definition, &node(1, Some(2)), now);
        assert_eq!(remaining(&node(1, Some(2)), &cut), (0, Some(0)));
        // The same definition: the state as it is.
        assert_eq!(carry(state, &from.definition, &from, now), state);
        // A root becoming an inner node: its one rate stands for both.
        let root = node(4, None);
        let as_inner = carry(used(&root, 2, now), &root.definition, &to, now);
        assert_eq!(remaining(&to, &as_inner), (6, Some(2)));
        // An inner node becoming the root: its ceiling counts all traffic.
        let as_root = carry(state, &from.definition, &node(8, None), now);
        assert_eq!(remaining(&node(8, None), &as_root), (6, None));
        assert_eq!(as_root.assured, None);
    }

    #[test]
    fn a_node_alone_needs_both_its_rates() {
        let second = Micros::from_secs(1);
        let node = Node::new(Definition {
            limit: 1,
            period: second,
            burst: 1,
            ceil: Some(5),
            cburst: 5,
            max_debt: Micros::from_secs(60),
        })
        .unwrap();
        let out = node.decide(None, second, 1).unwrap();
        assert!(out.decision.allowed);
        let Some(StateWrite::Value(v)) = out.write else {
            panic!("no write")
        };
        let again = node.decide(Some(&v), second, 1).unwrap();
        assert!(!again.decision.allowed);
        assert_eq!(again.write, None);
        assert_eq!(
            node.decide(Some(b"x"), second, 1).unwrap_err(),
            StateError::Foreign
        );
    }
}
