//! The HTTP API of the `http_api` example: a middleware that checks every
//! request against a per-API-key limit and a global limit in one `RL.ALL`
//! call, and tells the client what it may do next:
//!
//! - always: `RateLimit-Policy` (each limit's rate: `q` per `w` seconds) and
//!   `RateLimit` (IETF draft-ietf-httpapi-ratelimit-headers-11);
//! - when denied: `429 Too Many Requests`, `Retry-After` in whole seconds
//!   (rounded up: the longest wait of the limits that denied), `RateLimit`
//!   for that limit only, and a `quota-exceeded` problem body naming the
//!   limits that denied;
//! - without an `X-Api-Key` header: `401`;
//! - when Redis cannot answer in time: what each limit chose, admit (fail
//!   open) or `503` (fail closed). The error itself goes to the log, never
//!   to the client.
//!
//! The connection to Redis reconnects by itself, with backoff, after Redis
//! restarts or the network drops.
//!
//! Shared with `tests/http_api.rs`, which serves it against a real server.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::Arc;
use std::time::Duration;

/// The first wait before reconnecting; it doubles after each failure...
pub const RECONNECT_MIN_DELAY: Duration = Duration::from_millis(50);
/// ...up to this (plus up to as much again of random jitter).
pub const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(1);
/// One connection attempt gives up after this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a request waits for the limiter before its limits' fallback
/// (`OnStoreError`) applies.
pub const STORE_TIMEOUT: Duration = Duration::from_millis(500);

/// A connection to Redis that reconnects by itself, with exponential
/// backoff, for as long as it takes. Lazy: the service starts even while
/// Redis is down.
pub fn connect(redis_url: &str) -> redis::RedisResult<ConnectionManager> {
    let config = ConnectionManagerConfig::new()
        .set_min_delay(RECONNECT_MIN_DELAY)
        .set_max_delay(RECONNECT_MAX_DELAY)
        .set_number_of_retries(usize::MAX)
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(STORE_TIMEOUT));
    ConnectionManager::new_lazy_with_config(redis::Client::open(redis_url)?, config)
}

/// What a limit does when Redis cannot answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnStoreError {
    /// A safety limit (it protects the service): admit, so that a limiter
    /// outage does not become a service outage.
    FailOpen,
    /// A billed contract (a plan's quota): refuse with `503` rather than
    /// give away what is sold.
    FailClosed,
}

/// A policy's rate in the terms of `RateLimit-Policy`: `q` per `w` seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    pub q: u64,
    pub w: u64,
}

impl Quota {
    /// The sustained rate of an `RL.ALL` policy (never its burst):
    /// `GCRA limit period`, `SLIDING`/`FIXED limit window`, `BUCKET capacity
    /// refill period`. A period in whole seconds is `w`; otherwise `w` is
    /// the shortest whole number of seconds with a whole `q` at that rate.
    pub fn of(policy: &[String]) -> Result<Quota, String> {
        let word = |i: usize| {
            policy
                .get(i)
                .map(String::as_str)
                .ok_or_else(|| format!("policy {policy:?} is too short"))
        };
        let (count, period) = match word(0)?.to_ascii_uppercase().as_str() {
            "GCRA" | "SLIDING" | "FIXED" => (word(1)?, word(2)?),
            "BUCKET" => (word(2)?, word(3)?),
            other => return Err(format!("unknown policy {other}")),
        };
        let count: u128 = count
            .parse()
            .map_err(|_| format!("bad count {count} in {policy:?}"))?;
        let ms = u128::from(millis(period)?);
        let w = if ms % 1000 == 0 {
            ms / 1000
        } else {
            ms / gcd(ms, count * 1000)
        };
        let q = count * 1000 * w / ms;
        Ok(Quota {
            q: u64::try_from(q).unwrap_or(u64::MAX),
            w: u64::try_from(w).unwrap_or(u64::MAX),
        })
    }
}

/// `60`, `250ms`, `1m`, ... in milliseconds (a bare number is seconds).
fn millis(duration: &str) -> Result<u64, String> {
    let split = duration
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(duration.len());
    let (number, unit) = duration.split_at(split);
    let per_unit = match unit.to_ascii_lowercase().as_str() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("bad duration {duration}")),
    };
    number
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .and_then(|n| n.checked_mul(per_unit))
        .ok_or_else(|| format!("bad duration {duration}"))
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// One limit: its name in the headers, its `RL.ALL` policy, its rate, and
/// what to do when Redis cannot answer.
#[derive(Clone, Debug)]
pub struct Limit {
    pub name: &'static str,
    pub policy: Vec<String>,
    pub quota: Quota,
    pub on_store_error: OnStoreError,
}

