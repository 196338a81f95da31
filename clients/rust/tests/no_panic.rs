//! No panic is reachable through the public API: every entry point driven
//! with extreme values (durations from zero to `Duration::MAX`, counts and
//! costs up to `u64::MAX`, shares near zero, names with quotes, control
//! characters and non-ASCII text), replies of any shape, and the real
//! server's replies at the extremes it accepts (counts up to `MAX_COUNT`,
//! periods from 1 ms, or 1 µs rounded up, to `MAX_DURATION`), where a
//! panic in a call's task must never become an outage that a fail-open
//! limit admits through.

#[path = "../../../tests/common/mod.rs"]
mod common;

use proptest::prelude::*;
use redis::Value;
use redis_ratelimit_client::http::{
    ceil_seconds, header_fields, problem, HeaderKey, HttpLimit, Named, PeerIp, RedisRateLimitLayer,
};
use redis_ratelimit_client::{
    acquire, parse_duration, All, AllDecision, BlockLease, BlockingLeasedLimit, Bucket, Charge,
    Client, Command, Concurrency, Decide, Decision, Fixed, Gcra, LeasePlan, LeasedLimit, Peek,
    Policy, Quota, Sliding, Throttle, MAX_COUNT, MAX_DURATION,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(Duration::from_nanos(1)),
        any::<u64>().prop_map(Duration::from_nanos),
        any::<u64>().prop_map(Duration::from_millis),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

fn count() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0),
        Just(1),
        Just(u64::MAX),
        Just(i64::MAX as u64),
        any::<u64>()
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("a \"quoted\"\\ name".to_string()),
        Just("\r\n\0".to_string()),
        any::<String>(),
        "[a-z-]{1,20}",
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        (count(), duration(), proptest::option::of(count())).prop_map(|(l, p, b)| {
            let g = Gcra::new(l, p);
            Policy::from(match b {
                Some(b) => g.burst(b),
                None => g,
            })
        }),
        (count(), count(), duration()).prop_map(|(c, r, p)| Bucket::new(c, r, p).into()),
        (count(), duration(), any::<u32>())
            .prop_map(|(l, w, n)| Sliding::new(l, w).buckets(n).into()),
        (count(), duration()).prop_map(|(l, w)| Sliding::new(l, w).approx().into()),
        (count(), duration()).prop_map(|(l, w)| Fixed::new(l, w).aligned().into()),
        (count(), duration()).prop_map(|(l, t)| Concurrency::new(l, t).into()),
    ]
}

