//! Every command through the typed client against real servers with the
//! module and the manual clock, in RESP2 and RESP3: the same typed
//! replies, the reference's exact values, the server's errors kept, and
//! leases held as guards.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use redis_ratelimit_client::*;
use std::time::Duration;
use support::*;

const S: Duration = Duration::from_secs(1);
const H: Duration = Duration::from_secs(3_600);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Runs every command once on a fresh server with the clock at T0;
/// returns the replies, and checks the reference's values on the way.
async fn every_command(client: &Client) -> Vec<String> {
    let mut seen = Vec::new();
    let mut note = |what: &str, out: &dyn std::fmt::Debug| seen.push(format!("{what}: {out:?}"));

    // Keys read again later have periods of hours (the reference's
    // minutes and seconds, times 60 or 3600): keys expire on the server's
    // real clock, and these outlive the test however slow the machine.
    // RL.GCRA: 100 per hour, bursts of 20.
    let gcra = Gcra::new(100, H).burst(20);
    let d = client.send(&Decide::new("api:42", gcra)).await.unwrap();
    assert_eq!((d.allowed, d.limit, d.remaining), (true, 20, 19));
    assert_eq!((d.retry_after, d.reset_after), (None, 36 * S));
    note("gcra", &d);
    let d = client
        .send(&Decide::new("api:42", gcra).cost(19))
        .await
        .unwrap();
    assert_eq!((d.remaining, d.reset_after), (0, 720 * S));
    let d = client.send(&Decide::new("api:42", gcra)).await.unwrap();
    assert!(!d.allowed && !d.never());
    assert_eq!(d.retry_after, Some(36 * S));
    note("gcra denied", &d);
    let d = client
        .send(&Decide::new("api:42", gcra).cost(21))
        .await
        .unwrap();
    assert!(d.never(), "{d:?}");

    // PARTIAL, REFUND and FORCE.
    let tokens = Gcra::new(10_000, H);
    let d = client
        .send(&Decide::new("tokens", tokens).charge(Charge::Partial(12_000)))
        .await
        .unwrap();
    assert_eq!((d.allowed, d.granted, d.remaining), (true, Some(10_000), 0));
    note("partial", &d);
    let d = client
        .send(&Decide::new("tokens", tokens).charge(Charge::Refund(1_500)))
        .await
        .unwrap();
    assert_eq!((d.allowed, d.remaining), (true, 1_500));
    let d = client
        .send(&Decide::new("tokens", tokens).charge(Charge::Force(3_000)))
        .await
        .unwrap();
    assert!(!d.allowed && d.retry_after.is_some());
    note("force", &d);

    // RL.BUCKET: 100 tokens, 10 more an hour.
    let bucket = Bucket::new(100, 10, H);
    let d = client
        .send(&Decide::new("upload:42", bucket).cost(60))
        .await
        .unwrap();
    assert_eq!((d.remaining, d.reset_after), (40, 6 * H));
    let d = client
        .send(&Decide::new("upload:42", bucket).cost(60))
        .await
        .unwrap();
    assert_eq!((d.allowed, d.retry_after), (false, Some(2 * H)));
    note("bucket", &d);

    // RL.SLIDING in its three modes.
    let login = Sliding::new(5, 15 * 60 * S);
    for left in (0..5).rev() {
        let d = client.send(&Decide::new("login", login)).await.unwrap();
        assert_eq!((d.allowed, d.remaining), (true, left));
    }
    let d = client.send(&Decide::new("login", login)).await.unwrap();
    assert_eq!(d.retry_after, Some(ms(900_000)));
    note("sliding exact", &d);
    for (key, policy) in [
        ("approx", Sliding::new(100, 60 * S).approx()),
        ("buckets", Sliding::new(100, 60 * S).buckets(6)),
    ] {
        let d = client
            .send(&Decide::new(key, policy).cost(95))
            .await
            .unwrap();
        assert_eq!((d.allowed, d.limit, d.remaining), (true, 100, 5));
        note(key, &d);
    }

    // RL.FIXED, from the first request and aligned.
    for (key, fixed) in [
        ("quota:43", Fixed::new(1000, 86_400 * S)),
        ("quota:42", Fixed::new(1000, 86_400 * S).aligned()),
    ] {
        let d = client.send(&Decide::new(key, fixed)).await.unwrap();
        assert_eq!((d.remaining, d.reset_after), (999, 86_400 * S));
        note(key, &d);
    }

    // RL.SKETCH.
    let sketch = Sketch::new("rl:ip", "203.0.113.7", 100, H);
    let d = client.send(&sketch).await.unwrap();
    assert_eq!((d.allowed, d.remaining), (true, 99));
    note("sketch", &d);
    let err = client.send(&sketch.clone().width(16)).await.unwrap_err();
    assert!(
        matches!(&err, Error::Server { code, message } if code == "WRONGTYPE"
            && message == "WRONGTYPE key holds RL.SKETCH state with WIDTH 2048, not 16"),
        "{err:?}"
    );

    // RL.ALL: admitted by both, then denied by the second.
    let both = || {
        All::new()
            .limit("{org:7}:user:42", Gcra::new(10, H))
            .limit("{org:7}", Gcra::new(2, H))
    };
    let d = client.send(&both()).await.unwrap();
    assert!(d.allowed && d.blocked_by.is_none() && d.retry_after.is_none());
    assert_eq!(
        d.limits.iter().map(|l| l.remaining).collect::<Vec<_>>(),
        [9, 1]
    );
    note("all", &d);
    let d = client.send(&both().cost(2)).await.unwrap();
    assert_eq!((d.allowed, d.blocked_by), (false, Some(1)));
    assert_eq!(d.retry_after, Some(1_800 * S));
    // The first limit's reply is its dry run: nothing was charged.
    assert_eq!(d.limits[0].remaining, 7);
    note("all denied", &d);
    let d = client
        .send(
            &All::new()
                .limit("{u:1}:req", Gcra::new(100, 60 * S))
                .limit("{u:1}:bytes", Fixed::new(1_048_576, 60 * S))
                .costs([1, 300_000]),
        )
        .await
        .unwrap();
    assert_eq!(
        d.limits.iter().map(|l| l.remaining).collect::<Vec<_>>(),
        [99, 748_576]
    );

    // RL.PEEK changes nothing.
    let d = client.send(&Peek::new("api:42", gcra)).await.unwrap();
    assert_eq!((d.allowed, d.remaining), (false, 0));
    note("peek", &d);

    // RL.ACQUIRE, RL.RENEW, RL.RELEASE.
    let d = client.send(&acquire("gpu", 1, 30 * H)).await.unwrap();
    let lease = d.lease.clone().expect("a lease");
    assert_eq!(lease.0.len(), 44);
    note("acquire", &(d.allowed, d.limit, d.remaining, d.reset_after));
    let d = client.send(&acquire("gpu", 1, 30 * H)).await.unwrap();
    assert_eq!((d.allowed, d.lease.as_ref()), (false, None));
    assert_eq!(d.retry_after, Some(30 * H));
    note("acquire denied", &d);
    let renew = Renew::new("gpu", lease.clone(), 60 * H);
    assert!(client.send(&renew).await.unwrap());
    let release = Release::new("gpu", lease);
    assert!(client.send(&release).await.unwrap());
    assert!(!client.send(&release).await.unwrap());
    assert!(!client.send(&renew).await.unwrap());
    let d = client
        .send(
            &All::new()
                .limit("{j}:rate", Gcra::new(10, S))
                .limit("{j}:inflight", Concurrency::new(2, 30 * S)),
        )
        .await
        .unwrap();
    assert!(d.limits[0].lease.is_none() && d.limits[1].lease.is_some());

    // CL.THROTTLE, in redis-cell's seconds.
    let d = client
        .send(&Throttle::new("user123", 15, 30, 60 * S))
        .await
        .unwrap();
    assert_eq!(d, ThrottleDecision::admitted(16, 15, 2 * S));
    note("throttle", &d);
    seen
}

