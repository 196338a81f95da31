//! The HTTP API of the `http_api` example: a middleware that checks every
//! request against a per-API-key limit and a global limit in one `RL.ALL`
//! call, and tells the client what it may do next:
//!
//! - always: `RateLimit-Policy` and `RateLimit` (IETF
//!   draft-ietf-httpapi-ratelimit-headers), one item per limit;
//! - when denied: `429 Too Many Requests`, `Retry-After` in whole seconds
//!   (rounded up) and a `quota-exceeded` problem body naming the limits that
//!   denied;
//! - without an `X-Api-Key` header: `401`; when Redis cannot answer: `503`
//!   (fail closed).
//!
//! Shared with `tests/http_api.rs`, which serves it against a real server.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use redis::aio::MultiplexedConnection;
use std::sync::Arc;

/// One limit: its name in the headers, its `RL.ALL` policy, and the window
/// in seconds that `RateLimit-Policy` announces.
#[derive(Clone, Debug)]
pub struct Limit {
    pub name: &'static str,
    pub policy: Vec<String>,
    pub window_s: u64,
}

impl Limit {
    pub fn new(name: &'static str, policy: &str, window_s: u64) -> Limit {
        Limit {
            name,
            policy: policy.split_whitespace().map(str::to_string).collect(),
            window_s,
        }
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

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            // 10 per second with bursts of 10 for each API key...
            per_key: Limit::new("per-key", "GCRA 10 1s", 1),
            // ...and 1000 per minute for the whole service.
            global: Limit::new("global", "SLIDING 1000 60s APPROX", 60),
        }
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
}

/// Milliseconds as whole seconds, rounded up: a client that waits that
/// long is never early.
pub fn ceil_s(ms: i64) -> i64 {
    (ms.max(0) + 999) / 1000
}

/// The response header fields for a verdict, in the order of `limits`.
pub fn header_fields(verdict: &Verdict, limits: &[&Limit]) -> Vec<(&'static str, String)> {
    let pairs = || limits.iter().zip(&verdict.limits);
    let policy = pairs()
        .map(|(l, r)| format!("\"{}\";q={};w={}", l.name, r.limit, l.window_s))
        .collect::<Vec<_>>()
        .join(", ");
    // `t`: with nothing left, when a request is admitted again; otherwise
    // when the limit is back to full. (On a denial each limit reports its
    // dry run: what would remain had the request been charged.)
    let current = pairs()
        .map(|(l, r)| {
            let t = if r.remaining == 0 && r.retry_after_ms > 0 {
                ceil_s(r.retry_after_ms)
            } else {
                ceil_s(r.reset_after_ms)
            };
            format!("\"{}\";r={};t={}", l.name, r.remaining, t)
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut fields = vec![("ratelimit-policy", policy), ("ratelimit", current)];
    if let (false, Some(ms)) = (verdict.allowed, verdict.retry_after_ms) {
        fields.push(("retry-after", ceil_s(ms).to_string()));
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
    redis: MultiplexedConnection,
    limits: Arc<Limits>,
}

impl App {
    pub fn new(redis: MultiplexedConnection, limits: Limits) -> App {
        App {
            redis,
            limits: Arc::new(limits),
        }
    }

    /// One atomic decision over both limits.
    pub async fn check(&self, api_key: &str) -> Result<Verdict, String> {
        let mut cmd = redis::cmd("RL.ALL");
        cmd.arg(2)
            .arg(format!("rl:key:{api_key}"))
            .arg("rl:global")
            .arg(&self.limits.per_key.policy)
            .arg(&self.limits.global.policy);
        let reply: redis::Value = cmd
            .query_async(&mut self.redis.clone())
            .await
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
    let verdict = match app.check(&api_key).await {
        Ok(v) => v,
        Err(e) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("rate limiter unavailable: {e}\n"),
            )
                .into_response()
        }
    };
    let limits = [&app.limits.per_key, &app.limits.global];
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
