"""50 requests in flight on one key admit exactly what the limit allows; cluster clients."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from redis_ratelimit import AsyncRateLimiter, Policy, RateLimiter

from .conftest import SLACK, Server

IN_FLIGHT = 50
LIMIT = Policy.gcra(10, "1m")  # 10 at once, then one every 6 s of limiter time


async def test_fifty_in_flight_asyncio(arl: AsyncRateLimiter) -> None:
    decisions = await asyncio.gather(*(arl.decide("hot", LIMIT) for _ in range(IN_FLIGHT)))
    assert sum(d.allowed for d in decisions) == 10
    assert sorted(d.remaining for d in decisions if d.allowed) == list(range(10))


def test_fifty_in_flight_threads(fresh: Server, protocol: int) -> None:
    rl = RateLimiter(fresh.client(protocol, max_connections=IN_FLIGHT), deadline=SLACK)
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        decisions = list(pool.map(lambda _: rl.decide("hot", LIMIT), range(IN_FLIGHT)))
    assert sum(d.allowed for d in decisions) == 10


async def test_fifty_waiting_in_flight_are_admitted_in_turn(arl: AsyncRateLimiter) -> None:
    """With WAIT the line is the server's: each step of the clock admits exactly one more."""
    waiting = [
        asyncio.create_task(arl.decide("line", Policy.gcra(1, "1s"), wait="1h"))
        for _ in range(IN_FLIGHT)
    ]
    await _until_waiting(arl, IN_FLIGHT - 1)
    # The one the server admitted at once: its reply may still be on its way here.
    await asyncio.wait(waiting, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    admitted = sum(t.done() for t in waiting)
    assert admitted == 1
    for n in range(2, IN_FLIGHT + 1):
        await arl.advance_clock(1_000_000)
        await _until_waiting(arl, IN_FLIGHT - n)
    decisions = await asyncio.gather(*waiting)
    assert all(d.allowed for d in decisions)


async def _until_waiting(arl: AsyncRateLimiter, n: int) -> None:
    deadline = time.monotonic() + 10
    while (await arl.client.execute_command("INFO", "ratelimit"))["ratelimit_waiting"] != n:
        assert time.monotonic() < deadline, f"never {n} waiting"
        await asyncio.sleep(0.002)


@pytest.fixture(scope="module")
def cluster() -> object:
    server = Server(extra=("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"))
    client = server.client()
    client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
    deadline = time.monotonic() + 10
    while b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield server
    server.remove()


def test_cluster_client(cluster: Server, protocol: int) -> None:
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.port, protocol=protocol)
    rl = RateLimiter(client, deadline=SLACK)
    key = f"c{protocol}"
    assert rl.gcra(key, 10, "1s").remaining == 9
    d = rl.all([(f"{{{key}}}:u", Policy.gcra(10, "1s")), (f"{{{key}}}", Policy.gcra(15, "1s"))])
    assert [x.remaining for x in d.limits] == [9, 14]
    client.close()


async def test_async_cluster_client(cluster: Server, protocol: int) -> None:
    client = redis.asyncio.cluster.RedisCluster(
        host="127.0.0.1", port=cluster.port, protocol=protocol
    )
    arl = AsyncRateLimiter(client, deadline=SLACK)
    key = f"a{protocol}"
    d = await arl.all(
        [(f"{{{key}}}:u", Policy.gcra(10, "1s")), (f"{{{key}}}", Policy.gcra(15, "1s"))]
    )
    assert [x.remaining for x in d.limits] == [9, 14]
    decisions = await asyncio.gather(*(arl.decide(key, LIMIT) for _ in range(IN_FLIGHT)))
    assert sum(d.allowed for d in decisions) == 10
    await client.aclose()