#[test]
fn every_command_reads_the_same_in_resp2_and_resp3() {
    let mut replies = Vec::new();
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let s = Server::start();
        clock_set(&mut s.conn(), T0);
        replies.push(block_on(async {
            let client = client(&s, protocol);
            // The protocol is the one asked for: a map in RESP3.
            let mut conn = connect(&url(&s, protocol)).unwrap();
            let raw: redis::Value = redis::cmd("RL.PEEK")
                .arg("nothing")
                .arg("GCRA")
                .arg(1)
                .arg("1s")
                .query_async(&mut conn)
                .await
                .unwrap();
            let is_map = matches!(raw, redis::Value::Map(_));
            assert_eq!(is_map, matches!(protocol, Protocol::Resp3), "{raw:?}");
            every_command(&client).await
        }));
    }
    assert_eq!(replies[0], replies[1]);
}

#[test]
fn blocking_connections_send_the_same_commands() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Two an hour: the key outlives the test on the wall clock.
    let call = Decide::new("k", Gcra::new(2, 3_600 * S));
    assert!(call.query(&mut c).unwrap().allowed);
    let d = call.clone().cost(2).query(&mut c).unwrap();
    assert_eq!((d.allowed, d.retry_after), (false, Some(1_800 * S)));
    let mut c3 = s.conn_resp3();
    let d = Peek::new("k", Gcra::new(2, 3_600 * S))
        .query(&mut c3)
        .unwrap();
    assert_eq!((d.allowed, d.remaining), (true, 1));
}

