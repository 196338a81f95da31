"""Reservations (``reserve``) and jittered waits (``jitter=True``) against a real server."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Literal

import httpx
import pytest

from redis_ratelimit import AsyncRateLimiter, CommandError, Policy, RateLimiter, Reservation

from .conftest import SLACK, Server, free_port
from .test_asgi import starlette_app


def ms(n: int) -> timedelta:
    return timedelta(milliseconds=n)


ONE_PER_S = Policy.gcra(1, "1s")


def test_reserve_admits_now_for_a_start_later(rl: RateLimiter) -> None:
    assert rl.decide("api:42", ONE_PER_S).allowed
    r = rl.reserve("api:42", ONE_PER_S, "5s")
    assert isinstance(r, Reservation) and r
    assert (r.decision.allowed, r.decision.reset_after, r.delay) == (True, ms(2000), ms(1000))
    # The next start is 2 s away: denied as without RESERVE, nothing charged.
    denied = rl.reserve("api:42", ONE_PER_S, "1500ms")
    assert not denied and denied.delay is None and denied.decision.retry_after == ms(2000)
    assert rl.peek("api:42", ONE_PER_S).reset_after == ms(2000)


def test_reserve_admitted_at_once_has_no_delay(rl: RateLimiter) -> None:
    r = rl.reserve("api:1", Policy.bucket(5, 1, "1s"), timedelta(seconds=1), cost=2)
    assert r.delay == timedelta(0) and r.decision.remaining == 3


def test_reserve_dryrun_charges_nothing(rl: RateLimiter) -> None:
    rl.decide("api:2", ONE_PER_S)
    r = rl.reserve("api:2", ONE_PER_S, "5s", dryrun=True)
    assert r.delay == ms(1000)
    assert rl.peek("api:2", ONE_PER_S).reset_after == ms(1000)


def test_reserve_on_a_window_starts_when_the_window_ends(rl: RateLimiter) -> None:
    window = Policy.fixed(1, "1m")
    assert rl.decide("w:1", window).allowed
    r = rl.reserve("w:1", window, "2m")
    assert r and r.delay == ms(60_000)
    assert not rl.decide("w:1", window).allowed


def test_reserve_on_a_lease_is_refused_by_name(rl: RateLimiter) -> None:
    with pytest.raises(
        CommandError, match=r"^ERR syntax error: RESERVE cannot be combined with RL.ACQUIRE"
    ):
        rl.reserve("c:1", Policy.concurrency(10, "1m"), "1s")


def test_fifty_threads_reserve_in_line(fresh: Server, protocol: int) -> None:
    """50 in flight on one key, the clock still: each start one interval after the last."""
    client = fresh.client(protocol, max_connections=60)
    rl = RateLimiter(client, deadline=SLACK)
    # Periods of hours: keys expire on the server's real clock, which a
    # loaded machine can move past a 1 s key while the threads connect.
    policy = Policy.gcra(10, "1h", burst=5)
    with ThreadPoolExecutor(50) as pool:
        got = list(pool.map(lambda _: rl.reserve("hot", policy, "1h"), range(50)))
    delays = sorted(r.delay for r in got if r.delay is not None)
    # 5 at once, then one each 6 min up to the 1 h bound; the rest denied, charging nothing.
    assert delays == [timedelta(0)] * 5 + [ms(360_000 * i) for i in range(1, 11)]
    assert all(not r.decision.allowed for r in got if r.delay is None)
    state = rl.peek("hot", policy)
    assert (state.remaining, state.reset_after) == (0, ms(5_400_000))
    client.close()


def test_jitter_spreads_the_waits_of_clients_denied_together(
    rl: RateLimiter, protocol: int
) -> None:
    # Herds live in the server's memory, not the key: a key of its own per protocol.
    key = f"api:7:{protocol}"
    policy = Policy.gcra(100, "1s")
    rl.decide(key, policy, cost=100)
    plain = rl.decide(key, policy)
    assert plain.retry_after == ms(10)
    waits = [rl.decide(key, policy, jitter=True).retry_after for _ in range(20)]
    # Never before the true wait; the i-th denied in the i-th interval after it.
    assert all(
        w is not None and ms(10 + 10 * i) <= w <= ms(10 + 10 * (i + 1)) for i, w in enumerate(waits)
    )
    assert len(set(waits)) > 10
    assert rl.peek(key, policy).reset_after == ms(1000)  # a denial writes nothing


def test_jitter_is_deterministic_under_the_manual_clock(protocol: int) -> None:
    def run() -> list[timedelta | None]:
        server = Server()  # herds start empty
        client = server.client(protocol)
        client.execute_command("RL.CLOCK", "SET", 1767225600000000)
        rl = RateLimiter(client, deadline=SLACK)
        rl.gcra("api:7", 100, "1s", cost=100)
        waits = [rl.gcra("api:7", 100, "1s", jitter=True).retry_after for _ in range(5)]
        client.close()
        server.remove()
        return waits

    first = run()
    assert first[:2] == [ms(18), ms(29)]  # docs/commands.md's example
    assert run() == first


async def test_async_reserve(arl: AsyncRateLimiter) -> None:
    assert (await arl.decide("api:42", ONE_PER_S)).allowed
    r = await arl.reserve("api:42", ONE_PER_S, "5s")
    assert r.delay == ms(1000)
    denied = await arl.reserve("api:42", ONE_PER_S, "1500ms")
    assert denied.delay is None and denied.decision.retry_after == ms(2000)
    hourly = Policy.gcra(10, "1h")  # a key that outlives a slow machine's real clock
    tasks = [arl.reserve("a:hot", hourly, "30m") for _ in range(30)]
    got = await asyncio.gather(*tasks)
    delays = sorted(r.delay for r in got if r.delay is not None)
    assert delays == [timedelta(0)] * 10 + [ms(360_000 * i) for i in range(1, 6)]
    assert (await arl.peek("a:hot", hourly)).reset_after == ms(5_400_000)


async def test_async_jitter(arl: AsyncRateLimiter) -> None:
    await arl.gcra("a:7", 100, "1s", cost=100)
    waits = [(await arl.gcra("a:7", 100, "1s", jitter=True)).retry_after for _ in range(3)]
    assert all(w is not None and w >= ms(10) for w in waits) and len(set(waits)) > 1


async def test_middleware_passes_on_the_jittered_retry_after(arl: AsyncRateLimiter) -> None:
    async def retry_afters(jitter: bool) -> list[str]:
        app = starlette_app(arl, jitter=jitter)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            headers = {"x-api-key": f"k{jitter}{id(arl)}"}
            statuses = [(await http.get("/hello", headers=headers)) for _ in range(12)]
        assert [r.status_code for r in statuses[:2]] == [200, 200]
        return [r.headers["retry-after"] for r in statuses[2:]]

    plain = await retry_afters(False)
    jittered = await retry_afters(True)
    # 2 per minute: the true wait is 30 s; the spread adds up to 30 s per denial.
    assert set(plain) == {"30"}
    assert all(int(v) >= 30 for v in jittered) and len(set(jittered)) > 1


@pytest.mark.parametrize("fallback", ["open", "closed"])
def test_reserve_without_redis_answers_the_fallback(fallback: Literal["open", "closed"]) -> None:
    """Nothing listening: an admission by the fallback starts at once, a denial has no delay."""
    rl = RateLimiter.from_url(f"redis://127.0.0.1:{free_port()}", deadline=0.2, fallback=fallback)
    r = rl.reserve("api:1", ONE_PER_S, "1s")
    assert r.decision.fallback == fallback
    assert r.delay == (timedelta(0) if fallback == "open" else None)
