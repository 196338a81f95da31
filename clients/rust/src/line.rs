//! The line of requests waiting for a leased key's units, first come first
//! served: shared by [`crate::LeasedLimit`] and the layer's leased limits.
//!
//! A [`Line`] holds a key's [`BlockLease`], the call out for it and the
//! requests its block cannot serve. Each call's units go to them in the
//! order they came (a request arriving later waits behind them even if the
//! block holds its units), and when the first still needs units the next
//! call goes out as soon as the last lands: one call out per key, a block
//! of `k` one store command per `k` admissions.
//!
//! A waiting request is a [`Waiting`]: dropped before it is told, it leaves
//! the line, and units handed to it meanwhile go back to the block. Its
//! owner (the line's keeper, an [`Owner`]) decides where the line lives.

use crate::blocks::{BlockLease, Flight, Step};
use crate::command::Charge;
use crate::Error;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What a waiting request is told: admitted (its units taken from the
/// block), denied, or the error of the call it waited for.
type Answer = Result<bool, Error>;

/// A request waiting for `cost` units. One whose caller left it (its
/// receiver closed) stays where it is until it reaches the front, where
/// [`Line::serve`] drops it: leaving costs no search of the line.
struct Waiter {
    cost: u64,
    answer: oneshot::Sender<Answer>,
}

/// A call for a block to send, once the line is unlocked.
pub(crate) struct Call {
    pub(crate) flight: Arc<Flight>,
    pub(crate) charge: Charge,
    /// How long it may queue on the server (a queued lease).
    pub(crate) wait: Option<Duration>,
    pub(crate) units: u64,
}

/// A key's lease, the call out for it and the requests waiting for units,
/// changed together.
pub(crate) struct Line {
    pub(crate) lease: BlockLease,
    /// The call out, if any. While requests wait, one is out.
    pub(crate) flight: Option<Arc<Flight>>,
    /// The requests waiting for units, in the order they came: answered
    /// from the front ([`Line::serve`]).
    waiters: VecDeque<Waiter>,
    /// Waiters [`Line::serve`] has looked at: its work, for the tests.
    #[cfg(test)]
    examined: u64,
}

impl Line {
    pub(crate) fn new(lease: BlockLease) -> Line {
        Line {
            lease,
            flight: None,
            waiters: VecDeque::new(),
            #[cfg(test)]
            examined: 0,
        }
    }

    /// A request of `cost` units at `now`: its step. One that finds others
    /// waiting waits behind them ([`Step::Join`]) even if the block holds
    /// its units: no request overtakes one that came before it.
    pub(crate) fn arrive(&mut self, now: Instant, cost: u64) -> Step {
        if self.waiters.is_empty() || cost == 0 {
            return self.lease.step_for(now, cost);
        }
        self.lease.arrive(now);
        Step::Join
    }

    /// Puts a request of `cost` units at the back of the line: where its
    /// answer comes.
    pub(crate) fn wait_in_line(&mut self, cost: u64) -> oneshot::Receiver<Answer> {
        let (answer, told) = oneshot::channel();
        self.waiters.push_back(Waiter { cost, answer });
        told
    }

    /// The call the step `step` of the first request in line asks for:
    /// the call out from now on.
    pub(crate) fn call(&mut self, step: Step) -> Option<Call> {
        let (charge, wait, units) = match step {
            Step::Ask(k) => (Charge::Partial(k), None, k),
            Step::Queue { units, timeout } => (Charge::Cost(units), Some(timeout), units),
            Step::Admit | Step::Deny { .. } | Step::Join => return None,
        };
        let flight = Flight::new();
        self.flight = Some(Arc::clone(&flight));
        Some(Call {
            flight,
            charge,
            wait,
            units,
        })
    }

    /// The call out failed or was not made: every request waiting gets
    /// `e`, and the next request may call.
    pub(crate) fn fail(&mut self, e: &Error) {
        self.flight = None;
        self.lease.on_failure();
        for waiter in self.waiters.drain(..) {
            let _ = waiter.answer.send(Err(e.clone()));
        }
    }

    /// [`Line::fail`] if `flight` is the call out (not one that replaced
    /// it).
    pub(crate) fn fail_if(&mut self, flight: &Arc<Flight>, e: &Error) {
        if self.flight.as_ref().is_some_and(|f| Arc::ptr_eq(f, flight)) {
            self.fail(e);
        }
    }

    /// Answers the requests in line at `now`, first come first served:
    /// each whose units the block holds is admitted, each the lease denies
    /// (its next call is not due) is denied; for the first that needs a
    /// call, the call to send (one is out at a time: the rest wait for it).
    /// Requests that left the line are dropped as they reach the front.
    pub(crate) fn serve(&mut self, now: Instant) -> Option<Call> {
        while let Some(first) = self.waiters.front() {
            #[cfg(test)]
            {
                self.examined += 1;
            }
            if first.answer.is_closed() {
                self.waiters.pop_front();
                continue;
            }
            let cost = first.cost;
            let allowed = match self.lease.step_again_for(now, cost) {
                Step::Admit => true,
                Step::Deny { .. } => false,
                Step::Join => return None,
                call => return self.call(call),
            };
            if let Some(waiter) = self.waiters.pop_front() {
                if let Err(Ok(true)) = waiter.answer.send(Ok(allowed)) {
                    // Nobody to take them: the units stay in the block.
                    self.lease.put_back(cost);
                }
            }
        }
        None
    }
}

/// Where a line lives: what a [`Waiting`] request needs of it.
pub(crate) trait Owner {
    /// The call out for the line, if any.
    fn flight(&self) -> Option<Arc<Flight>>;
    /// A request left the line: those behind it are served by what it
    /// waited for.
    fn left(&self);
    /// `units` handed to a request whose caller gave up go back to the
    /// block, for those in line.
    fn give_back(&self, units: u64);
}

/// What a waiting request heard.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Heard {
    /// Admitted (its units taken from the block) or denied by the lease.
    Told(bool),
    /// Its line is gone (its key's lease gave way).
    Gone,
    /// Still in line after the calls it may wait for: out of the line now,
    /// for the store to decide.
    Long,
}

