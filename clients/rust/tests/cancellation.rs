//! Callers that give up at random points lose no unit: every future the
//! client returns, cut short thousands of times by `tokio::time::timeout`
//! (0 to 800 µs, seeded) on a multi-threaded runtime with many tasks on
//! one key, and then the server's own state (`RL.PEEK`, or `CL.THROTTLE`'s
//! peek) against what the callers were admitted. The manual clock stands still: nothing refills
//! or expires during a run, so every unit is accounted for.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis_ratelimit_client::http::HttpLimit;
use redis_ratelimit_client::{
    acquire, All, Client, Command, Decide, Gcra, LeasePlan, LeasedLimit, Peek, Policy, Release,
    Throttle,
};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;
use tokio::time::timeout;

const SEED: u64 = 0x5eed_0040;
const TASKS: u64 = 24;
const CALLS: u64 = 250;

/// A random cut-off from 0 to 800 µs.
fn cut(rng: &mut StdRng) -> Duration {
    Duration::from_micros(rng.gen_range(0..=800))
}

/// The calls given a random cut-off and those cut short, by future, over
/// every task.
#[derive(Default)]
struct Cuts(Mutex<BTreeMap<&'static str, [u64; 2]>>);

impl Cuts {
    /// Runs `f` (the future `what`) for at most a random cut-off: its
    /// output, or `None` (one more call cut short).
    async fn run<F: Future>(
        &self,
        what: &'static str,
        rng: &mut StdRng,
        f: F,
    ) -> Option<F::Output> {
        let out = timeout(cut(rng), f).await.ok();
        let mut counts = self.0.lock().unwrap();
        let count = counts.entry(what).or_default();
        count[0] += 1;
        count[1] += u64::from(out.is_none());
        out
    }

    /// Calls cut short, of every future.
    fn count(&self) -> u64 {
        self.0.lock().unwrap().values().map(|c| c[1]).sum()
    }

    /// Each future: calls given a cut-off, and cut short.
    fn report(&self) -> String {
        let counts = self.0.lock().unwrap();
        let each: Vec<String> = counts
            .iter()
            .map(|(what, [given, cut])| format!("{what} {cut} of {given}"))
            .collect();
        format!("cut short: {}", each.join(", "))
    }
}

/// What is left on the key, as the server says.
async fn remaining(client: &Client, key: &str, policy: impl Into<Policy>) -> u64 {
    client
        .send(&Peek::new(key, policy))
        .await
        .unwrap()
        .remaining
}

/// Waits (at most 10 s) until `settled` holds: what callers cut short left
/// to finish in the background (on this runtime) has landed.
async fn settle<F: Future<Output = bool>>(mut settled: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !settled().await && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs `TASKS × tasks_factor` tasks of `body(task index, rng)` to the end.
async fn run_tasks<F>(tasks: u64, seed: u64, body: impl Fn(StdRng) -> F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let handles: Vec<_> = (0..tasks)
        .map(|t| tokio::spawn(body(StdRng::seed_from_u64(seed + t))))
        .collect();
    for handle in handles {
        handle.await.unwrap();
    }
}

fn started() -> Server {
    let s = Server::start();
    clock_set(&mut s.conn(), T0);
    s
}

/// Enough that no run spends it: every unit the server lost shows as
/// consumed and not admitted.
const LIMIT: u64 = 1_000_000;

/// `LIMIT` per 100 years: the key's TTL on the server (real time, as Redis
/// keeps it) is an hour per unit consumed, longer than any run.
fn plenty() -> Gcra {
    Gcra::new(LIMIT, redis_ratelimit_client::MAX_DURATION)
}

#[test]
fn a_cancelled_acquire_release_or_run_never_leaks_a_lease() {
    let s = started();
    let call = acquire("slots", 10, Duration::from_secs(3600));
    let policy = call.policy;
    let cuts = Arc::new(Cuts::default());
    let held = block_on_multi(async {
        let client = client(&s, Protocol::Resp2).timeout(Duration::from_secs(5));
        run_tasks(TASKS, SEED, |mut rng| {
            let (client, call, cuts) = (client.clone(), call.clone(), cuts.clone());
            async move {
                for i in 0..5 * CALLS {
                    // Every other acquire runs to its end, so that leases
                    // are held for the releases and runs cut short.
                    let acquired = if i % 2 == 0 {
                        Some(client.acquire(&call).await)
                    } else {
                        cuts.run("Client::acquire", &mut rng, client.acquire(&call))
                            .await
                    };
                    let Some(Ok(Ok(guard))) = acquired else {
                        continue;
                    };
                    match i % 3 {
                        0 => drop(guard),
                        1 => {
                            cuts.run("LeaseGuard::release", &mut rng, guard.release())
                                .await;
                        }
                        _ => {
                            cuts.run(
                                "LeaseGuard::run",
                                &mut rng,
                                guard.run(tokio::task::yield_now()),
                            )
                            .await;
                        }
                    }
                }
            }
        })
        .await;
        settle(|| async { remaining(&client, "slots", policy).await == 10 }).await;
        10 - remaining(&client, "slots", policy).await
    });
    let cut = cuts.count();
    println!(
        "acquire: {} calls, {cut} cut short, {held} of 10 slots leaked",
        5 * TASKS * CALLS
    );
    println!("  {}", cuts.report());
    assert!(cut > 100, "only {cut} calls were cut short");
    assert_eq!(held, 0);
}

#[test]
fn a_cancelled_leased_acquire_or_refund_loses_no_unit() {
    let s = started();
    let cuts = Arc::new(Cuts::default());
    let admitted = Arc::new(AtomicU64::new(0));
    let (admitted, consumed) = block_on_multi(async {
        let client = client(&s, Protocol::Resp2).timeout(Duration::from_secs(5));
        let hot = LeasedLimit::new(client.clone(), "hot", plenty(), LeasePlan::fixed(20));
        run_tasks(TASKS * 2, SEED + 100, |mut rng| {
            let (hot, cuts, admitted) = (hot.clone(), cuts.clone(), admitted.clone());
            async move {
                for i in 0..CALLS {
                    // Every other acquire runs to its end, so that units
                    // are held for the refunds cut short to lose.
                    // A third of the requests cost 2 or 3 units.
                    let cost = if i % 3 == 0 { 1 + i % 5 % 3 } else { 1 };
                    let admit = if i % 2 == 0 {
                        hot.acquire_cost(cost).await.ok()
                    } else {
                        cuts.run(
                            "LeasedLimit::acquire_cost",
                            &mut rng,
                            hot.acquire_cost(cost),
                        )
                        .await
                        .and_then(Result::ok)
                    };
                    if admit.is_some_and(|a| a.allowed) {
                        admitted.fetch_add(cost, Ordering::Relaxed);
                    }
                    if i % 7 != 1 {
                        cuts.run(
                            "LeasedLimit::refund_if_idle",
                            &mut rng,
                            hot.refund_if_idle(Duration::ZERO),
                        )
                        .await;
                    } else {
                        cuts.run("LeasedLimit::refund_all", &mut rng, hot.refund_all())
                            .await;
                    }
                }
            }
        })
        .await;
        let admitted = admitted.load(Ordering::Relaxed);
        let consumed = || async {
            hot.refund_all().await.unwrap();
            LIMIT - remaining(&client, "hot", plenty()).await
        };
        settle(|| async { consumed().await == admitted }).await;
        (admitted, consumed().await)
    });
    let cut = cuts.count();
    println!(
        "leased: {} calls, {cut} cut short, {admitted} units admitted, {} units lost",
        TASKS * 2 * CALLS * 2,
        consumed.saturating_sub(admitted)
    );
    println!("  {}", cuts.report());
    assert!(cut > 100, "only {cut} calls were cut short");
    assert_eq!(consumed, admitted);
}

fn request() -> http::Request<String> {
    http::Request::get("/")
        .header("x-api-key", "k")
        .body(String::new())
        .unwrap()
}

/// Requests through a layer (plain or leased) dropped at random points,
/// with the layer's refunds cut short too: calls cut short, requests
/// served, units the server holds charged.
fn layer_run(leased: bool, seed: u64) -> (Arc<Cuts>, u64, u64) {
    let s = started();
    let cuts = Arc::new(Cuts::default());
    let served = Arc::new(AtomicU64::new(0));
    let consumed = block_on_multi(async {
        let client = client(&s, Protocol::Resp2).timeout(Duration::from_secs(5));
        let mut per_key = HttpLimit::per_key(plenty()).name("per-key").prefix("rl:");
        if leased {
            per_key = per_key.leased(LeasePlan::fixed(20));
        }
        let layer = by_api_key(client.clone()).limit(per_key).build().unwrap();
        let counter = served.clone();
        let inner = tower::service_fn(move |_request: http::Request<String>| {
            // Counted as the request reaches the service: from then on it
            // is being served.
            counter.fetch_add(1, Ordering::Relaxed);
            async { Ok::<_, std::convert::Infallible>(http::Response::new(String::from("ok"))) }
        });
        let app = tower_layer::Layer::layer(&layer, inner);
        run_tasks(TASKS, seed, |mut rng| {
            let (mut app, cuts, layer) = (app.clone(), cuts.clone(), layer.clone());
            async move {
                use tower_service::Service;
                for i in 0..CALLS {
                    // Every other request runs to its end: the calls cut
                    // short then meet others in flight, as in a service.
                    if i % 2 == 0 {
                        let _ = app.call(request()).await;
                    } else {
                        cuts.run("a request through the layer", &mut rng, app.call(request()))
                            .await;
                    }
                    if leased && i % 10 == 0 {
                        cuts.run(
                            "layer refund_idle",
                            &mut rng,
                            layer.refund_idle(Duration::ZERO),
                        )
                        .await;
                    } else if leased && i % 10 == 5 {
                        cuts.run("layer refund_all", &mut rng, layer.refund_all())
                            .await;
                    }
                }
            }
        })
        .await;
        let served = served.load(Ordering::Relaxed);
        let consumed = || async {
            layer.refund_all().await.unwrap();
            LIMIT - remaining(&client, "rl:k", plenty()).await
        };
        settle(|| async { consumed().await == served }).await;
        consumed().await
    });
    let served = served.load(Ordering::Relaxed);
    (cuts, served, consumed)
}

#[test]
fn a_request_dropped_before_it_is_served_is_not_charged() {
    let (cuts, served, consumed) = layer_run(false, SEED + 200);
    let cut = cuts.count();
    println!(
        "plain layer: {} requests, {cut} cut short, {served} served, {} charged and not served",
        TASKS * CALLS,
        consumed.saturating_sub(served)
    );
    println!("  {}", cuts.report());
    assert!(cut > 100, "only {cut} requests were cut short");
    assert_eq!(consumed, served);
}

#[test]
fn a_leased_layer_dropped_mid_request_or_mid_refund_loses_no_unit() {
    let (cuts, served, consumed) = layer_run(true, SEED + 300);
    let cut = cuts.count();
    println!(
        "leased layer: {} calls, {cut} cut short, {served} served, {} units lost",
        TASKS * CALLS * 6 / 5,
        consumed.saturating_sub(served)
    );
    println!("  {}", cuts.report());
    assert!(cut > 100, "only {cut} calls were cut short");
    assert_eq!(consumed, served);
}

#[test]
fn a_cancelled_send_of_a_charge_is_refunded_when_its_reply_lands() {
    let s = started();
    let cuts = Arc::new(Cuts::default());
    // Units admitted on "sent" (RL.GCRA), and on "{a}:1" (RL.ALL, with
    // "{a}:2" charged twice as much).
    let admitted = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let (admitted, consumed) = block_on_multi(async {
        let client = client(&s, Protocol::Resp3).timeout(Duration::from_secs(5));
        run_tasks(TASKS, SEED + 400, |mut rng| {
            let (client, cuts, admitted) = (client.clone(), cuts.clone(), admitted.clone());
            async move {
                for i in 0..CALLS {
                    let cost = 1 + i % 3;
                    let whole = i % 2 == 0;
                    let (allowed, on) = if i % 4 < 2 {
                        let call = Decide::new("sent", plenty()).cost(cost);
                        let d = if whole {
                            client.send(&call).await.ok()
                        } else {
                            cuts.run("Client::send(Decide)", &mut rng, client.send(&call))
                                .await
                                .and_then(Result::ok)
                        };
                        (d.map(|d| d.allowed), 0)
                    } else {
                        let call = All::new()
                            .limit("{a}:1", plenty())
                            .limit("{a}:2", plenty())
                            .costs([cost, 2 * cost]);
                        let d = if whole {
                            client.send(&call).await.ok()
                        } else {
                            cuts.run("Client::send(All)", &mut rng, client.send(&call))
                                .await
                                .and_then(Result::ok)
                        };
                        (d.map(|d| d.allowed), 1)
                    };
                    if allowed == Some(true) {
                        admitted[on].fetch_add(cost, Ordering::Relaxed);
                    }
                }
            }
        })
        .await;
        let admitted = [0, 1].map(|i| admitted[i].load(Ordering::Relaxed));
        let consumed = || async {
            let mut used = [0; 3];
            for (i, key) in ["sent", "{a}:1", "{a}:2"].into_iter().enumerate() {
                used[i] = LIMIT - remaining(&client, key, plenty()).await;
            }
            used
        };
        let expected = [admitted[0], admitted[1], 2 * admitted[1]];
        settle(|| async { consumed().await == expected }).await;
        (expected, consumed().await)
    });
    let cut = cuts.count();
    let lost: u64 = (0..3)
        .map(|i| consumed[i].saturating_sub(admitted[i]))
        .sum();
    println!(
        "send: {} calls, {cut} cut short, {:?} units admitted, {lost} units lost",
        TASKS * CALLS,
        admitted
    );
    println!("  {}", cuts.report());
    assert!(cut > 100, "only {cut} calls were cut short");
    assert_eq!(consumed, admitted);
}

#[test]
fn a_cancelled_reservation_is_refunded_when_its_reply_lands() {
    let s = started();
    let cuts = Arc::new(Cuts::default());
    let admitted = Arc::new(AtomicU64::new(0));
    let (admitted, consumed) = block_on_multi(async {
        let client = client(&s, Protocol::Resp2).timeout(Duration::from_secs(5));
        run_tasks(TASKS, SEED + 500, |mut rng| {
            let (client, cuts, admitted) = (client.clone(), cuts.clone(), admitted.clone());
            async move {
                for i in 0..CALLS {
                    let cost = 1 + i % 3;
                    let call = Decide::new("reserved", plenty())
                        .cost(cost)
                        .reserve(Duration::from_secs(3600));
                    let r = if i % 2 == 0 {
                        client.send(&call).await.ok()
                    } else {
                        cuts.run("Client::send(Reserve)", &mut rng, client.send(&call))
                            .await
                            .and_then(Result::ok)
                    };
                    if r.is_some_and(|r| r.decision.allowed) {
                        admitted.fetch_add(cost, Ordering::Relaxed);
                    }
                }
            }
        })
        .await;
        let admitted = admitted.load(Ordering::Relaxed);
        let consumed = || async { LIMIT - remaining(&client, "reserved", plenty()).await };
        settle(|| async { consumed().await == admitted }).await;
        (admitted, consumed().await)
    });
    let cut = cuts.count();
    println!(
        "reserve: {} calls, {cut} cut short, {admitted} units admitted, {} units lost",
        TASKS * CALLS,
        consumed.saturating_sub(admitted)
    );
    println!("  {}", cuts.report());
    assert!(cut > 100, "only {cut} calls were cut short");
    assert_eq!(consumed, admitted);
}

/// `CL.THROTTLE` of `LIMIT` at once (`max_burst` `LIMIT - 1`), one per
/// 3,000 s: a burst span of 95 years (the server takes up to 100), and the
/// key's TTL (real time) 50 minutes per unit consumed.
fn throttle(key: &str, quantity: u64) -> Throttle {
    Throttle::new(key, LIMIT - 1, 1, Duration::from_secs(3000)).quantity(quantity)
}

#[test]
fn a_cancelled_throttle_is_given_back_when_its_reply_lands() {
    let s = started();
    let cuts = Arc::new(Cuts::default());
    let admitted = Arc::new(AtomicU64::new(0));
    let (admitted, consumed) = block_on_multi(async {
        let client = client(&s, Protocol::Resp2).timeout(Duration::from_secs(5));
        run_tasks(TASKS, SEED + 600, |mut rng| {
            let (client, cuts, admitted) = (client.clone(), cuts.clone(), admitted.clone());
            async move {
                for i in 0..CALLS {
                    let quantity = 1 + i % 3;
                    let call = throttle("throttled", quantity);
                    let d = if i % 2 == 0 {
                        client.send(&call).await.ok()
                    } else {
                        cuts.run("Client::send(Throttle)", &mut rng, client.send(&call))
                            .await
                            .and_then(Result::ok)
                    };
                    if d.is_some_and(|d| !d.limited) {
                        admitted.fetch_add(quantity, Ordering::Relaxed);
                    }
                }
            }
        })
        .await;
        let admitted = admitted.load(Ordering::Relaxed);
        // Quantity 0: a peek.
        let consumed = || async {
            let peek = client.send(&throttle("throttled", 0)).await.unwrap();
            LIMIT - peek.remaining
        };
        settle(|| async { consumed().await == admitted }).await;
        (admitted, consumed().await)
    });
    let cut = cuts.count();
    println!(
        "throttle: {} calls, {cut} cut short, {admitted} units admitted, {} units lost",
        TASKS * CALLS,
        consumed.saturating_sub(admitted)
    );
    println!("  {}", cuts.report());
    assert!(cut > 100, "only {cut} calls were cut short");
    assert_eq!(consumed, admitted);
}

#[test]
fn a_queued_call_cut_short_is_refunded_when_the_server_admits_it_later() {
    // One an hour: the second call queues on the server (WAIT 2 h) and
    // its caller gives up; the server admits it once the clock moves on,
    // and what it took goes back. (An hour: the key's TTL, in real time,
    // outlasts the test.) A queued call holds its connection: each has
    // its own.
    let s = started();
    let policy = Gcra::new(1, Duration::from_secs(3600));
    let slot = acquire("slot", 1, Duration::from_secs(864_000)).wait(Duration::from_secs(10));
    let mut c = s.conn();
    let peek = |c: &mut redis::Connection, key: &str, policy: Policy| {
        Peek::new(key, policy).query(c).unwrap().remaining
    };
    block_on_multi(async {
        let calls = client(&s, Protocol::Resp2).timeout(Duration::from_secs(5));
        let leases = client(&s, Protocol::Resp2).timeout(Duration::from_secs(5));
        let queued = Decide::new("queued", policy).wait(Duration::from_secs(7200));
        assert!(calls.send(&queued).await.unwrap().allowed);
        let cut = timeout(Duration::from_millis(100), calls.send(&queued)).await;
        assert!(cut.is_err(), "the second call waits in line");
        let first = leases.acquire(&slot).await.unwrap().unwrap();
        let cut = timeout(Duration::from_millis(100), leases.acquire(&slot)).await;
        assert!(cut.is_err(), "the second acquire waits in line");
        // The callers have given up; the server admits both now.
        advance(&mut c, 3_600_000_000);
        // Released on another connection: the lease's own waits behind the
        // queued acquire (the guard's release later finds it gone).
        assert!(Release::new("slot", first.id().clone())
            .query(&mut c)
            .unwrap());
        drop(first);
        let settled = |c: &mut redis::Connection| {
            peek(c, "queued", policy.into()) == 1 && peek(c, "slot", slot.policy) == 1
        };
        settle(|| {
            let done = settled(&mut s.conn());
            async move { done }
        })
        .await;
    });
    assert_eq!(
        peek(&mut c, "queued", policy.into()),
        1,
        "the unit the server gave the call cut short is back"
    );
    assert_eq!(
        peek(&mut c, "slot", slot.policy),
        1,
        "the lease granted to the acquire cut short is released"
    );
}

#[test]
fn a_leased_request_dropped_in_line_or_once_served_gives_its_units_to_the_next() {
    // One unit a second, bursts of 4, spent; blocks of 2 queued for on the
    // server. Three requests in line: the first is dropped before a block
    // comes, the second once a block has come for it but before its caller
    // looked; the third takes the unit the second left, nothing is lost.
    let s = started();
    let mut c = s.conn();
    let policy = Gcra::new(4, Duration::from_secs(4));
    let (held, granted) = block_on(async {
        let shared = client(&s, Protocol::Resp2).timeout(Duration::from_secs(5));
        let spend = Decide::new("line", policy).charge(redis_ratelimit_client::Charge::Cost(4));
        assert!(shared.send(&spend).await.unwrap().allowed);
        let plan = LeasePlan::fixed(2).queued(Duration::from_secs(60));
        let hot = LeasedLimit::new(shared, "line", policy, plan)
            .queue_on(client(&s, Protocol::Resp2).timeout(Duration::from_secs(5)));
        // Polled once each: in line, in this order.
        let mut first = Box::pin(hot.acquire());
        let mut second = Box::pin(hot.acquire());
        let mut third = Box::pin(hot.acquire());
        for f in [first.as_mut(), second.as_mut(), third.as_mut()] {
            let mut f = Some(f);
            let pending = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(f.take().unwrap().poll(cx).is_pending())
            })
            .await;
            assert!(pending, "waits in line");
        }
        drop(first);
        settle(|| async { common::blocking::waiting(&mut s.conn()) == 1 }).await;
        advance(&mut c, 2 * SECOND);
        // The block lands: one unit for the second (never looked at), one
        // for the third.
        settle(|| async { hot.units_granted() == 2 }).await;
        drop(second);
        let third = third.await.unwrap();
        assert!(third.allowed);
        (hot.held(), hot.units_granted())
    });
    assert_eq!(
        (held, granted),
        (1, 2),
        "the second's unit is back in the block"
    );
}
