//! The async client: sends [`Command`]s over a multiplexed connection with
//! a timeout per call, and holds concurrency leases as guards.
//!
//! Cancellation-safe: a call whose caller stops waiting (the future
//! dropped, or [`Error::Timeout`]) is finished in the background on the
//! current tokio runtime, and what its answer says it took is given back
//! ([`Command::undo`]): a charge refunded, a lease released, a
//! `CL.THROTTLE` quantity given back. A refund or release cut short still
//! reaches the server.

use crate::circuit::Circuit;
use crate::command::{Command, Decide, Release, Renew};
use crate::landing::Landing;
use crate::reply::{Decision, LeaseId};
use crate::Error;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The first wait before reconnecting; it doubles after each failure...
pub const RECONNECT_MIN_DELAY: Duration = Duration::from_millis(50);
/// ...up to this (plus up to as much again of random jitter): a server
/// that returns is connected to again within twice this.
pub const RECONNECT_MAX_DELAY: Duration = Duration::from_millis(250);
/// One connection attempt gives up after this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a [`Client`] waits for an answer unless told otherwise
/// ([`Client::timeout`]); a command's own `WAIT` is added to it. Long
/// enough for a loaded server's tail, short enough that a request behind a
/// stalled store fails over (fail-open, fail-closed or degraded mode)
/// before its own caller gives up.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(300);

/// A connection that reconnects by itself, with exponential backoff, for
/// as long as it takes. Lazy: it connects at its first command, so a
/// service starts even while Redis is down. Add `?protocol=resp3` to the
/// URL for RESP3; replies read the same. Call it inside a tokio runtime:
/// the connection's task lives there.
pub fn connect(url: &str) -> Result<ConnectionManager, Error> {
    let config = ConnectionManagerConfig::new()
        .set_min_delay(RECONNECT_MIN_DELAY)
        .set_max_delay(RECONNECT_MAX_DELAY)
        .set_number_of_retries(usize::MAX)
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        // Each call has its own timeout (`Client::timeout`), which allows
        // for a command's `WAIT`.
        .set_response_timeout(None);
    Ok(ConnectionManager::new_lazy_with_config(
        redis::Client::open(url)?,
        config,
    )?)
}

/// Sends the module's commands. Cheap to clone: clones share the
/// connection and its circuit: once a call finds the store unavailable,
/// calls fail at once with [`Error::StoreDown`] until a probe finds it
/// back (see [`crate::PROBE_INTERVAL`]).
///
/// ```no_run
/// # async fn f() -> Result<(), redis_ratelimit_client::Error> {
/// use redis_ratelimit_client::{connect, Client, Decide, Gcra};
/// use std::time::{Duration, Instant};
/// let client = Client::new(connect("redis://127.0.0.1/")?).timeout(Duration::from_millis(100));
/// let d = client.send(&Decide::new("rl:user:42", Gcra::new(10, Duration::from_secs(1)))).await?;
/// if !d.allowed { println!("retry after {:?}", d.retry_after) }
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Client<C = ConnectionManager> {
    conn: C,
    timeout: Option<Duration>,
    circuit: Arc<Circuit>,
}

