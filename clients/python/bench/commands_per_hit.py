"""Commands per hit: this package's limits storage beside limits' own Redis storage.

Starts one redis-server with the module (real clock), runs the same hits
through each storage and strategy, and counts with INFO commandstats what
the server ran: round trips (the commands a client sent: EVALSHA or RL.*)
and commands (a script's own calls included). Run:

    cd clients/python && .venv/bin/python -m bench.commands_per_hit
"""

from __future__ import annotations

import redis
from limits import parse
from limits.storage import RedisStorage, Storage
from limits.strategies import STRATEGIES

from redis_ratelimit.limits_storage import RateLimitStorage
from tests.conftest import Server

HITS = 1000
ITEM = parse("500/minute")  # half admitted, half denied


def counts(client: redis.Redis) -> tuple[int, int]:
    stats = client.info("commandstats")
    sent = sum(
        v["calls"] for k, v in stats.items() if k.startswith(("cmdstat_evalsha", "cmdstat_rl."))
    )
    return sent, sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")


def main() -> None:
    server = Server(manual_clock=False)
    try:
        client = server.client()
        url = f"127.0.0.1:{server.port}"
        storages: list[tuple[str, Storage]] = [
            ("redis-ratelimit", RateLimitStorage(f"redis+ratelimit://{url}")),
            ("limits RedisStorage", RedisStorage(f"redis://{url}")),
        ]
        print(f"{HITS} hits of {ITEM} on one key (half denied); per hit:")
        print(f"{'strategy':<24}{'storage':<22}{'round trips':>12}{'server commands':>17}")
        for name in sorted(STRATEGIES):
            for label, storage in storages:
                strategy = STRATEGIES[name](storage)
                strategy.hit(ITEM, f"warm-up:{name}")  # scripts loaded, connection made
                before = counts(client)
                for _ in range(HITS):
                    strategy.hit(ITEM, name)
                after = counts(client)
                sent, ran = after[0] - before[0], after[1] - before[1]
                print(f"{name:<24}{label:<22}{sent / HITS:>12.2f}{ran / HITS:>17.2f}")
    finally:
        server.remove()


if __name__ == "__main__":
    main()
