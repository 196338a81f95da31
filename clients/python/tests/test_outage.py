"""Decisions while Redis is down: the server killed and frozen (SIGSTOP), sync and asyncio.

Closed-loop callers against a real server (``bench/outage.py`` is the
harness and prints the table); each decision on a key of its own, so the
server's keys say which decisions it ran.
"""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest
from fastapi import FastAPI, Request
from flask_limiter.util import get_remote_address
from limits import parse
from limits.strategies import STRATEGIES
from slowapi import Limiter as SlowLimiter

from bench.outage import (
    ASYNC,
    SYNC,
    Kind,
    Result,
    Through,
    Trace,
    _request_key,
    _slowapi_app,
    run_async,
    run_sync,
)
from redis_ratelimit import AsyncRateLimiter, RateLimiter, Unavailable
from redis_ratelimit.limits_storage import RateLimitStorage

from .conftest import Server
from .test_asgi import starlette_app

DEADLINE = 0.1


def _check(result: Result) -> None:
    assert result.during > 0
    assert result.p99_ms <= DEADLINE * 1000 + 20, result.row()
    assert result.first_back_ms <= 1000, result.row()
    assert result.sent_after_giving_up == 0, result.row()


@pytest.mark.parametrize("through", SYNC)
@pytest.mark.parametrize("kind", ["killed", "frozen"])
def test_threads_through_an_outage(kind: Kind, through: Through) -> None:
    _check(run_sync(kind, through, deadline=DEADLINE, normal=0.3, down=1.0, after=1.2))


@pytest.mark.parametrize("through", ASYNC)
@pytest.mark.parametrize("kind", ["killed", "frozen"])
def test_tasks_through_an_outage(kind: Kind, through: Through) -> None:
    _check(run_async(kind, through, deadline=DEADLINE, normal=0.3, down=1.0, after=1.2))


def _timed(call: object) -> float:
    start = time.monotonic()
    assert callable(call)
    call()
    return time.monotonic() - start


def test_the_fallbacks_answer_at_once_once_the_connection_is_known_down() -> None:
    server = Server()
    url = f"redis://127.0.0.1:{server.port}"
    try:
        limiters = {
            f: RateLimiter.from_url(url, deadline=DEADLINE, fallback=f)
            for f in ("raise", "open", "closed", "degraded")
        }
        for f, rl in limiters.items():
            assert rl.gcra(f"k:{f}", 3, "1m").fallback is None
        server.stop()
        with pytest.raises(Unavailable):
            limiters["raise"].gcra("k", 3, "1m")
        assert limiters["open"].gcra("k", 3, "1m").allowed
        closed = limiters["closed"].gcra("k", 3, "1m")
        assert not closed.allowed and closed.fallback == "closed"
        assert closed.retry_after is not None and closed.retry_after.total_seconds() >= 1
        # Degraded: its observed share (all of it), from the level the server told (2 of 3 left).
        local = [limiters["degraded"].gcra("k:degraded", 3, "1m") for _ in range(4)]
        assert [d.allowed for d in local] == [True, True, False, False]
        assert {d.fallback for d in local} == {"degraded"}
        assert local[3].retry_after is not None and 19 < local[3].retry_after.total_seconds() <= 20
        # The circuit is open: each answers without trying to connect.
        assert _timed(lambda: limiters["open"].gcra("k", 3, "1m")) < 0.005
        with pytest.raises(Unavailable):
            limiters["raise"].gcra("k", 3, "1m")
    finally:
        server.remove()


async def test_a_per_call_deadline_and_wait() -> None:
    server = Server(manual_clock=False)
    try:
        rl = AsyncRateLimiter.from_url(f"redis://127.0.0.1:{server.port}", fallback="open")
        assert rl.guard.deadline == 0.3
        for _ in range(2):
            await rl.gcra("q", 2, "1s")
        # A queued request may take its WAIT besides its deadline (here shorter than the wait).
        start = time.monotonic()
        d = await rl.gcra("q", 2, "1s", wait="900ms", deadline=0.05)
        took = time.monotonic() - start
        assert d.allowed and d.fallback is None  # the server's answer, not a fallback
        assert took >= 0.4  # admitted about 500 ms later, past the 50 ms deadline
        await rl.client.aclose()  # type: ignore[attr-defined]
    finally:
        server.remove()