#[test]
fn server_errors_keep_their_code_and_message() {
    let s = Server::start();
    let mut c = s.conn();
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("hello")
        .query(&mut c)
        .unwrap();
    block_on(async {
        let client = client(&s, Protocol::Resp2);
        let error = |call: Decide| {
            let client = client.clone();
            async move {
                match client.send(&call).await {
                    Err(Error::Server { code, message }) => (code, message),
                    other => panic!("{other:?}"),
                }
            }
        };
        assert_eq!(
            error(Decide::new("text", Gcra::new(1, S))).await,
            (
                "WRONGTYPE".into(),
                "WRONGTYPE key holds a string that is not RL.GCRA state".into()
            )
        );
        client
            .send(&Decide::new("b", Bucket::new(1, 1, S)))
            .await
            .unwrap();
        assert_eq!(
            error(Decide::new("b", Gcra::new(1, S))).await.1,
            "WRONGTYPE key holds RL.BUCKET state, not RL.GCRA state"
        );
        let (code, message) = error(Decide::new("k", Gcra::new(0, S))).await;
        assert_eq!(code, "ERR");
        assert!(
            message.starts_with("ERR limit must be an integer from 1"),
            "{message}"
        );
        let (code, message) = error(Decide::new("k", Gcra::new(1, Duration::ZERO))).await;
        assert_eq!(code, "ERR");
        assert!(message.starts_with("ERR period must be"), "{message}");
        // FORCE on a concurrency limit: refused by the server, in its words.
        let (_, message) = error(acquire("c", 1, S).charge(Charge::Force(1))).await;
        assert!(message.contains("FORCE"), "{message}");
    });
}

#[test]
fn a_lease_guard_releases_when_done_or_dropped_and_renews_while_work_runs() {
    let s = Server::start();
    let mut c = s.conn();
    clock_set(&mut c, T0);
    // Held for an hour first (the key outlives the check on the wall
    // clock), then for 300 ms, renewed by the guard in real time.
    let held = acquire("gpu", 1, 3_600 * S);
    let slot = acquire("gpu", 1, 300 * MS_DURATION);
    block_on(async {
        let client = client(&s, Protocol::Resp2);
        let guard = client.acquire(&held).await.unwrap().expect("free");
        let denied = client.acquire(&held).await.unwrap().err().expect("held");
        assert_eq!(denied.retry_after, Some(3_600 * S));
        assert!(guard.renew().await.unwrap());
        assert!(guard.release().await.unwrap());

        // Work that outlasts the TTL keeps its lease: the guard renews it
        // every third of the TTL while the work runs. The work lasts until
        // the server has seen three renewals, however slowly they come
        // (polls of at least 10 ms each, up to a minute: a hang guard).
        let guard = client.acquire(&slot).await.unwrap().expect("free again");
        let renewals_before = calls(&mut c, "rl.renew");
        let worked = guard
            .run(async {
                let mut polls = 0;
                while calls(&mut c, "rl.renew") < renewals_before + 3 {
                    polls += 1;
                    assert!(polls < 6000, "the lease was never renewed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                7
            })
            .await;
        assert_eq!(worked, 7);
        // ...and released it at the end.
        let guard = client.acquire(&slot).await.unwrap().expect("released");

        // Dropped: released in the background, soon.
        drop(guard);
        let mut attempts = 0;
        while client
            .send(&Peek::new("gpu", Concurrency::new(1, S)))
            .await
            .unwrap()
            .remaining
            == 0
        {
            attempts += 1;
            assert!(attempts < 1000, "never released");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
}

const MS_DURATION: Duration = Duration::from_millis(1);

/// `RESERVE`: admitted now for a start later, the delay read in both
/// protocols; beyond the delay accepted, denied with none. `JITTER`: a
/// denial's wait never earlier than the true one.
#[test]
fn reservations_and_jittered_waits_through_the_typed_client() {
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let s = Server::start();
        clock_set(&mut s.conn(), T0);
        block_on(async {
            let client = client(&s, protocol);
            let call = Decide::new("k", Gcra::new(1, H));
            let r = client.send(&call.clone().reserve(H)).await.unwrap();
            assert!(r.decision.allowed);
            assert_eq!(r.delay, Some(Duration::ZERO));
            let r = client.send(&call.clone().reserve(2 * H)).await.unwrap();
            assert!(r.decision.allowed, "{r:?}");
            assert_eq!((r.delay, r.decision.reset_after), (Some(H), 2 * H));
            let r = client.send(&call.clone().reserve(H)).await.unwrap();
            assert!(!r.decision.allowed);
            assert_eq!((r.delay, r.decision.retry_after), (None, Some(2 * H)));
            let d = client.send(&call.clone().jitter()).await.unwrap();
            assert!(!d.allowed && d.retry_after >= Some(2 * H), "{d:?}");
            // A window reserves too: admitted now, its start told.
            let r = client
                .send(&Decide::new("w", Fixed::new(1, H)).reserve(H))
                .await
                .unwrap();
            assert!(r.decision.allowed, "{r:?}");
            assert_eq!(r.delay, Some(Duration::ZERO));
        });
    }
}
