//! Whether this node serves a slot, from `CLUSTER NODES` (the one view of
//! slot ownership Redis 7.0 gives a module): the `myself` line's slots, its
//! ranges and its `[slot->-id]` migrations.

/// This node and a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// The node owns the slot.
    Owned,
    /// The node owns it but is moving it away: a key no longer here has
    /// gone to the other node.
    Migrating,
    /// Another node owns it (or nobody does).
    NotOwned,
}

pub fn serving(nodes: &str, slot: u16) -> Serving {
    let Some(me) = nodes.lines().find(|l| {
        l.split(' ')
            .nth(2)
            .is_some_and(|flags| flags.split(',').any(|f| f == "myself"))
    }) else {
        return Serving::NotOwned;
    };
    let mut owned = false;
    let mut migrating = false;
    for field in me.split(' ').skip(8) {
        if let Some(inner) = field.strip_prefix('[').and_then(|f| f.strip_suffix(']')) {
            if let Some((s, _)) = inner.split_once("->-") {
                migrating |= s.parse() == Ok(slot);
            }
            continue;
        }
        let (lo, hi) = field.split_once('-').unwrap_or((field, field));
        if let (Ok(lo), Ok(hi)) = (lo.parse::<u16>(), hi.parse::<u16>()) {
            owned |= (lo..=hi).contains(&slot);
        }
    }
    match (owned, migrating) {
        (true, true) => Serving::Migrating,
        (true, false) => Serving::Owned,
        _ => Serving::NotOwned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected
e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 7000 [5461->-67ed]
67ed 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922 [7001-<-e7d1]
";

    #[test]
    fn reads_the_myself_line() {
        assert_eq!(serving(NODES, 0), Serving::Owned);
        assert_eq!(serving(NODES, 5460), Serving::Owned);
        assert_eq!(serving(NODES, 7000), Serving::Owned);
        assert_eq!(serving(NODES, 5461), Serving::NotOwned);
        assert_eq!(serving(NODES, 16383), Serving::NotOwned);
        let migrating = NODES.replace("7000 [5461->-67ed]", "7000 [7000->-67ed]");
        assert_eq!(serving(&migrating, 7000), Serving::Migrating);
        assert_eq!(serving("", 1), Serving::NotOwned);
    }
}
