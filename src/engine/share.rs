//! RL.SHARE's decision: one path of nodes, leaf first, over as many keys.
//! It spans the keys (a node may borrow from its parent), so it is made
//! here, once for the path ([`crate::algorithm::share::decide`]), not by
//! each key's policy alone; then written all or nothing, as every decision.

use super::{write_all, Charge, KeyError, Outcome, PerLimit, Request};
use crate::algorithm::share::{self, Definition, Node, NodeState};
use crate::algorithm::Micros;
use crate::bounds::work::{self, Work};
use crate::codec::StateError;
use crate::engine::error::Error;
use crate::engine::store::Store;
use crate::policy::share::{carry, read_stored, write};
use crate::policy::{Policy, StateWrite};

/// A path of RL.SHARE nodes, leaf first.
pub(super) struct Path {
    pub nodes: PerLimit<Node>,
    /// Defined by name (`RL.POLICY SET name SHARE ...`): a node stored
    /// under another definition is carried to the path's
    /// ([`crate::policy::share::carry`]), not refused, and a key holding
    /// another algorithm's state restarts, as for every named policy.
    pub named: bool,
}

/// The path when `policies` are RL.SHARE nodes (all given literally, or
/// all by name).
pub(super) fn path(policies: &[Policy]) -> Option<Path> {
    let node = |p: &Policy| match p {
        Policy::Share(node) => Some((*node, false)),
        Policy::Named(named) => match named.as_ref() {
            Policy::Share(node) => Some((*node, true)),
            _ => None,
        },
        _ => None,
    };
    let (_, named) = node(policies.first()?)?;
    let nodes = policies
        .iter()
        .map(|p| node(p).filter(|(_, n)| *n == named).map(|(node, _)| node))
        .collect::<Option<PerLimit<Node>>>()?;
    Some(Path { nodes, named })
}

/// Decides `request` at the leaf of `nodes` (node `i` over key `i`), and
/// writes the new states only if it is admitted (not for DRYRUN or a
/// peek). A refund takes back an admission whose lender is `lender` (see
/// [`share::refund`]).
pub(super) fn decide<S: Store>(
    store: &mut S,
    path: &Path,
    now: Micros,
    request: &Request,
    lender: Option<usize>,
) -> Result<Outcome, KeyError> {
    let nodes = &path.nodes[..];
    work::add(Work::Decisions, nodes.len() as u64);
    let mut states: PerLimit<NodeState> = PerLimit::with_capacity(nodes.len());
    for (key, node) in nodes.iter().enumerate() {
        let stored = store.value(key).map_err(|error| KeyError { key, error })?;
        let (state, definition) = match read_stored(stored) {
            Ok(read) => read,
            // Named: another algorithm's state restarts the node.
            Err(StateError::OtherKind(_)) if path.named => (NodeState::default(), None),
            Err(e) => {
                return Err(KeyError {
                    key,
                    error: Error::state(crate::codec::Kind::Share.name(), e),
                })
            }
        };
        let state = match definition.filter(|d| *d != node.definition) {
            None => state,
            Some(stored) if path.named => carry(state, &stored, node, now),
            Some(stored) => {
                let error = Error::Redefined {
                    key: String::new(),
                    stored: words(&stored),
                    given: words(&node.definition),
                };
                return Err(KeyError { key, error });
            }
        };
        states.push(state);
    }
    let cost = request.cost;
    let (shared, units) = match request.charge {
        Charge::Normal => (share::decide(nodes, &states, now, cost), cost),
        Charge::Peek => (share::peek(nodes, &states, now), 1),
        Charge::Refund => {
            let after = share::refund(nodes, &states, now, cost, lender);
            let mut looked = share::decide(nodes, &after, now, 0);
            for (i, (_, new)) in looked.nodes.iter_mut().enumerate() {
                *new = (after[i] != states[i]).then_some(after[i]);
            }
            (looked, cost)
        }
        // Refused by the command's grammar.
        Charge::Force | Charge::Partial => {
            return Err(KeyError {
                key: 0,
                error: Error::Internal("RL.SHARE"),
            })
        }
    };
    let decided = Outcome {
        allowed: shared.allowed,
        blocked_by: shared.blocked_by,
        retry_after: shared.retry_after,
        decisions: shared.nodes.iter().map(|(d, _)| *d).collect(),
        granted: None,
        units: shared.nodes.iter().map(|_| units).collect(),
        leases: shared.nodes.iter().map(|_| None).collect(),
        reservation: None,
        lender: shared.lender.and_then(|m| u16::try_from(m).ok()),
    };
    let writes: PerLimit<Option<StateWrite>> = (shared.nodes.iter().zip(nodes))
        .map(|((_, new), node)| new.map(|s| write(node, &s)))
        .collect();
    let writes_state = decided.allowed && request.charge != Charge::Peek;
    if writes_state && !request.dryrun {
        write_all(store, &decided.decisions, &writes)?;
    }
    Ok(decided)
}

