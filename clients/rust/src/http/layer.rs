//! The layer and its service: one `RL.ALL` per request (or a remembered
//! denial), the contract's headers on every response, `429` with a problem
//! body, `503` or admission when the store cannot answer.

use super::headers::{deciding, header_fields, legacy_fields, problem, Named};
use super::leases::{Follow, Leases, Outcome};
use super::rejection::{Denial, Reason, Rejection};
use super::{HttpLimit, KeyExtractor, OnStoreError};
use crate::blocks::{BlockLease, Flight, MOST_WAITS};
use crate::command::All;
use crate::degraded::Shares;
use crate::deny_cache::DenyCache;
use crate::reply::{AllDecision, Decision};
use crate::{Client, Error};
use http::request::Parts;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use redis::aio::ConnectionManager;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

type ErrorHook = Arc<dyn Fn(&Error) + Send + Sync>;
type CostOf = Arc<dyn Fn(&Parts) -> u64 + Send + Sync>;
type ErrorHandler<B> = Arc<dyn Fn(Rejection) -> Response<B> + Send + Sync>;

/// How many keys' block leases a layer keeps unless told otherwise.
pub const DEFAULT_LEASE_CAPACITY: usize = 10_000;

/// How many hot keys a layer asks the server for unless told otherwise.
pub const DEFAULT_HOT_KEYS_COUNT: usize = 10;

/// The decisions a second at which a listed key turns hot unless told
/// otherwise.
pub const DEFAULT_HOT_KEYS_RATE: u64 = 100;

/// How often [`RedisRateLimitLayer::follow_hot_keys`] polls unless told
/// otherwise.
pub const DEFAULT_HOT_KEYS_POLL: Duration = Duration::from_secs(1);

struct Config<K, C> {
    client: Client<C>,
    extractor: K,
    limits: Vec<HttpLimit>,
    named: Vec<Named>,
    /// Each limit's words, the deny cache's name for it.
    words: Vec<String>,
    wait: Option<Duration>,
    /// `JITTER` on every call: a denial's `Retry-After` spread.
    jitter: bool,
    deny_cache: Option<Arc<DenyCache>>,
    /// The request keys whose call is out while the deny cache holds a
    /// denial on them: the requests behind it wait for its answer.
    probes: Arc<Mutex<HashMap<String, Arc<Flight>>>>,
    shares: Option<Arc<Mutex<Shares>>>,
    /// The block leases of the leased limits, if any is.
    leases: Option<Arc<Leases<C>>>,
    lease_capacity: usize,
    /// How the limits leased while hot follow the server's hot keys.
    follow: Follow,
    missing_key: (StatusCode, &'static str),
    on_error: Option<ErrorHook>,
    headers: bool,
    legacy_headers: bool,
    /// The methods limited; every method when `None`.
    methods: Option<Vec<Method>>,
    /// The units a request costs; 1 when `None`.
    cost: Option<CostOf>,
}

/// Limits every request of the service it wraps: a key taken from each
/// request, one or several limits decided in one `RL.ALL` (or from leased
/// blocks), the `RateLimit` header fields on every response, `429` with a
/// problem body. Built with [`RedisRateLimitLayer::builder`]; clones
/// share the connection, the deny cache and the leases.
///
/// ```no_run
/// # async fn f() -> Result<(), redis_ratelimit_client::Error> {
/// use redis_ratelimit_client::http::{HeaderKey, HttpLimit, RedisRateLimitLayer};
/// use redis_ratelimit_client::{connect, Client, Gcra};
/// use std::time::Duration;
/// let client = Client::new(connect("redis://127.0.0.1/")?);
/// let layer = RedisRateLimitLayer::builder(client, HeaderKey::new(http::HeaderName::from_static("x-api-key")))
///     .limit(HttpLimit::per_key(Gcra::new(10, Duration::from_secs(1))).name("per-key").prefix("rl:key:"))
///     .deny_cache(10_000)
///     .build()?;
/// // axum: Router::new().route("/", get(handler)).layer(layer)
/// # Ok(()) }
/// ```
///
/// `B` is the body of the responses the layer gives itself (`String`
/// unless [`Builder::error_handler`] returns another): the wrapped
/// service's response body must be `From<B>`.
#[non_exhaustive]
pub struct RedisRateLimitLayer<K, C = ConnectionManager, B = String> {
    config: Arc<Config<K, C>>,
    handler: ErrorHandler<B>,
}

impl<K, C, B> Clone for RedisRateLimitLayer<K, C, B> {
    fn clone(&self) -> Self {
        RedisRateLimitLayer {
            config: Arc::clone(&self.config),
            handler: Arc::clone(&self.handler),
        }
    }
}

/// Builds a [`RedisRateLimitLayer`]: its limits and options, checked by
/// [`Builder::build`].
#[must_use = "a builder does nothing until built"]
#[non_exhaustive]
pub struct Builder<K, C = ConnectionManager, B = String> {
    config: Config<K, C>,
    handler: ErrorHandler<B>,
}

impl<K, C, B> Builder<K, C, B>
where
    K: KeyExtractor,
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Adds a limit; every request must pass all of them, decided in one
    /// `RL.ALL` (in a cluster, their keys must share a hash slot).
    pub fn limit(mut self, limit: HttpLimit) -> Builder<K, C, B> {
        self.config.limits.push(limit);
        self
    }

