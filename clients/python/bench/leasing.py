"""Commands per admission of block leasing on a real clock: python -m bench.leasing.

One key at ``GCRA 2000 1s`` on a server with the real clock; 1 or 3
processes, each with 50 threads in a closed loop (a request as soon as the
last is answered) for 3 s, blocks of 20. Prints the admissions a second,
the ``RL.GCRA`` calls and the calls per admission (refunds at the end
included).
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor

from redis_ratelimit import Leases, Policy, RateLimiter
from tests.conftest import Server

POLICY = Policy.gcra(2000, "1s")
SECONDS = 3.0


def process(port: int, out: multiprocessing.Queue[int]) -> None:
    rl = RateLimiter.from_url(
        f"redis://127.0.0.1:{port}", deadline=10, leases=Leases(20), max_connections=50
    )
    end = time.monotonic() + SECONDS

    def caller(_: int) -> int:
        n = 0
        while time.monotonic() < end:
            n += rl.decide("hot", POLICY).allowed
        return n

    with ThreadPoolExecutor(50) as pool:
        admitted = sum(pool.map(caller, range(50)))
    rl.refund_leases()
    out.put(admitted)


def run(processes: int) -> str:
    server = Server(manual_clock=False)
    try:
        server.client().config_resetstat()
        spawn = multiprocessing.get_context("spawn")
        out: multiprocessing.Queue[int] = spawn.Queue()
        procs = [spawn.Process(target=process, args=(server.port, out)) for _ in range(processes)]
        for p in procs:
            p.start()
        admitted = sum(out.get(timeout=120) for _ in procs)
        for p in procs:
            p.join()
        calls = int(server.client().info("commandstats")["cmdstat_rl.gcra"]["calls"])
        return (
            f"| {processes} | 50 | {admitted / SECONDS:.0f}/s | {calls} | {calls / admitted:.4f} |"
        )
    finally:
        server.remove()


if __name__ == "__main__":
    print("| processes | threads each | admitted | RL.GCRA calls | calls per admission |")
    print("|---|---|---|---|---|")
    for n in (1, 3):
        print(run(n))