fn decision() -> impl Strategy<Value = Decision> {
    (
        any::<bool>(),
        count(),
        count(),
        proptest::option::of(duration()),
        duration(),
        proptest::option::of(count()),
    )
        .prop_map(
            |(allowed, limit, remaining, retry_after, reset_after, granted)| {
                let d = if allowed {
                    Decision::admitted(limit, remaining)
                } else {
                    Decision::denied(limit, retry_after).with_remaining(remaining)
                };
                let d = d.with_reset_after(reset_after);
                match granted {
                    Some(g) => d.with_granted(g),
                    None => d,
                }
            },
        )
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Nil),
        any::<i64>().prop_map(Value::Int),
        any::<Vec<u8>>().prop_map(Value::BulkString),
        any::<String>().prop_map(Value::SimpleString),
        any::<f64>().prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
    ];
    leaf.prop_recursive(3, 24, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::vec((inner.clone(), inner), 0..6).prop_map(Value::Map),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn policies_and_commands_with_extreme_values(p in policy(), d in duration(), n in count(), key in name()) {
        let _ = p.validate();
        let _ = (p.to_string(), p.words(), p.quota(), p.unit_interval(), p.command_name());
        let _ = p.to_string().parse::<Policy>();
        for charge in [Charge::Cost(n), Charge::Partial(n), Charge::Refund(n)] {
            let call = Decide::new(key.clone(), p).charge(charge).wait(d);
            let _ = (call.to_cmd(), call.waits());
        }
        let _ = acquire(key.clone(), n, d).to_cmd();
        let _ = All::new().limit(key.clone(), p).limit("", p).costs([n, 0]).wait(d).to_cmd();
        let _ = Peek::new(key.clone(), p).to_cmd();
        let _ = Throttle::new(key, n, n, d).quantity(n).to_cmd();
    }

    #[test]
    fn text_parsers_take_anything(text in any::<String>(), words in "[A-Za-z0-9 ]{0,40}") {
        let _ = parse_duration(&text);
        let _ = text.parse::<Policy>();
        let _ = words.parse::<Policy>();
    }

    #[test]
    fn replies_of_any_shape_are_errors_not_panics(v in value()) {
        let _ = Decide::parse(&v);
        let _ = All::parse(&v);
        let _ = Peek::parse(&v);
        let _ = Throttle::parse(&v);
    }

    #[test]
    fn header_fields_of_extreme_decisions(ds in proptest::collection::vec(decision(), 1..4), q in count(), w in count(), wait in proptest::option::of(duration()), n in name(), d in duration()) {
        let named: Vec<Named> = ds.iter().map(|_| Named::new(n.clone(), Quota::new(q, w))).collect();
        let mut all = AllDecision::new(ds);
        if !all.allowed {
            all.retry_after = wait;
        }
        let _ = header_fields(&all, &named);
        let _ = problem(&all, &named);
        let _ = ceil_seconds(d);
    }

    #[test]
    fn block_leases_and_limits_of_any_size(k in count(), d in duration(), n in name(), p in policy()) {
        let plan = LeasePlan::adaptive(k).queued(d);
        let _ = (plan.max_block(), plan.is_adaptive(), plan.queue_timeout());
        let lease = BlockLease::from(plan);
        let _ = (lease.block(), lease.held(), lease.blocked_until(), lease.queues());
        let limit = HttpLimit::per_key(p).name(n.clone()).prefix(n.clone()).leased(LeasePlan::fixed(k));
        let _ = limit.key_for(&n);
        let _ = HttpLimit::shared(p).name(n.clone()).key_for(&n);
    }
}

proptest! {
    // Each case builds a layer and sends requests to a closed port (the
    // connection is refused at once): fewer cases.
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn layers_and_clients_with_extreme_values(p in policy(), n in name(), d in duration(), k in count(), key in any::<Vec<u8>>()) {
        block_on(async {
            // Nothing listens on the port: every call fails or, waiting as
            // long as its bound allows (up to `Duration::MAX`), is cut
            // short here.
            let short = Duration::from_millis(20);
            let url = format!("redis://127.0.0.1:{}/", free_port());
            let conn = redis_ratelimit_client::connect(&url).unwrap();
            let client = Client::new(conn).timeout(d.min(Duration::from_millis(50)));
            let wait = Decide::new("k", p).charge(Charge::Cost(k)).wait(d);
            let _ = tokio::time::timeout(short, client.send(&wait)).await;
            let forever = Client::new(redis_ratelimit_client::connect(&url).unwrap()).timeout(Duration::MAX);
            let call = Decide::new("k", Gcra::new(1, Duration::MAX)).wait(Duration::MAX);
            let _ = tokio::time::timeout(short, forever.send(&call)).await;
            let _ = tokio::time::timeout(short, client.acquire(&Decide::new("k", p))).await;
            let layer = RedisRateLimitLayer::builder(client.clone(), HeaderKey::new(http::header::AUTHORIZATION))
                .limit(HttpLimit::per_key(p).name(n.clone()).leased(LeasePlan::adaptive(k)))
                .wait(d)
                .deny_cache(k.min(1 << 20) as usize)
                .degraded(k.min(1 << 20) as usize)
                .cost(move |_| k)
                .error_handler(|r| r.response)
                .build();
            if let Ok(layer) = layer {
                let _ = tokio::time::timeout(short, layer.refund_all()).await;
                let _ = tokio::time::timeout(short, layer.refund_idle(d)).await;
                let mut service = tower::ServiceBuilder::new()
                    .layer(layer)
                    .service_fn(|_r: http::Request<String>| async { Ok::<_, std::convert::Infallible>(http::Response::new(String::new())) });
                let mut request = http::Request::new(String::new());
                if let Ok(v) = http::HeaderValue::from_bytes(&key) {
                    request.headers_mut().insert(http::header::AUTHORIZATION, v);
                }
                use tower::Service;
                let _ = tokio::time::timeout(short, service.call(request)).await;
            }
            let peer = RedisRateLimitLayer::builder(client, PeerIp::new())
                .limit(HttpLimit::shared(Gcra::new(1, Duration::from_secs(1))))
                .build();
            prop_assert!(peer.is_ok());
            Ok(())
        })?;
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

static PANICKED: AtomicBool = AtomicBool::new(false);

/// Records every panic, in any thread (a call's task included), before the
/// default report.
fn watch_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.store(true, Ordering::SeqCst);
            report(info)
        }));
    });
}

