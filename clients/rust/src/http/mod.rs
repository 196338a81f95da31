//! A tower layer (usable with axum) that limits HTTP requests: a key taken
//! from each request, one or several limits decided in one `RL.ALL`, and
//! the README's client contract on every response.
//!
//! ```no_run
//! # fn f() -> Result<(), redis_ratelimit_client::Error> {
//! use redis_ratelimit_client::http::{HeaderKey, HttpLimit, RateLimitLayer};
//! use redis_ratelimit_client::{connect, Client, Gcra, Sliding};
//! use std::time::Duration;
//! let client = Client::new(connect("redis://127.0.0.1/")?).timeout(Duration::from_millis(500));
//! let layer = RateLimitLayer::new(client, HeaderKey::new("x-api-key"))
//!     // The plan a key pays for: refused while it cannot be checked.
//!     .limit(HttpLimit::per_key("per-key", "rl:key:", Gcra::new(10, Duration::from_secs(1))).fail_closed())
//!     // A safety limit for everyone: admits while it cannot be checked.
//!     .limit(HttpLimit::shared("global", "rl:global", Sliding::new(1000, Duration::from_secs(60)).approx()).fail_open());
//! // axum: Router::new().route(...).layer(layer)
//! # Ok(()) }
//! ```

pub mod headers;
mod layer;
mod leases;

pub use headers::{ceil_seconds, header_fields, problem, Named};
pub use layer::{RateLimit, RateLimitLayer};

use crate::{BlockLease, Policy};
use http::request::Parts;
use http::HeaderName;

/// What a limit does when the store cannot answer in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnStoreError {
    /// A safety limit (it protects the service): admit, so that a limiter
    /// outage does not become a service outage.
    FailOpen,
    /// A billed contract (a plan's quota): refuse with `503` rather than
    /// give away what is sold.
    FailClosed,
}

/// Where a limit keeps its state.
#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyOf {
    /// The prefix, then the request's key: one limiter per client.
    PerKey(String),
    /// One limiter for every request.
    Shared(String),
}

/// One limit of the layer: its name in the headers, its key, its policy,
/// what it does when the store cannot answer, and whether it is leased in
/// blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpLimit {
    name: String,
    key: KeyOf,
    policy: Policy,
    on_store_error: OnStoreError,
    lease: Option<BlockLease>,
}

impl HttpLimit {
    /// A limit per request key, stored at `prefix` + the key. Fails closed
    /// unless told otherwise.
    pub fn per_key(
        name: impl Into<String>,
        prefix: impl Into<String>,
        policy: impl Into<Policy>,
    ) -> HttpLimit {
        HttpLimit::with(name, KeyOf::PerKey(prefix.into()), policy)
    }

    /// One limit shared by every request, stored at `key`. Fails closed
    /// unless told otherwise.
    pub fn shared(
        name: impl Into<String>,
        key: impl Into<String>,
        policy: impl Into<Policy>,
    ) -> HttpLimit {
        HttpLimit::with(name, KeyOf::Shared(key.into()), policy)
    }

    fn with(name: impl Into<String>, key: KeyOf, policy: impl Into<Policy>) -> HttpLimit {
        HttpLimit {
            name: name.into(),
            key,
            policy: policy.into(),
            on_store_error: OnStoreError::FailClosed,
            lease: None,
        }
    }

    /// Leases the limit in blocks (see [`crate::blocks`]): each key's
    /// units are taken `k` at a time with `COST k PARTIAL` and admitted
    /// locally, and what is left goes back with `REFUND` when the key is
    /// idle ([`RateLimitLayer::refund_when_idle`]), at shutdown
    /// ([`RateLimitLayer::refund_all`]) and when the layer is dropped.
    /// `lease` is the policy each key starts with, e.g.
    /// `BlockLease::fixed(20)`. The layer's calls share one connection,
    /// which a queued call would hold: its leases take what fits
    /// (`PARTIAL`) and never queue ([`BlockLease::queued`] is ignored
    /// here; [`crate::LeasedLimit::queue_on`] queues on a connection of
    /// its own).
    pub fn leased(mut self, lease: BlockLease) -> HttpLimit {
        self.lease = Some(lease);
        self
    }

    pub fn fail_open(self) -> HttpLimit {
        self.on_store_error(OnStoreError::FailOpen)
    }

    pub fn fail_closed(self) -> HttpLimit {
        self.on_store_error(OnStoreError::FailClosed)
    }

    pub fn on_store_error(mut self, choice: OnStoreError) -> HttpLimit {
        self.on_store_error = choice;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The store key for a request whose key is `request_key`.
    pub fn key_for(&self, request_key: &str) -> String {
        match &self.key {
            KeyOf::PerKey(prefix) => format!("{prefix}{request_key}"),
            KeyOf::Shared(key) => key.clone(),
        }
    }
}

/// Takes the key that requests are limited by (an API key, a user, an IP)
/// from a request; `None` refuses the request (`401` by default). Any
/// `Fn(&Parts) -> Option<String>` is one.
pub trait KeyExtractor: Clone + Send + Sync + 'static {
    fn key(&self, request: &Parts) -> Option<String>;
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<String> + Clone + Send + Sync + 'static,
{
    fn key(&self, request: &Parts) -> Option<String> {
        self(request)
    }
}

/// The value of a request header (non-empty, visible ASCII) as the key.
#[derive(Clone, Debug)]
pub struct HeaderKey(HeaderName);

impl HeaderKey {
    /// # Panics
    /// If `name` is not a valid header name (a constant in practice).
    pub fn new(name: &'static str) -> HeaderKey {
        HeaderKey(HeaderName::from_static(name))
    }
}

impl KeyExtractor for HeaderKey {
    fn key(&self, request: &Parts) -> Option<String> {
        request
            .headers
            .get(&self.0)
            .and_then(|v| v.to_str().ok())
            .filter(|k| !k.is_empty())
            .map(str::to_string)
    }
}
