//! No panic is reachable through the public API: every entry point driven
//! with extreme values (durations from zero to `Duration::MAX`, counts and
//! costs up to `u64::MAX`, shares near zero, names with quotes, control
//! characters and non-ASCII text), and replies of any shape.

use proptest::prelude::*;
use redis::Value;
use redis_ratelimit_client::http::{
    ceil_seconds, header_fields, problem, HeaderKey, HttpLimit, Named, PeerIp, RedisRateLimitLayer,
};
use redis_ratelimit_client::{
    acquire, parse_duration, All, AllDecision, BlockLease, Bucket, Charge, Client, Command,
    Concurrency, Decide, Decision, Fixed, Gcra, LeasePlan, Peek, Policy, Quota, Sliding, Throttle,
};
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
