//! The layer's keys and options as a tower_governor user reaches for them,
//! in an axum router against real servers with the manual clock: the
//! client's address behind proxies, one key for everyone, typed keys,
//! requests without a key, exempt methods, the older `X-RateLimit-*`
//! fields and an error handler answering with axum's `IntoResponse`.
//! Each asserts the server's own state (`RL.PEEK`, its command counts).

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use axum::body::Body;
use axum::response::IntoResponse;
use axum::routing::any;
use axum::Router;
use common::*;
use http::request::Parts;
use http::{Method, StatusCode};
use redis_ratelimit_client::http::{
    GlobalKey, HeaderKey, HttpLimit, KeyExtractor, PeerIp, Reason, RedisRateLimitLayer, SmartIp,
};
use redis_ratelimit_client::{Command, Gcra, Peek};
use std::net::SocketAddr;
use std::time::Duration;
use support::*;

const HOUR: Duration = Duration::from_secs(3600);

/// Three an hour: nothing accrues while a test runs.
fn three_an_hour() -> Gcra {
    Gcra::new(3, HOUR)
}

fn app<L>(layer: L) -> Router
where
    L: tower_layer::Layer<axum::routing::Route> + Clone + Send + Sync + 'static,
    L::Service: tower_service::Service<http::Request<Body>, Error = std::convert::Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as tower_service::Service<http::Request<Body>>>::Response: IntoResponse + 'static,
    <L::Service as tower_service::Service<http::Request<Body>>>::Future: Send + 'static,
{
    Router::new()
        .route("/", any(|| async { "ok" }))
        .layer(layer)
}

/// `method /` through `router` with these header fields and, if given,
/// the peer's address in the request's extensions.
async fn call(
    router: &Router,
    method: Method,
    fields: &[(&str, &str)],
    peer: Option<SocketAddr>,
) -> Reply {
    let mut request = http::Request::builder().method(method).uri("/");
    for (name, value) in fields {
        request = request.header(*name, *value);
    }
    let mut request = request.body(Body::empty()).expect("request");
    if let Some(peer) = peer {
        request.extensions_mut().insert(peer);
    }
    send(router, request).await
}

fn remaining(c: &mut redis::Connection, key: &str) -> u64 {
    Peek::new(key, three_an_hour())
        .query(c)
        .expect("RL.PEEK")
        .remaining
}

#[test]
fn smart_ip_keys_on_the_client_address_proxies_report_then_the_peer() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on_multi(async {
        let layer = RedisRateLimitLayer::builder(client(&s, Protocol::Resp2), SmartIp)
            .limit(HttpLimit::per_key(three_an_hour()).prefix("rl:ip:"))
            .build()
            .unwrap();
        let app = app(layer);
        let get = |fields: &'static [(&'static str, &'static str)], peer| {
            let app = app.clone();
            async move { call(&app, Method::GET, fields, peer).await.status }
        };
        let peer = Some(SocketAddr::from(([10, 0, 0, 1], 40_000)));
        // The first address of X-Forwarded-For, whatever the proxies after
        // it: three requests through two different proxies, one client.
        for fields in [
            &[("x-forwarded-for", "203.0.113.7, 10.0.0.1")][..],
            &[("x-forwarded-for", "203.0.113.7, 10.0.0.2")],
            &[("x-forwarded-for", "203.0.113.7")],
        ] {
            assert_eq!(get(fields, peer).await, 200);
        }
        assert_eq!(
            get(&[("x-forwarded-for", "203.0.113.7, 10.9.9.9")], peer).await,
            429
        );
        assert_eq!(remaining(&mut c, "rl:ip:203.0.113.7"), 0);
        // Forwarded comes first, quoted IPv6 with a port.
        let fwd = &[
            (
                "forwarded",
                "for=\"[2001:db8::1]:4711\";proto=https, for=10.0.0.1",
            ),
            ("x-forwarded-for", "203.0.113.7"),
        ];
        assert_eq!(get(fwd, peer).await, 200);
        assert_eq!(remaining(&mut c, "rl:ip:2001:db8::1"), 2);
        // X-Real-IP, then the peer.
        assert_eq!(get(&[("x-real-ip", "198.51.100.2")], peer).await, 200);
        assert_eq!(remaining(&mut c, "rl:ip:198.51.100.2"), 2);
        assert_eq!(get(&[], peer).await, 200);
        assert_eq!(remaining(&mut c, "rl:ip:10.0.0.1"), 2);
        // No address anywhere: the layer cannot key it, a 500.
        let r = call(&app, Method::GET, &[("x-forwarded-for", "unknown")], None).await;
        assert_eq!(r.status, 500);
        assert_eq!(r.body, "no rate-limit key in the request\n");
    });
}

