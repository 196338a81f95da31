//! Waiters that went away (a disconnect, `CLIENT UNBLOCK … ERROR`, a role
//! change, which ends every wait at once) leave the queue before its next
//! use, not inside Redis's callback: a primary made a replica unblocks its
//! 10,000 waiters inside one command, and giving back each one's planned
//! admission there would cost more than Redis's own unblocking. On a
//! replica, where the queue decides nothing any more, a queue whose every
//! waiter is gone is dropped whole (no planned admission given back, none
//! can be used); otherwise each leaves as it always did
//! ([`Queues::abandon`]: those behind it move up).

use super::{KeyName, Token};
use crate::algorithm::Micros;
use crate::engine::queue::Queues;
use crate::server::stats;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

thread_local! {
    /// The waiters gone since the queue was last used, and when each went.
    static GONE: RefCell<Vec<(Token, Micros)>> = const { RefCell::new(Vec::new()) };
}

/// Whether this server is a replica (from the role-change event).
static REPLICA: AtomicBool = AtomicBool::new(false);

/// The waiter holding `token` went away at `at` (its handle is unblocked;
/// the token is only compared from now on).
pub(super) fn went(token: Token, at: Micros) {
    GONE.with(|g| g.borrow_mut().push((token, at)));
}

pub(super) fn set_replica(replica: bool) {
    REPLICA.store(replica, Relaxed);
}

/// Takes the waiters that went away out of `queues` (called before every
/// use of the queue).
pub(super) fn settle(queues: &mut Queues<KeyName, Token>) {
    let gone = GONE.with(|g| std::mem::take(&mut *g.borrow_mut()));
    if gone.is_empty() {
        return;
    }
    if REPLICA.load(Relaxed) && gone.len() == queues.len() && same_tokens(&gone, queues) {
        // All went in the same command: one time for every waited time.
        let at = gone.iter().map(|&(_, at)| at).max().unwrap_or_default();
        for w in queues.waiters() {
            stats::wait_abandoned(at.saturating_sub(w.since));
        }
        *queues = Queues::new();
        return;
    }
    for (token, at) in gone {
        if let Some(waiter) = queues.abandon(&token, at) {
            stats::wait_abandoned(at.saturating_sub(waiter.since));
        }
    }
}

/// Whether the waiters of `queues` hold exactly the tokens of `gone`
/// (each handle goes at most once): the same count and the same two folds
/// of the handles' addresses (a sum of multiples and an xor), without a
/// hash per waiter; two different sets agreeing on both is not a case to
/// plan for.
fn same_tokens(gone: &[(Token, Micros)], queues: &Queues<KeyName, Token>) -> bool {
    let fold = |(sum, xor): (u64, u64), address: u64| {
        (
            sum.wrapping_add(address.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            xor ^ address,
        )
    };
    let of_gone = gone.iter().map(|(t, _)| t.address()).fold((0, 0), fold);
    let of_queue = queues
        .waiters()
        .map(|w| w.token.address())
        .fold((0, 0), fold);
    of_gone == of_queue
}
