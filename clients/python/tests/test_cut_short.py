"""Calls cut short return what they took: the server's state after callers gave up at random points.

Many callers on one key, each giving up at a random point (a deadline
of a fraction of a millisecond to a few, an asyncio task cancelled after
a random delay), the server frozen (``SIGSTOP``) for part of the run; the
clock is manual and never moves, so the key's ``remaining`` (``RL.PEEK``)
must end at the limit less what the callers were told was admitted, less
what leases hold. ``CL.THROTTLE`` callers (quantities 1 to 3, given back
with a negative quantity) are held to the same on a key of their own, read
with a quantity-0 peek. Seeded. Half the limit is charged first: the key's
TTL (real time, even under the manual clock) is then half an hour, so a
freeze cannot let it expire.
"""

from __future__ import annotations

import asyncio
import random
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from redis_ratelimit import AsyncRateLimiter, Leases, Policy, RateLimiter, Unavailable

from .conftest import Server

LIMIT = 100_000
POLICY = Policy.gcra(LIMIT, "1h")
FIRST = LIMIT // 2
SEED = 41
THROTTLE = ("t", LIMIT - 1, LIMIT, 3600)
"""``CL.THROTTLE``'s key and limit: ``POLICY``'s rate and burst."""


@pytest.fixture
def own() -> Iterator[Server]:
    """A server of this test's own (it is frozen), ``FIRST`` units of each key charged."""
    s = Server()
    s.client().execute_command("RL.GCRA", "k", *POLICY.single, "COST", FIRST)
    s.client().execute_command("CL.THROTTLE", *THROTTLE, FIRST)
    yield s
    s.remove()


def settle(limiter: RateLimiter | AsyncRateLimiter) -> None:
    """Waits (real time, at most 20 s) until every call given up has landed."""
    until = time.monotonic() + 20
    while limiter.landings.pending:
        assert time.monotonic() < until, "calls still out after 20 s"
        time.sleep(0.005)


def freeze_for(server: Server, after: float, down: float) -> threading.Thread:
    """Freezes ``server`` ``after`` seconds from now, for ``down`` seconds."""
    process = server.process
    assert process is not None

    def run() -> None:
        time.sleep(after)  # the outage's timing, not a wait for a result
        process.send_signal(signal.SIGSTOP)
        time.sleep(down)
        process.send_signal(signal.SIGCONT)

    t = threading.Thread(target=run)
    t.start()
    return t


def remaining(server: Server, plan: str = "plain") -> int:
    """What the key of ``plan`` has left, as the server says (``CL.THROTTLE``'s: a peek)."""
    if plan == "throttle":
        return int(server.client().execute_command("CL.THROTTLE", *THROTTLE, 0)[2])
    return int(server.client().execute_command("RL.PEEK", "k", *POLICY.words)[2])


PLANS = pytest.mark.parametrize("plan", ["plain", "leased", "queued", "throttle"])


def leases_for(plan: str) -> Leases | None:
    """No leases, blocks of 5 polled, or blocks of 5 queued for up to 50 ms."""
    if plan in ("plain", "throttle"):
        return None
    return Leases(5, queue=0.05 if plan == "queued" else None)


def quantity(rng: random.Random, plan: str) -> int:
    """What a call takes: ``CL.THROTTLE``'s 1 to 3, a decision's 1."""
    return rng.randint(1, 3) if plan == "throttle" else 1


@PLANS
def test_threads_that_time_out_at_random_points_leave_no_charge(own: Server, plan: str) -> None:
    leases = leases_for(plan)
    limiter = RateLimiter.from_url(
        f"redis://127.0.0.1:{own.port}",
        probe_interval=0.001,
        leases=leases,
        max_connections=64,
    )
    admitted = [0] * 16
    unavailable = [0] * 16

    def caller(i: int) -> None:
        rng = random.Random(SEED + i)
        for _ in range(150):
            deadline = rng.uniform(0.0002, 0.004)
            n = quantity(rng, plan)
            try:
                if plan == "throttle":
                    d = limiter.throttle(*THROTTLE, n, deadline=deadline)
                else:
                    d = limiter.decide("k", POLICY, deadline=deadline)
            except Unavailable:
                unavailable[i] += 1
                continue
            admitted[i] += n * d.allowed

    freezer = freeze_for(own, 0.05, 0.15)
    threads = [threading.Thread(target=caller, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    freezer.join()
    settle(limiter)
    held = limiter.leases.held() if limiter.leases is not None else 0
    assert remaining(own, plan) == LIMIT - FIRST - sum(admitted) - held
    limiter.refund_leases()
    assert remaining(own, plan) == LIMIT - FIRST - sum(admitted)
    print(  # shown with pytest -s
        f"{plan}: {16 * 150} calls, {limiter.landings.started} cut short after they were"
        f" written, {sum(unavailable)} unavailable, {sum(admitted)} units admitted,"
        f" {LIMIT - FIRST - sum(admitted) - remaining(own, plan)} units lost"
    )
    assert limiter.landings.started > 0  # some calls were cut short after they were written
    assert sum(unavailable) > 0


@PLANS
async def test_tasks_cancelled_at_random_points_leave_no_charge(own: Server, plan: str) -> None:
    leases = leases_for(plan)
    leased = leases is not None
    limiter = AsyncRateLimiter.from_url(
        f"redis://127.0.0.1:{own.port}",
        deadline=0.05,
        probe_interval=0.001,
        leases=leases,
        max_connections=200,
        socket_connect_timeout=10,
    )
    admitted = 0
    cancelled = 0

    async def caller(i: int) -> None:
        nonlocal admitted, cancelled
        rng = random.Random(SEED + i)
        for _ in range(80):
            n = quantity(rng, plan)
            if plan == "throttle":
                call = asyncio.ensure_future(limiter.throttle(*THROTTLE, n))
            else:
                call = asyncio.ensure_future(limiter.decide("k", POLICY))
            await asyncio.sleep(rng.uniform(0, 0.02))
            if not call.done():
                call.cancel()
            try:
                d = await call
            except asyncio.CancelledError:
                cancelled += 1
                continue
            except Unavailable:
                continue
            admitted += n * d.allowed

    # Every caller's connection made first: a call cancelled while connecting is never sent.
    await asyncio.gather(*(limiter.decide("warm", POLICY, deadline=10) for _ in range(50)))
    freezer = freeze_for(own, 0.05, 0.15)
    await asyncio.gather(*(caller(i) for i in range(50)))
    await asyncio.to_thread(freezer.join)
    until = time.monotonic() + 20
    while limiter.landings.pending:
        assert time.monotonic() < until, "calls still out after 20 s"
        await asyncio.sleep(0.005)
    held = limiter.leases.held() if limiter.leases is not None else 0
    assert remaining(own, plan) == LIMIT - FIRST - admitted - held
    await limiter.refund_leases()
    assert remaining(own, plan) == LIMIT - FIRST - admitted
    print(  # shown with pytest -s
        f"{plan}: {50 * 80} calls, {cancelled} cancelled, {limiter.landings.started} landed"
        f" late, {admitted} units admitted,"
        f" {LIMIT - FIRST - admitted - remaining(own, plan)} units lost"
    )
    assert cancelled > 0, (cancelled, admitted)
    if not leased:  # a leased request cancelled leaves the call for its block running
        assert limiter.landings.started > 0
    await limiter.client.aclose()  # type: ignore[attr-defined]
