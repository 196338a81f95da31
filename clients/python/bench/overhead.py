"""A typed call's client CPU beside a raw ``execute_command``, same run.

Two measures, both of client CPU (``time.process_time``):

1. the work the typed layer adds, alone: building a call's arguments from a
   prebuilt policy and reading its reply into a ``Decision`` (RESP2 array,
   RESP3 map), on canned replies;
2. end to end against a real server: the same number of calls through
   ``RateLimiter.decide`` and through ``execute_command``, interleaved in
   rounds, the difference per call.

Run: ``cd clients/python && .venv/bin/python -m bench.overhead``
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from redis_ratelimit import Policy, RateLimiter
from redis_ratelimit._commands import decide
from redis_ratelimit.decision import parse_decision
from tests.conftest import Server

POLICY = Policy.gcra(1_000_000_000, "1s")
RESP2 = [1, 1_000_000_000, 999_999_999, -1, 1]
RESP3 = {
    b"allowed": True,
    b"limit": 1_000_000_000,
    b"remaining": 999_999_999,
    b"retry_after_ms": -1,
    b"reset_after_ms": 1,
}


def cpu_per_call(fn: Callable[[], object], n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n


def main() -> None:
    n = 200_000
    for label, reply in (("RESP2", RESP2), ("RESP3", RESP3)):

        def layer(reply: object = reply) -> object:
            _args, partially = decide("rl:user:42", POLICY, {})
            return parse_decision(reply, POLICY, partially)

        best = min(cpu_per_call(layer, n) for _ in range(5))
        print(f"typed layer alone, {label}: {best * 1e6:.2f} us per call (best of 5 x {n:,})")

    server = Server(manual_clock=False)
    try:
        for protocol in (2, 3):
            client = server.client(protocol)
            rl = RateLimiter(client)
            raw_args = ("RL.GCRA", "rl:user:42", "1000000000", "1s")
            typed, raw, gaps = [], [], []
            rounds, per_round = 40, 1_000
            for _ in range(rounds):
                t = cpu_per_call(partial(rl.decide, "rl:user:42", POLICY), per_round)
                r = cpu_per_call(partial(client.execute_command, *raw_args), per_round)
                typed.append(t)
                raw.append(r)
                gaps.append(t - r)
            for xs in (typed, raw, gaps):
                xs.sort()
            mid = rounds // 2
            print(
                f"end to end, RESP{protocol}: typed {typed[mid] * 1e6:.1f} us, "
                f"raw execute_command {raw[mid] * 1e6:.1f} us of client CPU per call; "
                f"typed minus raw, median of {rounds} back-to-back rounds of {per_round:,}: "
                f"{gaps[mid] * 1e6:.1f} us (quartiles {gaps[rounds // 4] * 1e6:.1f} to "
                f"{gaps[3 * rounds // 4] * 1e6:.1f})"
            )
            client.close()
    finally:
        server.remove()


if __name__ == "__main__":
    main()
