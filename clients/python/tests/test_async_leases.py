"""The asyncio client, leases (sync and async) and what callers that give up leave behind."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from redis_ratelimit import AsyncRateLimiter, LimitExceeded, Node, Policy, RateLimiter, aio

from .conftest import Server

JOB = Policy.concurrency(1, "30s")


async def test_async_calls(arl: AsyncRateLimiter) -> None:
    d = await arl.gcra("api:42", 100, "1m", burst=20)
    assert (d.allowed, d.limit, d.remaining, d.reset_after) == (
        True,
        20,
        19,
        timedelta(milliseconds=600),
    )
    assert (await arl.bucket("b", 100, 10, "1s", cost=60)).remaining == 40
    assert (await arl.sliding("s", 5, "15m")).remaining == 4
    assert (await arl.fixed("f", 3, "1m", aligned=True)).remaining == 2
    assert (await arl.sketch("sk", "ip", 10, "1m")).remaining == 9
    d = await arl.all(
        [("{o}u", Policy.gcra(10, "1s")), ("{o}", Policy.sliding(5, "1s", mode="approx"))]
    )
    assert [x.remaining for x in d.limits] == [9, 4]
    path = [("{p}u", Node(10, "1s", ceil=50)), ("{p}", Node(100, "1s"))]
    assert (await arl.share(path)).limits[0].remaining == 9
    assert (await arl.share_peek(path)).limits[0].remaining == 9
    await arl.client.execute_command("RL.POLICY", "SET", "plan", "GCRA", "2", "1s")
    assert (await arl.check("k", "nope", "plan")).remaining == 1
    assert (await arl.peek("k", Policy.named("plan"))).remaining == 1
    lease = await arl.acquire("c", 1, "10s")
    assert lease.lease is not None
    assert await arl.renew("c", lease.lease, "10s")
    assert await arl.release("c", lease.lease)
    assert (await arl.throttle("t", 5, 10, 60)).remaining == 5
    now = await arl.clock()
    assert await arl.advance_clock(1) == now + 1


def test_lease_releases_on_exit_and_on_error(rl: RateLimiter) -> None:
    with rl.lease("job", 1, "30s") as lease:
        assert len(lease.id) == 44
        with pytest.raises(LimitExceeded) as denied:
            rl.lease("job", 1, "30s").__enter__()
        assert denied.value.decision.retry_after == timedelta(seconds=30)
    assert rl.peek("job", JOB).remaining == 1
    with pytest.raises(RuntimeError, match="boom"), rl.lease("job", 1, "30s"):
        raise RuntimeError("boom")
    assert rl.peek("job", JOB).remaining == 1


def _until(condition: object, what: str) -> None:
    """Waits (up to 10 s of real time) for a background thread's effect."""
    deadline = time.monotonic() + 10
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_lease_renews_while_the_body_runs(rl: RateLimiter) -> None:
    with rl.lease("job", 1, "10s", renew_every="5ms") as lease:
        for _ in range(3):  # 27 s of limiter time under a 10 s TTL
            rl.advance_clock(timedelta(seconds=9))
            seen = lease.renewals
            _until(lambda seen=seen: lease.renewals > seen + 1, "a renewal after the clock moved")
            assert rl.peek("job", JOB).remaining == 0
        assert not lease.lost
    assert rl.peek("job", JOB).remaining == 1


def test_a_lease_that_ran_past_its_ttl_is_lost(rl: RateLimiter) -> None:
    with rl.lease("job", 1, "10s", renew_every="5ms") as lease:
        rl.advance_clock(timedelta(seconds=11))
        _until(lambda: lease.lost, "the renewal that finds the lease gone")


async def test_async_lease_renews_and_releases(arl: AsyncRateLimiter) -> None:
    async with arl.lease("job", 1, "10s", renew_every="5ms") as lease:
        await arl.advance_clock(timedelta(seconds=9))
        seen = lease.renewals
        deadline = time.monotonic() + 10
        while lease.renewals <= seen + 1:
            assert time.monotonic() < deadline, "no renewal after the clock moved"
            await asyncio.sleep(0.005)
        await arl.advance_clock(timedelta(seconds=9))
        assert (await arl.peek("job", JOB)).remaining == 0
    assert (await arl.peek("job", JOB)).remaining == 1


async def test_a_lease_cancelled_mid_body_is_released(arl: AsyncRateLimiter) -> None:
    started = asyncio.Event()

    async def work() -> None:
        async with arl.lease("job", 1, "30s"):
            started.set()
            await asyncio.Event().wait()  # until cancelled

    task = asyncio.create_task(work())
    await started.wait()
    assert (await arl.peek("job", JOB)).remaining == 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await arl.peek("job", JOB)).remaining == 1


async def test_a_lease_cancelled_while_waiting_is_released_when_it_comes(
    arl: AsyncRateLimiter,
) -> None:
    holder = await arl.acquire("job", 1, "30s")
    assert holder.lease is not None
    waiting = asyncio.create_task(arl.lease("job", 1, "30s", wait="10s").__aenter__())
    while not (await arl.client.execute_command("INFO", "ratelimit"))["ratelimit_waiting"]:
        await asyncio.sleep(0.005)  # until the server has the waiter in line
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await arl.release("job", holder.lease)  # the waiter is admitted now...
    deadline = time.monotonic() + 10
    while (await arl.peek("job", JOB)).remaining == 0:  # ... and gives its lease back
        assert time.monotonic() < deadline, "the orphaned lease was not released"
        await asyncio.sleep(0.005)
    assert not aio._background or await asyncio.gather(*aio._background) is not None


def test_the_server_stopped_and_restarted() -> None:
    server = Server()
    try:
        rl = RateLimiter(server.client(socket_timeout=2))
        assert rl.gcra("k", 2, "1m").remaining == 1
        server.stop()
        with pytest.raises(__import__("redis").ConnectionError):
            rl.gcra("k", 2, "1m")
        server.start()
        back = time.monotonic() + 1  # the circuit looks again within its probe interval
        while True:
            try:
                assert rl.gcra("k", 2, "1m").remaining == 1  # a new server: state was not saved
                break
            except __import__("redis").ConnectionError:
                assert time.monotonic() < back, "not back within 1 s of the server's return"
                time.sleep(0.01)
    finally:
        server.remove()


async def test_fair_waiting_options(arl: AsyncRateLimiter) -> None:
    assert (await arl.gcra("fair", 1, "1s")).allowed
    waiting = asyncio.create_task(arl.gcra("fair", 1, "1s", wait="1h", flow="tenant", weight=3))
    deadline = time.monotonic() + 10
    while not (await arl.client.execute_command("INFO", "ratelimit"))["ratelimit_waiting"]:
        assert time.monotonic() < deadline, "the FLOW request never waited"
        await asyncio.sleep(0.002)
    await arl.advance_clock(1_000_000)
    assert (await waiting).allowed
