"""Degraded mode admits each process's observed share: 3 limiters at uneven rates, a 10 s outage.

Time is simulated: the server's manual clock and the limiters' degraded
clock move together to each request's instant, so the run is exact and
takes no real time. Three limiters, each with its own connection and its
own degraded state (as three processes would have), offer 20, 40 and 60
requests a second (Poisson, seeded) on one key limited to 60 a second, for 20 s with the
server up, then 10 s with it stopped.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator

import pytest

from redis_ratelimit import Policy, RateLimiter

from .conftest import MIDNIGHT_US, Server

POLICY = Policy.gcra(60, "1s")
DEMANDS = (20, 40, 60)
UP, DOWN = 20.0, 10.0
SEED = 41


def arrivals(end: float) -> Iterator[tuple[float, int]]:
    """Every request, in time order: (instant, process), Poisson per process (seeded)."""
    rng = random.Random(SEED)
    streams = []
    for i, d in enumerate(DEMANDS):
        at = rng.expovariate(d)
        while at < end:
            streams.append((at, i))
            at += rng.expovariate(d)
    heapq.heapify(streams)
    while streams:
        yield heapq.heappop(streams)


@pytest.fixture
def own() -> Iterator[Server]:
    s = Server()
    yield s
    s.remove()


def test_each_process_admits_its_observed_share_during_an_outage(own: Server) -> None:
    now = [0.0]
    limiters = []
    for _ in DEMANDS:
        rl = RateLimiter.from_url(f"redis://127.0.0.1:{own.port}", fallback="degraded")
        rl.guard.degraded.clock = lambda: now[0]
        limiters.append(rl)
    clock = own.client()
    seen = [0] * len(DEMANDS)  # admitted by the server over the last 10 s it was up
    during = [0] * len(DEMANDS)  # admitted locally while it was down
    stopped = False
    shares: list[float | None] = []
    for at, i in arrivals(UP + DOWN):
        if at >= UP and not stopped:
            shares = [rl.guard.degraded.observed("k", POLICY) for rl in limiters]
            own.stop()
            stopped = True
        now[0] = at
        if not stopped:
            clock.execute_command("RL.CLOCK", "SET", MIDNIGHT_US + round(at * 1e6))
        d = limiters[i].decide("k", POLICY)
        if not stopped and at >= UP - 10:
            assert d.fallback is None
            seen[i] += d.allowed
        elif stopped:
            assert d.fallback == "degraded"
            during[i] += d.allowed
    truth = [n / sum(seen) for n in seen]
    rate = 60
    for i, demand in enumerate(DEMANDS):
        expected = min(demand, truth[i] * rate) * DOWN
        assert 0.8 <= during[i] / expected <= 1.2, (i, during, expected, truth, shares)
        estimate = shares[i]
        assert estimate is not None and abs(estimate - truth[i]) <= 0.2 * truth[i], (shares, truth)
    assert sum(during) <= rate * DOWN * 1.2
