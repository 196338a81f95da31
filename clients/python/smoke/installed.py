"""A smoke test of the package as installed from its wheel or sdist, in a venv of its own.

``make test-python`` runs it in an empty venv after installing each
artifact: one decision through the sync and the asyncio limiter against a
real server with the module (``RL_MODULE``), the deny cache, a lease, and
the package's version.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version

import redis.exceptions

import redis_ratelimit
from redis_ratelimit import AsyncRateLimiter, DenyCache, Leases, Policy, RateLimiter


def main() -> None:
    """Installs nothing: checks the installed package against a server of its own."""
    assert sys.prefix in redis_ratelimit.__file__, redis_ratelimit.__file__  # the installed copy
    assert version("redis-ratelimit") == "0.2.0"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as work:
        server = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
                "--save",
                "",
                "--dir",
                work,
                "--loadmodule",
                os.environ["RL_MODULE"],
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            url = f"redis://127.0.0.1:{port}"
            until = time.monotonic() + 20
            while True:
                try:
                    RateLimiter.from_url(url, deadline=1).clock()
                    break
                except redis.exceptions.ConnectionError:
                    assert time.monotonic() < until, "the server did not start"
                    time.sleep(0.05)  # waiting for the server to listen
            rl = RateLimiter.from_url(url, deadline=5, deny_cache=DenyCache())
            assert rl.gcra("smoke", 2, "1h").remaining == 1
            leased = RateLimiter.from_url(url, deadline=5, leases=Leases(5))
            assert leased.decide("leased", Policy.gcra(10, "1h")).allowed
            assert leased.refund_leases() == 4

            async def asynchronously() -> int:
                arl = AsyncRateLimiter.from_url(url, deadline=5)
                d = await arl.gcra("smoke", 2, "1h")
                await arl.client.aclose()  # type: ignore[attr-defined]
                return d.remaining

            assert asyncio.run(asynchronously()) == 0
        finally:
            server.kill()
            server.wait()
    print("smoke test passed:", redis_ratelimit.__file__)


if __name__ == "__main__":
    main()
