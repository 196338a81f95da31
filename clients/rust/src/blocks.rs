//! Leasing blocks of units for a hot key: take up to `k` units in one call
//! with `COST k PARTIAL`, admit from the block without a round trip, give
//! back what was not used with `REFUND` when idle or at shutdown.
//!
//! A [`LeasePlan`] says how a key is leased; [`BlockLease`] is one key's
//! lease as it runs, the policy alone (time passed in, no I/O);
//! [`LeasedLimit`] runs it over a [`Client`].
//!
//! **k.** A fixed block, or adaptive: the key's local rate over the last
//! [`RATE_WINDOW`] (a decayed count of requests), at least 1 and at most
//! the maximum. A cold key asks for 1 unit per request, so it holds
//! nothing and has nothing to give back.
//!
//! **Pacing.** A call gets what accrued since anyone's last call, so when
//! the limit is contended a process that called as soon as its block ran
//! out would get blocks of one or two units, one store command each.
//! Having got `m` of `k` units after a gap `g`, a process estimates the
//! spacing that would get whole blocks as `g × k / m` (a denial counts as
//! half a unit) and moves its spacing towards it, at most doubling it
//! (fourfold after a denial) and never below the time `k` units take to
//! accrue; it answers "no" locally until the next call is due. Between
//! calls, the processes together should leave one to three blocks on the
//! server, so that a call that comes early still gets a whole block: a
//! full block that leaves three or more shortens the spacing by a tenth
//! (others went quiet) and the next block may be taken at once, one that
//! leaves less than one block lengthens it by a twentieth. Spacing is at
//! most [`MAX_GAP`]; after a denial, the next call waits for the store's
//! `retry_after` however long (nothing would fit sooner), and the requests
//! denied locally meanwhile are told that wait.
//!
//! **Queued blocks.** Pacing cannot know when the others call: with many
//! hungry processes some calls still come back short. A lease made
//! [`LeasePlan::queued`] queues from its first call, and again whenever
//! the key is contended (a block came back short or denied), for the next
//! whole block on the
//! server (`COST k WAIT timeout`, first come first served among the
//! processes), so every call gets `k` units and nobody is denied while the
//! line moves. A queued block that leaves whole blocks unused on the server
//! says the key is no longer contended, and the lease polls again. A queued
//! call holds its connection until it is answered: it needs a connection
//! of its own (see [`LeasedLimit::queue_on`]). A queued call denied (its
//! place in the line lies beyond `timeout`, or the line is full) calls
//! again when its place would be within `timeout`. The server admits a
//! queued block whether or not its caller still waits: the async shell
//! sends it from a task of its own, so that the block lands in the lease
//! (for the next requests, or an idle refund) even if its caller gave up.
//!
//! **Requests in line.** A [`LeasedLimit`] has one call for a block out
//! per key at a time. The requests its block cannot serve wait in line for
//! the units the call brings, first come first served (none overtakes one
//! that came before it), and when the first in line still needs units the
//! next call goes out as soon as the last lands: however many requests are
//! in flight, a block of `k` costs one store command per `k` admissions.
//!
//! **Bounds.** Units are charged on the server when leased, so the server
//! never admits more than its limit; what a process admits later from its
//! block can exceed the limit in some window by at most what is leased out
//! (`k` × processes).

use crate::command::{Charge, Command, Decide};
pub use crate::leasing::{Admission, LeasePlan};
use crate::line::{Call, Heard, Line, Owner, Waiting};
use crate::reply::Decision;
use crate::{Client, Error, Policy};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a process waits between calls.
pub const MAX_GAP: Duration = Duration::from_secs(1);
/// The span over which an adaptive block counts the key's local rate.
pub const RATE_WINDOW: Duration = Duration::from_millis(100);

/// What to do with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Admitted from the block.
    Admit,
    /// Denied locally: the block is spent and the next call is not due.
    Deny { until: Instant },
    /// Ask the store for this many units (`COST n PARTIAL`), then
    /// [`BlockLease::on_reply`].
    Ask(u64),
    /// Queue on the server for a whole block of `units` for up to
    /// `timeout` (`COST units WAIT timeout`), then
    /// [`BlockLease::on_queued_reply`].
    Queue {
        /// The block asked for.
        units: u64,
        /// How long it may wait in line on the server.
        timeout: Duration,
    },
    /// This process has a call out for the key: wait until it lands, then
    /// [`BlockLease::step_again`].
    Join,
}

/// The time `units` take to accrue on an empty key, from a reply that
/// left it empty: refilling all of `limit` takes `reset_after` (exact for
/// GCRA and token buckets; for windows, an upper bound).
fn accrual(reply: &Decision, units: u64) -> Duration {
    if reply.remaining > 0 || reply.limit == 0 {
        return Duration::ZERO;
    }
    scale(reply.reset_after, units.into(), reply.limit.into())
}

/// `d × num / den` in whole nanoseconds, saturating at `Duration::MAX`
/// (`den` 0 counts as 1): exact integers, whatever the server's counts
/// and periods.
pub(crate) fn scale(d: Duration, num: u128, den: u128) -> Duration {
    let den = den.max(1);
    let nanos = d.as_nanos();
    let scaled = match nanos.checked_mul(num) {
        Some(product) => Some(product / den),
        // Divided first: exact enough where the product overflows.
        None => (nanos / den).checked_mul(num),
    };
    let Some(scaled) = scaled else {
        return Duration::MAX;
    };
    match u64::try_from(scaled / 1_000_000_000) {
        // The remainder is below 10^9: it fits a u32.
        Ok(secs) => Duration::new(secs, (scaled % 1_000_000_000) as u32),
        Err(_) => Duration::MAX,
    }
}

/// What the processes together should leave on the server between calls:
/// one to three blocks (at most a quarter to three quarters of the limit).
fn band(block: u64, limit: u64) -> (u64, u64) {
    let low = block.min(limit / 4);
    let three_quarters = u64::try_from(u128::from(limit) * 3 / 4).unwrap_or(u64::MAX);
    let high = block.saturating_mul(3).min(three_quarters);
    (low, high.max(low.saturating_add(1)))
}

/// One key's lease as it runs: the units held, the block the next call
/// asks for, when it is due. Started from a [`LeasePlan`]; read with
/// [`LeasedLimit::lease`] and [`BlockingLeasedLimit::lease`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BlockLease {
    max_block: u64,
    adaptive: bool,
    held: u64,
    last_used: Option<Instant>,
    next_call: Option<Instant>,
    last_call: Option<Instant>,
    gap: Duration,
    /// Requests in about the last `RATE_WINDOW`, decayed continuously.
    recent: f64,
    recent_at: Option<Instant>,
    asked: u64,
    /// How long a queued call may wait; `None`: never queue.
    queue: Option<Duration>,
    /// Others use the key: the next call queues (when `queue` is set).
    contended: bool,
    /// A call for a block is out: the requests that find the block spent
    /// wait for it instead of sending their own.
    in_flight: bool,
}

