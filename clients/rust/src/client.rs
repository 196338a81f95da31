//! The async client: sends [`Command`]s over a multiplexed connection with
//! a timeout per call, and holds concurrency leases as guards.

use crate::command::{Command, Decide, Release, Renew};
use crate::reply::{Decision, LeaseId};
use crate::Error;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Value;
use std::future::Future;
use std::time::Duration;

/// The first wait before reconnecting; it doubles after each failure...
pub const RECONNECT_MIN_DELAY: Duration = Duration::from_millis(50);
/// ...up to this (plus up to as much again of random jitter).
pub const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(1);
/// One connection attempt gives up after this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

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
/// connection.
///
/// ```no_run
/// # async fn f() -> Result<(), redis_ratelimit_client::Error> {
/// use redis_ratelimit_client::{connect, Client, Decide, Gcra};
/// use std::time::Duration;
/// let client = Client::new(connect("redis://127.0.0.1/")?).timeout(Duration::from_millis(100));
/// let d = client.send(&Decide::new("rl:user:42", Gcra::new(10, Duration::from_secs(1)))).await?;
/// if !d.allowed { println!("retry after {:?}", d.retry_after) }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client<C = ConnectionManager> {
    conn: C,
    timeout: Option<Duration>,
}

impl<C> Client<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    pub fn new(conn: C) -> Client<C> {
        Client {
            conn,
            timeout: None,
        }
    }

    /// Gives up on a call after `timeout` (plus the call's own `WAIT`) with
    /// [`Error::Timeout`].
    pub fn timeout(mut self, timeout: Duration) -> Client<C> {
        self.timeout = Some(timeout);
        self
    }

    /// Sends one command and reads its reply.
    pub async fn send<T: Command>(&self, command: &T) -> Result<T::Output, Error> {
        let cmd = command.to_cmd();
        let mut conn = self.conn.clone();
        let call = async move { cmd.query_async::<Value>(&mut conn).await };
        let reply = match self.timeout {
            Some(timeout) => {
                let bound = timeout + command.waits();
                tokio::time::timeout(bound, call)
                    .await
                    .map_err(|_| Error::Timeout(bound))??
            }
            None => call.await?,
        };
        T::parse(&reply)
    }

    /// Acquires a concurrency lease (`RL.ACQUIRE`, built with
    /// [`crate::acquire`]): a guard that releases it when dropped, or the
    /// denial.
    pub async fn acquire(&self, call: &Decide) -> Result<Result<LeaseGuard<C>, Decision>, Error> {
        let decision = self.send(call).await?;
        let ttl = match call.policy {
            crate::Policy::Concurrency(c) => c.ttl,
            _ => return Err(Error::Reply("acquire needs a Concurrency policy".into())),
        };
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

    /// Releases the lease now; `false` if it had already ended.
    pub async fn release(mut self) -> Result<bool, Error> {
        self.released = true;
        self.client.send(&self.release_command()).await
    }

    /// Runs `work` while renewing the lease every third of its TTL, then
    /// releases it. A renewal that fails is retried at the next third.
    pub async fn run<F: Future>(self, work: F) -> F::Output {
        let renewal = self.renewal();
        let client = self.client.clone();
        let every = (self.ttl / 3).max(Duration::from_millis(1));
        let renewer = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let _ = client.send(&renewal).await;
            }
        });
        let output = work.await;
        renewer.abort();
        let _ = self.release().await;
        output
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