    /// Keeps the block leases of at most `capacity` keys (default
    /// [`DEFAULT_LEASE_CAPACITY`]); the least recently used gives way, its
    /// units refunded at the next idle sweep.
    pub fn lease_capacity(mut self, capacity: usize) -> Builder<K, C, B> {
        self.config.lease_capacity = capacity;
        self
    }

    /// For limits leased while hot ([`HttpLimit::leased_when_hot`]): a
    /// key among the `count` hottest listed (1 to 1000; default
    /// [`DEFAULT_HOT_KEYS_COUNT`]) turns hot once its rate less its error
    /// is at least `per_second` decisions a second (default
    /// [`DEFAULT_HOT_KEYS_RATE`]). Leased, a key makes one decision per
    /// block: each poll asks for `count` × the block keys (at most 1000),
    /// and a hot key stays hot while listed there at a rate that, with its
    /// error and a block per decision, may still reach `per_second`, or
    /// while this process asked it for a block since the last poll.
    pub fn hot_keys(mut self, count: usize, per_second: u64) -> Builder<K, C, B> {
        self.config.follow = Follow {
            count: count.clamp(1, 1000),
            min_per_second: per_second,
        };
        self
    }

    /// Queues a request on the server for up to `timeout` (`WAIT`) before
    /// denying it; the client's timeout is added to the wait.
    pub fn wait(mut self, timeout: Duration) -> Builder<K, C, B> {
        self.config.wait = Some(timeout);
        self
    }

    /// `JITTER` on every call: a denial's `retry_after` (and so its
    /// `Retry-After`) is spread by the server over the time the key needs
    /// to admit the clients it denied recently, never earlier than the
    /// true wait, so that clients denied together do not come back
    /// together.
    pub fn jitter(mut self) -> Builder<K, C, B> {
        self.config.jitter = true;
        self
    }

    /// Remembers up to `capacity` denials: until a denied limit's
    /// `retry_after` has passed, its key is denied without a round trip,
    /// and while a request on a key so denied is out, the requests on the
    /// same key wait for its answer instead of asking too. For GCRA and
    /// token-bucket limits the denial is paced: each later admission of
    /// this layer moves it on by the time one unit takes, so a key offered
    /// more than its limit reaches the store about once per admission (see
    /// [`crate::deny_cache`]).
    pub fn deny_cache(mut self, capacity: usize) -> Builder<K, C, B> {
        self.config.deny_cache = Some(Arc::new(DenyCache::new(capacity)));
        self
    }

    /// Degraded mode: while the store does not answer (a timeout or a
    /// connection error), each fail-closed limit is enforced locally at
    /// its rate times this process's share of the key's recent traffic
    /// (tracked for up to `capacity` keys: between two of the store's
    /// replies on a key, what everyone used against what this process
    /// charged; a key never answered has no share and is refused), and
    /// fail-open limits admit. A denial there is a `429` with
    /// `Retry-After`; an admission carries no `RateLimit` fields. The next
    /// answer from the store ends it.
    pub fn degraded(mut self, capacity: usize) -> Builder<K, C, B> {
        self.config.shares = Some(Arc::new(Mutex::new(Shares::new(capacity))));
        self
    }

    /// The status and body for a request the key extractor finds no key
    /// in (default `500`: a layer that cannot key its requests is
    /// misconfigured; say `401` where the key is the caller's to give, such
    /// as an API key).
    pub fn missing_key(mut self, status: StatusCode, body: &'static str) -> Builder<K, C, B> {
        self.config.missing_key = (status, body);
        self
    }

    /// Called with each store error (for the log). Responses never carry
    /// the store's words: they name keys.
    pub fn on_error(mut self, hook: impl Fn(&Error) + Send + Sync + 'static) -> Builder<K, C, B> {
        self.config.on_error = Some(Arc::new(hook));
        self
    }

    /// Whether responses carry the `RateLimit-Policy`, `RateLimit` and
    /// `Retry-After` fields (default `true`).
    pub fn headers(mut self, on: bool) -> Builder<K, C, B> {
        self.config.headers = on;
        self
    }

