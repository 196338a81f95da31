//! The `http_api` example served in-process against a real server with the
//! manual clock, driven by plain HTTP/1.1 requests: status codes,
//! `Retry-After`, `RateLimit`, `RateLimit-Policy` and the problem body.

#[path = "../examples/http_api/app.rs"]
#[allow(dead_code)]
mod app;
mod common;

use common::*;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Serves the example's router on a free loopback port, on its own thread
/// and runtime; returns the port.
fn serve(redis_url: String, limits: app::Limits) -> u16 {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let redis = redis::Client::open(redis_url)
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().port()).unwrap();
            let router = app::router(app::App::new(redis, limits));
            axum::serve(listener, router).await.unwrap();
        });
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("server up")
}

struct Response {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
}

/// `GET path` with an optional `X-Api-Key`, over a fresh connection.
fn get(port: u16, path: &str, api_key: Option<&str>) -> Response {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let key = api_key.map_or(String::new(), |k| format!("X-Api-Key: {k}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{key}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a full response");
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    Response {
        status: status.parse().unwrap(),
        headers,
        body: body.to_string(),
    }
}

fn limits() -> app::Limits {
    app::Limits {
        // 3 per 30 s per key: one every 10 s, bursts of 3.
        per_key: app::Limit::new("per-key", "GCRA 3 30s", 30),
        // 5 per minute for everyone, counted in a sliding window.
        global: app::Limit::new("global", "SLIDING 5 60s", 60),
    }
}

const POLICY: &str = "\"per-key\";q=3;w=30, \"global\";q=5;w=60";

#[test]
fn limits_per_key_and_globally_and_tells_the_client() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let port = serve(s.url(), limits());

    assert_eq!(get(port, "/hello", None).status, 401);

    // alice: her burst of 3, each response saying what is left.
    for (left, reset) in [(2, 10), (1, 20), (0, 30)] {
        let r = get(port, "/hello", Some("alice"));
        assert_eq!(r.status, 200);
        assert_eq!(r.body, "hello\n");
        assert_eq!(r.headers["ratelimit-policy"], POLICY);
        let global_left = 4 - (2 - left);
        assert_eq!(
            r.headers["ratelimit"],
            format!("\"per-key\";r={left};t={reset}, \"global\";r={global_left};t=60")
        );
        assert!(!r.headers.contains_key("retry-after"));
    }

    // Her 4th: denied by her own limit, for 10 s; the global limit is not
    // charged (its dry run still says 1 would remain after this request).
    let state_before = get_bytes(&mut c, "rl:global");
    let r = get(port, "/hello", Some("alice"));
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["retry-after"], "10");
    assert_eq!(r.headers["content-type"], "application/problem+json");
    assert!(r.body.contains("#quota-exceeded"), "{}", r.body);
    assert!(r.body.contains("\"violated-policies\":[\"per-key\"]"));
    assert_eq!(r.headers["ratelimit-policy"], POLICY);
    assert_eq!(
        r.headers["ratelimit"],
        "\"per-key\";r=0;t=10, \"global\";r=1;t=60"
    );
    assert_eq!(get_bytes(&mut c, "rl:global"), state_before);

    // bob: two more fill the global limit; his third is denied by it, and
    // the wait is the global window's.
    for _ in 0..2 {
        assert_eq!(get(port, "/hello", Some("bob")).status, 200);
    }
    let r = get(port, "/hello", Some("bob"));
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["retry-after"], "60");
    assert!(r.body.contains("\"violated-policies\":[\"global\"]"));

    // A minute later the sliding window has emptied.
    advance(&mut c, 60 * SECOND);
    let r = get(port, "/hello", Some("bob"));
    assert_eq!(r.status, 200);
    assert!(r.headers["ratelimit"].ends_with("\"global\";r=4;t=60"));
}

#[test]
fn a_limiter_failure_fails_closed() {
    let s = Server::with(Config::without_module());
    let port = serve(s.url(), limits());
    let r = get(port, "/hello", Some("alice"));
    assert_eq!(r.status, 503);
    assert!(r.body.starts_with("rate limiter unavailable"), "{}", r.body);
}

#[test]
fn rounds_retry_after_up_to_whole_seconds() {
    assert_eq!(app::ceil_s(0), 0);
    assert_eq!(app::ceil_s(1), 1);
    assert_eq!(app::ceil_s(1000), 1);
    assert_eq!(app::ceil_s(1001), 2);
    assert_eq!(app::ceil_s(-1), 0);
}