impl BlockLease {
    /// Always asks for `k` units.
    pub(crate) fn fixed(k: u64) -> BlockLease {
        BlockLease::new(k, false)
    }

    /// Asks for what the key's local rate uses in `RATE_WINDOW`, from 1 to
    /// `max_k`.
    pub(crate) fn adaptive(max_k: u64) -> BlockLease {
        BlockLease::new(max_k, true)
    }

    fn new(max_block: u64, adaptive: bool) -> BlockLease {
        BlockLease {
            max_block: max_block.max(1),
            adaptive,
            held: 0,
            last_used: None,
            next_call: None,
            last_call: None,
            gap: Duration::ZERO,
            recent: 0.0,
            recent_at: None,
            asked: 0,
            queue: None,
            contended: false,
            in_flight: false,
        }
    }

    /// Once the key is contended, queues on the server for whole blocks,
    /// waiting up to `timeout` in line (see the module's documentation).
    /// The caller of a queued step waits that long at most.
    pub(crate) fn queued(mut self, timeout: Duration) -> BlockLease {
        self.queue = Some(timeout);
        // Queues from the first call, until a block says the key is not
        // contended.
        self.contended = true;
        self
    }

    /// Whether the next call queues.
    pub fn queues(&self) -> bool {
        self.contended && self.queue.is_some()
    }

    /// The block the next call asks for.
    pub fn block(&self) -> u64 {
        if !self.adaptive {
            return self.max_block;
        }
        // The decayed count is about rate × window + 1/2 at steady rates.
        // Float-to-int conversion saturates: a huge rate is the maximum.
        (self.recent.floor() as u64).clamp(1, self.max_block)
    }

    /// Units leased and not yet used.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// While the block is spent, when the next call is due.
    pub fn blocked_until(&self) -> Option<Instant> {
        self.next_call.filter(|_| self.held == 0)
    }

    /// When the next call is due (before then a request the block cannot
    /// serve is denied locally).
    pub(crate) fn next_call_at(&self) -> Option<Instant> {
        self.next_call
    }

    fn count_request(&mut self, now: Instant) {
        let since = self
            .recent_at
            .map_or(Duration::MAX, |t| now.saturating_duration_since(t));
        let decay = (-since.as_secs_f64() / RATE_WINDOW.as_secs_f64()).exp();
        self.recent = self.recent * decay + 1.0;
        self.recent_at = Some(now);
    }

    /// A request at `now`.
    #[cfg(test)]
    pub(crate) fn step(&mut self, now: Instant) -> Step {
        self.step_for(now, 1)
    }

    /// A request of `cost` units at `now`: admitted once the block holds
    /// them all (a call asks for at least `cost`).
    pub(crate) fn step_for(&mut self, now: Instant, cost: u64) -> Step {
        self.arrive(now);
        self.step_again_for(now, cost)
    }

    /// Counts a request at `now` (its step is taken later, with
    /// [`BlockLease::step_again_for`]: it waits behind others).
    pub(crate) fn arrive(&mut self, now: Instant) {
        self.count_request(now);
        self.last_used = Some(now);
    }

    /// The step of a request already counted by [`BlockLease::step`] that
    /// waited while another request's call was out: a unit of the block
    /// that call brought, or the call to make now.
    #[cfg(test)]
    pub(crate) fn step_again(&mut self, now: Instant) -> Step {
        self.step_again_for(now, 1)
    }

    /// [`BlockLease::step_again`] for a request of `cost` units.
    pub(crate) fn step_again_for(&mut self, now: Instant, cost: u64) -> Step {
        if self.held >= cost {
            self.held -= cost;
            return Step::Admit;
        }
        if self.in_flight {
            return Step::Join;
        }
        if let Some(until) = self.next_call.filter(|&t| now < t) {
            return Step::Deny { until };
        }
        self.in_flight = true;
        self.asked = self.block().max(cost);
        match self.queue {
            Some(timeout) if self.contended => Step::Queue {
                units: self.asked,
                timeout,
            },
            _ => Step::Ask(self.asked),
        }
    }

    /// Whether a call is out (between [`Step::Ask`] or [`Step::Queue`]
    /// and its reply).
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> bool {
        self.in_flight
    }

    /// The store's reply to [`Step::Ask`] at `now`, for the request that
    /// asked: whether it is admitted (it takes one of the units granted;
    /// the rest are held).
    pub(crate) fn on_reply(&mut self, now: Instant, reply: &Decision) -> bool {
        self.land(now, reply);
        self.take()
    }

    /// The store's reply to [`Step::Queue`] for `units` at `now`, for the
    /// request that queued: whether it is admitted.
    pub(crate) fn on_queued_reply(&mut self, now: Instant, units: u64, reply: &Decision) -> bool {
        self.land_queued(now, units, reply);
        self.take()
    }

    /// The call out failed (no answer): nothing was granted, the next
    /// request may call.
    pub(crate) fn on_failure(&mut self) {
        self.in_flight = false;
    }

    fn take(&mut self) -> bool {
        let some = self.held > 0;
        self.held -= u64::from(some);
        some
    }

    /// Lands the reply to [`Step::Ask`] at `now`: the units granted are
    /// added to those held (the requests that waited take them with
    /// [`BlockLease::step_again`]). Returns the units granted.
    pub(crate) fn land(&mut self, now: Instant, reply: &Decision) -> u64 {
        self.in_flight = false;
        let asked = self.asked.max(1);
        let granted = if reply.allowed {
            reply.granted.unwrap_or(asked).min(asked)
        } else {
            0
        };
        let since = self
            .last_call
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        self.last_call = Some(now);
        self.gap = self.next_gap(since, asked, granted, reply).min(MAX_GAP);
        let (_, high) = band(asked, reply.limit);
        self.next_call = if granted == asked && reply.remaining >= high {
            // Whole blocks lie unused: the next block may be taken at once
            // (a late wake-up is caught up).
            Some(now)
        } else {
            now.checked_add(self.gap)
        };
        if granted < asked && self.queue.is_some() {
            // Contended: queue for the next block at once instead of
            // polling; the server paces the line.
            self.contended = true;
            self.next_call = Some(now);
        } else if granted == 0 {
            // Denied: nothing fits before the store's `retry_after`, which
            // may be longer than any spacing; the requests denied locally
            // until then are told that wait.
            if let Some(wait) = reply.retry_after {
                let due = now.checked_add(wait.min(crate::MAX_DURATION));
                self.next_call = self.next_call.max(due);
            }
        }
        self.held = self.held.saturating_add(granted);
        granted
    }