/// A request waiting in line for its units. Dropped before it is told (its
/// caller gave up), it leaves the line, and units handed to it meanwhile go
/// back to the block, for those behind it.
pub(crate) struct Waiting<'a, O: Owner + ?Sized> {
    owner: &'a O,
    cost: u64,
    told: oneshot::Receiver<Answer>,
    /// Told, or out of the line.
    done: bool,
}

impl<'a, O: Owner + ?Sized> Waiting<'a, O> {
    /// A request of `cost` units, in `owner`'s line, told on `told`.
    pub(crate) fn new(owner: &'a O, cost: u64, told: oneshot::Receiver<Answer>) -> Waiting<'a, O> {
        Waiting {
            owner,
            cost,
            told,
            done: false,
        }
    }

    /// What the request hears once the calls ahead of it have brought its
    /// units, the lease denies it, its line is gone, or the call it waits
    /// for fails (its error). Each call is waited for at most `bound`, and
    /// each counts against `waits`: with none left, the request leaves the
    /// line ([`Heard::Long`]).
    pub(crate) async fn answer(
        &mut self,
        bound: Option<Duration>,
        waits: &mut usize,
    ) -> Result<Heard, Error> {
        while *waits > 0 {
            *waits -= 1;
            let mut landed = std::pin::pin!(landing(self.owner.flight(), bound));
            // Its answer first: a call lands after it has told those it
            // served.
            let outcome = std::future::poll_fn(|cx| {
                if let Poll::Ready(told) = Pin::new(&mut self.told).poll(cx) {
                    self.done = true;
                    return Poll::Ready(Some(heard(told)));
                }
                landed.as_mut().poll(cx).map(|l| l.err().map(Err))
            })
            .await;
            // `None`: a call landed without its units, the next one.
            if let Some(heard) = outcome {
                return heard;
            }
        }
        self.leave().unwrap_or(Ok(Heard::Long))
    }

    /// Takes the request out of the line: `None` if it was still waiting,
    /// else what it heard. Closing its receiver is its leaving: an answer
    /// sent before is read here, one after it fails to send (and
    /// [`Line::serve`] keeps the units).
    fn leave(&mut self) -> Option<Result<Heard, Error>> {
        self.done = true;
        self.told.close();
        match self.told.try_recv() {
            Ok(answer) => Some(answer.map(Heard::Told)),
            Err(_) => {
                self.owner.left();
                None
            }
        }
    }
}

/// What a request told `told` (or whose line went without telling it) heard.
fn heard<E>(told: Result<Answer, E>) -> Result<Heard, Error> {
    match told {
        Ok(answer) => answer.map(Heard::Told),
        Err(_) => Ok(Heard::Gone),
    }
}

impl<O: Owner + ?Sized> Drop for Waiting<'_, O> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(Ok(Heard::Told(true))) = self.leave() {
            // Admitted as its caller gave up: the units go back.
            self.owner.give_back(self.cost);
        }
    }
}

/// Until `flight` lands, for at most `bound`: its error if it failed. No
/// flight: the request was told (or is being told) already.
async fn landing(flight: Option<Arc<Flight>>, bound: Option<Duration>) -> Result<(), Error> {
    match (flight, bound) {
        (Some(flight), _) => flight.wait(bound).await,
        (None, Some(bound)) => {
            tokio::time::sleep(bound).await;
            Err(Error::Timeout(bound))
        }
        (None, None) => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leaving costs no search of the line: every request but the first
    /// leaves (the last to come first, the worst order for a search from
    /// the front), each followed by the serve its owner runs, then the
    /// first leaves too. The waiters examined per request stay flat from
    /// a line of 100 to one of 100,000.
    #[test]
    fn leaving_the_line_costs_the_same_however_long_it_is() {
        let per_request = |n: u64| {
            let mut line = Line::new(BlockLease::fixed(5));
            let mut told: Vec<_> = (0..n).map(|_| line.wait_in_line(1)).collect();
            let now = Instant::now();
            // The first in line asks for a block: nothing is served yet.
            let _ = line.serve(now);
            for t in told.iter_mut().skip(1).rev() {
                t.close();
                let _ = line.serve(now);
            }
            told[0].close();
            let _ = line.serve(now);
            assert!(line.waiters.is_empty());
            line.examined as f64 / n as f64
        };
        let (small, large) = (per_request(100), per_request(100_000));
        assert!(
            large <= 2.0 && large <= small * 1.05,
            "{small} then {large}"
        );
    }
}