impl<C> Client<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A client over `conn` (e.g. [`connect`]), with the
    /// [`DEFAULT_TIMEOUT`].
    pub fn new(conn: C) -> Client<C> {
        Client {
            conn,
            timeout: Some(DEFAULT_TIMEOUT),
            circuit: Arc::default(),
        }
    }

    /// Gives up on a call after `timeout` (plus the call's own `WAIT`) with
    /// [`Error::Timeout`] (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Client<C> {
        self.timeout = Some(timeout);
        self
    }

    /// Waits for every answer as long as it takes (a paused server stalls
    /// each call for as long as it is paused).
    pub fn without_timeout(mut self) -> Client<C> {
        self.timeout = None;
        self
    }

    /// How long a call that the server may hold back for `waits` is waited
    /// for; `None`: without end.
    pub(crate) fn bound(&self, waits: Duration) -> Option<Duration> {
        self.timeout.map(|t| t.saturating_add(waits))
    }

    /// Sends one command and reads its reply; while the store is known
    /// down, fails at once with [`Error::StoreDown`] without sending it.
    pub async fn send<T: Command>(&self, command: &T) -> Result<T::Output, Error> {
        self.up()?;
        let (call, start) = (self.send_untimed(command), Instant::now());
        let outcome = match self.bound(command.waits()) {
            Some(bound) => tokio::time::timeout(bound, call)
                .await
                .unwrap_or(Err(Error::Timeout(bound))),
            None => call.await,
        };
        let outcome = outcome.map_err(|e| e.with_deadline(start.elapsed()));
        self.circuit.record(&outcome);
        outcome
    }

    /// `Err(StoreDown)` while the store is known down (and, if one is due,
    /// a probe started); `Ok` while calls are sent.
    pub(crate) fn up(&self) -> Result<(), Error> {
        if !self.circuit.is_open() {
            return Ok(());
        }
        let bound = self.bound(Duration::ZERO).unwrap_or(DEFAULT_TIMEOUT);
        self.circuit.probe(&self.conn, bound);
        Err(Error::StoreDown)
    }

    /// What the outcome of a call sent otherwise than by [`Client::send`]
    /// says of the store (see [`Client::up`]).
    pub(crate) fn record<T>(&self, outcome: &Result<T, Error>) {
        self.circuit.record(outcome);
    }

    /// Sends one command and waits for its reply however long it takes:
    /// for calls whose reply must land (what the server granted) even when
    /// their caller has stopped waiting. Dropped, it finishes in the
    /// background and is undone (see the module's documentation).
    pub(crate) async fn send_untimed<T: Command>(&self, command: &T) -> Result<T::Output, Error> {
        let (cmd, undo) = (command.to_cmd(), command.undo());
        let reply = Landing::new(&self.conn, cmd, undo, command.waits()).await?;
        T::parse(&reply)
    }

    /// Acquires a concurrency lease (`RL.ACQUIRE`, built with
    /// [`crate::acquire`]): a guard that releases it when dropped, or the
    /// denial. A policy other than `Concurrency` is an [`Error::Config`],
    /// and nothing is sent. Dropped or timed out before the answer, the
    /// lease it may have been granted is released when the answer lands.
    pub async fn acquire(&self, call: &Decide) -> Result<Result<LeaseGuard<C>, Decision>, Error> {
        let ttl = match call.policy {
            crate::Policy::Concurrency(c) => c.ttl,
            _ => return Err(Error::Config("acquire needs a Concurrency policy".into())),
        };
        let decision = self.send(call).await?;
        Ok(match decision.lease.clone() {
            Some(lease) if decision.allowed => Ok(LeaseGuard {
                client: self.clone(),
                key: call.key.clone(),
                lease,
                ttl,
                released: false,
            }),
            _ => Err(decision),
        })
    }
}

/// A held concurrency lease. Dropped, it is released in the background
/// (on the current tokio runtime; without one it ends at its TTL on the
/// server).
#[non_exhaustive]
pub struct LeaseGuard<C = ConnectionManager>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    client: Client<C>,
    key: String,
    lease: LeaseId,
    ttl: Duration,
    released: bool,
}

impl<C> LeaseGuard<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The lease's id, as the server handed it out.
    pub fn id(&self) -> &LeaseId {
        &self.lease
    }

    fn renewal(&self) -> Renew {
        Renew {
            key: self.key.clone(),
            lease: self.lease.clone(),
            ttl: self.ttl,
        }
    }

    fn release_command(&self) -> Release {
        Release {
            key: self.key.clone(),
            lease: self.lease.clone(),
        }
    }

    /// Extends the lease to its TTL from now; `false` if it had already
    /// ended.
    pub async fn renew(&self) -> Result<bool, Error> {
        self.client.send(&self.renewal()).await
    }

    /// Releases the lease now; `false` if it had already ended. Dropped
    /// or timed out, the release still reaches the server.
    pub async fn release(mut self) -> Result<bool, Error> {
        // Marked at once: from here the release is sent whatever happens
        // to this future (see `Client::send`).
        self.released = true;
        self.client.send(&self.release_command()).await
    }

    /// Runs `work` while renewing the lease every third of its TTL, then
    /// releases it. A renewal that fails is retried at the next third.
    /// Cancellation-safe: dropping the future stops the renewals and
    /// releases the lease in the background.
    pub async fn run<F: Future>(self, work: F) -> F::Output {
        let renewal = self.renewal();
        let client = self.client.clone();
        let every = (self.ttl / 3).max(Duration::from_millis(1));
        let renewer = AbortOnDrop(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let _ = client.send(&renewal).await;
            }
        }));
        let output = work.await;
        drop(renewer);
        let _ = self.release().await;
        output
    }
}

/// A task that ends when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<C> Drop for LeaseGuard<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (client, release) = (self.client.clone(), self.release_command());
            runtime.spawn(async move {
                let _ = client.send(&release).await;
            });
        }
    }
}