    /// Lands the reply to [`Step::Queue`] for `units` at `now` (see
    /// [`BlockLease::land`]). Returns the units granted.
    pub(crate) fn land_queued(&mut self, now: Instant, units: u64, reply: &Decision) -> u64 {
        self.in_flight = false;
        let asked = units.max(1);
        self.last_call = Some(now);
        if reply.allowed {
            let (_, high) = band(asked, reply.limit);
            // Whole blocks left unused: nobody else is waiting for them.
            self.contended = reply.remaining < high;
            self.next_call = Some(now);
            self.held = self.held.saturating_add(asked);
            return asked;
        }
        match (reply.retry_after, self.queue) {
            // Its place lay beyond the timeout (or the line was full):
            // call again when it would be within it, and not before a
            // block could accrue.
            (Some(wait), Some(timeout)) => {
                let until = wait.saturating_sub(timeout).max(accrual(reply, asked));
                self.next_call = now.checked_add(until.min(MAX_GAP));
            }
            // A block that can never be admitted at once: poll for what
            // fits instead.
            _ => {
                self.contended = false;
                self.next_call = now.checked_add(self.gap);
            }
        }
        0
    }

    /// The spacing after a call `since` the previous one that got `granted`
    /// of `asked` units.
    fn next_gap(&self, since: Duration, asked: u64, granted: u64, reply: &Decision) -> Duration {
        if granted < asked {
            // Others use the key. What this call got after `since` says
            // how long a block takes (nothing counts as half a unit), but
            // one sample is noisy: it measures the time since anyone's
            // last call. The spacing grows towards it, at most twofold (after
            // a denial fourfold), and never stays below the time a block
            // takes to accrue on an empty key.
            // In half units: nothing counts as one half.
            let got = u128::from(granted).saturating_mul(2).max(1);
            let estimate = scale(since, u128::from(asked) * 2, got);
            let floor = accrual(reply, asked).max(reply.retry_after.unwrap_or_default());
            let gap = self.gap.max(floor);
            let most = if granted == 0 { 4 } else { 2 };
            return estimate.clamp(gap, gap.saturating_mul(most));
        }
        // A full block. The processes together should leave between one
        // and three blocks on the server: a call that comes early then
        // still gets a full block from what is left.
        let (low, high) = band(asked, reply.limit);
        if reply.remaining >= high {
            // Units left unused: call sooner.
            scale(self.gap, 9, 10)
        } else if reply.remaining < low {
            scale(self.gap, 21, 20)
        } else {
            self.gap
        }
    }

    /// Takes the unused units back if the key was idle for `idle`: what to
    /// refund (`REFUND n`).
    pub(crate) fn take_if_idle(&mut self, now: Instant, idle: Duration) -> Option<u64> {
        let quiet = self
            .last_used
            .is_none_or(|t| now.saturating_duration_since(t) >= idle);
        if quiet {
            self.take_all()
        } else {
            None
        }
    }

    /// Takes every unused unit back: what to refund.
    pub(crate) fn take_all(&mut self) -> Option<u64> {
        (self.held > 0).then(|| std::mem::take(&mut self.held))
    }

    /// Returns the `units` taken by [`BlockLease::step_for`] for a request
    /// that was not served after all (another limit denied it).
    pub(crate) fn put_back(&mut self, units: u64) {
        self.held = self.held.saturating_add(units);
    }

    /// The largest block a call asks for.
    pub(crate) fn max_block(&self) -> u64 {
        self.max_block
    }
}

/// A limit on one key, leased in blocks over a [`Client`]. Cheap to
/// clone: clones share the lease. Dropping the last clone refunds what it
/// holds in the background.
///
/// One call for a block is out at a time. The requests the block cannot
/// serve wait in line, first come first served: each call's units go to
/// them in the order they came (a request arriving later waits behind
/// them even if the block holds its units), and when the first in line
/// still needs units the next call is sent at once, for it. What the
/// server granted lands in the lease even if every caller gave up.
///
/// It shares its client's circuit: while the store is known down, a
/// request its block cannot serve fails at once with
/// [`Error::StoreDown`] (see [`Client`]).
///
/// ```no_run
/// # async fn f() -> Result<(), redis_ratelimit_client::Error> {
/// use redis_ratelimit_client::{connect, Client, Gcra, LeasePlan, LeasedLimit};
/// use std::time::Duration;
/// let client = Client::new(connect("redis://127.0.0.1/")?);
/// let hot = LeasedLimit::new(client, "rl:hot", Gcra::new(2000, Duration::from_secs(1)), LeasePlan::fixed(20));
/// let _refunder = hot.refund_when_idle(Duration::from_millis(200));
/// if hot.acquire().await?.allowed { /* serve */ }
/// // A request that costs 5 units: taken from the block when it holds them.
/// let upload = hot.acquire_cost(5).await?;
/// if !upload.allowed { println!("retry after {:?}", upload.retry_after) }
/// hot.refund_all().await?; // at shutdown
/// # Ok(()) }
/// ```
#[non_exhaustive]
pub struct LeasedLimit<C = redis::aio::ConnectionManager>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    shared: Arc<Shared<C>>,
}

impl<C> Clone for LeasedLimit<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    fn clone(&self) -> Self {
        LeasedLimit {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// What the clones of a [`LeasedLimit`] share. The calls' tasks hold it
/// weakly: once the owner is gone, what lands is refunded.
struct Shared<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    client: Client<C>,
    /// Where queued calls go: a connection of their own.
    queue_client: Option<Client<C>>,
    call: Decide,
    state: Mutex<Line>,
    commands: AtomicU64,
    /// Units the server granted (landed in the lease) and units refunded.
    granted: AtomicU64,
    refunded: AtomicU64,
}

/// One call for a block: done once its reply has landed (or it failed).
pub(crate) struct Flight {
    landed: tokio::sync::Notify,
    done: std::sync::atomic::AtomicBool,
    failure: Mutex<Option<Error>>,
}

impl Flight {
    pub(crate) fn new() -> Arc<Flight> {
        Arc::new(Flight {
            landed: tokio::sync::Notify::new(),
            done: std::sync::atomic::AtomicBool::new(false),
            failure: Mutex::new(None),
        })
    }

