//! A tower layer (usable with axum) that limits HTTP requests: a key taken
//! from each request, one or several limits decided in one `RL.ALL`, and
//! the README's client contract on every response.
//!
//! ```no_run
//! # fn f() -> Result<(), redis_ratelimit_client::Error> {
//! use redis_ratelimit_client::http::{HeaderKey, HttpLimit, RedisRateLimitLayer};
//! use redis_ratelimit_client::{connect, Client, Gcra, Sliding};
//! use http::HeaderName;
//! use std::time::Duration;
//! let client = Client::new(connect("redis://127.0.0.1/")?); // 300 ms timeout by default
//! let layer = RedisRateLimitLayer::builder(client, HeaderKey::new(HeaderName::from_static("x-api-key")))
//!     // The plan a key pays for: refused while it cannot be checked.
//!     .limit(HttpLimit::per_key(Gcra::new(10, Duration::from_secs(1))).name("per-key").prefix("rl:key:"))
//!     // A safety limit for everyone: admits while it cannot be checked.
//!     .limit(HttpLimit::shared(Sliding::new(1000, Duration::from_secs(60)).approx()).name("global").fail_open())
//!     // Without an API key: the caller's fault (the default, 500, is for a
//!     // layer that cannot key its requests).
//!     .missing_key(http::StatusCode::UNAUTHORIZED, "missing X-Api-Key\n")
//!     .build()?;
//! // axum: Router::new().route(...).layer(layer)
//! # Ok(()) }
//! ```
//!
//! **Compared with tower_governor.** tower_governor limits in the
//! process's memory; this layer limits in Redis, so every process of a
//! service shares one count. The pieces correspond:
//!
//! | tower_governor | here |
//! |---|---|
//! | `GovernorLayer` / `Governor` | [`RedisRateLimitLayer`] / [`RedisRateLimit`] |
//! | `GovernorConfigBuilder::default().per_second(..).burst_size(..).finish()` | `RedisRateLimitLayer::builder(client, key).limit(HttpLimit::per_key(Gcra::new(..).burst(..))).build()` |
//! | `KeyExtractor` (typed keys) | [`KeyExtractor`] (its `Key: Display`); any `Fn(&Parts) -> Option<T>` |
//! | `PeerIpKeyExtractor`, `SmartIpKeyExtractor`, `GlobalKeyExtractor` | [`PeerIp`], [`SmartIp`] (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`, the peer), [`GlobalKey`]; and [`HeaderKey`] |
//! | `.methods(..)` | [`Builder::methods`]: other methods pass without a round trip |
//! | `.use_headers()` (`x-ratelimit-*`) | [`Builder::legacy_headers`]; the IETF draft's `RateLimit-Policy`, `RateLimit`, `Retry-After` are on by default ([`Builder::headers`]) |
//! | `.error_handler(\|err: GovernorError\| ..)` | [`Builder::error_handler`]`(\|rejection: Rejection\| response)`, any `http::Response` (with axum, `.into_response()` of any `IntoResponse`): the [`Reason`] (a [`Denial`] with the deciding limit's name, `retry_after`, `remaining` and the decision; a missing key; the store unavailable or in error) and the default response to keep or replace |
//! | no key: `500` | no key: `500` unless [`Builder::missing_key`] says otherwise |
//! | every request costs 1 | [`Builder::cost`]`(\|request: &Parts\| n)`, 0 free |
//! | — | [`Builder::on_error`] (every store error, for the log), the [`crate::AllDecision`] in each served request's extensions |
//! | — (one process's memory) | fail-open / fail-closed per limit, degraded mode, deny cache, block leasing |
//!
//! What the store cannot answer: a limit admits ([`HttpLimit::fail_open`])
//! or refuses with `503` ([`HttpLimit::fail_closed`], the default) only
//! while the store is unavailable (a connection error or the client's
//! timeout); any other error (a key of another type, a policy the server
//! refuses) is a `500`, and a policy the server would refuse is an error
//! of [`Builder::build`].

pub mod headers;
mod keys;
mod layer;
mod leases;
mod rejection;

pub use headers::{ceil_seconds, header_fields, legacy_fields, problem, Named};
pub use keys::{GlobalKey, HeaderKey, KeyExtractor, PeerIp, SmartIp};
pub use layer::{
    Builder, RedisRateLimit, RedisRateLimitLayer, DEFAULT_HOT_KEYS_COUNT, DEFAULT_HOT_KEYS_POLL,
    DEFAULT_HOT_KEYS_RATE, DEFAULT_LEASE_CAPACITY,
};
pub use rejection::{Denial, Reason, Rejection};

use crate::{LeasePlan, Policy};

/// What a limit does when the store cannot answer in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// One limiter for every request (by default at `rl:shared:` + the
    /// limit's name).
    Shared(Option<String>),
}

