"""Decisions while Redis is down: the server killed, then frozen (SIGSTOP), sync and asyncio.

Closed-loop callers (threads, or asyncio tasks) decide one request after
another through the typed API, the ``limits`` storage, the middleware,
Flask-Limiter (HTTP requests by werkzeug's test client, one per thread)
and slowapi (HTTP requests by httpx over ASGI), the last two on the
storage URI with ``swallow_errors=True`` (the fallback: fail open); each
decision on a key of its own (``out:<n>``, or ``n<n>x`` in a framework's
key) so that the server's keys say which decisions it ran. Mid-run
the server is killed (then started again on its port) or frozen (then
continued). Reported per run: the deadline, the p99 and the largest time a
decision took while the server was down, how long after its return the
first decision came from the server, and the late sends: decisions whose
caller had already been answered by the fallback but that the server ran
all the same, split into those the client sent after giving up (none: it
never sends again) and those already in the frozen server's socket before
it froze (the server runs them when it continues; no client can take a
written command back). Run:

    cd clients/python && .venv/bin/python -m bench.outage
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import signal
import threading
import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from fastapi import Depends, FastAPI, Request
from flask import Flask, request
from flask_limiter import Limiter
from limits import parse
from limits.aio.strategies import FixedWindowRateLimiter as AsyncFixedWindowRateLimiter
from limits.strategies import FixedWindowRateLimiter
from slowapi import Limiter as SlowLimiter

from redis_ratelimit import AsyncRateLimiter, Policy, RateLimiter, Unavailable
from redis_ratelimit.asgi import HttpLimit, RateLimitMiddleware, Receive, Scope, Send, header_key
from redis_ratelimit.limits_storage import AsyncRateLimitStorage, RateLimitStorage
from tests.conftest import Server

Kind = Literal["killed", "frozen"]
Through = Literal["typed", "storage", "asgi", "flask", "slowapi"]
"""The typed API, the ``limits`` storage (as Flask-Limiter and slowapi call it), the middleware,
and HTTP requests through Flask-Limiter (werkzeug's test client) and slowapi (httpx, ASGI)."""
ITEM = parse("1/hour")
SYNC: tuple[Through, ...] = ("typed", "storage", "flask")
ASYNC: tuple[Through, ...] = ("typed", "asgi", "storage", "slowapi")
N_KEY = re.compile(r"/n(\d+)x/")


@dataclass
class Trace:
    """What the callers saw: each decision's start, duration, key and whether the server ran it."""

    down_at: float = 0.0
    back_at: float = 0.0
    calls: list[tuple[float, float, int, bool]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    served: set[int] = field(default_factory=set)
    """Through a framework: the requests whose storage command the server answered."""
    keys: dict[int, str] = field(default_factory=dict)
    """Through a framework: each request's key on the server."""

    def watch(self, storage: Any) -> None:
        """Records the key of each ``incr`` of a framework's storage, and those answered."""
        incr = storage.incr

        def watched(key: str, *args: Any, **kwargs: Any) -> Any:
            n = int(N_KEY.search(key)[1])  # type: ignore[index]
            self.keys[n] = storage.prefixed(key)
            out = incr(key, *args, **kwargs)
            self.served.add(n)
            return out

        storage.incr = watched

    def add(self, start: float, end: float, n: int, served: bool) -> None:
        with self.lock:
            self.calls.append((start, end - start, n, served))


@dataclass
class Result:
    """One run's figures."""

    api: str
    kind: Kind
    deadline: float
    callers: int
    during: int
    p99_ms: float
    max_ms: float
    first_back_ms: float
    given_up: int
    ran_late: int
    waited: int

    @property
    def sent_after_giving_up(self) -> int:
        """Decisions the server ran that their caller had been answered without sending."""
        return self.ran_late - self.waited

    def row(self) -> str:
        return (
            f"| {self.api} | {self.kind} | {self.callers} | {self.deadline * 1000:.0f} ms "
            f"| {self.during} | {self.p99_ms:.1f} ms | {self.max_ms:.1f} ms "
            f"| {self.first_back_ms:.0f} ms | {self.sent_after_giving_up} "
            f"| {self.waited} of {self.given_up} |"
        )


HEADER = (
    "| API | server | callers | deadline | decisions while down | p99 | max "
    "| first served after return | late sends "
    "| given up, left charged on the server |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


def _outage(server: Server, kind: Kind, trace: Trace, normal: float, down: float) -> None:
    assert server.process is not None
    time.sleep(normal)
    trace.down_at = time.monotonic()
    if kind == "killed":
        server.stop()
    else:
        os.kill(server.process.pid, signal.SIGSTOP)
    time.sleep(down)
    if kind == "killed":
        server.start()
    else:
        os.kill(server.process.pid, signal.SIGCONT)
    trace.back_at = time.monotonic()


async def _request(app: RateLimitMiddleware, n: int) -> bool:
    """One HTTP request straight through the middleware: whether the server decided it."""
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"x-n", str(n).encode())]}
    fields: list[tuple[bytes, bytes]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b""}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            fields.extend(message["headers"])

    await app(scope, receive, send)
    return any(name == b"ratelimit" for name, _ in fields)


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _key(through: Through, n: int, trace: Trace) -> str:
    """The key a decision makes on the server."""
    if through in ("flask", "slowapi"):
        return trace.keys.get(n, f"never sent {n}")
    return f"out:{ITEM.key_for(str(n))}" if through == "storage" else f"out:{n}"


