"""Degraded mode across OS processes: 3 at uneven rates on one key, the server frozen.

Three processes (``spawn``), each with its own limiter and so its own
degraded state, send open-loop Poisson requests (seeded) at 20, 40 and 60
a second to one key limited to ``GCRA 60 1s`` on a server with the real
clock: 3 s with the server up, then 10 s frozen (``SIGSTOP``), then 1 s up
again. While the server is frozen each process admits from a local bucket
at its observed share of the rate; together they offer twice the limit,
so each should admit about ``share * 60`` a second.

Robust to a loaded 2-core machine: the arrival instants are fixed by the
seed and kept as a schedule (a process that falls behind sends its late
requests at once, so each offers the same requests whatever the load);
what a process admitted is compared with the time the server was
actually frozen (the parent's own ``SIGSTOP`` and ``SIGCONT`` instants),
not with the planned 10 s, and with the share the process itself had
observed when the outage began; a request is counted as degraded by its
answer (``fallback == "degraded"``), not by when it was planned. The
processes start together at a wall-clock instant chosen after all of them
are spawned.
"""

from __future__ import annotations

import multiprocessing
import random
import signal
import time
from collections.abc import Iterator

import pytest

from redis_ratelimit import Policy, RateLimiter

from .conftest import Server

POLICY = Policy.gcra(60, "1s")
RATE = 60.0
DEMANDS = (20.0, 40.0, 60.0)
UP, DOWN, AFTER = 3.0, 10.0, 1.0
SEED = 41

Outcome = tuple[int, int, float, int]
"""A process's outcome: degraded admissions, degraded answers, its observed share,
and the decisions answered by the server after the outage."""


def schedule(i: int) -> list[float]:
    """Process ``i``'s request instants from the common start (Poisson, seeded)."""
    rng = random.Random(SEED + i)
    out, at = [], rng.expovariate(DEMANDS[i])
    while at < UP + DOWN + AFTER:
        out.append(at)
        at += rng.expovariate(DEMANDS[i])
    return out


def worker(i: int, port: int, start: float, out: multiprocessing.Queue[Outcome]) -> None:
    """Sends process ``i``'s schedule from the wall-clock ``start``."""
    rl = RateLimiter.from_url(
        f"redis://127.0.0.1:{port}", deadline=0.1, fallback="degraded", probe_interval=0.1
    )
    rl.client.execute_command("PING")  # connected before the start
    begin = time.monotonic() + (start - time.time())
    admitted = answered = after = 0
    share = -1.0
    for at in schedule(i):
        ahead = begin + at - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)  # the schedule's next arrival (open loop), not a wait for a result
        d = rl.decide("shared", POLICY)
        if d.fallback == "degraded":
            if share < 0:
                share = rl.guard.degraded.observed("shared", POLICY) or 0.0
            answered += 1
            admitted += d.allowed
        elif answered:
            after += 1
    out.put((admitted, answered, share, after))


@pytest.fixture
def real_clock() -> Iterator[Server]:
    s = Server(manual_clock=False)
    yield s
    s.remove()


def test_three_processes_admit_their_observed_shares_while_the_server_is_frozen(
    real_clock: Server,
) -> None:
    process = real_clock.process
    assert process is not None
    spawn = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[Outcome] = spawn.Queue()
    start = time.time() + 3.0  # every process spawned and connected by then
    procs = [
        spawn.Process(target=worker, args=(i, real_clock.port, start, out))
        for i in range(len(DEMANDS))
    ]
    for p in procs:
        p.start()
    time.sleep(max(start + UP - time.time(), 0))  # the outage's timing
    frozen = time.monotonic()
    process.send_signal(signal.SIGSTOP)
    time.sleep(DOWN)
    process.send_signal(signal.SIGCONT)
    down = time.monotonic() - frozen
    outcomes = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    shares = [s for _, _, s, _ in outcomes]
    ratios = [a / (s * RATE * down) if s else 0.0 for a, _, s, _ in outcomes]
    rounded = [round(s, 3) for s in shares], [round(r, 3) for r in ratios]
    print(f"frozen {down:.2f} s, shares {rounded[0]}, admitted ÷ expected {rounded[1]}")
    # The processes' estimates together cover the whole key (each is its own part of
    # what the server admitted; which process gets how much depends on the arrivals).
    assert all(s > 0 for s in shares), outcomes
    assert 0.8 <= sum(shares) <= 1.2, outcomes
    for admitted, answered, share, after in outcomes:
        expected = share * RATE * down
        assert 0.8 <= admitted / expected <= 1.2, (outcomes, down)
        assert answered > admitted  # each offered more than its share: some denied
        assert after > 0  # the server decides again once it is back
    assert sum(a for a, _, _, _ in outcomes) <= RATE * down * 1.2 + RATE