    /// Waits until the call has landed, for at most `bound`: its error if
    /// it failed.
    pub(crate) async fn wait(&self, bound: Option<Duration>) -> Result<(), Error> {
        let landed = self.landed.notified();
        if !self.done.load(Ordering::Acquire) {
            match bound {
                Some(bound) => tokio::time::timeout(bound, landed)
                    .await
                    .map_err(|_| Error::Timeout(bound))?,
                None => landed.await,
            }
        }
        match locked(&self.failure).as_ref() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The call has landed (`failure`: it failed): wakes those waiting.
    pub(crate) fn finish(&self, failure: Option<Error>) {
        *locked(&self.failure) = failure;
        self.done.store(true, Ordering::Release);
        self.landed.notify_waiters();
    }
}

/// Held by a call's task: if the task ends without finishing its flight
/// (a panic while landing the reply), `reset` lets the next request call
/// and the requests waiting get an error that is not an outage, so that
/// no fail-open limit admits on it.
pub(crate) struct Unlanded<F: FnMut()> {
    pub(crate) flight: Arc<Flight>,
    pub(crate) reset: F,
}

impl<F: FnMut()> Drop for Unlanded<F> {
    fn drop(&mut self) {
        if !self.flight.done.load(Ordering::Acquire) {
            (self.reset)();
            let failure = Error::Reply("the store's reply could not be landed".into());
            self.flight.finish(Some(failure));
        }
    }
}

/// How many calls a request may wait for before it stops waiting: a
/// request still without its units after this many (a long line for small
/// blocks) is decided by the store itself, never denied locally for it.
pub(crate) const MOST_WAITS: usize = 64;

impl<C> LeasedLimit<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Leases `key` under `policy` over `client`, as `plan` says. A
    /// [`LeasePlan::queued`] lease sends its queued calls over `client` too unless given a
    /// connection of their own ([`LeasedLimit::queue_on`]): a queued call
    /// holds its connection (every call behind it on a shared connection
    /// waits as long).
    pub fn new(
        client: Client<C>,
        key: impl Into<String>,
        policy: impl Into<Policy>,
        plan: LeasePlan,
    ) -> LeasedLimit<C> {
        LeasedLimit {
            shared: Arc::new(Shared {
                client,
                queue_client: None,
                call: Decide::new(key, policy),
                state: Mutex::new(Line::new(plan.into())),
                commands: AtomicU64::new(0),
                granted: AtomicU64::new(0),
                refunded: AtomicU64::new(0),
            }),
        }
    }

    /// Sends the queued calls over `client`, a connection used by nothing
    /// else (e.g. another [`crate::connect`]): the other calls and the
    /// refunds never wait behind a queued block. The client's timeout is
    /// added to the lease's queue timeout. Call it before cloning.
    pub fn queue_on(mut self, client: Client<C>) -> LeasedLimit<C> {
        match Arc::get_mut(&mut self.shared) {
            Some(shared) => shared.queue_client = Some(client),
            None => {
                let old = Arc::clone(&self.shared);
                let lease = old.state().lease.clone();
                self = LeasedLimit {
                    shared: Arc::new(Shared {
                        client: old.client.clone(),
                        queue_client: Some(client),
                        call: old.call.clone(),
                        state: Mutex::new(Line::new(lease)),
                        commands: AtomicU64::new(0),
                        granted: AtomicU64::new(0),
                        refunded: AtomicU64::new(0),
                    }),
                }
            }
        }
        self
    }

    /// Admits one request, locally when it can. When the block is spent it
    /// waits in line for the units the calls out bring, served in the
    /// order the requests came; each call is waited for at most the
    /// client's timeout, plus the queue timeout of a queued lease (a
    /// request still in line after 64 calls is decided by the store).
    /// Cancellation-safe: a request dropped while it waits leaves the line
    /// and loses nothing; units handed to it go back to the block, for
    /// those behind it, and the block lands in the lease for the next
    /// requests (or a refund).
    pub async fn acquire(&self) -> Result<Admission, Error> {
        self.acquire_cost(1).await
    }

    /// Admits a request of `cost` units once the block holds them all (a
    /// call asks for at least `cost`); a cost of 0 is admitted at once.
    /// Otherwise as [`LeasedLimit::acquire`].
    pub async fn acquire_cost(&self, cost: u64) -> Result<Admission, Error> {
        let allowed = self.admit(cost).await?;
        Ok(Admission::of(
            allowed,
            &self.shared.state().lease,
            Instant::now(),
        ))
    }

    async fn admit(&self, cost: u64) -> Result<bool, Error> {
        let shared = &self.shared;
        let (mut waiting, call) = {
            let mut state = shared.state();
            let step = state.arrive(Instant::now(), cost);
            match step {
                Step::Admit => return Ok(true),
                Step::Deny { .. } => return Ok(false),
                // The store known down: the call out may not land until it
                // is back, and nothing is sent; the fallback at once.
                Step::Join => shared.client.up()?,
                Step::Ask(_) | Step::Queue { .. } => {
                    if let Err(e) = shared.client.up() {
                        // Not made: the next request may call.
                        state.lease.on_failure();
                        return Err(e);
                    }
                }
            }
            let told = state.wait_in_line(cost);
            (Waiting::new(shared, cost, told), state.call(step))
        };
        shared.launch(call);
        let mut waits = MOST_WAITS;
        let heard = waiting.answer(shared.bound(), &mut waits).await;
        drop(waiting);
        match heard {
            Ok(Heard::Told(allowed)) => Ok(allowed),
            // Still in line after `MOST_WAITS` calls: the store decides
            // this request by itself.
            Ok(Heard::Long) => {
                shared.commands.fetch_add(1, Ordering::Relaxed);
                let alone = shared.call.clone().charge(Charge::Cost(cost));
                Ok(shared.client.send(&alone).await?.allowed)
            }
            // A limit's line never goes (never expected).
            Ok(Heard::Gone) => {
                let e = Error::Reply("a waiting request was never answered".into());
                shared.client.record::<()>(&Err(e.clone()));
                Err(e)
            }
            Err(e) => {
                shared.client.record::<()>(&Err(e.clone()));
                Err(e)
            }
        }
    }

    /// Gives the unused units back if the key was idle for `idle`.
    /// Dropped or timed out, the refund still reaches the server (see
    /// [`crate::Command::undo`]).
    pub async fn refund_if_idle(&self, idle: Duration) -> Result<(), Error> {
        let units = self.shared.state().lease.take_if_idle(Instant::now(), idle);
        self.shared.refund(units).await
    }