/// One limit of the layer: its name in the headers, its key, its policy,
/// what it does when the store cannot answer, and whether it is leased in
/// blocks.
///
/// ```
/// use redis_ratelimit_client::http::HttpLimit;
/// use redis_ratelimit_client::Gcra;
/// use std::time::Duration;
/// let plan = HttpLimit::per_key(Gcra::new(10, Duration::from_secs(1)))
///     .name("per-key")
///     .prefix("rl:key:");
/// assert_eq!(plan.key_for("alice"), "rl:key:alice");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct HttpLimit {
    name: String,
    key: KeyOf,
    policy: Policy,
    on_store_error: OnStoreError,
    lease: Option<LeasePlan>,
    /// Leased only while the server names the key hot.
    when_hot: bool,
}

impl HttpLimit {
    /// A limit per request key, stored at the prefix (default `"rl:"`) +
    /// the key, named `"default"` in the headers until
    /// [`HttpLimit::name`]. Fails closed unless told otherwise.
    pub fn per_key(policy: impl Into<Policy>) -> HttpLimit {
        HttpLimit::with(KeyOf::PerKey("rl:".into()), policy)
    }

    /// One limit shared by every request, stored at `rl:shared:` + its
    /// name unless [`HttpLimit::key`] says otherwise. Fails closed unless
    /// told otherwise.
    pub fn shared(policy: impl Into<Policy>) -> HttpLimit {
        HttpLimit::with(KeyOf::Shared(None), policy)
    }

    fn with(key: KeyOf, policy: impl Into<Policy>) -> HttpLimit {
        HttpLimit {
            name: "default".into(),
            key,
            policy: policy.into(),
            on_store_error: OnStoreError::FailClosed,
            lease: None,
            when_hot: false,
        }
    }

    /// Its name in the header fields and the problem body: a token
    /// (letters, digits, `-`, `_`, ...), checked by
    /// [`Builder::build`].
    pub fn name(mut self, name: impl Into<String>) -> HttpLimit {
        self.name = name.into();
        self
    }

    /// A per-key limit's prefix: the store key is the prefix + the
    /// request's key. (For a shared limit, the key itself.)
    pub fn prefix(mut self, prefix: impl Into<String>) -> HttpLimit {
        self.key = match self.key {
            KeyOf::PerKey(_) => KeyOf::PerKey(prefix.into()),
            KeyOf::Shared(_) => KeyOf::Shared(Some(prefix.into())),
        };
        self
    }

    /// A shared limit's store key. (For a per-key limit, its prefix.)
    pub fn key(self, key: impl Into<String>) -> HttpLimit {
        self.prefix(key)
    }

    /// Leases the limit in blocks (see [`crate::blocks`]): each key's
    /// units are taken `k` at a time with `COST k PARTIAL` and admitted
    /// locally, one call out per key at a time (the requests that find
    /// the block spent wait in line for its units, first come first
    /// served), and what is left goes back with
    /// `REFUND` when the key is idle
    /// ([`RedisRateLimitLayer::refund_when_idle`]), at shutdown
    /// ([`RedisRateLimitLayer::refund_all`]) and when the layer is
    /// dropped. `plan` is how each key is leased, e.g.
    /// `LeasePlan::fixed(20)`. The layer's calls share one connection,
    /// which a queued call would hold: its leases take what fits
    /// (`PARTIAL`) and never queue ([`LeasePlan::queued`] is ignored
    /// here; [`crate::LeasedLimit::queue_on`] queues on a connection of
    /// its own).
    pub fn leased(mut self, plan: LeasePlan) -> HttpLimit {
        self.lease = Some(plan);
        self.when_hot = false;
        self
    }

    /// Leases the limit in blocks as [`HttpLimit::leased`] does, but only
    /// the keys the server names hot (`RL.HOTKEYS`, on unless the
    /// operator sets `ratelimit.hot-key-counters` to 0): the layer polls the list
    /// ([`RedisRateLimitLayer::follow_hot_keys`], or one poll with
    /// [`RedisRateLimitLayer::refresh_hot_keys`]), a listed key turns hot
    /// once it surely takes [`Builder::hot_keys`]' rate, stays hot while
    /// listed at a rate that may still reach it (counting a block per
    /// decision), and once it drops out gives its block's units
    /// back. Every other key is decided per request by the store.
    pub fn leased_when_hot(mut self, plan: LeasePlan) -> HttpLimit {
        self.lease = Some(plan);
        self.when_hot = true;
        self
    }

    /// Admits while the store is unavailable: for a safety limit.
    pub fn fail_open(self) -> HttpLimit {
        self.on_store_error(OnStoreError::FailOpen)
    }

    /// Refuses with `503` while the store is unavailable (the default): for
    /// a limit that is sold.
    pub fn fail_closed(self) -> HttpLimit {
        self.on_store_error(OnStoreError::FailClosed)
    }

    /// What the limit does while the store is unavailable.
    pub fn on_store_error(mut self, choice: OnStoreError) -> HttpLimit {
        self.on_store_error = choice;
        self
    }

    /// Its name in the headers.
    pub fn name_str(&self) -> &str {
        &self.name
    }

    /// Its policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The store key for a request whose key is `request_key`.
    pub fn key_for(&self, request_key: &str) -> String {
        match &self.key {
            KeyOf::PerKey(prefix) => format!("{prefix}{request_key}"),
            KeyOf::Shared(Some(key)) => key.clone(),
            KeyOf::Shared(None) => format!("rl:shared:{}", self.name),
        }
    }
}
