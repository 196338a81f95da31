//! The `http_api` example served in-process against a real server with the
//! manual clock, driven by plain HTTP/1.1 requests: status codes,
//! `Retry-After`, `RateLimit`, `RateLimit-Policy` and the problem body.

#[path = "../examples/http_api/app.rs"]
#[allow(dead_code)]
mod app;
mod common;

use common::*;
use redis_ratelimit_client::http::{ceil_seconds, header_fields, Named};
use redis_ratelimit_client::{AllDecision, Decision, Policy};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long the apps of tests against a live server wait for it: long
/// enough that no loaded machine makes a live server look like a failed
/// one (the example's own timeout is for its outages).
const LIVE_STORE_TIMEOUT: Duration = Duration::from_secs(60);

/// Serves the example's router on a free loopback port, on its own thread
/// and runtime; returns the port.
fn serve(redis_url: String, limits: app::Limits) -> u16 {
    serve_with_store_timeout(redis_url, limits, LIVE_STORE_TIMEOUT)
}

fn serve_with_store_timeout(
    redis_url: String,
    limits: app::Limits,
    store_timeout: Duration,
) -> u16 {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let redis = app::connect(&redis_url).unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().port()).unwrap();
            let router =
                app::router(app::App::with_store_timeout(redis, limits, store_timeout).unwrap());
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

fn limit(name: &'static str, policy: &str, on_error: app::OnStoreError) -> app::Limit {
    app::Limit::new(name, policy, on_error).unwrap()
}

fn limits_failing(on_error: app::OnStoreError) -> app::Limits {
    app::Limits {
        // 3 per 30 s per key: one every 10 s, bursts of 3.
        per_key: limit("per-key", "GCRA 3 30s", on_error),
        // 5 per minute for everyone, counted in a sliding window.
        global: limit("global", "SLIDING 5 60s", on_error),
    }
}

fn limits() -> app::Limits {
    limits_failing(app::OnStoreError::FailClosed)
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
    // Only the limit that decides: the global limit's 60 s would end after
    // Retry-After, which a strict reader of the draft takes as wrong.
    assert_eq!(r.headers["ratelimit"], "\"per-key\";r=0;t=10");
    assert_eq!(get_bytes(&mut c, "rl:global"), state_before);

    // bob: two more fill the global limit; his third is denied by it, and
    // the wait is the global window's.
    for _ in 0..2 {
        assert_eq!(get(port, "/hello", Some("bob")).status, 200);
    }
    let r = get(port, "/hello", Some("bob"));
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["retry-after"], "60");
    assert_eq!(r.headers["ratelimit"], "\"global\";r=0;t=60");
    assert!(r.body.contains("\"violated-policies\":[\"global\"]"));

    // alice again: both limits deny, hers for 10 s, the global one for 60 s.
    // The longer wait decides Retry-After and the one item reported.
    let r = get(port, "/hello", Some("alice"));
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["retry-after"], "60");
    assert_eq!(r.headers["ratelimit"], "\"global\";r=0;t=60");
    assert!(r
        .body
        .contains("\"violated-policies\":[\"per-key\",\"global\"]"));

    // A minute later the sliding window has emptied.
    advance(&mut c, 60 * SECOND);
    let r = get(port, "/hello", Some("bob"));
    assert_eq!(r.status, 200);
    assert!(r.headers["ratelimit"].ends_with("\"global\";r=4;t=60"));
}

/// Redis's words and the request's keys: none may reach a response.
fn assert_no_leak(r: &Response) {
    for secret in ["ERR", "unknown", "RL.ALL", "rl:", "alice", "global"] {
        assert!(!r.body.contains(secret), "{secret} in {:?}", r.body);
    }
}

#[test]
fn a_store_that_answers_with_an_error_is_a_500_whatever_the_limits_chose() {
    use app::OnStoreError::{FailClosed, FailOpen};
    // A server without the module: every RL.ALL is an error. It answers,
    // so it is not unavailable: failing open would hide the fault for good.
    let s = Server::with(Config::without_module());
    let mixed = app::Limits {
        per_key: limit("per-key", "GCRA 3 30s", FailClosed),
        global: limit("global", "SLIDING 5 60s", FailOpen),
    };
    for limits in [limits_failing(FailClosed), mixed, limits_failing(FailOpen)] {
        let r = get(serve(s.url(), limits), "/hello", Some("alice"));
        assert_eq!(r.status, 500);
        assert_eq!(r.body, "rate limiter error\n");
        assert!(!r.headers.contains_key("ratelimit"));
        assert_no_leak(&r);
    }
}