    /// A task (on the current tokio runtime) that gives the unused units
    /// back whenever the key has been idle for `idle`, checking twice per
    /// `idle`. It holds the lease weakly and ends once every clone is
    /// dropped. A failed refund is not retried: its units stay charged
    /// until the limit refills them.
    pub fn refund_when_idle(&self, idle: Duration) -> tokio::task::JoinHandle<()> {
        let shared = Arc::downgrade(&self.shared);
        let every = (idle / 2).max(Duration::from_millis(1));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                let units = shared.state().lease.take_if_idle(Instant::now(), idle);
                // In the background: waits for the answer however long it
                // takes (a refund cut short by a timeout may never be sent).
                let _ = shared.refund_untimed(units).await;
            }
        })
    }

    /// Gives every unused unit back (at shutdown), after the call out, if
    /// any, has landed (waiting at most the client's timeout plus the
    /// queue timeout). Dropped or timed out, what it took from the lease
    /// still reaches the server.
    pub async fn refund_all(&self) -> Result<(), Error> {
        if let Some(flight) = self.shared.flight() {
            let _ = flight.wait(self.shared.bound()).await;
        }
        let units = self.shared.state().lease.take_all();
        self.shared.refund(units).await
    }

    /// Store commands sent so far.
    pub fn commands(&self) -> u64 {
        self.shared.commands.load(Ordering::Relaxed)
    }

    /// Units held and not yet used.
    pub fn held(&self) -> u64 {
        self.shared.state().lease.held()
    }

    /// Units the server granted so far (that landed in this lease).
    pub fn units_granted(&self) -> u64 {
        self.shared.granted.load(Ordering::Relaxed)
    }

    /// Units given back so far (those whose refund was answered while its
    /// caller waited).
    pub fn units_refunded(&self) -> u64 {
        self.shared.refunded.load(Ordering::Relaxed)
    }

    /// The leasing state (units held, when the next call is due).
    pub fn lease(&self) -> BlockLease {
        self.shared.state().lease.clone()
    }
}

impl<C> Shared<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    fn state(&self) -> std::sync::MutexGuard<'_, Line> {
        locked(&self.state)
    }

    fn flight(&self) -> Option<Arc<Flight>> {
        locked(&self.state).flight.clone()
    }

    /// How long a request waits for a call: the client's timeout, plus
    /// the queue timeout of a queued lease.
    fn bound(&self) -> Option<Duration> {
        let queue = self.state().lease.queue.unwrap_or_default();
        self.client.bound(queue)
    }

    /// Sends `call`, the call out for the requests in line, unless the
    /// store is known down (or there is no runtime to send it from): then
    /// those waiting get the error, and the next request may call.
    fn launch(self: &Arc<Self>, call: Option<Call>) {
        let Some(call) = call else {
            return;
        };
        let unsent = match self.client.up() {
            Err(e) => e,
            Ok(()) if tokio::runtime::Handle::try_current().is_ok() => {
                self.start(&call.flight, call.charge, call.wait, call.units);
                return;
            }
            Ok(()) => Error::Reply("no tokio runtime to send the call from".into()),
        };
        self.state().fail_if(&call.flight, &unsent);
        call.flight.finish(Some(unsent));
    }

    /// Sends the call for a block from a task of its own, so that what the
    /// server grants lands in the lease (or, once the lease is gone, is
    /// refunded) whether or not anyone still waits for it. Its answer (or
    /// failure) tells the circuit whether the store is up.
    fn start(
        self: &Arc<Self>,
        flight: &Arc<Flight>,
        charge: Charge,
        wait: Option<Duration>,
        units: u64,
    ) {
        let mut call = self.call.clone().charge(charge);
        let client = match wait {
            Some(timeout) => {
                call = call.wait(timeout);
                self.queue_client.clone().unwrap_or(self.client.clone())
            }
            None => self.client.clone(),
        };
        self.commands.fetch_add(1, Ordering::Relaxed);
        let (owner, landing) = (Arc::downgrade(self), Arc::clone(flight));
        let unlanded = {
            let (owner, flight) = (owner.clone(), Arc::clone(flight));
            move || {
                if let Some(shared) = owner.upgrade() {
                    let failure = Error::Reply("the store's reply could not be landed".into());
                    shared.state().fail_if(&flight, &failure);
                }
            }
        };
        let unlanded = Unlanded {
            flight: Arc::clone(flight),
            reset: unlanded,
        };
        tokio::spawn(async move {
            let _unlanded = unlanded;
            let reply = client.send_untimed(&call).await;
            client.record(&reply);
            let Some(shared) = owner.upgrade() else {
                // The lease is gone: what was granted goes back.
                if let Ok(reply) = &reply {
                    let granted = granted(reply, units, wait.is_some());
                    if granted > 0 {
                        let refund = call.clone().charge(Charge::Refund(granted));
                        let _ = client.send_untimed(&refund).await;
                    }
                }
                landing.finish(None);
                return;
            };
            let (failure, next) = {
                let mut state = shared.state();
                match &reply {
                    Ok(reply) => {
                        state.flight = None;
                        let now = Instant::now();
                        let landed = match wait {
                            Some(_) => state.lease.land_queued(now, units, reply),
                            None => state.lease.land(now, reply),
                        };
                        shared.granted.fetch_add(landed, Ordering::Relaxed);
                        // The units go to those in line, in order; the
                        // next call, if they need one, is sent at once.
                        (None, state.serve(now))
                    }
                    Err(e) => {
                        state.fail(e);
                        (Some(e.clone()), None)
                    }
                }
            };
            shared.launch(next);
            landing.finish(failure);
        });
    }

    async fn refund_untimed(&self, units: Option<u64>) -> Result<(), Error> {
        if let Some(n) = units {
            self.commands.fetch_add(1, Ordering::Relaxed);
            let refund = self.call.clone().charge(Charge::Refund(n));
            self.client.send_untimed(&refund).await?;
            self.refunded.fetch_add(n, Ordering::Relaxed);
        }
        Ok(())
    }

    async fn refund(&self, units: Option<u64>) -> Result<(), Error> {
        let Some(n) = units else {
            return Ok(());
        };
        let refund = self.call.clone().charge(Charge::Refund(n));
        self.commands.fetch_add(1, Ordering::Relaxed);
        match self.client.send(&refund).await {
            Ok(_) => {
                self.refunded.fetch_add(n, Ordering::Relaxed);
                Ok(())
            }
            // Not sent (the store known down): the units stay in the
            // lease, for the next requests or a later refund.
            Err(Error::StoreDown) => {
                self.commands.fetch_sub(1, Ordering::Relaxed);
                self.state().lease.put_back(n);
                Err(Error::StoreDown)
            }
            Err(e) => Err(e),
        }
    }
}

impl<C> Owner for Arc<Shared<C>>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    fn flight(&self) -> Option<Arc<Flight>> {
        Shared::flight(self)
    }

    fn left(&self) {
        let call = self.state().serve(Instant::now());
        self.launch(call);
    }

    fn give_back(&self, units: u64) {
        let call = {
            let mut state = self.state();
            state.lease.put_back(units);
            state.serve(Instant::now())
        };
        self.launch(call);
    }
}

