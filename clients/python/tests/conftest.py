"""Real redis-server processes with the module loaded, as the Rust tests start them.

The module is ``$RL_MODULE``, else the repository's debug build
(``cargo build`` makes it); the server binary ``$RL_SERVER``, else
``redis-server``. Servers load the module with ``clock manual`` unless a
test asks for the real clock; tests move time with ``RL.CLOCK``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio

from redis_ratelimit import AsyncRateLimiter, RateLimiter

REPO = Path(__file__).resolve().parents[3]
SLACK = 10.0
"""A deadline no loaded machine reaches, for tests that are not about deadlines."""
MIDNIGHT_US = 20833 * 86_400 * 1_000_000
"""2026-01-14T00:00:00Z: every aligned window starts here."""


def module_path() -> Path:
    path = Path(os.environ.get("RL_MODULE", REPO / "target/debug/libredis_ratelimit.so"))
    if not path.exists():
        pytest.exit(f"the module is not built at {path}: run `cargo build` first", returncode=2)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One redis-server in a directory of its own; stopped and removed by ``stop``."""

    def __init__(self, *, manual_clock: bool = True, extra: tuple[str, ...] = ()) -> None:
        self.manual_clock = manual_clock
        self.extra = extra
        self.dir = Path(tempfile.mkdtemp(prefix="rl-py-"))
        self.process: subprocess.Popen[bytes] | None = None
        for attempt in range(5):  # another process may take the free port first
            self.port = free_port()
            try:
                self.start()
                return
            except RuntimeError:
                if attempt == 4:
                    raise

    def start(self) -> None:
        args = [
            os.environ.get("RL_SERVER", "redis-server"),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            "redis.log",
            "--loadmodule",
            str(module_path()),
        ]
        if self.manual_clock:
            args += ["clock", "manual"]
        args += ["policies", "on", *self.extra]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    log = (self.dir / "redis.log").read_text(errors="replace")
                    raise RuntimeError(f"redis-server did not start:\n{log}") from None
                time.sleep(0.01)  # waiting for the process to listen, not for a result

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, protocol: int = 2, **options: object) -> redis.Redis:
        return redis.Redis(port=self.port, protocol=protocol, **options)  # type: ignore[arg-type]

    def aclient(self, protocol: int = 2, **options: object) -> redis.asyncio.Redis:
        return redis.asyncio.Redis(port=self.port, protocol=protocol, **options)  # type: ignore[arg-type]

    @property
    def url(self) -> str:
        return f"redis+ratelimit://127.0.0.1:{self.port}"


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.remove()


@pytest.fixture
def fresh(server: Server) -> Server:
    """The session's server, emptied, its clock at midnight UTC (a whole day since the epoch)."""
    client = server.client()
    client.flushall()
    client.execute_command("RL.CLOCK", "SET", MIDNIGHT_US)
    client.close()
    return server


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def protocol(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def rl(fresh: Server, protocol: int) -> Iterator[RateLimiter]:
    client = fresh.client(protocol)
    yield RateLimiter(client, deadline=SLACK)
    client.close()


@pytest.fixture
async def arl(fresh: Server, protocol: int) -> AsyncIterator[AsyncRateLimiter]:
    client = fresh.aclient(protocol, max_connections=100)
    yield AsyncRateLimiter(client, deadline=SLACK)
    await client.aclose()