fn multi<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Counts the server takes, their edges first.
fn server_count() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(1),
        Just(2),
        Just(20),
        Just(MAX_COUNT),
        Just(MAX_COUNT - 1),
        1..=MAX_COUNT
    ]
}

/// Periods the server takes (1 µs is sent as 1 ms), their edges first.
fn server_period() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::from_micros(1)),
        Just(Duration::from_millis(1)),
        Just(Duration::from_secs(3)),
        Just(MAX_DURATION),
        (1u64..=MAX_DURATION.as_millis() as u64).prop_map(Duration::from_millis),
    ]
}

fn server_policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        (server_count(), server_period()).prop_map(|(l, p)| Gcra::new(l, p).into()),
        (server_count(), server_count(), server_period())
            .prop_map(|(l, b, p)| Gcra::new(l, p).burst(b).into()),
        (server_count(), server_count(), server_period())
            .prop_map(|(c, r, p)| Bucket::new(c, r, p).into()),
        (server_count(), server_period()).prop_map(|(l, w)| Fixed::new(l, w).into()),
    ]
}

/// Clock steps: none, the smallest, a period's worth, years.
fn server_step() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(3_000_000),
        Just(MAX_DURATION.as_micros() as u64),
        0u64..=MAX_DURATION.as_micros() as u64,
    ]
}

/// No error of a call may say its reply could not be landed (a panic).
fn landed<T>(result: &Result<T, redis_ratelimit_client::Error>) -> bool {
    !matches!(result, Err(redis_ratelimit_client::Error::Reply(r)) if r.contains("landed"))
}