impl Limit {
    pub fn new(
        name: &'static str,
        policy: &str,
        on_store_error: OnStoreError,
    ) -> Result<Limit, String> {
        let policy: Vec<String> = policy.split_whitespace().map(str::to_string).collect();
        Ok(Limit {
            name,
            quota: Quota::of(&policy)?,
            policy,
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
    pub fn standard() -> Result<Limits, String> {
        Ok(Limits {
            // 10 per second with bursts of 10 for each API key: what its plan
            // pays for, so refused while it cannot be checked...
            per_key: Limit::new("per-key", "GCRA 10 1s", OnStoreError::FailClosed)?,
            // ...and 1000 per minute for the whole service, a safety limit.
            global: Limit::new("global", "SLIDING 1000 60s APPROX", OnStoreError::FailOpen)?,
        })
    }

    pub fn all(&self) -> [&Limit; 2] {
        [&self.per_key, &self.global]
    }
}

/// One limit's part of the reply: the 5-field reply of the single-key
/// commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitReply {
    pub allowed: bool,
    pub limit: i64,
    pub remaining: i64,
    pub retry_after_ms: i64,
    pub reset_after_ms: i64,
}

/// What `RL.ALL` answered (RESP2):
/// `[allowed, blocked_by, retry_after_ms, reply_1, ..., reply_n]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// The wait until every limit would admit; `None` when allowed or never.
    pub retry_after_ms: Option<i64>,
    pub limits: Vec<LimitReply>,
}

fn int(v: &redis::Value) -> Result<i64, String> {
    match v {
        redis::Value::Int(n) => Ok(*n),
        other => Err(format!("expected an integer, got {other:?}")),
    }
}

impl Verdict {
    pub fn parse(reply: &redis::Value) -> Result<Verdict, String> {
        let redis::Value::Array(items) = reply else {
            return Err(format!("expected an array, got {reply:?}"));
        };
        let [allowed, _blocked_by, retry, limits @ ..] = items.as_slice() else {
            return Err(format!("short reply {items:?}"));
        };
        let limits = limits
            .iter()
            .map(|l| match l {
                redis::Value::Array(f) if f.len() == 5 => Ok(LimitReply {
                    allowed: int(&f[0])? == 1,
                    limit: int(&f[1])?,
                    remaining: int(&f[2])?,
                    retry_after_ms: int(&f[3])?,
                    reset_after_ms: int(&f[4])?,
                }),
                other => Err(format!("expected a 5-field reply, got {other:?}")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let retry = int(retry)?;
        Ok(Verdict {
            allowed: int(allowed)? == 1,
            retry_after_ms: (retry >= 0).then_some(retry),
            limits,
        })
    }

    /// On a denial with a known wait: the limit that decides it, the one
    /// with the longest wait, and that wait (never shorter than any denying
    /// limit's).
    pub fn deciding(&self) -> Option<(usize, i64)> {
        let wait = self.retry_after_ms.filter(|_| !self.allowed)?;
        let (i, r) = self
            .limits
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.allowed)
            .max_by_key(|(_, r)| r.retry_after_ms)?;
        Some((i, wait.max(r.retry_after_ms)))
    }
}

/// Milliseconds as whole seconds, rounded up: a client that waits that
/// long is never early.
pub fn ceil_s(ms: i64) -> i64 {
    (ms.max(0) + 999) / 1000
}

/// A limit's `RateLimit` item: `r` what is left, `t` the seconds in which
/// no more than `r` may be used (the wait when nothing is left; otherwise
/// until the limit is full again), at most the window `w`.
fn item(limit: &Limit, r: &LimitReply) -> String {
    let ms = if r.remaining == 0 && r.retry_after_ms > 0 {
        r.retry_after_ms
    } else {
        r.reset_after_ms
    };
    let w = i64::try_from(limit.quota.w).unwrap_or(i64::MAX);
    let t = ceil_s(ms).min(w);
    format!("\"{}\";r={};t={t}", limit.name, r.remaining)
}

/// The response header fields for a verdict, in the order of `limits`.
///
/// `RateLimit-Policy` lists every limit, the same on every response. On a
/// denial `RateLimit` names only the deciding limit, its `t` equal to
/// `Retry-After`: the draft says `Retry-After` should not point before the
/// end of any reported effective window, and the other limits' windows may
/// end later than the wait.
pub fn header_fields(verdict: &Verdict, limits: &[&Limit]) -> Vec<(&'static str, String)> {
    let policy = limits
        .iter()
        .map(|l| format!("\"{}\";q={};w={}", l.name, l.quota.q, l.quota.w))
        .collect::<Vec<_>>()
        .join(", ");
    let mut fields = vec![("ratelimit-policy", policy)];
    match verdict.deciding() {
        Some((i, wait_ms)) => {
            let (limit, reply) = (limits[i], &verdict.limits[i]);
            let wait = ceil_s(wait_ms);
            let current = format!("\"{}\";r={};t={wait}", limit.name, reply.remaining);
            fields.push(("ratelimit", current));
            fields.push(("retry-after", wait.to_string()));
        }
        None => {
            let current = limits
                .iter()
                .zip(&verdict.limits)
                .map(|(l, r)| item(l, r))
                .collect::<Vec<_>>()
                .join(", ");
            fields.push(("ratelimit", current));
        }
    }
    fields
}

/// The `application/problem+json` body of a 429.
pub fn problem(verdict: &Verdict, limits: &[&Limit]) -> String {
    let violated = limits
        .iter()
        .zip(&verdict.limits)
        .filter(|(_, r)| !r.allowed)
        .map(|(l, _)| format!("\"{}\"", l.name))
        .collect::<Vec<_>>()
        .join(",");
    format!(
        "{{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\",\
         \"title\":\"Request cannot be satisfied as assigned quota has been exceeded\",\
         \"violated-policies\":[{violated}]}}\n"
    )
}

#[derive(Clone)]
pub struct App {
    redis: ConnectionManager,
    limits: Arc<Limits>,
    timeout: Duration,
}

impl App {
    pub fn new(redis: ConnectionManager, limits: Limits) -> App {
        App {
            redis,
            limits: Arc::new(limits),
            timeout: STORE_TIMEOUT,
        }
    }

    /// One atomic decision over both limits, or why there is none (for the
    /// log: it names keys and Redis's own words).
    pub async fn check(&self, api_key: &str) -> Result<Verdict, String> {
        let mut cmd = redis::cmd("RL.ALL");
        cmd.arg(2)
            .arg(format!("rl:key:{api_key}"))
            .arg("rl:global")
            .arg(&self.limits.per_key.policy)
            .arg(&self.limits.global.policy);
        let mut redis = self.redis.clone();
        let reply: redis::Value = tokio::time::timeout(self.timeout, cmd.query_async(&mut redis))
            .await
            .map_err(|_| format!("no answer within {:?}", self.timeout))?
            .map_err(|e| e.to_string())?;
        Verdict::parse(&reply)
    }
}

/// The rate-limit middleware in front of every route.
async fn limit(State(app): State<App>, request: Request, next: Next) -> Response {
    let api_key = request
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.is_empty())
        .map(str::to_string);
    let Some(api_key) = api_key else {
        return (StatusCode::UNAUTHORIZED, "missing X-Api-Key\n").into_response();
    };
    let limits = app.limits.all();
    let verdict = match app.check(&api_key).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("rate limiter unavailable: {e}");
            let open = limits
                .iter()
                .all(|l| l.on_store_error == OnStoreError::FailOpen);
            return if open {
                next.run(request).await
            } else {
                unavailable()
            };
        }
    };
    let mut response = if verdict.allowed {
        next.run(request).await
    } else {
        let mut r = (StatusCode::TOO_MANY_REQUESTS, problem(&verdict, &limits)).into_response();
        r.headers_mut().insert(
            "content-type",
            HeaderValue::from_static("application/problem+json"),
        );
        r
    };
    add_headers(response.headers_mut(), header_fields(&verdict, &limits));
    response
}

/// A `503` that says only that the limiter is down: Redis's error text
/// names keys (API keys) and internals.
fn unavailable() -> Response {
    let mut r = (
        StatusCode::SERVICE_UNAVAILABLE,
        "rate limiter unavailable\n",
    )
        .into_response();
    r.headers_mut()
        .insert("retry-after", HeaderValue::from_static("1"));
    r
}

fn add_headers(headers: &mut HeaderMap, fields: Vec<(&'static str, String)>) {
    for (name, value) in fields {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

/// The service: one route, behind the limiter.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/hello", get(|| async { "hello\n" }))
        .layer(middleware::from_fn_with_state(app, limit))
}
