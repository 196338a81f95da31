//! What the client's tests share beyond the module's harness
//! (`tests/common`, which starts the servers): clients in either protocol,
//! a runtime, and the server's own count of commands.
#![allow(dead_code)]

use crate::common::Server;
use axum::http::HeaderName;
use axum::routing::get as route;
use axum::Router;
use redis_ratelimit_client::http::{Builder, HeaderKey, HttpLimit, RedisRateLimitLayer};
use redis_ratelimit_client::{connect, Client, Gcra, LeasePlan};
use std::future::Future;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub enum Protocol {
    Resp2,
    Resp3,
}

/// A reconnecting client of `server`, with a timeout of 60 s per call: a
/// hang guard, which a live server answers within however loaded the
/// machine is (tests of timeouts set their own).
/// Within a runtime (the connection lives on it).
pub fn client(server: &Server, protocol: Protocol) -> Client {
    Client::new(connect(&url(server, protocol)).expect("client")).timeout(Duration::from_secs(60))
}

pub fn url(server: &Server, protocol: Protocol) -> String {
    match protocol {
        Protocol::Resp2 => server.url(),
        Protocol::Resp3 => format!("{}?protocol=resp3", server.url()),
    }
}

/// Runs `f` to completion on a fresh single-threaded runtime.
pub fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// How many times the server ran `command` (lower case), from
/// `INFO commandstats`.
pub fn calls(c: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(c)
        .expect("INFO");
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A response of the service under test, its body read.
pub struct Reply {
    pub status: u16,
    pub headers: std::collections::HashMap<String, String>,
    pub body: String,
}

/// `GET /` through `router` with an optional `X-Api-Key`.
pub async fn get(router: &axum::Router, api_key: Option<&str>) -> Reply {
    let headers: Vec<(&str, &str)> = api_key.map(|k| ("x-api-key", k)).into_iter().collect();
    get_with(router, &headers).await
}

/// `GET /` through `router` with these header fields.
pub async fn get_with(router: &axum::Router, fields: &[(&str, &str)]) -> Reply {
    let mut request = axum::http::Request::get("/");
    for (name, value) in fields {
        request = request.header(*name, *value);
    }
    send(
        router,
        request.body(axum::body::Body::empty()).expect("request"),
    )
    .await
}

/// `request` through `router`, the response's body read.
pub async fn send(router: &axum::Router, request: axum::http::Request<axum::body::Body>) -> Reply {
    use tower_service::Service;
    let response = router.clone().call(request).await.expect("infallible");
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("body");
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Runs `f` to completion on a fresh multi-threaded runtime (four worker
/// threads): the shape services run in.
pub fn block_on_multi<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// An app that answers "ok" on `/` behind `layer`.
pub fn router(layer: RedisRateLimitLayer<HeaderKey>) -> Router {
    Router::new()
        .route("/", route(|| async { "ok" }))
        .layer(layer)
}

/// A layer's builder keyed by the `X-Api-Key` header.
pub fn by_api_key(client: Client) -> Builder<HeaderKey> {
    RedisRateLimitLayer::builder(client, HeaderKey::new(HeaderName::from_static("x-api-key")))
}

/// `processes` layers, each with its own client and connection (as
/// separate processes would have), sharing one limit `hot` on the key
/// `rl:hot` of `policy`, leased in blocks of 20; `builder` starts each
/// layer from its client.
pub fn hot_leased_layers(
    server: &Server,
    policy: Gcra,
    processes: usize,
    builder: impl Fn(Client) -> Builder<HeaderKey>,
) -> Vec<RedisRateLimitLayer<HeaderKey>> {
    (0..processes)
        .map(|_| {
            let limit = HttpLimit::shared(policy)
                .name("hot")
                .key("rl:hot")
                .leased(LeasePlan::fixed(20));
            builder(client(server, Protocol::Resp2))
                .limit(limit)
                .build()
                .unwrap()
        })
        .collect()
}
