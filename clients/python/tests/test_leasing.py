"""Block leasing: commands per admission with many in flight, several processes, the hot keys.

Real servers, the manual clock fixed: the key regains nothing while the
callers run, so the processes together can admit at most the limit, and
after every lease is refunded the key's ``remaining`` (``RL.PEEK``) is the
limit less exactly what was admitted.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from redis_ratelimit import AsyncRateLimiter, Leases, Policy, RateLimiter
from redis_ratelimit.asgi import HttpLimit, RateLimitMiddleware, header_key

from .conftest import SLACK, Server
from .test_asgi import hello

IN_FLIGHT = 50
BLOCK = 20
REQUESTS = 100
"""Each caller's requests: 50 callers ask 5,000, beyond the limit."""


def commands(server: Server) -> int:
    """``RL.GCRA`` calls since the last ``CONFIG RESETSTAT``."""
    stats = server.client().info("commandstats")
    return int(stats.get("cmdstat_rl.gcra", {}).get("calls", 0))


def remaining(server: Server, key: str, policy: Policy) -> int:
    return int(server.client().execute_command("RL.PEEK", key, *policy.words)[2])


QUEUE = 0.5
"""A queued lease's wait in line (never waited here: the key holds blocks, or none accrue)."""
PLANS = pytest.mark.parametrize("queue", [None, QUEUE], ids=["polling", "queued"])


def threads_on_one_key(
    port: int,
    limit: int,
    out: multiprocessing.Queue[tuple[int, int]] | None,
    queue: float | None = None,
) -> tuple[int, int]:
    """50 threads, each deciding ``REQUESTS`` times on ``hot``: the admissions, refunds sent."""
    rl = RateLimiter.from_url(
        f"redis://127.0.0.1:{port}",
        deadline=SLACK,
        leases=Leases(BLOCK, queue=queue),
        max_connections=IN_FLIGHT,
        socket_timeout=SLACK,
    )
    policy = Policy.gcra(limit, "1h")

    def caller(_: int) -> int:
        return sum(rl.decide("hot", policy).allowed for _ in range(REQUESTS))

    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        admitted = sum(pool.map(caller, range(IN_FLIGHT)))
    refunds = int(rl.refund_leases() > 0)
    if out is not None:
        out.put((admitted, refunds))
    return admitted, refunds


@PLANS
def test_fifty_threads_on_a_leased_key(fresh: Server, queue: float | None) -> None:
    limit = 4000
    fresh.client().config_resetstat()
    admitted, refunds = threads_on_one_key(fresh.port, limit, None, queue)
    sent = commands(fresh) - refunds  # less the refund at shutdown
    # 5,000 asked: never more than the limit, and the key charged exactly what was admitted
    # (a request that waited past its deadline while others took the blocks is denied here).
    assert limit * 0.95 <= admitted <= limit
    assert remaining(fresh, "hot", Policy.gcra(limit, "1h")) == limit - admitted
    assert sent / admitted <= 0.055, (sent, admitted)


@PLANS
async def test_fifty_tasks_on_a_leased_key(fresh: Server, queue: float | None) -> None:
    limit = 4000
    policy = Policy.gcra(limit, "1h")
    rl = AsyncRateLimiter.from_url(
        f"redis://127.0.0.1:{fresh.port}", deadline=SLACK, leases=Leases(BLOCK, queue=queue)
    )
    fresh.client().config_resetstat()

    async def caller() -> int:
        return sum([(await rl.decide("hot", policy)).allowed for _ in range(REQUESTS)])

    admitted = sum(await asyncio.gather(*(caller() for _ in range(IN_FLIGHT))))
    sent = commands(fresh)
    assert limit * 0.95 <= admitted <= limit
    assert sent / admitted <= 0.055, (sent, admitted)
    await rl.refund_leases()
    assert remaining(fresh, "hot", policy) == limit - admitted
    await rl.client.aclose()  # type: ignore[attr-defined]


