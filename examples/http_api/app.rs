//! The HTTP API of the `http_api` example: every request is checked
//! against a per-API-key limit and a global limit in one `RL.ALL` call by
//! the client library's tower layer, which tells the client what it may do
//! next (`RateLimit-Policy`, `RateLimit`, `Retry-After`, `429` with a
//! problem body), refuses requests without an `X-Api-Key` with `401`, and
//! when Redis cannot answer in time does what each limit chose: admit (fail
//! open) or `503` (fail closed); any other store error is a `500`. The error goes to the log, never to the
//! client. The connection reconnects by itself, with backoff.
//!
//! Shared with `tests/http_api.rs`, which serves it against a real server.

use axum::http::{HeaderName, StatusCode};
use axum::routing::get;
use axum::Router;
use redis::aio::ConnectionManager;
use redis_ratelimit_client::http::{HeaderKey, HttpLimit, RedisRateLimitLayer};
use redis_ratelimit_client::{Client, Error, ParsePolicyError, Policy};
use std::time::Duration;

pub use redis_ratelimit_client::connect;
pub use redis_ratelimit_client::http::OnStoreError;

/// How long a request waits for the limiter before its limits' fallback
/// (`OnStoreError`) applies.
pub const STORE_TIMEOUT: Duration = Duration::from_millis(500);

/// One limit: its name in the headers, its policy (as `RL.ALL` writes
/// it) and what to do when Redis cannot answer.
#[derive(Clone, Debug)]
pub struct Limit {
    pub name: &'static str,
    pub policy: Policy,
    pub on_store_error: OnStoreError,
}

impl Limit {
    pub fn new(
        name: &'static str,
        policy: &str,
        on_store_error: OnStoreError,
    ) -> Result<Limit, ParsePolicyError> {
        Ok(Limit {
            name,
            policy: policy.parse()?,
            on_store_error,
        })
    }
}

/// The two limits every request must pass.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Per API key, stored at `rl:key:<api key>`.
    pub per_key: Limit,
    /// For everyone together, stored at `rl:global`.
    pub global: Limit,
}

impl Limits {
    pub fn standard() -> Result<Limits, ParsePolicyError> {
        Ok(Limits {
            // 10 per second with bursts of 10 for each API key: what its plan
            // pays for, so refused while it cannot be checked...
            per_key: Limit::new("per-key", "GCRA 10 1s", OnStoreError::FailClosed)?,
            // ...and 1000 per minute for the whole service, a safety limit.
            global: Limit::new("global", "SLIDING 1000 60s APPROX", OnStoreError::FailOpen)?,
        })
    }
}

pub struct App {
    layer: RedisRateLimitLayer<HeaderKey>,
}

impl App {
    /// The service's limiter; an error if a limit is one the server would
    /// refuse.
    pub fn new(redis: ConnectionManager, limits: Limits) -> Result<App, Error> {
        App::with_store_timeout(redis, limits, STORE_TIMEOUT)
    }

    /// The app with another wait for the limiter than [`STORE_TIMEOUT`].
    pub fn with_store_timeout(
        redis: ConnectionManager,
        limits: Limits,
        store_timeout: Duration,
    ) -> Result<App, Error> {
        let (per_key, global) = (limits.per_key, limits.global);
        let client = Client::new(redis).timeout(store_timeout);
        let api_key = HeaderKey::new(HeaderName::from_static("x-api-key"));
        let layer = RedisRateLimitLayer::builder(client, api_key)
            .missing_key(StatusCode::UNAUTHORIZED, "missing X-Api-Key\n")
            .limit(
                HttpLimit::per_key(per_key.policy)
                    .name(per_key.name)
                    .prefix("rl:key:")
                    .on_store_error(per_key.on_store_error),
            )
            .limit(
                HttpLimit::shared(global.policy)
                    .name(global.name)
                    .key("rl:global")
                    .on_store_error(global.on_store_error),
            )
            .on_error(|e| eprintln!("rate limiter: {e}"))
            .build()?;
        Ok(App { layer })
    }
}

/// The service: one route, behind the limiter.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/hello", get(|| async { "hello\n" }))
        .layer(app.layer)
}
