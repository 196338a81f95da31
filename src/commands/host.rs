//! What a handler needs from the server it runs in ([`Host`]), and what it
//! answers ([`Reply`]): the handlers stay plain Rust, and the server shell
//! implements the one and writes the other.

use crate::algorithm::cell::CellReply;
use crate::algorithm::Micros;
use crate::engine::gate::Gated;
use crate::engine::registry::PolicyStats;
use crate::engine::store::Store;
use crate::engine::topk::TopKey;
use crate::engine::{KeyError, Outcome, Request, Verdict};
use crate::policy::Policy;

/// How a blocked caller's outcome is written when it comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One decision (RL.GCRA, RL.BUCKET, RL.SLIDING, RL.FIXED, …).
    One,
    /// RL.ALL's combined reply.
    All,
}

/// The server one call runs in.
pub trait Host {
    /// An argument of the call.
    type Arg: AsRef<[u8]>;
    /// Keys of the call, opened.
    type Store<'h>: Store
    where
        Self: 'h;

    /// The limiter clock.
    fn now(&self) -> Micros;
    /// Opens `keys` for reading and writing, or only for reading.
    fn open(&mut self, keys: &[Self::Arg], read_only: bool) -> Self::Store<'_>;
    /// The decision path with waiting ([`crate::engine::gate`]) over `keys`.
    fn decide(
        &mut self,
        shape: Shape,
        keys: &[Self::Arg],
        policies: &[Policy],
        request: &Request,
    ) -> Result<Gated, KeyError>;
    /// What `request` would answer behind the waiting lines of `keys`
    /// (`None`: nobody waits on them).
    fn behind_line(
        &mut self,
        keys: &[Self::Arg],
        policies: &[Policy],
        now: Micros,
        request: Request,
    ) -> Option<Result<Outcome, KeyError>>;
    /// Units of `key` were freed: its first waiter is decided now.
    fn key_freed(&mut self, key: &Self::Arg);
    /// Whether the clock is manual (`clock manual` at load).
    fn clock_is_manual(&self) -> bool;
    /// Moves the manual clock to `to`; waiters whose time has come are
    /// admitted (or time out) before this returns.
    fn set_clock(&mut self, to: Micros);
    /// Sends this call, as it is, to replicas and the AOF.
    fn replicate_verbatim(&mut self);
    /// Sends `command args...` to replicas and the AOF in place of this
    /// call (its effect, where the call itself depends on the clock).
    fn replicate(&mut self, command: &str, args: &[&[u8]]);
}

/// One element of a nested reply ([`Reply::Items`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Item>),
}

/// What a call answers.
#[derive(Debug)]
pub enum Reply {
    /// One decision's fields.
    Decision(Outcome),
    /// A look (RL.PEEK): one decision's fields, counted as no decision.
    Peek(Outcome),
    /// A shadow policy's decision: admitted, saying what enforcement would
    /// have answered.
    Shadow(Outcome),
    /// RL.ALL's combined reply.
    All(Outcome),
    /// A look at a path (RL.SHARE.PEEK): RL.ALL's combined reply, counted
    /// as no decision.
    PeekAll(Outcome),
    /// The caller is blocked; the reply comes when its wait ends.
    Blocked,
    /// CL.THROTTLE's five integers.
    Throttle(CellReply),
    Int(i64),
    Ok,
    Bulk(Vec<u8>),
    Bulks(Vec<Vec<u8>>),
    /// Lines of text as simple strings, as Redis's own `HELP` replies.
    Lines(Vec<String>),
    /// RL.POLICY STATS.
    PolicyStats(PolicyStats, Vec<TopKey>),
    /// Nested arrays of integers and strings (RL.DENYLIST, RL.HOTKEYS).
    Items(Item),
}

impl Reply {
    /// A decision over several keys' reply: the combined one, or nothing
    /// yet.
    pub fn of_all(gated: Gated) -> Reply {
        match gated {
            Gated::Now(outcome) => Reply::All(outcome),
            Gated::Blocked => Reply::Blocked,
        }
    }

    pub fn verdict(&self) -> Verdict {
        match self {
            Reply::Decision(o) | Reply::All(o) => Verdict::of(o.allowed),
            Reply::Shadow(o) if o.allowed => Verdict::Allowed,
            Reply::Shadow(_) => Verdict::ShadowDenied,
            Reply::Blocked => Verdict::Waiting,
            Reply::Throttle(r) => Verdict::of(!r.limited),
            Reply::Peek(_)
            | Reply::PeekAll(_)
            | Reply::Int(_)
            | Reply::Ok
            | Reply::Bulk(_)
            | Reply::Bulks(_)
            | Reply::Lines(_)
            | Reply::PolicyStats(..)
            | Reply::Items(_) => Verdict::Other,
        }
    }
}