@PLANS
def test_three_processes_share_a_leased_key(fresh: Server, queue: float | None) -> None:
    """Three processes of 50 threads: 15,000 asked of 6,000; the limit, about 1 call a block."""
    limit = 6000
    fresh.client().config_resetstat()
    spawn = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[tuple[int, int]] = spawn.Queue()
    procs = [
        spawn.Process(target=threads_on_one_key, args=(fresh.port, limit, out, queue))
        for _ in range(3)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    admitted = [a for a, _ in results]
    for p in procs:
        p.join()
        assert p.exitcode == 0
    sent = commands(fresh) - sum(r for _, r in results)  # less the refunds at shutdown
    assert limit * 0.95 <= sum(admitted) <= limit
    assert remaining(fresh, "hot", Policy.gcra(limit, "1h")) == limit - sum(admitted)
    assert sent / sum(admitted) <= 0.055, (sent, admitted)


def test_a_block_is_given_back_when_idle_and_at_shutdown(rl: RateLimiter) -> None:
    policy = Policy.gcra(100, "1h")
    leased = RateLimiter(rl.client, deadline=SLACK, leases=Leases(BLOCK))
    assert leased.decide("k", policy).allowed
    assert leased.decide("k", policy, cost=3).remaining == 96
    assert rl.peek("k", policy).remaining == 80
    assert leased.refund_leases(idle=3600) == 0  # used just now
    assert leased.refund_leases(idle=0) == 16
    assert rl.peek("k", policy).remaining == 96
    # Options other than cost go to the server, as does a cost above a block.
    assert leased.decide("k", policy, cost=BLOCK + 1).remaining == 75
    assert leased.decide("k", policy, dryrun=True).remaining == 74  # what one more would leave


HOT = Policy.gcra(100_000, "1h")


def test_exactly_the_keys_the_server_names_hot_are_leased(fresh: Server) -> None:
    c = fresh.client()
    c.config_set("ratelimit.hot-key-counters", 320)
    try:
        leases = Leases(BLOCK, hot=True, hot_rate=100, poll=None)  # polled by the test
        rl = RateLimiter.from_url(
            f"redis://127.0.0.1:{fresh.port}", deadline=SLACK, leases=leases, max_connections=64
        )
        for _ in range(300):
            rl.decide("hot", HOT)
        for i in range(10):
            for _ in range(5):
                rl.decide(f"cold:{i}", HOT)
        # A second of limiter time on: the rates are over a second (hot 300/s, cold 5/s).
        c.execute_command("RL.CLOCK", "ADVANCE", 1_000_000)
        assert rl.refresh_hot_keys() == frozenset({b"hot"})
        before = remaining(fresh, "hot", HOT)
        c.config_resetstat()
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            hot = sum(pool.map(lambda _: rl.decide("hot", HOT).allowed, range(3990)))
        assert hot == 3990
        assert commands(fresh) == 200  # one a block of 20
        for i in range(10):
            rl.decide(f"cold:{i}", HOT)
        assert commands(fresh) == 210  # cold keys: one command each
        assert leases.held() == 10
        held = leases.held()
        assert remaining(fresh, "hot", HOT) == before - 3990 - held
        # Two seconds of limiter time later the server lists nothing: the block is refunded.
        c.execute_command("RL.CLOCK", "ADVANCE", 3_600_000)  # 100 units refill meanwhile
        assert rl.refresh_hot_keys() == frozenset()
        assert leases.held() == 0
        assert remaining(fresh, "hot", HOT) == before - 3990 + 100
        c.config_resetstat()
        rl.decide("hot", HOT)
        assert commands(fresh) == 1  # per request again
    finally:
        c.config_set("ratelimit.hot-key-counters", 0)


def test_following_hot_keys_polls_until_stopped(fresh: Server) -> None:
    c = fresh.client()
    c.config_set("ratelimit.hot-key-counters", 320)
    try:
        rl = RateLimiter.from_url(
            f"redis://127.0.0.1:{fresh.port}", deadline=SLACK, leases=Leases(BLOCK, hot=True)
        )
        follower = rl.follow_hot_keys(every=0.01)
        seen = threading.Event()
        while not seen.wait(0.005):  # at most a few polls of 10 ms
            if follower.polls >= 2:
                seen.set()
        follower.stop()
        assert not follower.thread.is_alive()
    finally:
        c.config_set("ratelimit.hot-key-counters", 0)


def test_a_limiter_without_hot_leases_refuses_to_poll(rl: RateLimiter) -> None:
    with pytest.raises(ValueError, match="Leases"):
        rl.refresh_hot_keys()


async def _requests(app: Starlette, n: int, key: str) -> list[int]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:

        async def caller(count: int) -> list[int]:
            return [
                (await http.get("/hello", headers={"x-api-key": key})).status_code
                for _ in range(count)
            ]

        per = n // IN_FLIGHT
        return [
            s
            for batch in await asyncio.gather(*(caller(per) for _ in range(IN_FLIGHT)))
            for s in batch
        ]


def _app(limiter: AsyncRateLimiter, limits: list[HttpLimit]) -> Starlette:
    middleware = Middleware(
        RateLimitMiddleware,
        limiter=limiter,
        limits=limits,
        key=header_key("x-api-key"),
        timeout=SLACK,
    )
    return Starlette(routes=[Route("/hello", hello)], middleware=[middleware])


async def test_the_middleware_decides_a_leased_limit_from_its_blocks(fresh: Server) -> None:
    policy = Policy.gcra(4000, "1h")
    rl = AsyncRateLimiter.from_url(
        f"redis://127.0.0.1:{fresh.port}", deadline=SLACK, leases=Leases(BLOCK)
    )
    fresh.client().config_resetstat()
    statuses = await _requests(_app(rl, [HttpLimit("per-key", policy, prefix="rl:")]), 5000, "k")
    admitted = statuses.count(200)
    assert 3800 <= admitted <= 4000 and statuses.count(429) == 5000 - admitted
    assert commands(fresh) / admitted <= 0.055
    await rl.refund_leases()
    assert remaining(fresh, "rl:k", policy) == 4000 - admitted
    await rl.client.aclose()  # type: ignore[attr-defined]


async def test_a_request_another_limit_denies_puts_its_units_back(fresh: Server) -> None:
    per_key = Policy.gcra(100, "1h")
    shared = Policy.fixed(30, "1h")
    rl = AsyncRateLimiter.from_url(
        f"redis://127.0.0.1:{fresh.port}", deadline=SLACK, leases=Leases(BLOCK)
    )
    limits = [
        HttpLimit("per-key", per_key, prefix="rl:"),
        HttpLimit("global", shared, prefix="rl:global", shared=True, leased=False),
    ]
    statuses = await _requests(_app(rl, limits), 100, "k")
    assert statuses.count(200) == 30
    await rl.refund_leases()
    assert (
        remaining(fresh, "rl:k", per_key) == 70
    )  # the 70 the global limit denied gave theirs back
    await rl.client.aclose()  # type: ignore[attr-defined]


async def test_the_middleware_leases_the_keys_the_server_names_hot(fresh: Server) -> None:
    c = fresh.client()
    c.config_set("ratelimit.hot-key-counters", 320)
    try:
        policy = Policy.gcra(100_000, "1h")
        leases = Leases(BLOCK, hot=True, poll=None)  # polled by the test
        rl = AsyncRateLimiter.from_url(
            f"redis://127.0.0.1:{fresh.port}", deadline=SLACK, leases=leases
        )
        app = _app(rl, [HttpLimit("per-key", policy, prefix="rl:")])
        await _requests(app, 300, "hot")  # per request: 300 RL.ALL
        await _requests(app, 50, "cold")
        c.execute_command("RL.CLOCK", "ADVANCE", 1_000_000)
        assert await rl.refresh_hot_keys() == frozenset({b"rl:hot"})
        c.config_resetstat()
        assert set(await _requests(app, 1000, "hot")) == {200}
        assert commands(fresh) == 50  # RL.GCRA blocks of 20, no RL.ALL
        assert set(await _requests(app, 50, "cold")) == {200}
        assert int(c.info("commandstats")["cmdstat_rl.all"]["calls"]) == 50
        await rl.refund_leases()
        await rl.client.aclose()  # type: ignore[attr-defined]
    finally:
        c.config_set("ratelimit.hot-key-counters", 0)


def test_the_first_decision_starts_polling_the_hot_keys(fresh: Server) -> None:
    c = fresh.client()
    c.config_set("ratelimit.hot-key-counters", 320)
    try:
        leases = Leases(BLOCK, hot=True, poll=0.01)
        rl = RateLimiter.from_url(f"redis://127.0.0.1:{fresh.port}", deadline=SLACK, leases=leases)
        for _ in range(300):
            rl.decide("hot", HOT)
        c.execute_command("RL.CLOCK", "ADVANCE", 1_000_000)
        until = time.monotonic() + 10
        while leases.hot_keys != frozenset({b"hot"}):  # a later poll of 10 ms names it
            assert time.monotonic() < until, "never named hot"
            time.sleep(0.005)
        rl.follower.stop()
    finally:
        c.config_set("ratelimit.hot-key-counters", 0)


def test_a_queued_lease_waits_in_line_within_its_bound() -> None:
    """A real clock and a line that moves: 50 threads, a block of 20 accrues every 100 ms.

    Every request is answered within its deadline plus the lease's
    ``queue`` (0.5 s of margin for a loaded machine), and the admissions
    stay within what the key accrues over the run plus one block.
    """
    server = Server(manual_clock=False)
    try:
        rl = RateLimiter.from_url(
            f"redis://127.0.0.1:{server.port}",
            deadline=0.3,
            leases=Leases(BLOCK, queue=0.2),
            max_connections=IN_FLIGHT,
        )
        policy = Policy.gcra(200, "1s")
        slowest = [0.0] * IN_FLIGHT

        def caller(i: int) -> int:
            n = 0
            for _ in range(10):
                start = time.monotonic()
                n += rl.decide("line", policy).allowed
                slowest[i] = max(slowest[i], time.monotonic() - start)
            return n

        start = time.monotonic()
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            admitted = sum(pool.map(caller, range(IN_FLIGHT)))
        span = time.monotonic() - start
        assert max(slowest) <= 0.3 + 0.2 + 0.5, slowest
        assert 200 <= admitted <= 200 * span + 200 + BLOCK, (admitted, span)
        rl.refund_leases()
    finally:
        server.remove()


async def test_queued_blocks_land_for_tasks_cancelled_while_they_wait() -> None:
    """50 tasks on a real clock, each cancelled after a random delay (seeded).

    What the queued calls bring lands in the lease whether or not their
    callers still wait: after the refund at shutdown, the key's
    ``remaining`` is the limit less what the callers were told was
    admitted, less what accrued meanwhile (the key refills 1 a second).
    """
    server = Server(manual_clock=False)
    try:
        policy = Policy.gcra(3600, "1h", burst=400)
        rl = AsyncRateLimiter.from_url(
            f"redis://127.0.0.1:{server.port}",
            deadline=SLACK,
            leases=Leases(BLOCK, queue=0.2),
        )
        admitted = 0
        cancelled = 0

        async def caller(i: int) -> None:
            nonlocal admitted, cancelled
            rng = random.Random(41 + i)
            for _ in range(20):
                call = asyncio.ensure_future(rl.decide("line", policy))
                await asyncio.sleep(rng.uniform(0, 0.01))
                if not call.done():
                    call.cancel()
                try:
                    admitted += (await call).allowed
                except asyncio.CancelledError:
                    cancelled += 1

        start = time.monotonic()
        await asyncio.gather(*(caller(i) for i in range(IN_FLIGHT)))
        await rl.refund_leases()
        accrued = time.monotonic() - start + 1  # 1 unit a second, one more for rounding
        left = remaining(server, "line", policy)
        assert 400 - admitted <= left <= 400 - admitted + accrued, (left, admitted)
        assert cancelled > 0
        await rl.client.aclose()  # type: ignore[attr-defined]
    finally:
        server.remove()
