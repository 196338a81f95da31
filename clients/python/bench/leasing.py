"""Commands per admission of block leasing on a real clock: python -m bench.leasing.

One key at ``GCRA 2000 1s`` on a server with the real clock; 1 or 3
processes, each with 50 threads (the sync limiter) or 50 asyncio tasks
(the asyncio limiter) in a closed loop (a request as soon as the last is
answered) from a common start for 3 s, blocks of 20, queued
(``Leases(20, queue=1.0)``; with ``--polling`` also ``Leases(20)``).
Prints the admissions over the span from the first decision to the last,
their bound (2,000 a second over that span, plus the burst of 2,000, plus
a block per process), the ``RL.GCRA`` calls and the calls per admission
(refunds at the end included).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from redis_ratelimit import AsyncRateLimiter, Leases, Policy, RateLimiter
from tests.conftest import Server

POLICY_RATE = 2000
POLICY = Policy.gcra(POLICY_RATE, "1s")
SECONDS = 3.0
IN_FLIGHT = 50


def begin(start: float) -> float:
    """Waits for the processes' common start (wall clock); the monotonic end of the run."""
    time.sleep(max(start - time.time(), 0))
    return time.monotonic() + SECONDS


def threads(port: int, queue: float | None, start: float) -> tuple[int, float, float]:
    rl = RateLimiter.from_url(
        f"redis://127.0.0.1:{port}",
        deadline=10,
        leases=Leases(20, queue=queue),
        max_connections=IN_FLIGHT,
    )
    end = begin(start)

    def caller(_: int) -> int:
        n = 0
        while time.monotonic() < end:
            n += rl.decide("hot", POLICY).allowed
        return n

    first = time.time()
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        admitted = sum(pool.map(caller, range(IN_FLIGHT)))
    last = time.time()
    rl.refund_leases()
    return admitted, first, last


async def tasks(port: int, queue: float | None, start: float) -> tuple[int, float, float]:
    rl = AsyncRateLimiter.from_url(
        f"redis://127.0.0.1:{port}", deadline=10, leases=Leases(20, queue=queue)
    )
    end = begin(start)

    async def caller() -> int:
        n = 0
        while time.monotonic() < end:
            n += (await rl.decide("hot", POLICY)).allowed
        return n

    first = time.time()
    admitted = sum(await asyncio.gather(*(caller() for _ in range(IN_FLIGHT))))
    last = time.time()
    await rl.refund_leases()
    await rl.client.aclose()  # type: ignore[attr-defined]
    return admitted, first, last


Result = tuple[int, float, float]
"""A process's admissions, and the wall-clock times of its first and last decisions."""


def process(
    port: int, kind: str, queue: float | None, start: float, out: multiprocessing.Queue[Result]
) -> None:
    if kind == "threads":
        out.put(threads(port, queue, start))
    else:
        out.put(asyncio.run(tasks(port, queue, start)))


def run(processes: int, kind: str, queue: float | None) -> str:
    server = Server(manual_clock=False)
    try:
        server.client().config_resetstat()
        spawn = multiprocessing.get_context("spawn")
        out: multiprocessing.Queue[Result] = spawn.Queue()
        start = time.time() + 2.0  # every process spawned and connected by then
        procs = [
            spawn.Process(target=process, args=(server.port, kind, queue, start, out))
            for _ in range(processes)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join()
        admitted = sum(a for a, _, _ in results)
        span = max(x for _, _, x in results) - min(x for _, x, _ in results)
        # What the key can admit over the span, plus what the leases hold.
        bound = POLICY_RATE * span + POLICY_RATE + 20 * processes
        calls = int(server.client().info("commandstats")["cmdstat_rl.gcra"]["calls"])
        plan = "polling" if queue is None else f"queued {queue:g} s"
        return (
            f"| {processes} | {IN_FLIGHT} {kind} | {plan} | {admitted} in {span:.2f} s "
            f"| {bound:.0f} | {calls} | {calls / admitted:.4f} |"
        )
    finally:
        server.remove()


if __name__ == "__main__":
    queues: list[float | None] = [None, 1.0] if "--polling" in sys.argv else [1.0]
    print(
        "| processes | in flight each | plan | admitted | bound | RL.GCRA calls "
        "| calls per admission |"
    )
    print("|---|---|---|---|---|---|---|")
    for kind in ("threads", "tasks"):
        for n in (1, 3):
            for q in queues:
                print(run(n, kind, q), flush=True)
