"""Client instructions per call, typed beside raw, counted by callgrind (load does not move it).

Runs ``N`` calls of one kind against a server on ``PORT``; run under
callgrind at two ``N`` and take the difference, so that start-up cancels:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python -m bench.instructions typed 2000 PORT   # and 4000, and raw

``bench/instructions.sh`` does all of it.
"""

from __future__ import annotations

import sys

import redis

from redis_ratelimit import Policy, RateLimiter

POLICY = Policy.gcra(1_000_000_000, "1s")
RAW = ("RL.GCRA", "rl:user:42", "1000000000", "1s")


def main() -> None:
    kind, n, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    protocol = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    client = redis.Redis(port=port, protocol=protocol)
    rl = RateLimiter(client)
    client.ping()
    if kind == "typed":
        for _ in range(n):
            rl.decide("rl:user:42", POLICY)
    else:
        for _ in range(n):
            client.execute_command(*RAW)


if __name__ == "__main__":
    main()