/// A node's definition as RL.SHARE's arguments, every option spelled out.
pub fn words(d: &Definition) -> String {
    let mut w = format!("{} {} BURST {}", d.limit, duration(d.period), d.burst);
    if let Some(ceil) = d.ceil {
        w += &format!(" CEIL {ceil} CBURST {}", d.cburst);
    }
    w + &format!(" MAXDEBT {}", duration(d.max_debt))
}

/// A duration in the largest unit that divides it.
fn duration(t: Micros) -> String {
    let us = t.as_u64();
    let units = [
        (86_400_000_000, "d"),
        (3_600_000_000, "h"),
        (60_000_000, "m"),
        (1_000_000, "s"),
        (1_000, "ms"),
    ];
    match units.iter().find(|(n, _)| us > 0 && us.is_multiple_of(*n)) {
        Some((n, unit)) => format!("{}{unit}", us / n),
        None => format!("{us}us"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::store::MemoryStore;

    fn node(limit: u64) -> Policy {
        let hour = Micros::from_secs(3_600);
        Policy::Share(
            Node::new(Definition {
                limit,
                period: hour,
                burst: limit,
                ceil: None,
                cburst: limit,
                max_debt: Micros::from_secs(60),
            })
            .unwrap(),
        )
    }

    /// How many of `n` one-unit requests `policies` admit on `store`.
    fn admit(store: &mut MemoryStore, policies: &[Policy], n: u64) -> Result<u64, Error> {
        let now = Micros::from_secs(1_000_000);
        let mut admitted = 0;
        for _ in 0..n {
            let out = crate::engine::decide(store, policies, now, &Request::default())
                .map_err(|e| e.error)?;
            admitted += u64::from(out.allowed);
        }
        Ok(admitted)
    }

    #[test]
    fn a_named_path_carries_a_node_another_definition_wrote() {
        let mut store = MemoryStore::new(1);
        assert_eq!(admit(&mut store, &[node(2)], 3), Ok(2));
        // Given literally with another definition: refused, nothing written.
        let before = store.clone();
        let e = admit(&mut store, &[node(4)], 1).unwrap_err();
        assert!(matches!(e, Error::Redefined { .. }), "{e:?}");
        assert_eq!(store, before);
        // By name: the 2 used carry, 2 more fit, and the node is stored
        // with the new definition.
        assert_eq!(admit(&mut store, &[node(4).named()], 3), Ok(2));
        assert!(admit(&mut store, &[node(4)], 1).is_ok());
        // A key of another algorithm: refused given literally, restarted by
        // name.
        let mut store = MemoryStore::new(1);
        let gcra = crate::algorithm::gcra::Gcra::new(1, Micros::from_secs(1), 1).unwrap();
        assert_eq!(admit(&mut store, &[Policy::Gcra(gcra)], 1), Ok(1));
        assert!(admit(&mut store, &[node(2)], 1).is_err());
        assert_eq!(admit(&mut store, &[node(2).named()], 3), Ok(2));
    }

    #[test]
    fn a_conflicting_definition_is_an_err_naming_both() {
        let d = Definition {
            limit: 10,
            period: Micros::from_secs(60),
            burst: 10,
            ceil: Some(50),
            cburst: 10,
            max_debt: Micros::new(1_500),
        };
        let root = Definition { ceil: None, ..d };
        assert_eq!(words(&d), "10 1m BURST 10 CEIL 50 CBURST 10 MAXDEBT 1500us");
        assert_eq!(words(&root), "10 1m BURST 10 MAXDEBT 1500us");
        let e = Error::Redefined {
            key: "team".into(),
            stored: words(&d),
            given: words(&root),
        };
        assert_eq!(
            e.to_string(),
            "ERR RL.SHARE node 'team' is defined as '10 1m BURST 10 CEIL 50 CBURST 10 MAXDEBT \
             1500us', not '10 1m BURST 10 MAXDEBT 1500us': one definition per node (delete the \
             node to change it)"
        );
    }
}