    /// Whether responses also carry the older `x-ratelimit-limit`,
    /// `x-ratelimit-remaining`, `x-ratelimit-reset` and, on a denial,
    /// `x-ratelimit-after` fields (default `false`; see
    /// [`super::legacy_fields`]).
    pub fn legacy_headers(mut self, on: bool) -> Builder<K, C, B> {
        self.config.legacy_headers = on;
        self
    }

    /// Limits only requests of these methods; the others are served
    /// without a round trip, a key or header fields (default: every
    /// method).
    ///
    /// ```no_run
    /// # fn f(client: redis_ratelimit_client::Client) -> Result<(), redis_ratelimit_client::Error> {
    /// use redis_ratelimit_client::http::{HttpLimit, RedisRateLimitLayer, SmartIp};
    /// use redis_ratelimit_client::Gcra;
    /// use std::time::Duration;
    /// // Writes only: 10 a minute per client address.
    /// let layer = RedisRateLimitLayer::builder(client, SmartIp)
    ///     .limit(HttpLimit::per_key(Gcra::new(10, Duration::from_secs(60))))
    ///     .methods([http::Method::POST, http::Method::PUT, http::Method::DELETE])
    ///     .build()?;
    /// # let _ = layer; Ok(()) }
    /// ```
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Builder<K, C, B> {
        self.config.methods = Some(methods.into_iter().collect());
        self
    }

    /// The units each request costs, computed from it (default 1): every
    /// limit of the layer charges it (`COST n`). A cost of 0 is admitted in
    /// any state and charges nothing (it still reports the limits' state,
    /// except on leased limits, which answer it from their blocks without a
    /// round trip). On a leased limit a cost up to the block's size is
    /// taken from the block; a larger one is decided by the store
    /// directly, leaving the block to smaller requests. The deny cache
    /// denies locally only requests costing at least what the store denied.
    ///
    /// ```no_run
    /// # fn f(client: redis_ratelimit_client::Client) -> Result<(), redis_ratelimit_client::Error> {
    /// use redis_ratelimit_client::http::{HeaderKey, HttpLimit, RedisRateLimitLayer};
    /// use redis_ratelimit_client::Gcra;
    /// use std::time::Duration;
    /// // 1,000 units a minute per key; an upload costs 10, a HEAD nothing.
    /// let layer = RedisRateLimitLayer::builder(client, HeaderKey::new(http::HeaderName::from_static("x-api-key")))
    ///     .limit(HttpLimit::per_key(Gcra::new(1000, Duration::from_secs(60))))
    ///     .cost(|request: &http::request::Parts| match request.method {
    ///         http::Method::HEAD => 0,
    ///         http::Method::POST if request.uri.path() == "/upload" => 10,
    ///         _ => 1,
    ///     })
    ///     .build()?;
    /// # let _ = layer; Ok(()) }
    /// ```
    pub fn cost(
        mut self,
        cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static,
    ) -> Builder<K, C, B> {
        self.config.cost = Some(Arc::new(cost));
        self
    }

    /// Maps each request the layer answers itself (a denial, a request
    /// without a key, the store unavailable or in error: a [`Rejection`],
    /// with the response the layer would give) to the response it gets.
    /// Without one, that default response is given: `429` with the
    /// `RateLimit` fields and a problem body, `500` without a key, `503`
    /// or `500`. The handler may return any `http::Response<T>` whose body
    /// the service's converts from (`T` = `String`, or with axum
    /// `.into_response()` of any `IntoResponse`).
    ///
    /// ```no_run
    /// # fn f(client: redis_ratelimit_client::Client) -> Result<(), redis_ratelimit_client::Error> {
    /// use redis_ratelimit_client::http::{HeaderKey, HttpLimit, Reason, RedisRateLimitLayer};
    /// use redis_ratelimit_client::Gcra;
    /// use std::time::Duration;
    /// let layer = RedisRateLimitLayer::builder(client, HeaderKey::new(http::HeaderName::from_static("x-api-key")))
    ///     .limit(HttpLimit::per_key(Gcra::new(10, Duration::from_secs(1))).name("per-key"))
    ///     .error_handler(|rejection| match rejection.reason {
    ///         // Keep the status and header fields, answer in plain text.
    ///         Reason::Denied(denial) => {
    ///             let mut response = rejection.response;
    ///             *response.body_mut() = format!("limit {} reached\n", denial.limit);
    ///             response.headers_mut().insert(
    ///                 http::header::CONTENT_TYPE,
    ///                 http::HeaderValue::from_static("text/plain"),
    ///             );
    ///             response
    ///         }
    ///         // A store error is the service's fault: say so in its words.
    ///         Reason::StoreError(_) => http::Response::builder()
    ///             .status(http::StatusCode::SERVICE_UNAVAILABLE)
    ///             .body("try again later\n".to_string())
    ///             .unwrap_or_default(),
    ///         _ => rejection.response,
    ///     })
    ///     .build()?;
    /// # let _ = layer; Ok(()) }
    /// ```
    pub fn error_handler<T>(
        self,
        handler: impl Fn(Rejection) -> Response<T> + Send + Sync + 'static,
    ) -> Builder<K, C, T> {
        Builder {
            config: self.config,
            handler: Arc::new(handler),
        }
    }

