//! What the layer answers itself instead of serving a request, handed to
//! [`super::Builder::error_handler`] with the response it would give.

use crate::reply::AllDecision;
use crate::Error;
use http::Response;
use std::time::Duration;

/// A request the layer answers itself: why, and the response it gives
/// unless an [error handler](super::Builder::error_handler) returns
/// another.
///
/// ```
/// use redis_ratelimit_client::http::{Reason, Rejection};
/// // An error handler that keeps the default header fields of a denial
/// // and says it in the service's own words.
/// fn handle(rejection: Rejection) -> http::Response<String> {
///     match rejection.reason {
///         Reason::Denied(denial) => {
///             let mut response = rejection.response;
///             *response.body_mut() = format!(
///                 "{{\"error\":\"slow down\",\"limit\":\"{}\",\"retry_after_ms\":{}}}",
///                 denial.limit,
///                 denial.retry_after.map_or(-1, |w| w.as_millis() as i64),
///             );
///             response
///         }
///         _ => rejection.response,
///     }
/// }
/// # let _ = handle;
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Rejection {
    /// Why the request is not served.
    pub reason: Reason,
    /// What the layer answers by default: `429` with the `RateLimit`
    /// fields and a problem body, `500` without a key (or what
    /// [`super::Builder::missing_key`] says), `503` while the store is
    /// unavailable, `500` on a store error.
    pub response: Response<String>,
}

/// Why the layer answers a request itself.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Reason {
    /// A limit denied it.
    Denied(Denial),
    /// The key extractor found no key in it.
    MissingKey,
    /// The store did not answer (a connection error or the client's
    /// timeout) and a fail-closed limit refuses.
    Unavailable(Error),
    /// The store answered with an error (a key of another type, a policy
    /// it refuses, a reply this client cannot read): a fault to fix.
    StoreError(Error),
}

/// A denial: which limit decided it, when to come back, and the decision.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Denial {
    /// The name of the limit that decides it (the one with the longest
    /// wait).
    pub limit: String,
    /// The names of every limit that denied it, in the layer's order.
    pub violated: Vec<String>,
    /// The wait until the request would be admitted; `None` when it never
    /// can be (its cost is above a limit) or, in degraded mode, when this
    /// process has no share of the key.
    pub retry_after: Option<Duration>,
    /// What the deciding limit has left (more than 0 when the request's
    /// cost is above it).
    pub remaining: u64,
    /// The decision over every limit, as the store gave it (or a
    /// remembered denial, or a leased block's); `None` in degraded mode.
    pub decision: Option<AllDecision>,
}