def _result(
    api: str, kind: Kind, deadline: float, callers: int, trace: Trace, server: Server
) -> Result:
    through: Through = (
        "storage"
        if "storage" in api
        else "flask"
        if "Flask" in api
        else "slowapi"
        if "slowapi" in api
        else "typed"
    )
    during = [c for c in trace.calls if trace.down_at <= c[0] < trace.back_at]
    times = sorted(c[1] for c in during)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))] if times else 0.0
    back = [c[0] + c[1] for c in trace.calls if c[3] and c[0] + c[1] >= trace.back_at]
    first = min(back) - trace.back_at if back else float("inf")
    given_up = [c for c in trace.calls if not c[3]]
    client = server.client()
    pipe = client.pipeline(transaction=False)
    for c in given_up:
        pipe.exists(_key(through, c[2], trace))
    ran = [c for c, found in zip(given_up, pipe.execute(), strict=True) if found]
    client.close()
    return Result(
        api,
        kind,
        deadline,
        callers,
        len(during),
        p99 * 1000,
        (times[-1] if times else 0.0) * 1000,
        first * 1000,
        len(given_up),
        len(ran),
        # Answered by the open circuit at once (never sent) or after waiting for a reply.
        sum(1 for c in ran if c[1] >= deadline / 2),
    )


def run_sync(
    kind: Kind,
    through: Through = "typed",
    *,
    deadline: float = 0.1,
    threads: int = 8,
    normal: float = 0.5,
    down: float = 2.0,
    after: float = 1.5,
    pause: float = 0.002,
) -> Result:
    """Threads, each closed-loop with ``pause`` s between decisions."""
    server = Server(manual_clock=False)
    trace = Trace()
    seq = itertools.count()
    stop = threading.Event()
    rl = RateLimiter.from_url(
        f"redis://127.0.0.1:{server.port}", deadline=deadline, fallback="closed"
    )
    storage = RateLimitStorage(server.url, key_prefix="out", deadline=deadline)
    hits = FixedWindowRateLimiter(storage)
    app = _flask_app(server, deadline, trace)
    clients = threading.local()

    def decide(n: int) -> bool:
        if through == "typed":
            return rl.gcra(f"out:{n}", 1, "1h").fallback is None
        if through == "flask":
            if not hasattr(clients, "http"):
                clients.http = app.test_client()
            assert clients.http.get("/", headers={"x-n": str(n)}).status_code == 200
            return n in trace.served
        try:
            hits.hit(ITEM, str(n))
            return True
        except Unavailable:
            return False

    def caller() -> None:
        while not stop.is_set():
            n = next(seq)
            start = time.monotonic()
            served = decide(n)
            trace.add(start, time.monotonic(), n, served)
            time.sleep(pause)

    workers = [threading.Thread(target=caller) for _ in range(threads)]
    try:
        for w in workers:
            w.start()
        _outage(server, kind, trace, normal, down)
        time.sleep(after)
        stop.set()
        for w in workers:
            w.join()
        api = {"typed": "sync", "storage": "sync limits storage", "flask": "Flask-Limiter (HTTP)"}
        return _result(api[through], kind, deadline, threads, trace, server)
    finally:
        stop.set()
        server.remove()