    /// The layer, once every limit's policy is one the server takes
    /// ([`crate::Policy::validate`]) and a rate limit (a `Concurrency`
    /// policy needs releasing when the request ends: use
    /// [`Client::acquire`]), with at least one limit.
    pub fn build(mut self) -> Result<RedisRateLimitLayer<K, C, B>, Error> {
        if self.config.limits.is_empty() {
            return Err(Error::Config("a layer needs at least one limit".into()));
        }
        for limit in &self.config.limits {
            limit.policy.validate()?;
            let quota = limit.policy.quota().ok_or_else(|| {
                Error::Config(format!(
                    "limit \"{}\": the layer takes rate limits, not concurrency limits",
                    limit.name
                ))
            })?;
            if !super::headers::is_token(&limit.name) {
                return Err(Error::Config(format!(
                    "limit name \"{}\": a header token (letters, digits, !#$%&'*+-.^_`|~) is needed",
                    limit.name.escape_default()
                )));
            }
            self.config.named.push(Named {
                name: limit.name.clone(),
                quota,
            });
            self.config.words.push(limit.policy.to_string());
        }
        self.config.renew_leases();
        Ok(RedisRateLimitLayer {
            config: Arc::new(self.config),
            handler: self.handler,
        })
    }
}

impl<K, C> RedisRateLimitLayer<K, C>
where
    K: KeyExtractor,
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A builder of a layer whose requests are limited by the key
    /// `extractor` takes from them, through `client` (whose timeout bounds
    /// each call; [`crate::DEFAULT_TIMEOUT`] unless set).
    pub fn builder(client: Client<C>, extractor: K) -> Builder<K, C> {
        Builder {
            config: Config {
                client,
                extractor,
                limits: Vec::new(),
                named: Vec::new(),
                words: Vec::new(),
                wait: None,
                jitter: false,
                deny_cache: None,
                probes: Arc::default(),
                shares: None,
                leases: None,
                lease_capacity: DEFAULT_LEASE_CAPACITY,
                follow: Follow {
                    count: DEFAULT_HOT_KEYS_COUNT,
                    min_per_second: DEFAULT_HOT_KEYS_RATE,
                },
                missing_key: (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "no rate-limit key in the request\n",
                ),
                on_error: None,
                headers: true,
                legacy_headers: false,
                methods: None,
                cost: None,
            },
            handler: Arc::new(|rejection: Rejection| rejection.response),
        }
    }
}

impl<K, C, B> RedisRateLimitLayer<K, C, B>
where
    K: KeyExtractor,
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A task (on the current tokio runtime) that refunds the units of
    /// leased keys unused for `idle`, checking twice per `idle`; `None`
    /// without leased limits. It holds the layer's leases weakly and ends
    /// once the layer is dropped.
    pub fn refund_when_idle(&self, idle: Duration) -> Option<tokio::task::JoinHandle<()>> {
        Some(self.config.leases.as_ref()?.refund_when_idle(idle))
    }

    /// Refunds the units of leased keys unused for `idle`.
    pub async fn refund_idle(&self, idle: Duration) -> Result<(), Error> {
        match &self.config.leases {
            Some(leases) => leases.refund_idle(idle).await,
            None => Ok(()),
        }
    }

    /// Refunds every unit the leased limits hold (at shutdown; dropping
    /// the last clone of the layer does it in the background).
    pub async fn refund_all(&self) -> Result<(), Error> {
        match &self.config.leases {
            Some(leases) => leases.refund_all().await,
            None => Ok(()),
        }
    }

    /// A task (on the current tokio runtime) that polls the server's hot
    /// keys every `every` (default [`DEFAULT_HOT_KEYS_POLL`]; one call each,
    /// backing off up to 16 times that while the store fails), for the
    /// limits leased while hot; `None` without such limits. It holds the
    /// layer's leases weakly and ends once the layer is dropped.
    pub fn follow_hot_keys(&self, every: Duration) -> Option<tokio::task::JoinHandle<()>> {
        let leases = self.config.leases.as_ref()?;
        leases.follows_hot_keys().then(|| leases.follow_hot(every))
    }

    /// One poll of the server's hot keys (`RL.HOTKEYS COUNT n`): the keys
    /// that turned hot are leased from their next request, the units of
    /// those that cooled are refunded.
    pub async fn refresh_hot_keys(&self) -> Result<(), Error> {
        match &self.config.leases {
            Some(leases) if leases.follows_hot_keys() => leases.refresh_hot().await,
            _ => Ok(()),
        }
    }

    /// The keys the layer leases as hot now (as `RL.HOTKEYS` shows them).
    pub fn hot_keys(&self) -> Vec<String> {
        self.config
            .leases
            .as_ref()
            .map_or_else(Vec::new, |l| l.hot_keys())
    }

    /// Units the leased limits hold now.
    pub fn leased_units(&self) -> u64 {
        self.config.leases.as_ref().map_or(0, |l| l.held())
    }

    /// The deny cache, for its counter of round trips saved.
    pub fn deny_cache(&self) -> Option<&DenyCache> {
        self.config.deny_cache.as_deref()
    }
}

