//! Calls whose effect is never left unknown: a round trip is driven to its
//! end even when its caller stops waiting (the future dropped, or the
//! client's timeout), and what it took is then given back, since nobody
//! will use it: a lease is released, units are refunded.
//!
//! A command's future that is dropped may or may not have reached the
//! server (the redis crate skips a request whose caller has gone before
//! the request is written, and sends it otherwise), so neither "charged"
//! nor "not charged" can be assumed: the call is finished instead.

use crate::command::{All, Charge, Command, Decide, Release, Throttle};
use crate::reply::{AllDecision, Decision, Reservation, ThrottleDecision};
use crate::{Error, Policy};
use redis::Value;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// How long a call whose caller has gone is waited for in the background,
/// beyond its own `WAIT`. Past that (a server stalled that long) its
/// effect stands: a lease ends at its TTL, charged units refill.
pub const ORPHAN_WAIT: Duration = Duration::from_secs(60);

/// What gives back what a command took, for a call whose caller stopped
/// waiting before its answer: made by the crate's own commands
/// ([`Command::undo`]).
#[derive(Clone, Debug)]
pub struct Undo(Kind);

#[derive(Clone, Debug)]
enum Kind {
    /// A decision's charge: refunded if the reply says it was taken.
    Refund(Decide),
    /// An `RL.ALL` charge: refunded on every key if taken.
    RefundAll(All),
    /// A reservation's charge (`RESERVE`): refunded if admitted.
    RefundReserved(Decide),
    /// `RL.ACQUIRE`: the lease granted is released.
    Release(String),
    /// `CL.THROTTLE`: its quantity given back (a negative quantity) if
    /// admitted.
    GiveBack(Throttle),
}

impl Undo {
    /// For `call` (its charge, key and policy; not `DRYRUN`, not a refund).
    pub(crate) fn decide(call: &Decide, charge: Charge) -> Option<Undo> {
        Some(Undo(match (call.policy, charge) {
            (Policy::Concurrency(_), _) => Kind::Release(call.key.clone()),
            (_, Charge::Refund(_) | Charge::Cost(0)) => return None,
            (policy, charge) => Kind::Refund(Decide::new(call.key.clone(), policy).charge(charge)),
        }))
    }

    /// For a reservation of `call` (not `DRYRUN`).
    pub(crate) fn reservation(call: &Decide, charge: Charge) -> Option<Undo> {
        match Undo::decide(call, charge)?.0 {
            Kind::Refund(call) => Some(Undo(Kind::RefundReserved(call))),
            // No reservation on a concurrency limit (the server refuses it).
            _ => None,
        }
    }

    /// For an `RL.ALL` (not `DRYRUN`, not a refund, no concurrency limit).
    pub(crate) fn all(call: All) -> Undo {
        Undo(Kind::RefundAll(call))
    }

    /// For a `CL.THROTTLE` that takes something (not a peek).
    pub(crate) fn throttle(call: &Throttle) -> Option<Undo> {
        call.give_back()?;
        Some(Undo(Kind::GiveBack(call.clone())))
    }

    /// The command that gives back what `reply` says was taken, if anything.
    fn command(&self, reply: &Value) -> Option<redis::Cmd> {
        match &self.0 {
            Kind::Release(key) => {
                let d = Decision::from_value(reply).ok()?;
                let lease = d.lease.filter(|_| d.allowed)?;
                Some(
                    Release {
                        key: key.clone(),
                        lease,
                    }
                    .to_cmd(),
                )
            }
            Kind::Refund(call) => {
                let d = Decision::from_value(reply).ok()?;
                let units = taken(call.charge_of(), d.allowed, d.granted)?;
                let refund = Decide::new(call.key.clone(), call.policy);
                Some(refund.charge(Charge::Refund(units)).to_cmd())
            }
            Kind::RefundReserved(call) => {
                let d = Reservation::from_value(reply).ok()?.decision;
                let units = taken(call.charge_of(), d.allowed, d.granted)?;
                let refund = Decide::new(call.key.clone(), call.policy);
                Some(refund.charge(Charge::Refund(units)).to_cmd())
            }
            Kind::GiveBack(call) => {
                let d = ThrottleDecision::from_value(reply).ok()?;
                call.give_back().filter(|_| !d.limited)
            }
            Kind::RefundAll(call) => {
                let d = AllDecision::from_value(reply).ok()?;
                call.refund(d.allowed, &d.limits).map(|r| r.to_cmd())
            }
        }
    }
}

/// The units a charge took, from its reply: `None` if nothing.
pub(crate) fn taken(charge: Charge, allowed: bool, granted: Option<u64>) -> Option<u64> {
    let units = match charge {
        // A forced charge is taken even when denied (a debt).
        Charge::Force(n) => n,
        Charge::Cost(n) if allowed => n,
        Charge::Partial(n) if allowed => granted.unwrap_or(n).min(n),
        _ => 0,
    };
    (units > 0).then_some(units)
}

type Call = Pin<Box<dyn Future<Output = Result<Value, Error>> + Send>>;

/// A round trip that, dropped before its answer, finishes in the
/// background (on the current tokio runtime) and sends its [`Undo`].
pub(crate) struct Landing<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    call: Option<Call>,
    undo: Option<Undo>,
    /// How long the server may hold the reply back (`WAIT`).
    waits: Duration,
    conn: C,
}

impl<C> Landing<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// `cmd` sent over `conn`; the server may hold its reply back for
    /// `waits`.
    pub(crate) fn new(
        conn: &C,
        cmd: redis::Cmd,
        undo: Option<Undo>,
        waits: Duration,
    ) -> Landing<C> {
        let mut sending = conn.clone();
        let call: Call = Box::pin(async move {
            let reply = cmd.query_async::<Value>(&mut sending).await?;
            Ok(reply)
        });
        Landing {
            call: Some(call),
            undo,
            waits,
            conn: conn.clone(),
        }
    }
}

// Nothing of a `Landing` is pinned but its boxed call.
impl<C> Unpin for Landing<C> where C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static {}

impl<C> Future for Landing<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    type Output = Result<Value, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(call) = this.call.as_mut() else {
            return Poll::Ready(Err(Error::Reply("a call polled after its answer".into())));
        };
        let reply = std::task::ready!(call.as_mut().poll(cx));
        this.call = None;
        Poll::Ready(reply)
    }
}

impl<C> Drop for Landing<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        // Outside a runtime (being shut down) nothing can run: the effect
        // stands, as past `ORPHAN_WAIT`.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (undo, mut conn) = (self.undo.take(), self.conn.clone());
        let bound = ORPHAN_WAIT.saturating_add(self.waits);
        runtime.spawn(async move {
            let Ok(Ok(reply)) = tokio::time::timeout(bound, call).await else {
                return;
            };
            if let Some(cmd) = undo.and_then(|u| u.command(&reply)) {
                let _ =
                    tokio::time::timeout(ORPHAN_WAIT, cmd.query_async::<Value>(&mut conn)).await;
            }
        });
    }
}