#[test]
fn peer_ip_reads_the_socket_address_and_without_it_answers_500() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on_multi(async {
        let layer = RedisRateLimitLayer::builder(client(&s, Protocol::Resp2), PeerIp::new())
            .limit(HttpLimit::per_key(three_an_hour()).prefix("rl:peer:"))
            .build()
            .unwrap();
        let app = app(layer);
        let peer = Some(SocketAddr::from(([127, 0, 0, 9], 1234)));
        // Proxies' fields are not the peer's address.
        let r = call(
            &app,
            Method::GET,
            &[("x-forwarded-for", "203.0.113.7")],
            peer,
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(remaining(&mut c, "rl:peer:127.0.0.9"), 2);
        // Not served with the address: a misconfiguration, not the
        // caller's fault, and nothing is charged.
        let before = calls(&mut c, "rl.all");
        let r = call(&app, Method::GET, &[], None).await;
        assert_eq!(r.status, 500);
        assert_eq!(calls(&mut c, "rl.all"), before);
    });
}

#[test]
fn a_global_key_shares_one_count_and_a_missing_key_is_configurable() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on_multi(async {
        let global = RedisRateLimitLayer::builder(client(&s, Protocol::Resp3), GlobalKey)
            .limit(HttpLimit::per_key(three_an_hour()).prefix("rl:"))
            .build()
            .unwrap();
        let global = app(global);
        let mut statuses = Vec::new();
        for who in ["a", "b", "c", "d", "e"] {
            let r = call(&global, Method::GET, &[("x-api-key", who)], None).await;
            statuses.push(r.status);
        }
        assert_eq!(statuses, [200, 200, 200, 429, 429]);
        assert_eq!(remaining(&mut c, "rl:global"), 0);
        // An API key is the caller's to give: 401 without one, as told.
        let by_key = RedisRateLimitLayer::builder(
            client(&s, Protocol::Resp3),
            HeaderKey::new(http::HeaderName::from_static("x-api-key")),
        )
        .limit(HttpLimit::per_key(three_an_hour()).prefix("rl:key:"))
        .missing_key(StatusCode::UNAUTHORIZED, "missing X-Api-Key\n")
        .build()
        .unwrap();
        let r = call(&app(by_key), Method::GET, &[], None).await;
        assert_eq!((r.status, r.body.as_str()), (401, "missing X-Api-Key\n"));
    });
}

/// A user id from a header a gateway sets, as a number.
#[derive(Clone)]
struct UserId;

impl KeyExtractor for UserId {
    type Key = u64;

    fn key(&self, request: &Parts) -> Option<u64> {
        request
            .headers
            .get("x-user-id")?
            .to_str()
            .ok()?
            .parse()
            .ok()
    }
}

#[test]
fn typed_keys_and_closures_key_the_store() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on_multi(async {
        let typed = RedisRateLimitLayer::builder(client(&s, Protocol::Resp2), UserId)
            .limit(HttpLimit::per_key(three_an_hour()).prefix("rl:user:"))
            .build()
            .unwrap();
        let typed = app(typed);
        let r = call(&typed, Method::GET, &[("x-user-id", "0042")], None).await;
        assert_eq!(r.status, 200);
        assert_eq!(remaining(&mut c, "rl:user:42"), 2);
        let r = call(&typed, Method::GET, &[("x-user-id", "alice")], None).await;
        assert_eq!(r.status, 500);
        // A closure returning any Display.
        let by_path = |request: &Parts| Some(request.uri.path().len());
        let closure = RedisRateLimitLayer::builder(client(&s, Protocol::Resp2), by_path)
            .limit(HttpLimit::per_key(three_an_hour()).prefix("rl:len:"))
            .build()
            .unwrap();
        assert_eq!(
            call(&app(closure), Method::GET, &[], None).await.status,
            200
        );
        assert_eq!(remaining(&mut c, "rl:len:1"), 2);
    });
}

#[test]
fn exempt_methods_make_no_round_trip() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on_multi(async {
        let layer = RedisRateLimitLayer::builder(client(&s, Protocol::Resp2), GlobalKey)
            .limit(HttpLimit::per_key(three_an_hour()).prefix("rl:"))
            .methods([Method::POST, Method::DELETE])
            .build()
            .unwrap();
        let app = app(layer);
        let before = calls(&mut c, "rl.all");
        for _ in 0..20 {
            for method in [Method::GET, Method::HEAD, Method::OPTIONS] {
                let r = call(&app, method, &[], None).await;
                assert_eq!(r.status, 200);
                assert!(!r.headers.contains_key("ratelimit"), "{:?}", r.headers);
            }
        }
        assert_eq!(calls(&mut c, "rl.all"), before);
        let mut statuses = Vec::new();
        for method in [Method::POST, Method::DELETE, Method::POST, Method::DELETE] {
            statuses.push(call(&app, method, &[], None).await.status);
        }
        assert_eq!(statuses, [200, 200, 200, 429]);
        assert_eq!(calls(&mut c, "rl.all") - before, 4);
        assert_eq!(remaining(&mut c, "rl:global"), 0);
    });
}