/// The units a reply granted: all of a queued block or nothing; what a
/// `PARTIAL` call says it charged.
pub(crate) fn granted(reply: &Decision, asked: u64, queued: bool) -> u64 {
    match (reply.allowed, queued) {
        (false, _) => 0,
        (true, true) => asked,
        (true, false) => reply.granted.unwrap_or(asked).min(asked),
    }
}

impl<C> Drop for Shared<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The last clone is gone: what it held goes back (in the background,
    /// on the current runtime; without one the units stay charged until
    /// they refill).
    fn drop(&mut self) {
        let Some(units) = locked(&self.state).lease.take_all() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (client, call) = (self.client.clone(), self.call.clone());
            runtime.spawn(async move {
                let _ = client
                    .send_untimed(&call.charge(Charge::Refund(units)))
                    .await;
            });
        }
    }
}

fn locked<T>(lock: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each change to the state is whole: a poisoned lock is usable.
    lock.lock().unwrap_or_else(|p| p.into_inner())
}

/// The same over a blocking connection (one per thread; a queued call
/// blocks the thread until its block comes or its timeout passes).
///
/// It has a circuit of its own, as a [`Client`]'s: once a call finds the
/// store unavailable (the connection's read timeout, set by the caller, or
/// its failure), requests its block cannot serve fail at once with
/// [`Error::StoreDown`]; at most one call each [`crate::PROBE_INTERVAL`]
/// first sends a `PING` on the connection, waiting its timeout, and the
/// store's answer closes the circuit. (A connection that does not reconnect
/// by itself, such as `redis::Connection`, stays down once its server is
/// gone; one that does, such as a pool's, comes back with it.)
#[non_exhaustive]
pub struct BlockingLeasedLimit<C: redis::ConnectionLike> {
    conn: C,
    call: Decide,
    lease: BlockLease,
    commands: u64,
    circuit: crate::circuit::Circuit,
}

impl<C: redis::ConnectionLike> BlockingLeasedLimit<C> {
    /// Leases `key` under `policy` over the blocking connection `conn`.
    pub fn new(
        conn: C,
        key: impl Into<String>,
        policy: impl Into<Policy>,
        plan: LeasePlan,
    ) -> BlockingLeasedLimit<C> {
        BlockingLeasedLimit {
            conn,
            call: Decide::new(key, policy),
            lease: plan.into(),
            commands: 0,
            circuit: crate::circuit::Circuit::default(),
        }
    }

    /// Admits one request, locally when it can.
    pub fn acquire(&mut self) -> Result<Admission, Error> {
        self.acquire_cost(1)
    }

    /// Admits a request of `cost` units once the block holds them all (a
    /// call asks for at least `cost`); a cost of 0 is admitted at once.
    pub fn acquire_cost(&mut self, cost: u64) -> Result<Admission, Error> {
        let allowed = self.acquire_with(Instant::now, Instant::now(), cost)?;
        Ok(Admission::of(allowed, &self.lease, Instant::now()))
    }

    /// [`BlockingLeasedLimit::acquire`] on a clock of the caller's: the
    /// request and the store's reply both at `now`.
    pub fn acquire_at(&mut self, now: Instant) -> Result<Admission, Error> {
        self.acquire_cost_at(now, 1)
    }

    /// [`BlockingLeasedLimit::acquire_cost`] at `now`, as
    /// [`BlockingLeasedLimit::acquire_at`].
    pub fn acquire_cost_at(&mut self, now: Instant, cost: u64) -> Result<Admission, Error> {
        let allowed = self.acquire_with(|| now, now, cost)?;
        Ok(Admission::of(allowed, &self.lease, now))
    }

    /// Store commands sent so far.
    pub fn commands(&self) -> u64 {
        self.commands
    }

