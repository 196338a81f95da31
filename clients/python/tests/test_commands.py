"""Every typed call against a real server, in RESP2 and RESP3 (the ``protocol`` fixture)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from redis_ratelimit import CommandError, Decision, Node, Policy, RateLimiter, WrongTypeError
from redis_ratelimit.policy import Quota

from .conftest import SLACK, Server


def ms(n: int) -> timedelta:
    return timedelta(milliseconds=n)


def test_gcra(rl: RateLimiter) -> None:
    d = rl.gcra("api:42", 100, "1m", burst=20)
    assert (d.allowed, d.limit, d.remaining, d.retry_after, d.reset_after) == (
        True,
        20,
        19,
        None,
        ms(600),
    )
    assert rl.gcra("api:42", 100, timedelta(minutes=1), burst=20, cost=19).remaining == 0
    denied = rl.gcra("api:42", 100, "1m", burst=20)
    assert not denied and denied.retry_after == ms(600) and denied.reset_after == ms(12000)


def test_bucket(rl: RateLimiter) -> None:
    assert rl.bucket("up:42", 100, 10, "1s", cost=60).remaining == 40
    d = rl.bucket("up:42", 100, 10, "1s", cost=60)
    assert (d.allowed, d.retry_after, d.reset_after) == (False, ms(2000), ms(6000))


def test_sliding_modes(rl: RateLimiter) -> None:
    for _ in range(5):
        assert rl.sliding("login:alice", 5, "15m").allowed
    d = rl.sliding("login:alice", 5, "15m")
    assert (d.allowed, d.remaining, d.retry_after) == (False, 0, ms(900_000))
    d = rl.sliding("search:42", 100, "1m", buckets=6, cost=95)
    assert (d.remaining, d.reset_after) == (5, ms(70_000))
    assert rl.sliding("approx:1", 10, 60, mode="approx").remaining == 9


def test_fixed(rl: RateLimiter) -> None:
    d = rl.fixed("quota:43", 1000, "1d")
    assert (d.remaining, d.reset_after) == (999, timedelta(days=1))
    assert rl.fixed("quota:44", 1000, "1d", aligned=True).remaining == 999


def test_options(rl: RateLimiter) -> None:
    assert rl.gcra("llm:7", 10000, "1m", cost=2000).remaining == 8000
    d = rl.gcra("llm:7", 10000, "1m", refund=1200)
    assert (d.allowed, d.remaining, d.reset_after) == (True, 9200, ms(4800))
    d = rl.gcra("llm:7", 10000, "1m", cost=20000, force=True)
    assert not d.allowed and d.remaining == 0
    d = rl.gcra("p:1", 10, "1s", cost=30, partial=True)
    assert (d.allowed, d.granted, d.remaining) == (True, 10, 0)
    assert rl.gcra("dry:1", 10, "1s", dryrun=True).remaining == 9
    assert rl.peek("dry:1", Policy.gcra(10, "1s")).remaining == 10


def test_sketch(rl: RateLimiter) -> None:
    d = rl.sketch("rl:ip", "203.0.113.7", 100, "1m")
    assert (d.allowed, d.limit, d.remaining, d.reset_after) == (True, 100, 99, ms(120_000))
    with pytest.raises(WrongTypeError, match="WIDTH 2048, not 16"):
        rl.sketch("rl:ip", "203.0.113.7", 100, "1m", width=16)


def test_all(rl: RateLimiter) -> None:
    user, org = Policy.gcra(10, "1s", name="user"), Policy.gcra(15, "1s", name="org")
    d = rl.all([("{org:7}:user:42", user), ("{org:7}", org)])
    assert d.allowed and d.blocked_by is None and d.retry_after is None
    assert [(x.remaining, x.reset_after) for x in d.limits] == [(9, ms(100)), (14, ms(67))]
    assert (d.limit, d.remaining) == (10, 9)
    d = rl.all(
        [("{u:1}:req", Policy.gcra(100, "1m")), ("{u:1}:bytes", Policy.fixed(1048576, "1m"))],
        costs=[1, 300_000],
    )
    assert [x.remaining for x in d.limits] == [99, 748_576]
    tight = Policy.fixed(1, "1m", name="tight")
    assert rl.all([("{a}1", user), ("{a}2", tight)]).allowed
    d = rl.all([("{a}1", user), ("{a}2", tight)])
    assert (d.allowed, d.blocked_by, d.retry_after) == (False, 1, ms(60_000))
    assert d.limits[1].policy == tight


def test_all_with_a_lease_and_partial(rl: RateLimiter) -> None:
    d = rl.all(
        [("{u:7}:rate", Policy.gcra(100, "1m")), ("{u:7}:inflight", Policy.concurrency(5, "30s"))]
    )
    assert d.lease is not None and len(d.lease) == 44 and d.limits[1].lease == d.lease
    d = rl.all(
        [("{p}1", Policy.gcra(5, "1s")), ("{p}2", Policy.gcra(3, "1s"))], cost=4, partial=True
    )
    assert (d.allowed, d.granted) == (True, 3)


def test_share(rl: RateLimiter) -> None:
    path = [("{org:7}:user:42", Node(10, "1s", ceil=50)), ("{org:7}", Node(100, "1s"))]
    d = rl.share(path)
    assert d.allowed and [(x.limit, x.remaining) for x in d.limits] == [(10, 9), (100, 99)]
    assert rl.share_peek(path).limits[0].remaining == 9


def test_check_and_shadow(rl: RateLimiter) -> None:
    rl.client.execute_command("RL.POLICY", "SET", "plan:free", "FIXED", "3", "1m")
    d = rl.check("user:42", "cust:42", "plan:free")
    assert (d.allowed, d.limit, d.remaining, d.reset_after) == (True, 3, 2, ms(60_000))
    rl.client.execute_command("RL.POLICY", "SET", "plan:shadow", "FIXED", "1", "1m", "SHADOW")
    assert not rl.check("user:9", "plan:shadow").shadow_denied
    d = rl.check("user:9", "plan:shadow")
    assert d.allowed and d.shadow_denied
    rl.client.execute_command("RL.POLICY", "SET", "plan:lease", "CONCURRENCY", "1", "10s", "SHADOW")
    d = rl.check("user:10", "plan:lease")
    assert d.lease is not None and not d.shadow_denied
    assert rl.check("user:10", "plan:lease").shadow_denied
    with pytest.raises(CommandError, match=r"^ERR none of the policies 'a', 'b' is defined$"):
        rl.check("k", "a", "b")
    assert rl.peek("user:42", Policy.named("plan:free")).remaining == 2


def test_leases(rl: RateLimiter) -> None:
    d = rl.acquire("gpu:t7", 1, "30s")
    assert d.allowed and d.lease is not None
    denied = rl.acquire("gpu:t7", 1, "30s")
    assert not denied and denied.lease is None and denied.retry_after == ms(30_000)
    assert rl.acquire("gpu:t7", 1, "30s", dryrun=True).lease is None
    assert rl.renew("gpu:t7", d.lease, "30s")
    assert rl.release("gpu:t7", d.lease)
    assert not rl.release("gpu:t7", d.lease)
    assert not rl.renew("gpu:t7", d.lease, "30s")
    with pytest.raises(CommandError, match=r"^ERR lease must be 44 lowercase hex digits"):
        rl.release("gpu:t7", "nope")


def test_throttle(rl: RateLimiter) -> None:
    d = rl.throttle("user123", 15, 30, 60)
    assert (d.allowed, d.limit, d.remaining, d.retry_after, d.reset_after) == (
        True,
        16,
        15,
        None,
        timedelta(seconds=2),
    )


def test_clock(rl: RateLimiter) -> None:
    now = rl.clock()
    assert rl.advance_clock(timedelta(seconds=2)) == now + 2_000_000
    assert rl.set_clock(now) == now


def test_errors_keep_the_servers_message(rl: RateLimiter) -> None:
    with pytest.raises(CommandError) as e:
        rl.gcra("k", 0, "1s")
    assert str(e.value) == "ERR limit must be an integer from 1 to 9223372036854775807"
    assert e.value.code == "ERR"
    rl.gcra("k", 1, "1s")
    with pytest.raises(WrongTypeError) as w:
        rl.bucket("k", 1, 1, "1s")
    assert str(w.value) == "WRONGTYPE key holds RL.GCRA state, not RL.BUCKET state"
    with pytest.raises(
        CommandError, match=r"^ERR syntax error: FORCE, PARTIAL and REFUND are mutually exclusive$"
    ):
        rl.gcra("k", 1, "1s", cost=1, force=True, partial=True)
    with pytest.raises(CommandError, match=r"^ERR syntax error: FLOW needs WAIT timeout$"):
        rl.gcra("k", 1, "1s", flow="tenant")
    with pytest.raises(CommandError, match=r"^ERR syntax error: WEIGHT needs FLOW name$"):
        rl.gcra("k", 1, "1s", wait="1s", weight=2)


def test_decisions_are_the_same_from_resp2_and_resp3(fresh: Server) -> None:
    """The same calls on two keys at one instant, read through each protocol."""
    calls = [
        lambda r, k: r.gcra(k, 10, "1s", cost=3),
        lambda r, k: r.gcra(k, 10, "1s", cost=30, partial=True),
        lambda r, k: r.acquire(k + ":c", 2, "10s"),
        lambda r, k: r.all(
            [("{" + k + "}a", Policy.gcra(1, "1s")), ("{" + k + "}b", Policy.concurrency(1, "5s"))]
        ),
        lambda r, k: r.all(
            [("{" + k + "}a", Policy.gcra(1, "1s")), ("{" + k + "}b", Policy.concurrency(1, "5s"))]
        ),
        lambda r, k: r.share([(k + "{s}u", Node(1, "1s", ceil=2)), (k + "{s}", Node(5, "1s"))]),
        lambda r, k: r.throttle(k + ":t", 5, 10, 60),
        lambda r, k: r.sketch(k + ":sk", "ip", 10, "1m"),
    ]
    readers = {
        name: RateLimiter(fresh.client(p, decode_responses=decode), deadline=SLACK)
        for name, p, decode in [("2", 2, False), ("3", 3, False), ("2d", 2, True), ("3d", 3, True)]
    }
    for call in calls:
        got = {name: call(r, f"same:{name}") for name, r in readers.items()}
        leases = {name: d.lease for name, d in got.items()}
        normal = {name: _without_leases(d) for name, d in got.items()}
        assert len(set(normal.values())) == 1, normal
        assert len({lease is None for lease in leases.values()}) == 1


def _without_leases(d: Decision) -> Decision:
    from dataclasses import replace

    return replace(d, lease=None, limits=tuple(_without_leases(x) for x in d.limits))


def test_quota_and_headers() -> None:
    assert Policy.gcra(10, "1s", burst=20).quota == Quota(10, 1)
    assert Policy.bucket(100, 10, "1s").quota == Quota(10, 1)
    assert Policy.gcra(1, "250ms").quota == Quota(4, 1)
    assert Policy.gcra(10, "1500ms").quota == Quota(20, 3)
    assert Policy.concurrency(5, "30s").quota is None
    with pytest.raises(ValueError, match="whole number of milliseconds"):
        Policy.gcra(1, timedelta(microseconds=1500))


def test_headers_on_a_denial_name_the_longest_wait() -> None:
    per_key, glob = Policy.gcra(3, "30s", name="per-key"), Policy.gcra(5, "1m", name="global")

    def denied(wait_ms: int, policy: Policy) -> Decision:
        return Decision(False, 3, 0, ms(wait_ms), ms(90_000), policy=policy)

    for waits, name in [((2_000, 9_500), "global"), ((9_500, 2_000), "per-key")]:
        limits = (denied(waits[0], per_key), denied(waits[1], glob))
        d = Decision(False, 3, 0, ms(9_500), ms(90_000), blocked_by=0, limits=limits)
        fields = d.headers()
        assert fields["Retry-After"] == "10"
        assert fields["RateLimit"] == f'"{name}";r=0;t=10'
        assert fields["RateLimit-Policy"] == '"per-key";q=3;w=30, "global";q=5;w=60'
        assert d.problem()["violated-policies"] == ["per-key", "global"]
    # Retry-After is never shorter than a denying limit's own wait.
    limits = (denied(3_001, per_key), denied(500, glob))
    d = Decision(False, 3, 0, ms(1_000), ms(90_000), blocked_by=0, limits=limits)
    assert d.headers()["Retry-After"] == "4"