/// Requests `GET /hello` for `api_key` until one is limited (a 200 or 429
/// with a `RateLimit` field): the app has reached the server. Each attempt
/// is bounded by the app's store timeout; the 60 s are a hang guard, not a
/// claim about how soon.
fn until_limited(port: u16, api_key: &str) {
    let start = std::time::Instant::now();
    loop {
        let r = get(port, "/hello", Some(api_key));
        if r.headers.contains_key("ratelimit") {
            return;
        }
        assert_no_leak(&r);
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "still {} after {:?}",
            r.status,
            start.elapsed()
        );
        // Paces the loop when the app answers at once (a refused
        // connection fails fast).
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn reconnects_by_itself_after_redis_restarts() {
    use app::OnStoreError::{FailClosed, FailOpen};
    let mut s = Server::start();
    clock_set(&mut s.conn(), T0);
    // The example's own store timeout: what bounds a request's wait while
    // Redis is away. Connected first (a first call connects, which on a
    // loaded machine may take longer than that).
    let serve = |limits| serve_with_store_timeout(s.url(), limits, app::STORE_TIMEOUT);
    let closed = serve(limits_failing(FailClosed));
    let open = serve(limits_failing(FailOpen));
    for port in [closed, open] {
        until_limited(port, "alice");
    }

    // Redis goes away: the billed contract refuses, the safety limit admits.
    let (config, port) = (s.config.clone(), s.port);
    // The first request finds the connection broken; the next ones wait
    // (bounded by the app's timeout) on a reconnection that keeps failing.
    s.stop();
    for _ in 0..2 {
        let r = get(closed, "/hello", Some("alice"));
        assert_eq!(r.status, 503);
        assert_no_leak(&r);
        let r = get(open, "/hello", Some("alice"));
        assert_eq!(r.status, 200);
        assert!(!r.headers.contains_key("ratelimit"));
    }

    // A new redis-server on the same port, with none of the old state:
    // both apps reconnect by themselves and are limited again, by the new
    // server (which holds the key each one wrote).
    let s = Server::start_on(config, new_dir(), port);
    let mut c = s.conn();
    clock_set(&mut c, T0);
    for port in [closed, open] {
        let api_key = format!("bob{port}");
        until_limited(port, &api_key);
        assert!(get_bytes(&mut c, &format!("rl:key:{api_key}")).is_some());
    }
}

#[test]
fn the_quota_is_the_rate_not_the_burst() {
    use app::OnStoreError::FailClosed;
    let s = Server::start();
    clock_set(&mut s.conn(), T0);
    for (burst, left) in [(20, 19), (1, 0)] {
        let limits = app::Limits {
            per_key: limit("per-key", &format!("GCRA 10 1s BURST {burst}"), FailClosed),
            global: limit("global", "BUCKET 100 10 1s", FailClosed),
        };
        let port = serve(s.url(), limits);
        let r = get(port, "/hello", Some(&format!("burst{burst}")));
        assert_eq!(r.status, 200);
        assert_eq!(
            r.headers["ratelimit-policy"],
            "\"per-key\";q=10;w=1, \"global\";q=10;w=1"
        );
        assert!(
            r.headers["ratelimit"].starts_with(&format!("\"per-key\";r={left};t=1,")),
            "{}",
            r.headers["ratelimit"]
        );
    }
    // With a burst of 20 at 10 per second, full again only after 2 s: `t`
    // stays within the window of 1 s.
    let limits = app::Limits {
        per_key: limit("per-key", "GCRA 10 1s BURST 20", FailClosed),
        global: limit("global", "BUCKET 100 10 1s", FailClosed),
    };
    let port = serve(s.url(), limits);
    // 15 requests' worth charged directly (the layer's RL.ALL keeps the
    // same state): carol's key lives a tenth of a second of wall clock per
    // request, less than a loaded machine may take between two HTTP
    // requests; without a TTL it waits for the 16th.
    atomically(
        &mut s.conn(),
        &[
            &[
                "RL.GCRA",
                "rl:key:carol",
                "10",
                "1s",
                "BURST",
                "20",
                "COST",
                "15",
            ],
            &["PERSIST", "rl:key:carol"],
        ],
    );
    let r = get(port, "/hello", Some("carol"));
    assert_eq!(r.status, 200);
    assert!(r.headers["ratelimit"].starts_with("\"per-key\";r=4;t=1,"));
}

#[test]
fn quotas_come_from_the_policy() {
    let quota = |p: &str| {
        let q = p.parse::<Policy>().unwrap().quota().unwrap();
        (q.units(), q.window_secs())
    };
    assert_eq!(quota("GCRA 10 1s BURST 20"), (10, 1));
    assert_eq!(quota("GCRA 10 1s BURST 1"), (10, 1));
    assert_eq!(quota("gcra 100 1m"), (100, 60));
    assert_eq!(quota("BUCKET 100 10 1s"), (10, 1));
    assert_eq!(quota("SLIDING 1000 60 APPROX"), (1000, 60));
    assert_eq!(quota("FIXED 5 1h ALIGNED"), (5, 3600));
    // Sub-second periods: the same rate over whole seconds.
    assert_eq!(quota("GCRA 1 250ms"), (4, 1));
    assert_eq!(quota("GCRA 3 1500ms"), (2, 1));
    assert_eq!(quota("GCRA 10 1500ms"), (20, 3));
    assert_eq!(quota("SLIDING 1 300ms"), (10, 3));
    for bad in [
        "",
        "GCRA 10",
        "GCRA x 1s",
        "GCRA 10 0s",
        "GCRA 10 1y",
        "LEAKY 1 1s",
    ] {
        assert!(bad.parse::<Policy>().is_err(), "{bad}");
    }
}

#[test]
fn approx_never_announces_t_beyond_the_window() {
    use app::OnStoreError::FailClosed;
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    let limits = app::Limits {
        per_key: limit("per-key", "GCRA 1000 1s", FailClosed),
        global: limit("global", "SLIDING 5 60s APPROX", FailClosed),
    };
    let port = serve(s.url(), limits);
    // Requests through one window and into the next: the previous window's
    // count keeps the key alive for up to two windows.
    let mut longest_reset_ms = 0;
    for step in 0..8 {
        let r = get(port, "/hello", Some("dave"));
        let global = r.headers["ratelimit"]
            .split(", ")
            .find(|i| i.starts_with("\"global\""))
            .unwrap_or_else(|| panic!("{:?}", r.headers))
            .to_string();
        let t: u64 = global.rsplit("t=").next().unwrap().parse().unwrap();
        assert!(t <= 60, "step {step}: {global}");
        let reset = decide(
            &mut c,
            &["RL.SLIDING", "rl:global", "5", "60s", "APPROX", "DRYRUN"],
        )[4];
        longest_reset_ms = longest_reset_ms.max(reset);
        advance(&mut c, 15 * SECOND);
    }
    assert!(longest_reset_ms > 60_000, "the case is exercised");
}

#[test]
fn the_longest_wait_decides_not_the_first_denial() {
    let denied = |retry_after_ms| {
        Decision::denied(10, Some(Duration::from_millis(retry_after_ms)))
            .with_reset_after(Duration::from_millis(90_000))
    };
    let limits = limits();
    let limits: Vec<Named> = [limits.per_key, limits.global]
        .iter()
        .map(|l| Named::new(l.name, l.policy.quota().unwrap()))
        .collect();
    // RL.ALL's blocked_by would be the first limit; the second waits longer.
    for (waits, name, wait) in [
        ([2_000, 9_500], "global", "10"),
        ([9_500, 2_000], "per-key", "10"),
    ] {
        let mut verdict = AllDecision::new(waits.iter().map(|&w| denied(w)).collect());
        verdict.blocked_by = Some(0);
        let fields: HashMap<_, _> = header_fields(&verdict, &limits).into_iter().collect();
        assert_eq!(fields["retry-after"], wait);
        assert_eq!(fields["ratelimit"], format!("\"{name}\";r=0;t={wait}"));
    }
    // Retry-After is never shorter than a denying limit's own wait.
    let mut verdict = AllDecision::new(vec![denied(3_001), denied(500)]);
    verdict.retry_after = Some(Duration::from_millis(1_000));
    let fields: HashMap<_, _> = header_fields(&verdict, &limits).into_iter().collect();
    assert_eq!(fields["retry-after"], "4");
}

#[test]
fn rounds_retry_after_up_to_whole_seconds() {
    let ceil_s = |ms| ceil_seconds(Duration::from_millis(ms));
    assert_eq!(ceil_s(0), 0);
    assert_eq!(ceil_s(1), 1);
    assert_eq!(ceil_s(1000), 1);
    assert_eq!(ceil_s(1001), 2);
}