async def test_the_middleware_answers_503_at_once_while_redis_is_down() -> None:
    server = Server()
    limiter = AsyncRateLimiter.from_url(f"redis://127.0.0.1:{server.port}", deadline=DEADLINE)
    try:
        app = starlette_app(limiter, fallback="closed", timeout=None)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            alice = {"x-api-key": "alice"}
            assert (await http.get("/hello", headers=alice)).status_code == 200
            server.stop()
            first = await http.get("/hello", headers=alice)
            assert first.status_code == 503 and first.headers["retry-after"] == "1"
            start = time.monotonic()
            for _ in range(20):
                assert (await http.get("/hello", headers=alice)).status_code == 503
            assert (time.monotonic() - start) / 20 < 0.005
        degraded = starlette_app(limiter, fallback="degraded", timeout=None)
        transport = httpx.ASGITransport(app=degraded)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            codes = [(await http.get("/hello", headers=alice)).status_code for _ in range(3)]
            assert codes == [200, 200, 429]  # the per-key limit, 2 per minute, kept locally
    finally:
        await limiter.client.aclose()  # type: ignore[attr-defined]
        server.remove()


def test_the_limits_storage_fails_fast_for_flask_limiters_fallbacks() -> None:
    server = Server()
    try:
        storage = RateLimitStorage(server.url, deadline=DEADLINE)
        limiter = STRATEGIES["fixed-window"](storage)
        item = parse("5/minute")
        assert limiter.hit(item, "k")
        server.stop()
        with pytest.raises(Unavailable):
            limiter.hit(item, "k")
        start = time.monotonic()
        for _ in range(20):
            with pytest.raises(Unavailable):
                limiter.hit(item, "k")
        assert (time.monotonic() - start) / 20 < 0.005
        assert get_remote_address is not None
    finally:
        server.remove()


async def test_a_per_call_deadline_on_a_frozen_server() -> None:
    """The limiter waits 5 s; a call that says 50 ms is answered by its fallback after 50 ms."""
    server = Server()
    url = f"redis://127.0.0.1:{server.port}"
    rl = RateLimiter.from_url(url, deadline=5, fallback="open")
    arl = AsyncRateLimiter.from_url(url, deadline=5, fallback="open")
    try:
        assert rl.gcra("k", 5, "1m").fallback is None
        assert (await arl.gcra("k", 5, "1m")).fallback is None
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            assert rl.gcra("k", 5, "1m", deadline=0.05).fallback == "open"
            assert 0.05 <= time.monotonic() - start < 0.05 + 0.02
            start = time.monotonic()
            assert (await arl.gcra("j", 5, "1m", deadline=0.05)).fallback == "open"
            assert 0.05 <= time.monotonic() - start < 0.05 + 0.02
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        await arl.client.aclose()  # type: ignore[attr-defined]
    finally:
        server.remove()


async def test_slowapi_fails_open_only_with_its_limit_unset_first() -> None:
    """slowapi's ``swallow_errors=True`` on a storage that raises: its endpoint wrapper reads
    ``request.state.view_rate_limit``, which only a decided request has; the dependency the
    README gives sets it first, and the request is let through."""
    server = Server()
    try:
        plain = SlowLimiter(
            key_func=_request_key,
            storage_uri=server.url,
            storage_options={"deadline": str(DEADLINE)},
            swallow_errors=True,
        )
        bare = FastAPI()
        bare.state.limiter = plain

        @plain.limit("1/hour")
        async def root(request: Request) -> str:
            return "ok"

        bare.add_api_route("/", root)
        fixed = _slowapi_app(server, DEADLINE, Trace())
        server.stop()
        headers = {"x-n": "1"}
        transport = httpx.ASGITransport(app=bare, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            assert (await http.get("/", headers=headers)).status_code == 500
        transport = httpx.ASGITransport(app=fixed)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            assert (await http.get("/", headers=headers)).status_code == 200
    finally:
        server.remove()
