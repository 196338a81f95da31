"""The deny cache at 10 times the limit on one key: commands per request, sync and asyncio.

One key limited to ``GCRA 100 1s``; 10 callers (threads, or asyncio tasks)
each ask every 10 ms, 1,000 requests a second in all. Counted after the
first second (the burst spent): requests, ``RL.GCRA`` commands the server
ran (INFO commandstats), admissions. Run:

    cd clients/python && .venv/bin/python -m bench.deny_cache
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

import redis

from redis_ratelimit import AsyncRateLimiter, DenyCache, Policy, RateLimiter
from tests.conftest import Server

POLICY = Policy.gcra(100, "1s")
CALLERS = 10
EVERY = 0.01


@dataclass
class Figures:
    """One run's counts over the measured seconds."""

    api: str
    requests: int
    commands: int
    admitted: int
    seconds: float

    def row(self) -> str:
        return (
            f"| {self.api} | {self.requests / self.seconds:.0f}/s "
            f"| {self.admitted / self.seconds:.1f}/s | {self.commands / self.requests:.3f} "
            f"| {self.commands / max(self.admitted, 1):.2f} |"
        )


HEADER = (
    "| API | offered | admitted | commands per request | commands per admission |\n"
    "|---|---|---|---|---|"
)


def _gcra_calls(client: redis.Redis) -> int:
    return int(client.info("commandstats")["cmdstat_rl.gcra"]["calls"])


def run_sync(server: Server, warm: float = 1.0, seconds: float = 5.0) -> Figures:
    """Threads, each asking every 10 ms."""
    rl = RateLimiter(server.client(max_connections=CALLERS), deny_cache=DenyCache())
    counter = server.client()
    counts = [0, 0]
    lock = threading.Lock()
    start = time.monotonic()
    measured = threading.Event()

    def caller(offset: float) -> None:
        n = 0
        while time.monotonic() - start < seconds:
            admitted = rl.decide("hot", POLICY).allowed
            if measured.is_set():
                with lock:
                    counts[0] += 1
                    counts[1] += admitted
            n += 1
            time.sleep(max(0.0, start + offset + n * EVERY - time.monotonic()))

    threads = [threading.Thread(target=caller, args=(i * 0.001,)) for i in range(CALLERS)]
    for t in threads:
        t.start()
    time.sleep(warm)
    before = _gcra_calls(counter)
    at = time.monotonic()
    measured.set()
    for t in threads:
        t.join()
    took = time.monotonic() - at
    return Figures("sync", counts[0], _gcra_calls(counter) - before, counts[1], took)


async def run_async(server: Server, warm: float = 1.0, seconds: float = 5.0) -> Figures:
    """Asyncio tasks on one loop, each asking every 10 ms."""
    rl = AsyncRateLimiter(server.aclient(), deny_cache=DenyCache())
    counter = server.client()
    counts = [0, 0]
    start = time.monotonic()
    measured = False

    async def caller(offset: float) -> None:
        n = 0
        while time.monotonic() - start < seconds:
            admitted = (await rl.decide("hot", POLICY)).allowed
            if measured:
                counts[0] += 1
                counts[1] += admitted
            n += 1
            await asyncio.sleep(max(0.0, start + offset + n * EVERY - time.monotonic()))

    async def warm_up() -> tuple[int, float]:
        nonlocal measured
        await asyncio.sleep(warm)
        measured = True
        return _gcra_calls(counter), time.monotonic()

    warming = asyncio.create_task(warm_up())
    await asyncio.gather(*(caller(i * 0.001) for i in range(CALLERS)))
    before, at = warming.result()
    took = time.monotonic() - at
    await rl.client.aclose()  # type: ignore[attr-defined]
    return Figures("asyncio", counts[0], _gcra_calls(counter) - before, counts[1], took)


def main() -> None:
    print(HEADER)
    for api in ("sync", "asyncio"):
        server = Server(manual_clock=False)
        try:
            figures = run_sync(server) if api == "sync" else asyncio.run(run_async(server))
            print(figures.row(), flush=True)
        finally:
            server.remove()


if __name__ == "__main__":
    main()
