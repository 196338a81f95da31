"""The deny cache against a real server: it only denies what the server denied, for as long.

The server's clock is manual (``RL.CLOCK``) and the cache's clock a
counter moved with it, so every step is deterministic.
"""

from __future__ import annotations

import asyncio
import random
import threading

import pytest
import redis

from bench import deny_cache
from redis_ratelimit import AsyncRateLimiter, DenyCache, Policy, RateLimiter

from .conftest import Server


class Clock:
    """The cache's clock, moved together with the server's."""

    def __init__(self, client: redis.Redis) -> None:
        self.now = 1000.0
        self.client = client

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.client.execute_command("RL.CLOCK", "ADVANCE", round(seconds * 1_000_000))


def calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0


def test_a_denial_is_repeated_locally_until_its_retry_after(fresh: Server) -> None:
    client = fresh.client()
    clock = Clock(client)
    cache = DenyCache(clock=clock)
    rl = RateLimiter(fresh.client(), deny_cache=cache)
    per_minute = Policy.fixed(2, "1m")
    assert [rl.decide("k", per_minute).allowed for _ in range(3)] == [True, True, False]
    sent = calls(client, "rl.fixed")
    local = [rl.decide("k", per_minute) for _ in range(5)]
    assert calls(client, "rl.fixed") == sent and cache.saved == 5
    assert not any(d.allowed for d in local)
    assert local[0].retry_after is not None and local[0].retry_after.total_seconds() == 60
    assert rl.decide("k", per_minute, cost=0).allowed  # cheaper than the denial: asked
    assert rl.decide("other", per_minute).allowed  # another key
    assert rl.decide("k", Policy.fixed(5, "1m")).allowed  # another limit on the key
    assert not rl.decide("k", per_minute, dryrun=True).allowed  # options go to the server
    clock.advance(59.999)
    assert rl.decide("k", per_minute).retry_after.total_seconds() == 0.001  # type: ignore[union-attr]
    sent = calls(client, "rl.fixed")
    clock.advance(0.001)
    assert rl.decide("k", per_minute).allowed  # the window ended: asked again
    assert calls(client, "rl.fixed") == sent + 1


def test_paced_after_each_admission_the_next_unit_is_one_interval_later(fresh: Server) -> None:
    client = fresh.client()
    clock = Clock(client)
    cache = DenyCache(clock=clock)
    rl = RateLimiter(fresh.client(), deny_cache=cache)
    # A unit every minute (keys expire on the server's real clock: no shorter).
    per_minute = Policy.gcra(10, "10m", burst=1)
    assert rl.decide("g", per_minute).allowed
    denied = rl.decide("g", per_minute)
    assert not denied.allowed and denied.retry_after is not None
    assert denied.retry_after.total_seconds() == 60
    clock.advance(60)
    assert rl.decide("g", per_minute).allowed  # the server admits the unit that came
    sent = calls(client, "rl.gcra")
    d = rl.decide("g", per_minute)  # paced: the next unit is a minute away, answered here
    assert not d.allowed and calls(client, "rl.gcra") == sent
    assert d.retry_after is not None and d.retry_after.total_seconds() == 60
    clock.advance(60)
    assert rl.decide("g", per_minute).allowed
    assert calls(client, "rl.gcra") == sent + 1


def test_it_never_admits_what_the_server_would_deny(fresh: Server) -> None:
    """Many threads on one key: every admission is the server's, the server's count is exact."""
    client = fresh.client()
    client.config_resetstat()
    cache = DenyCache()
    rl = RateLimiter(fresh.client(max_connections=20), deny_cache=cache)
    policy = Policy.gcra(50, "1h")
    admitted = 0
    lock = threading.Lock()

    def run() -> None:
        nonlocal admitted
        for _ in range(100):
            if rl.decide("hot", policy).allowed:
                with lock:
                    admitted += 1

    threads = [threading.Thread(target=run) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert admitted == 50
    assert rl.peek("hot", policy).remaining == 0
    assert calls(client, "rl.gcra") + cache.saved == 1000
    assert cache.saved >= 900  # denied for an hour: after the first denials, all local


@pytest.mark.parametrize("api", ["sync", "asyncio"])
def test_at_ten_times_the_limit_a_key_costs_at_most_0_12_commands_per_request(api: str) -> None:
    """Real clock: 1,000 requests/s offered for 3 s on a key of 100 per second (bench/deny_cache).

    Counted after the first second, once the burst is spent: the steady state.
    """
    server = Server(manual_clock=False)
    try:
        if api == "sync":
            f = deny_cache.run_sync(server, warm=1.0, seconds=3.0)
        else:
            f = asyncio.run(deny_cache.run_async(server, warm=1.0, seconds=3.0))
    finally:
        server.remove()
    assert f.requests / f.seconds > 800, f  # about 10x the limit was offered
    assert f.commands / f.requests <= 0.12, f
    # The limit's rate, give or take the requests out at the window's edges.
    assert 0.8 * 100 * f.seconds <= f.admitted <= 100 * f.seconds + 10, f


async def test_cancelled_calls_leave_no_request_counted_out(fresh: Server) -> None:
    """Tasks cancelled at random points: none stays counted as out for the key's units."""
    clock = Clock(fresh.client())
    cache = DenyCache(clock=clock)
    arl = AsyncRateLimiter(fresh.aclient(max_connections=100), deny_cache=cache, deadline=10)
    policy = Policy.gcra(10, "10m", burst=1)
    assert (await arl.decide("c", policy)).allowed
    assert not (await arl.decide("c", policy)).allowed  # denied: the cache knows the key
    clock.advance(60)  # one unit has come: calls go out for it
    rng = random.Random(7)
    for _ in range(20):
        tasks = [asyncio.create_task(arl.decide("c", policy)) for _ in range(5)]
        await asyncio.sleep(rng.random() * 0.002)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert all(entry.flying == 0 for entry in cache._entries.values())
    assert arl.guard.circuit.step() == "send"
    await arl.client.aclose()  # type: ignore[attr-defined]