#[test]
fn legacy_fields_on_admissions_and_denials() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on_multi(async {
        let layer = RedisRateLimitLayer::builder(client(&s, Protocol::Resp3), GlobalKey)
            .limit(HttpLimit::per_key(three_an_hour()).name("hourly"))
            .limit(
                HttpLimit::shared(Gcra::new(100, Duration::from_secs(60)))
                    .name("service")
                    .key("rl:service"),
            )
            .legacy_headers(true)
            .build()
            .unwrap();
        let router = app(layer);
        let r = call(&router, Method::GET, &[], None).await;
        assert_eq!(r.status, 200);
        // The limit with the least left: the hourly one.
        assert_eq!(r.headers["x-ratelimit-limit"], "3");
        assert_eq!(r.headers["x-ratelimit-remaining"], "2");
        assert_eq!(r.headers["x-ratelimit-reset"], "1200");
        // The draft's fields too, unless turned off.
        assert!(r.headers.contains_key("ratelimit-policy"));
        call(&router, Method::GET, &[], None).await;
        call(&router, Method::GET, &[], None).await;
        let r = call(&router, Method::GET, &[], None).await;
        assert_eq!(r.status, 429);
        assert_eq!(r.headers["x-ratelimit-remaining"], "0");
        assert_eq!(r.headers["x-ratelimit-after"], "1200");
        assert_eq!(r.headers["x-ratelimit-after"], r.headers["retry-after"]);
        assert_eq!(remaining(&mut c, "rl:global"), 0);

        let only_legacy = RedisRateLimitLayer::builder(client(&s, Protocol::Resp3), GlobalKey)
            .limit(HttpLimit::per_key(three_an_hour()).prefix("rl:other:"))
            .headers(false)
            .legacy_headers(true)
            .build()
            .unwrap();
        let r = call(&app(only_legacy), Method::GET, &[], None).await;
        assert_eq!(r.headers["x-ratelimit-remaining"], "2");
        assert!(!r.headers.contains_key("ratelimit"));
    });
}

#[test]
fn an_error_handler_answers_with_any_into_response() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on_multi(async {
        let layer = RedisRateLimitLayer::builder(client(&s, Protocol::Resp2), GlobalKey)
            .limit(HttpLimit::per_key(Gcra::new(1, HOUR)).name("hourly"))
            .error_handler(|rejection| match rejection.reason {
                Reason::Denied(denial) => (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("x-denied-by", denial.limit)],
                    format!("wait {:?}", denial.retry_after),
                )
                    .into_response(),
                _ => rejection.response.into_response(),
            })
            .build()
            .unwrap();
        let app = app(layer);
        assert_eq!(call(&app, Method::GET, &[], None).await.status, 200);
        let r = call(&app, Method::GET, &[], None).await;
        assert_eq!(r.status, 429);
        assert_eq!(r.headers["x-denied-by"], "hourly");
        assert_eq!(r.body, "wait Some(3600s)");
        assert_eq!(
            Peek::new("rl:global", Gcra::new(1, HOUR))
                .query(&mut c)
                .unwrap()
                .remaining,
            0
        );
    });
}

#[test]
fn fifty_in_flight_from_one_client_through_many_proxies_admit_exactly_the_limit() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    block_on_multi(async {
        let layer = RedisRateLimitLayer::builder(client(&s, Protocol::Resp3), SmartIp)
            .limit(HttpLimit::per_key(three_an_hour()).prefix("rl:ip:"))
            .legacy_headers(true)
            .deny_cache(100)
            .build()
            .unwrap();
        let app = app(layer);
        let tasks: Vec<_> = (0..50)
            .map(|i| {
                let app = app.clone();
                tokio::spawn(async move {
                    let chain = format!("203.0.113.7, 10.0.{}.{}", i / 10, i % 10);
                    let fields = [("x-forwarded-for", chain.as_str())];
                    call(&app, Method::GET, &fields, None).await
                })
            })
            .collect();
        let mut admitted = 0;
        for task in tasks {
            let r = task.await.unwrap();
            match r.status {
                200 => admitted += 1,
                429 => assert_eq!(r.headers["x-ratelimit-remaining"], "0"),
                other => panic!("{other}"),
            }
        }
        assert_eq!(admitted, 3);
        assert_eq!(remaining(&mut c, "rl:ip:203.0.113.7"), 0);
    });
}