def run_async(
    kind: Kind,
    through: Through = "typed",
    *,
    deadline: float = 0.1,
    tasks: int = 50,
    normal: float = 0.5,
    down: float = 2.0,
    after: float = 1.5,
    pause: float = 0.002,
) -> Result:
    """Asyncio tasks on one loop, each closed-loop; the outage driven from a thread."""
    server = Server(manual_clock=False)
    trace = Trace()
    seq = itertools.count()

    async def drive() -> None:
        rl = AsyncRateLimiter.from_url(
            f"redis://127.0.0.1:{server.port}", deadline=deadline, fallback="closed"
        )
        stop = asyncio.Event()
        storage = AsyncRateLimitStorage("async+" + server.url, key_prefix="out", deadline=deadline)
        hits = AsyncFixedWindowRateLimiter(storage)
        limit = HttpLimit("hourly", Policy.gcra(1, "1h"), prefix="out:")
        app = RateLimitMiddleware(_ok, rl, [limit], key=header_key("x-n"), fallback="closed")
        web = _slowapi_app(server, deadline, trace)
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=web), base_url="http://t", timeout=None
        )

        async def decide(n: int) -> bool:
            if through == "typed":
                return (await rl.gcra(f"out:{n}", 1, "1h")).fallback is None
            if through == "asgi":
                return await _request(app, n)
            if through == "slowapi":
                response = await http.get("/", headers={"x-n": str(n)})
                assert response.status_code == 200, response.text
                return n in trace.served
            try:
                await hits.hit(ITEM, str(n))
                return True
            except Unavailable:
                return False

        async def caller() -> None:
            while not stop.is_set():
                n = next(seq)
                start = time.monotonic()
                served = await decide(n)
                trace.add(start, time.monotonic(), n, served)
                await asyncio.sleep(pause)

        running = [asyncio.create_task(caller()) for _ in range(tasks)]
        await asyncio.to_thread(_outage, server, kind, trace, normal, down)
        await asyncio.sleep(after)
        stop.set()
        await asyncio.gather(*running)
        await http.aclose()
        await rl.client.aclose()  # type: ignore[attr-defined]

    try:
        asyncio.run(drive())
        api = {
            "typed": "asyncio",
            "asgi": "asyncio ASGI",
            "storage": "asyncio limits storage",
            "slowapi": "slowapi (HTTP)",
        }
        return _result(api[through], kind, deadline, tasks, trace, server)
    finally:
        server.remove()


def _flask_app(server: Server, deadline: float, trace: Trace) -> Flask:
    """Flask-Limiter on the storage, failing open (``swallow_errors``), a key per request."""
    app = Flask("outage")
    limiter = Limiter(
        lambda: f"n{request.headers['x-n']}x",
        app=app,
        storage_uri=server.url,
        storage_options={"deadline": str(deadline)},
        default_limits=["1/hour"],
        swallow_errors=True,
        key_prefix="out",
    )
    trace.watch(limiter._storage)
    logging.getLogger("flask-limiter").disabled = True  # a swallowed error logs a traceback
    app.add_url_rule("/", "root", lambda: "ok")
    return app


def _request_key(request: Request) -> str:
    """A key of its own for each request (slowapi passes a parameter named ``request``)."""
    return f"n{request.headers['x-n']}x"


def _slowapi_app(server: Server, deadline: float, trace: Trace) -> FastAPI:
    """slowapi on the storage, failing open (``swallow_errors``), a key per request.

    slowapi's wrapper reads ``request.state.view_rate_limit``, which only a
    request its storage decided sets: a dependency sets it to ``None`` first,
    so that a request whose storage command failed is let through, not 500.
    """
    limiter = SlowLimiter(
        key_func=_request_key,
        storage_uri=server.url,
        storage_options={"deadline": str(deadline)},
        swallow_errors=True,
        key_prefix="out",
    )
    trace.watch(limiter._storage)
    logging.getLogger("slowapi").disabled = True

    async def undecided(request: Request) -> None:
        request.state.view_rate_limit = None

    app = FastAPI(dependencies=[Depends(undecided)])
    app.state.limiter = limiter

    @limiter.limit("1/hour")
    async def root(request: Request) -> str:
        return "ok"

    app.add_api_route("/", root)
    return app


def main() -> None:
    deadline = float(os.environ.get("DEADLINE", "0.1"))
    print(HEADER)
    kinds: tuple[Kind, ...] = ("killed", "frozen")
    for kind in kinds:
        for sync in SYNC:
            print(run_sync(kind, sync, deadline=deadline).row(), flush=True)
        for through in ASYNC:
            print(run_async(kind, through, deadline=deadline).row(), flush=True)


if __name__ == "__main__":
    main()