    fn acquire_with(
        &mut self,
        clock: impl Fn() -> Instant,
        now: Instant,
        cost: u64,
    ) -> Result<bool, Error> {
        let (call, queued) = match self.lease.step_for(now, cost) {
            Step::Admit => return Ok(true),
            // Nothing is out on a blocking connection: its calls land
            // before `acquire` returns.
            Step::Deny { .. } | Step::Join => return Ok(false),
            Step::Ask(k) => (self.call.clone().charge(Charge::Partial(k)), None),
            Step::Queue { units, timeout } => (
                self.call.clone().charge(Charge::Cost(units)).wait(timeout),
                Some(units),
            ),
        };
        if let Err(e) = self.up() {
            self.lease.on_failure();
            return Err(e);
        }
        self.commands += 1;
        let reply = call.query(&mut self.conn);
        self.circuit.record(&reply);
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                // Nothing landed: the next request may call.
                self.lease.on_failure();
                return Err(e);
            }
        };
        let now = clock();
        if cost == 1 {
            return Ok(match queued {
                Some(units) => self.lease.on_queued_reply(now, units, &reply),
                None => self.lease.on_reply(now, &reply),
            });
        }
        match queued {
            Some(units) => self.lease.land_queued(now, units, &reply),
            None => self.lease.land(now, &reply),
        };
        Ok(match self.lease.step_again_for(now, cost) {
            Step::Admit => true,
            // Short of `cost` and free to call again: the next request
            // calls (this one is not kept waiting).
            Step::Ask(_) | Step::Queue { .. } => {
                self.lease.on_failure();
                false
            }
            Step::Deny { .. } | Step::Join => false,
        })
    }

    /// Gives the unused units back if the key was idle for `idle`.
    pub fn refund_if_idle(&mut self, idle: Duration) -> Result<(), Error> {
        let units = self.lease.take_if_idle(Instant::now(), idle);
        self.refund(units)
    }

    /// Gives every unused unit back (at shutdown).
    pub fn refund_all(&mut self) -> Result<(), Error> {
        let units = self.lease.take_all();
        self.refund(units)
    }

    fn refund(&mut self, units: Option<u64>) -> Result<(), Error> {
        let Some(n) = units else {
            return Ok(());
        };
        if let Err(e) = self.up() {
            // Not sent: the units stay in the lease.
            self.lease.put_back(n);
            return Err(e);
        }
        self.commands += 1;
        let refund = self.call.clone().charge(Charge::Refund(n));
        let answer = refund.query(&mut self.conn);
        self.circuit.record(&answer);
        answer.map(|_| ())
    }

    /// `Err(StoreDown)` while the store is known down and a probe, if one
    /// is due, finds it still down.
    fn up(&mut self) -> Result<(), Error> {
        if self.circuit.is_open() && !self.circuit.probe_blocking(&mut self.conn) {
            return Err(Error::StoreDown);
        }
        Ok(())
    }

    /// The leasing state (units held, when the next call is due).
    pub fn lease(&self) -> &BlockLease {
        &self.lease
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(allowed: bool, granted: u64, retry_ms: Option<u64>) -> Decision {
        Decision {
            allowed,
            limit: 100,
            remaining: 0,
            retry_after: retry_ms.map(Duration::from_millis),
            reset_after: Duration::ZERO,
            granted: Some(granted),
            lease: None,
        }
    }

    #[test]
    fn a_block_is_spent_locally_then_asked_for_again() {
        let mut l = BlockLease::fixed(4);
        let t = Instant::now();
        assert_eq!(l.step(t), Step::Ask(4));
        assert!(l.on_reply(t, &reply(true, 4, None)));
        for _ in 0..3 {
            assert_eq!(l.step(t), Step::Admit);
        }
        assert_eq!(l.step(t), Step::Ask(4));
        // Denied: answered locally until the retry is due.
        assert!(!l.on_reply(t, &reply(false, 0, Some(250))));
        let until = t + Duration::from_millis(250);
        assert_eq!(l.step(t), Step::Deny { until });
        assert_eq!(l.step(until), Step::Ask(4));
    }

    #[test]
    fn a_denial_longer_than_any_spacing_is_waited_out_and_told() {
        // 10 a minute in blocks of 5: once both blocks are spent the store
        // says 6 s, beyond the longest spacing.
        let mut l = BlockLease::fixed(5);
        let t = Instant::now();
        let six = Duration::from_secs(6);
        l.step(t);
        let denied = Decision {
            limit: 10,
            reset_after: Duration::from_secs(60),
            ..reply(false, 0, Some(6000))
        };
        assert!(!l.on_reply(t, &denied));
        let until = t + six;
        assert_eq!(l.step(t + MAX_GAP), Step::Deny { until });
        assert_eq!(l.blocked_until(), Some(until));
        assert_eq!(l.step(until), Step::Ask(5));
    }

    #[test]
    fn spacing_is_exact_integer_arithmetic_at_the_extremes() {
        let s = Duration::from_secs;
        assert_eq!(scale(s(3), 5, 10), Duration::from_millis(1500));
        assert_eq!(scale(s(3), u128::from(u64::MAX), 1), Duration::MAX);
        assert_eq!(scale(Duration::MAX, u128::MAX, 1), Duration::MAX);
        assert_eq!(scale(Duration::MAX, 1, 0), Duration::MAX);
        assert_eq!(scale(Duration::from_nanos(1), 1, u128::MAX), Duration::ZERO);
        let max = crate::MAX_COUNT;
        assert_eq!(band(max, max), (max / 4, max / 4 * 3 + 2));
        assert_eq!(band(20, max), (20, 60));
        assert_eq!(band(u64::MAX, u64::MAX).1, u64::MAX / 4 * 3 + 2);
        // A block of MAX_COUNT on 1 per 3 s, denied, then granted one.
        let mut l = BlockLease::fixed(max);
        let t = Instant::now();
        let empty = |allowed, granted, retry: Option<Duration>| Decision {
            allowed,
            limit: 1,
            remaining: 0,
            retry_after: retry,
            reset_after: s(3),
            granted: Some(granted),
            lease: None,
        };
        assert_eq!(l.step(t), Step::Ask(max));
        assert!(l.on_reply(t, &empty(true, 1, None)));
        assert!(l.gap <= MAX_GAP);
        let later = t + s(3);
        assert_eq!(l.step(later), Step::Ask(max));
        assert!(!l.on_reply(later, &empty(false, 0, Some(s(3)))));
        assert_eq!(l.blocked_until(), Some(later + s(3)));
    }

    #[test]
    fn an_adaptive_block_follows_the_local_rate_and_starts_at_one() {
        let mut l = BlockLease::adaptive(20);
        let t0 = Instant::now();
        assert_eq!(l.step(t0), Step::Ask(1), "a cold key asks for one");
        assert!(l.on_reply(t0, &reply(true, 1, None)));
        assert_eq!(l.held(), 0, "nothing held, nothing to give back");
        // 1000 requests a second: about 100 in the window, capped at 20.
        let mut t = t0;
        for _ in 0..200 {
            t += Duration::from_millis(1);
            if let Step::Ask(k) = l.step(t) {
                assert!(l.on_reply(t, &reply(true, k, None)));
            }
        }
        assert_eq!(l.block(), 20);
        // Ten requests a second: back to one.
        for _ in 0..20 {
            t += Duration::from_millis(100);
            if let Step::Ask(k) = l.step(t) {
                l.on_reply(t, &reply(true, k, None));
            }
        }
        assert_eq!(l.block(), 1);
    }

    #[test]
    fn contended_spacing_starts_at_a_blocks_accrual_grows_boundedly_and_shrinks_when_units_are_left(
    ) {
        let ms = Duration::from_millis;
        // 100 units refill in 50 ms: a block of 20 accrues in 10 ms.
        let partial = |granted: u64| Decision {
            remaining: 0,
            reset_after: ms(50),
            ..reply(true, granted, None)
        };
        let mut l = BlockLease::fixed(20);
        let t0 = Instant::now();
        assert_eq!(l.step(t0), Step::Ask(20));
        assert!(l.on_reply(t0, &partial(2)));
        assert_eq!(l.next_call, Some(t0 + ms(10)), "a block's accrual, not 0");
        // 2 of 20 after 10 ms says 100 ms; the spacing at most doubles.
        let t1 = t0 + ms(10);
        l.held = 0;
        assert_eq!(l.step(t1), Step::Ask(20));
        l.on_reply(t1, &partial(2));
        assert_eq!(l.gap, ms(20));
        // A full block that leaves three blocks: a tenth shorter; one that
        // leaves one to three: unchanged; less than one: a twentieth longer.
        let full = |remaining: u64| Decision {
            remaining,
            ..reply(true, 20, None)
        };
        let t2 = t1 + ms(20);
        l.held = 0;
        l.step(t2);
        l.on_reply(t2, &full(60));
        assert_eq!(l.gap, ms(18));
        l.held = 0;
        l.step(t2 + ms(18));
        l.on_reply(t2 + ms(18), &full(20));
        assert_eq!(l.gap, ms(18));
        l.held = 0;
        l.step(t2 + ms(36));
        l.on_reply(t2 + ms(36), &full(19));
        assert_eq!(l.gap, ms(18) * 21 / 20);
    }

    #[test]
    fn a_queued_lease_queues_for_whole_blocks_until_one_leaves_blocks_unused() {
        let second = Duration::from_secs(1);
        let mut l = BlockLease::fixed(4).queued(second);
        let t = Instant::now();
        let queue = Step::Queue {
            units: 4,
            timeout: second,
        };
        assert_eq!(l.step(t), queue, "queues from the first call");
        // Admitted when the whole block fits; nothing is left: contended.
        assert!(l.on_queued_reply(t, 4, &reply(true, 4, None)));
        assert_eq!(l.held(), 3);
        for _ in 0..3 {
            assert_eq!(l.step(t), Step::Admit);
        }
        assert_eq!(l.step(t), queue);
        // A block that leaves three blocks (band(4, 100): 12) unused: the
        // key is not contended, the next call polls.
        let plenty = Decision {
            remaining: 12,
            ..reply(true, 4, None)
        };
        assert!(l.on_queued_reply(t, 4, &plenty));
        for _ in 0..3 {
            l.step(t);
        }
        assert_eq!(l.step(t), Step::Ask(4));
        // A short block: contended again, and the next block is queued for
        // at once, not paced.
        assert!(l.on_reply(t, &reply(true, 2, None)));
        assert_eq!(l.step(t), Step::Admit);
        assert_eq!(l.step(t), queue);
    }

    #[test]
    fn a_queued_call_denied_calls_again_when_its_place_would_be_within_the_timeout() {
        let ms = Duration::from_millis;
        let mut l = BlockLease::fixed(4).queued(ms(1000));
        let t = Instant::now();
        l.step(t);
        // The line's plan admits it in 1.5 s: beyond its 1 s.
        assert!(!l.on_queued_reply(t, 4, &reply(false, 0, Some(1500))));
        assert_eq!(l.step(t), Step::Deny { until: t + ms(500) });
        let later = t + ms(500);
        assert!(matches!(l.step(later), Step::Queue { .. }));
        // A block that can never be admitted at once: polls instead.
        assert!(!l.on_queued_reply(later, 4, &reply(false, 0, None)));
        assert_eq!(l.step(later), Step::Ask(4));
    }

    #[test]
    fn a_request_that_waited_for_anothers_call_takes_a_unit_of_its_block() {
        let mut l = BlockLease::fixed(4).queued(Duration::from_secs(1));
        let t = Instant::now();
        // Two requests find the block spent; the first one's call brings
        // a block, the second takes a unit of it without a call.
        assert!(matches!(l.step(t), Step::Queue { .. }));
        assert_eq!(l.step(t), Step::Join);
        assert!(l.on_queued_reply(t, 4, &reply(true, 4, None)));
        assert_eq!(l.step_again(t), Step::Admit);
        assert_eq!(l.held(), 2);
    }

    #[test]
    fn one_call_is_out_at_a_time_and_what_lands_adds_up() {
        let mut l = BlockLease::fixed(4);
        let t = Instant::now();
        assert_eq!(l.step(t), Step::Ask(4));
        assert!(l.in_flight());
        // Fifty more requests while it is out: none sends a call.
        for _ in 0..50 {
            assert_eq!(l.step(t), Step::Join);
        }
        assert_eq!(l.land(t, &reply(true, 4, None)), 4);
        assert!(!l.in_flight());
        // The units are held, whoever takes them; a unit put back adds.
        assert_eq!(l.step_again(t), Step::Admit);
        l.put_back(1);
        assert_eq!(l.held(), 4);
        for _ in 0..4 {
            assert_eq!(l.step_again(t), Step::Admit);
        }
        // A failed call lets the next request call.
        assert_eq!(l.step_again(t), Step::Ask(4));
        l.on_failure();
        assert_eq!(l.step_again(t), Step::Ask(4));
    }

    #[test]
    fn a_request_of_several_units_takes_them_all_or_asks_for_at_least_its_cost() {
        let mut l = BlockLease::fixed(4);
        let t = Instant::now();
        assert_eq!(l.step_for(t, 3), Step::Ask(4));
        l.land(t, &reply(true, 4, None));
        assert_eq!(l.step_again_for(t, 3), Step::Admit);
        // One held, three wanted: the next call asks for the block.
        assert_eq!(l.step_for(t, 3), Step::Ask(4));
        assert_eq!(l.step_for(t, 1), Step::Admit, "the unit held is taken");
        l.land(t, &reply(true, 4, None));
        assert_eq!(l.step_again_for(t, 3), Step::Admit);
        assert_eq!(l.held(), 1);
        // A cost above the block asks for the cost; a cost of 0 takes nothing.
        let mut l = BlockLease::adaptive(8);
        assert_eq!(l.step_for(t, 6), Step::Ask(6));
        l.land(t, &reply(true, 6, None));
        assert_eq!(l.step_again_for(t, 0), Step::Admit);
        assert_eq!(l.held(), 6);
        l.put_back(2);
        assert_eq!(l.held(), 8);
    }

    #[test]
    fn idle_units_go_back_once() {
        let mut l = BlockLease::fixed(10);
        let t = Instant::now();
        l.step(t);
        l.on_reply(t, &reply(true, 10, None));
        assert_eq!(
            l.take_if_idle(t + Duration::from_millis(10), Duration::from_millis(50)),
            None
        );
        let later = t + Duration::from_millis(50);
        assert_eq!(l.take_if_idle(later, Duration::from_millis(50)), Some(9));
        assert_eq!(l.take_all(), None);
    }

    #[test]
    fn what_is_held_never_exceeds_what_was_granted_at_a_thousand_times_the_block() {
        for mut l in [BlockLease::fixed(20), BlockLease::fixed(20).queued(MAX_GAP)] {
            let t0 = Instant::now();
            let (mut granted, mut admitted, mut refunded) = (0u64, 0u64, 0u64);
            for i in 0..20_000u64 {
                let t = t0 + Duration::from_micros(i * 37);
                match l.step(t) {
                    Step::Admit => admitted += 1,
                    Step::Deny { .. } => {}
                    Step::Join => unreachable!("every call lands before the next request"),
                    Step::Ask(k) => {
                        let m = (i % 7).min(k);
                        granted += m;
                        admitted += u64::from(l.on_reply(t, &reply(m > 0, m, Some(1))));
                    }
                    // A queued call gets the whole block or nothing.
                    Step::Queue { units, .. } => {
                        let m = if i % 7 == 0 { 0 } else { units };
                        granted += m;
                        let r = reply(m > 0, m, Some(1));
                        admitted += u64::from(l.on_queued_reply(t, units, &r));
                    }
                }
                if i % 1000 == 999 {
                    refunded += l.take_if_idle(t, Duration::ZERO).unwrap_or(0);
                }
                assert!(l.held() <= 20);
                assert_eq!(admitted + l.held() + refunded, granted);
            }
        }
    }
}