#[test]
fn leasing_layers_and_undos_on_real_replies_at_the_extremes() {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    watch_panics();
    let s = common::Server::start();
    common::clock_set(&mut s.conn(), common::T0);
    let url = s.url();
    let case = AtomicU64::new(0);
    let config = Config {
        cases: 128,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let strategy = (
        server_policy(),
        server_count(),
        prop_oneof![Just(0u64), Just(1), server_count()],
        proptest::collection::vec(server_step(), 4),
        any::<bool>(),
    );
    runner
        .run(&strategy, |(policy, k, cost, steps, adaptive)| {
            let n = case.fetch_add(1, Ordering::Relaxed);
            let mut admin = s.conn();
            multi(async {
                let guard = Duration::from_secs(20);
                let client = Client::new(redis_ratelimit_client::connect(&url).unwrap());
                let lease = if adaptive {
                    LeasePlan::adaptive(k)
                } else {
                    LeasePlan::fixed(k)
                };
                let hot = LeasedLimit::new(client.clone(), format!("hot{n}"), policy, lease);
                let layer = RedisRateLimitLayer::builder(
                    client.clone(),
                    HeaderKey::new(http::header::AUTHORIZATION),
                )
                .limit(
                    HttpLimit::per_key(policy)
                        .name("leased")
                        .prefix(format!("l{n}:"))
                        .leased(lease)
                        .fail_open(),
                )
                .limit(
                    HttpLimit::per_key(policy)
                        .name("plain")
                        .prefix(format!("p{n}:"))
                        .fail_open(),
                )
                // Degraded mode's shares follow every reply of this one.
                .limit(
                    HttpLimit::per_key(policy)
                        .name("shared")
                        .prefix(format!("s{n}:")),
                )
                .degraded(16)
                .deny_cache(16)
                .cost(move |_| cost)
                .build();
                // A layer refuses a period under 1 ms, which the server
                // would round up (calls of its own send it as 1 ms).
                let layer = match layer {
                    Ok(layer) => Some(layer),
                    Err(e) => {
                        prop_assert!(e.to_string().contains("duration"), "{e}");
                        None
                    }
                };
                let mut service = layer.clone().map(|layer| {
                    tower::ServiceBuilder::new().layer(layer).service_fn(
                        |_r: http::Request<String>| async {
                            Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
                        },
                    )
                });
                let mut blocking =
                    BlockingLeasedLimit::new(s.conn(), format!("b{n}"), policy, lease);
                for step in &steps {
                    let acquired = tokio::time::timeout(guard, hot.acquire()).await;
                    prop_assert!(acquired.as_ref().is_ok_and(landed), "{acquired:?}");
                    let acquired = tokio::time::timeout(guard, hot.acquire_cost(cost)).await;
                    prop_assert!(acquired.as_ref().is_ok_and(landed), "{acquired:?}");
                    let acquired = blocking.acquire_cost(cost);
                    prop_assert!(landed(&acquired), "{acquired:?}");
                    // Reserved within the clock's step, cut short at once too.
                    let reserve = Decide::new(format!("r{n}"), policy)
                        .cost(cost)
                        .reserve(Duration::from_micros(*step));
                    let sent = tokio::time::timeout(guard, client.send(&reserve)).await;
                    prop_assert!(sent.is_ok());
                    let _ = tokio::time::timeout(Duration::ZERO, client.send(&reserve)).await;
                    let partial = Decide::new(format!("d{n}"), policy).charge(Charge::Partial(k));
                    let sent = tokio::time::timeout(guard, client.send(&partial)).await;
                    prop_assert!(sent.is_ok());
                    // Cut short at once: finished and refunded in the background.
                    let _ = tokio::time::timeout(Duration::ZERO, client.send(&partial)).await;
                    let mut request = http::Request::new(String::new());
                    request.headers_mut().insert(
                        http::header::AUTHORIZATION,
                        http::HeaderValue::from_static("key"),
                    );
                    use tower::Service;
                    if let Some(service) = service.as_mut() {
                        let response = tokio::time::timeout(guard, service.call(request)).await;
                        prop_assert!(response.is_ok());
                    }
                    common::advance(&mut admin, *step);
                }
                let refunds = tokio::time::timeout(guard, hot.refund_if_idle(Duration::ZERO)).await;
                prop_assert!(refunds.is_ok());
                prop_assert!(landed(&blocking.refund_all()));
                let _ = tokio::time::timeout(guard, hot.refund_all()).await;
                if let Some(layer) = layer {
                    let _ = tokio::time::timeout(guard, layer.refund_all()).await;
                }
                Ok(())
            })?;
            prop_assert!(!PANICKED.load(Ordering::SeqCst), "a panic (see above)");
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_block_of_max_count_on_one_per_three_seconds_admits_one_even_failing_open() {
    watch_panics();
    let s = common::Server::start();
    common::clock_set(&mut s.conn(), common::T0);
    let served = Arc::new(AtomicU64::new(0));
    multi(async {
        let client = Client::new(redis_ratelimit_client::connect(&s.url()).unwrap());
        let policy = Gcra::new(1, Duration::from_secs(3));
        let layer =
            RedisRateLimitLayer::builder(client, HeaderKey::new(http::header::AUTHORIZATION))
                .limit(
                    HttpLimit::per_key(policy)
                        .leased(LeasePlan::fixed(MAX_COUNT))
                        .fail_open(),
                )
                .build()
                .unwrap();
        let counter = served.clone();
        let mut service = tower::ServiceBuilder::new().layer(layer).service_fn(
            move |_r: http::Request<String>| {
                counter.fetch_add(1, Ordering::Relaxed);
                async { Ok::<_, std::convert::Infallible>(http::Response::new(String::new())) }
            },
        );
        for _ in 0..4 {
            let mut request = http::Request::new(String::new());
            request.headers_mut().insert(
                http::header::AUTHORIZATION,
                http::HeaderValue::from_static("key"),
            );
            use tower::Service;
            let response = service.call(request).await.unwrap();
            assert!(
                [200, 429].contains(&response.status().as_u16()),
                "{}",
                response.status()
            );
        }
    });
    assert!(!PANICKED.load(Ordering::SeqCst), "a panic (see above)");
    assert_eq!(served.load(Ordering::Relaxed), 1, "one unit in 3 s");
}