impl<S, K, C, B> tower_layer::Layer<S> for RedisRateLimitLayer<K, C, B> {
    type Service = RedisRateLimit<S, K, C, B>;

    fn layer(&self, inner: S) -> RedisRateLimit<S, K, C, B> {
        RedisRateLimit {
            inner,
            config: self.config.clone(),
            handler: self.handler.clone(),
        }
    }
}

/// The service [`RedisRateLimitLayer`] wraps around another.
#[non_exhaustive]
pub struct RedisRateLimit<S, K, C = ConnectionManager, B = String> {
    inner: S,
    config: Arc<Config<K, C>>,
    handler: ErrorHandler<B>,
}

impl<S: Clone, K, C, B> Clone for RedisRateLimit<S, K, C, B> {
    fn clone(&self) -> Self {
        RedisRateLimit {
            inner: self.inner.clone(),
            config: Arc::clone(&self.config),
            handler: Arc::clone(&self.handler),
        }
    }
}

/// What the limiter decided for a request.
enum Verdict {
    /// Serve it, adding these header fields (and the decision, when the
    /// store gave one, to the request's extensions).
    Serve(Vec<(&'static str, String)>, Option<AllDecision>),
    /// Answer it without serving it (through the error handler).
    Answer(Rejection),
}

impl<K, C> Config<K, C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Leases anew for the current limits (nothing is held yet: the layer
    /// is being built).
    fn renew_leases(&mut self) {
        let policies: Vec<_> = self
            .limits
            .iter()
            .map(|l| {
                l.lease
                    .map(|plan| (l.policy, BlockLease::from(plan.unqueued())))
            })
            .collect();
        let when_hot = self.limits.iter().map(|l| l.when_hot).collect();
        self.leases = policies.iter().any(Option::is_some).then(|| {
            Arc::new(Leases::new(
                self.client.clone(),
                policies,
                when_hot,
                self.follow,
                self.lease_capacity,
            ))
        });
    }
}

impl<K, C> Config<K, C>
where
    K: KeyExtractor,
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    fn is_leased(&self, index: usize, key: &str) -> bool {
        self.leases
            .as_ref()
            .is_some_and(|l| l.is_leased(index, key))
    }

    /// Whether a request of `cost` on the limit at `index` is decided from
    /// the limit's leased blocks.
    fn decided_by_blocks(&self, index: usize, key: &str, cost: u64) -> bool {
        self.leases
            .as_ref()
            .is_some_and(|l| l.takes(index, key, cost))
    }

    async fn decide(&self, request: &Parts) -> Verdict {
        if let Some(methods) = &self.methods {
            if !methods.contains(&request.method) {
                return Verdict::Serve(Vec::new(), None);
            }
        }
        // Formatted at once: a typed key need not be `Send`.
        let Some(request_key) = self.extractor.key(request).map(|k| k.to_string()) else {
            let (status, body) = self.missing_key;
            return self.answer(Reason::MissingKey, status, body.to_string(), Vec::new());
        };
        let cost = self.cost.as_ref().map_or(1, |cost| cost(request));
        let keys: Vec<String> = self
            .limits
            .iter()
            .map(|l| l.key_for(&request_key))
            .collect();
        // Held until the decision is remembered: the requests on a denied
        // key that wait for this one then read the cache again.
        let mut _probe = None;
        for _ in 0..MOST_WAITS {
            match self.probe(&request_key, &keys, cost) {
                Asking::Denied(denied) => return self.denial(&denied),
                Asking::Go(probe) => {
                    _probe = probe;
                    break;
                }
                Asking::Wait(flight) => {
                    let _ = flight.wait(self.client.bound(Duration::ZERO)).await;
                }
            }
        }
        // The leased limits first: most requests take a unit from a block.
        let mut decided: Vec<Option<Decision>> = vec![None; keys.len()];
        let mut taken = None;
        if let Some(leases) = &self.leases {
            match leases.admit(&keys, cost).await {
                Outcome::Admitted(units) => {
                    for (i, d) in units.decisions() {
                        decided[i] = Some(d.clone());
                    }
                    taken = Some(units);
                }
                Outcome::Denied(i, d) => return self.denial(&only(i, d, keys.len())),
                Outcome::Failed(e) => return self.store_error(&e, &keys, cost),
            }
        }
        let asked: Vec<usize> = (0..keys.len())
            .filter(|&i| !self.decided_by_blocks(i, &keys[i], cost))
            .collect();
        if asked.is_empty() {
            let limits = decided
                .into_iter()
                .map(|d| d.unwrap_or_else(unasked))
                .collect();
            let decision = AllDecision {
                allowed: true,
                blocked_by: None,
                retry_after: None,
                limits,
            };
            if let Some(units) = taken {
                units.keep();
            }
            return self.serve(decision);
        }
        let mut call = All::new();
        for &i in &asked {
            call = call.limit(keys[i].clone(), self.limits[i].policy);
        }
        if cost != 1 {
            call = call.cost(cost);
        }
        if let Some(wait) = self.wait {
            call = call.wait(wait);
        }
        if self.jitter {
            call = call.jitter();
        }
        // Dropped before the answer (the request's future dropped), the
        // units taken go back.
        let reply = match self.client.send(&call).await {
            Ok(reply) => reply,
            Err(e) => return self.store_error(&e, &keys, cost),
        };
        for (&i, d) in asked.iter().zip(reply.limits) {
            decided[i] = Some(d);
        }
        let decision = AllDecision {
            allowed: reply.allowed,
            blocked_by: reply.blocked_by.and_then(|b| asked.get(b).copied()),
            retry_after: reply.retry_after,
            limits: decided
                .into_iter()
                .map(|d| d.unwrap_or_else(unasked))
                .collect(),
        };
        self.observe(&keys, &decision, cost);
        if decision.allowed {
            if let Some(units) = taken {
                units.keep();
            }
            self.admitted(&keys, &asked, cost);
            self.serve(decision)
        } else {
            self.remember(&keys, &decision, cost);
            self.denial(&decision)
        }
    }

    fn serve(&self, decision: AllDecision) -> Verdict {
        Verdict::Serve(self.fields(&decision), Some(decision))
    }

    /// The header fields the layer is set to give for a decision.
    fn fields(&self, decision: &AllDecision) -> Vec<(&'static str, String)> {
        let mut fields = Vec::new();
        if self.headers {
            fields = header_fields(decision, &self.named);
        }
        if self.legacy_headers {
            fields.extend(legacy_fields(decision, &self.named));
        }
        fields
    }

    /// Whether this request may ask the store: denied by a remembered
    /// denial; at once when the deny cache holds no recent denial on its
    /// keys; as the one request out for the key (the guard, held until its
    /// answer is remembered); or after the request out for the key.
    fn probe(&self, request_key: &str, keys: &[String], cost: u64) -> Asking {
        let Some(cache) = &self.deny_cache else {
            return Asking::Go(None);
        };
        if let Some(denied) = self.remembered_denial(keys, cost) {
            return Asking::Denied(denied);
        }
        let recently_denied = |now| {
            keys.iter()
                .zip(&self.words)
                .any(|(k, w)| cache.recently_denied(k, w, now))
        };
        if !recently_denied(Instant::now()) {
            return Asking::Go(None);
        }
        // Again under the lock: the request out remembers its answer
        // before it leaves the map.
        let mut probes = self.probes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(denied) = self.remembered_denial(keys, cost) {
            return Asking::Denied(denied);
        }
        if let Some(flight) = probes.get(request_key) {
            return Asking::Wait(Arc::clone(flight));
        }
        let flight = Flight::new();
        probes.insert(request_key.to_string(), Arc::clone(&flight));
        Asking::Go(Some(Probe {
            probes: Arc::clone(&self.probes),
            key: request_key.to_string(),
            flight,
        }))
    }

    fn store_error(&self, e: &Error, keys: &[String], cost: u64) -> Verdict {
        if let Some(hook) = &self.on_error {
            hook(e);
        }
        if !e.is_unavailable() {
            // The store answered with an error (a key of another type, a
            // policy it refuses, a reply this client cannot read): a fault
            // to fix, not an outage to ride out.
            return self.answer(
                Reason::StoreError(e.clone()),
                StatusCode::INTERNAL_SERVER_ERROR,
                "rate limiter error\n".into(),
                Vec::new(),
            );
        }
        match &self.shares {
            Some(shares) => self.decide_locally(shares, keys, cost),
            None => self.unavailable(e),
        }
    }

    fn denial(&self, decision: &AllDecision) -> Verdict {
        let (i, retry_after) = match deciding(decision) {
            Some((i, wait)) => (i, Some(wait)),
            None => (decision.blocked_by.unwrap_or(0), None),
        };
        let violated = self
            .named
            .iter()
            .zip(&decision.limits)
            .filter(|(_, d)| !d.allowed)
            .map(|(l, _)| l.name.clone())
            .collect();
        let denial = Denial {
            limit: self
                .named
                .get(i)
                .map_or_else(String::new, |l| l.name.clone()),
            violated,
            retry_after,
            remaining: decision.limits.get(i).map_or(0, |d| d.remaining),
            decision: Some(decision.clone()),
        };
        self.answer(
            Reason::Denied(denial),
            StatusCode::TOO_MANY_REQUESTS,
            problem(decision, &self.named),
            self.fields(decision),
        )
    }

    /// The response the layer gives without serving the request (the
    /// error handler may give another).
    fn answer(
        &self,
        reason: Reason,
        status: StatusCode,
        body: String,
        fields: Vec<(&'static str, String)>,
    ) -> Verdict {
        let mut response = Response::new(body);
        *response.status_mut() = status;
        let content_type = if status == StatusCode::TOO_MANY_REQUESTS {
            "application/problem+json"
        } else {
            "text/plain; charset=utf-8"
        };
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(content_type),
        );
        if self.headers || self.legacy_headers || status == StatusCode::SERVICE_UNAVAILABLE {
            add_fields(response.headers_mut(), fields);
        }
        Verdict::Answer(Rejection { reason, response })
    }

    /// Without an answer: admit if every limit fails open (and say nothing
    /// about limits), otherwise `503`.
    fn unavailable(&self, e: &Error) -> Verdict {
        let open = self
            .limits
            .iter()
            .all(|l| l.on_store_error == OnStoreError::FailOpen);
        if open {
            Verdict::Serve(Vec::new(), None)
        } else {
            self.answer(
                Reason::Unavailable(e.clone()),
                StatusCode::SERVICE_UNAVAILABLE,
                "rate limiter unavailable\n".into(),
                vec![("retry-after", "1".into())],
            )
        }
    }

    /// Tracks the traffic shares of the fail-closed limits' keys.
    fn observe(&self, keys: &[String], decision: &AllDecision, cost: u64) {
        let Some(shares) = &self.shares else {
            return;
        };
        let mut shares = shares.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let charged = if decision.allowed { cost } else { 0 };
        for (i, d) in decision.limits.iter().enumerate() {
            if self.limits[i].on_store_error == OnStoreError::FailClosed
                && !self.is_leased(i, &keys[i])
            {
                shares.observe(&keys[i], self.named[i].quota, d, charged, now);
            }
        }
    }

    /// Degraded mode: the fail-closed limits decided locally. (Units taken
    /// from one limit's bucket when another denies are lost: the local
    /// buckets only ever err towards denying.)
    fn decide_locally(&self, shares: &Mutex<Shares>, keys: &[String], cost: u64) -> Verdict {
        let mut shares = shares.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let mut violated = Vec::new();
        // The deciding limit: the first that never admits, else the
        // longest wait.
        let mut deciding: Option<(usize, Option<Duration>)> = None;
        for (i, limit) in self.limits.iter().enumerate() {
            if limit.on_store_error == OnStoreError::FailOpen {
                continue;
            }
            if let Err(w) = shares.admit(&keys[i], self.named[i].quota, cost, now) {
                violated.push(i);
                let longer = match deciding {
                    None => true,
                    Some((_, None)) => false,
                    Some((_, Some(d))) => w.is_none_or(|w| w > d),
                };
                if longer {
                    deciding = Some((i, w));
                }
            }
        }
        drop(shares);
        let Some((i, wait)) = deciding else {
            return Verdict::Serve(Vec::new(), None);
        };
        let fields = wait
            .map(|w| vec![("retry-after", super::ceil_seconds(w).max(1).to_string())])
            .unwrap_or_default();
        let quoted: Vec<String> = violated
            .iter()
            .map(|&v| format!("\"{}\"", self.limits[v].name))
            .collect();
        let denial = Denial {
            limit: self.limits[i].name.clone(),
            violated: violated
                .iter()
                .map(|&v| self.limits[v].name.clone())
                .collect(),
            retry_after: wait,
            remaining: 0,
            decision: None,
        };
        self.answer(
            Reason::Denied(denial),
            StatusCode::TOO_MANY_REQUESTS,
            super::headers::problem_naming(&quoted.join(",")),
            fields,
        )
    }

    /// A denial the cache still holds for one of the limits, as the reply
    /// `RL.ALL` would give when only that limit's answer is known.
    fn remembered_denial(&self, keys: &[String], cost: u64) -> Option<AllDecision> {
        let cache = self.deny_cache.as_ref()?;
        let now = Instant::now();
        let (i, denied) = keys
            .iter()
            .zip(&self.words)
            .enumerate()
            .find_map(|(i, (k, w))| {
                let d = cache.check(k, w, cost, now)?;
                // With WAIT the server would queue a wait this short.
                let waits = self.wait.is_some_and(|w| d.retry_after <= Some(w));
                (!waits).then_some((i, d))
            })?;
        let retry_after = denied.retry_after;
        // The other limits were not asked: reported as admitting, they
        // take no part in the 429's fields.
        let mut decision = only(i, denied, keys.len());
        decision.retry_after = retry_after;
        Some(decision)
    }

    fn remember(&self, keys: &[String], decision: &AllDecision, cost: u64) {
        let Some(cache) = &self.deny_cache else {
            return;
        };
        let now = Instant::now();
        let limits = keys.iter().zip(&self.words).zip(&decision.limits);
        for (i, ((key, words), d)) in limits.enumerate() {
            if !self.is_leased(i, key) {
                let interval = self.limits[i].policy.unit_interval();
                cache.record_paced(key, words, cost, d, now, interval);
            }
        }
    }

    /// The limits at `asked` admitted a request of `cost`: paced denials
    /// move on.
    fn admitted(&self, keys: &[String], asked: &[usize], cost: u64) {
        let Some(cache) = &self.deny_cache else {
            return;
        };
        let now = Instant::now();
        for &i in asked {
            cache.admitted(&keys[i], &self.words[i], cost, now);
        }
    }
}

fn unasked() -> Decision {
    Decision {
        allowed: true,
        limit: 0,
        remaining: 0,
        retry_after: None,
        reset_after: Duration::ZERO,
        granted: None,
        lease: None,
    }
}

/// A denial by limit `i` alone: the other limits were not asked, and
/// reported as admitting they take no part in the 429's fields.
fn only(i: usize, denied: Decision, limits: usize) -> AllDecision {
    let retry_after = denied.retry_after;
    let mut all = vec![unasked(); limits];
    all[i] = denied;
    AllDecision {
        allowed: false,
        blocked_by: Some(i),
        retry_after,
        limits: all,
    }
}

fn add_fields(headers: &mut http::HeaderMap, fields: Vec<(&'static str, String)>) {
    for (name, value) in fields {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

/// What a request on a key the deny cache may hold a denial on does.
enum Asking {
    /// Denied by the remembered denial.
    Denied(AllDecision),
    /// Asks the store (as the one request out for the key, if a guard).
    Go(Option<Probe>),
    /// Waits for the request out for the key, then looks again.
    Wait(Arc<Flight>),
}

/// The one request out for a key the deny cache holds a denial on: when
/// dropped (its answer remembered, or the request given up), the requests
/// waiting for it read the cache again.
struct Probe {
    probes: Arc<Mutex<HashMap<String, Arc<Flight>>>>,
    key: String,
    flight: Arc<Flight>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        let mut probes = self.probes.lock().unwrap_or_else(|p| p.into_inner());
        if probes
            .get(&self.key)
            .is_some_and(|f| Arc::ptr_eq(f, &self.flight))
        {
            probes.remove(&self.key);
        }
        drop(probes);
        self.flight.finish(None);
    }
}

impl<S, K, C, B, ReqB, ResB> tower_service::Service<Request<ReqB>> for RedisRateLimit<S, K, C, B>
where
    S: tower_service::Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    K: KeyExtractor,
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
    B: 'static,
    ReqB: Send + 'static,
    ResB: From<B> + Send + 'static,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResB>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        // The service that was polled ready serves this request; a clone
        // stays for the next.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let config = self.config.clone();
        let handler = self.handler.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            match config.decide(&parts).await {
                Verdict::Serve(fields, decision) => {
                    let mut request = Request::from_parts(parts, body);
                    if let Some(decision) = decision {
                        request.extensions_mut().insert(decision);
                    }
                    let mut response = inner.call(request).await?;
                    add_fields(response.headers_mut(), fields);
                    Ok(response)
                }
                Verdict::Answer(rejection) => Ok(handler(rejection).map(ResB::from)),
            }
        })
    }
}
