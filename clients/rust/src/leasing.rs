//! What a leased limit is told to do ([`LeasePlan`], configuration) and
//! what it answers a request ([`Admission`]); the live state of a key's
//! lease is [`crate::BlockLease`].

use crate::blocks::BlockLease;
use std::time::{Duration, Instant};

/// How a key's units are leased: blocks of a fixed size or sized to the
/// key's local rate, and whether calls queue on the server once the key
/// is contended (see [`crate::blocks`]). Given to
/// [`crate::LeasedLimit::new`], [`crate::BlockingLeasedLimit::new`] and
/// [`crate::http::HttpLimit::leased`]; each key's lease starts from it.
///
/// ```
/// use redis_ratelimit_client::LeasePlan;
/// use std::time::Duration;
/// let plan = LeasePlan::fixed(20).queued(Duration::from_secs(1));
/// assert_eq!((plan.max_block(), plan.queue_timeout()), (20, Some(Duration::from_secs(1))));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeasePlan {
    max_block: u64,
    adaptive: bool,
    queue: Option<Duration>,
}

impl LeasePlan {
    /// Always asks for `k` units (at least 1).
    pub fn fixed(k: u64) -> LeasePlan {
        LeasePlan {
            max_block: k.max(1),
            adaptive: false,
            queue: None,
        }
    }

    /// Asks for what the key's local rate uses in
    /// [`crate::blocks::RATE_WINDOW`], from 1 to `max_k`.
    pub fn adaptive(max_k: u64) -> LeasePlan {
        LeasePlan {
            adaptive: true,
            ..LeasePlan::fixed(max_k)
        }
    }

    /// Once the key is contended, queues on the server for whole blocks,
    /// waiting up to `timeout` in line; the caller of a queued call waits
    /// that long at most. (The layer's leased limits never queue: their
    /// calls share one connection.)
    pub fn queued(mut self, timeout: Duration) -> LeasePlan {
        self.queue = Some(timeout);
        self
    }

    /// The largest block a call asks for.
    pub fn max_block(&self) -> u64 {
        self.max_block
    }

    /// Whether blocks follow the key's local rate.
    pub fn is_adaptive(&self) -> bool {
        self.adaptive
    }

    /// How long a queued call may wait in line; `None`: it never queues.
    pub fn queue_timeout(&self) -> Option<Duration> {
        self.queue
    }

    /// The same plan without queueing.
    pub(crate) fn unqueued(mut self) -> LeasePlan {
        self.queue = None;
        self
    }
}

impl From<LeasePlan> for BlockLease {
    fn from(plan: LeasePlan) -> BlockLease {
        let lease = if plan.adaptive {
            BlockLease::adaptive(plan.max_block)
        } else {
            BlockLease::fixed(plan.max_block)
        };
        match plan.queue {
            Some(timeout) => lease.queued(timeout),
            None => lease,
        }
    }
}

/// A leased limit's answer to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Admission {
    /// Whether the request is admitted.
    pub allowed: bool,
    /// On a denial, how long until this process's lease asks the store
    /// again (a request before then is denied locally); `None` when
    /// admitted, or when the lease may ask at once.
    pub retry_after: Option<Duration>,
}

impl Admission {
    /// An admission.
    pub const ADMITTED: Admission = Admission {
        allowed: true,
        retry_after: None,
    };

    /// A denial, from the lease's state at `now`.
    pub(crate) fn denied(lease: &BlockLease, now: Instant) -> Admission {
        Admission {
            allowed: false,
            retry_after: lease
                .next_call_at()
                .map(|t| t.saturating_duration_since(now))
                .filter(|d| !d.is_zero()),
        }
    }

    pub(crate) fn of(allowed: bool, lease: &BlockLease, now: Instant) -> Admission {
        if allowed {
            Admission::ADMITTED
        } else {
            Admission::denied(lease, now)
        }
    }
}
