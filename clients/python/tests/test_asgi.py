"""The middleware through real ASGI apps (Starlette, FastAPI, Litestar) and httpx."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from litestar import Litestar, get
from litestar.middleware import DefineMiddleware
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from redis_ratelimit import AsyncRateLimiter, CommandError, Policy
from redis_ratelimit.asgi import HttpLimit, RateLimitMiddleware, header_key

from .conftest import SLACK, Server

LIMITS = [
    HttpLimit("per-key", Policy.gcra(2, "1m"), prefix="rl:key:"),
    HttpLimit("global", Policy.sliding(1000, "1m", mode="approx"), prefix="rl:global", shared=True),
]


async def hello(_: object) -> PlainTextResponse:
    return PlainTextResponse("hello")


def starlette_app(limiter: AsyncRateLimiter, **options: Any) -> Starlette:
    # A timeout no loaded machine reaches, unless a test is about timeouts.
    options.setdefault("timeout", 10.0)
    middleware = Middleware(
        RateLimitMiddleware, limiter=limiter, limits=LIMITS, key=header_key("x-api-key"), **options
    )
    return Starlette(routes=[Route("/hello", hello)], middleware=[middleware])


@pytest.fixture
async def http(arl: AsyncRateLimiter) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=starlette_app(arl))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


async def test_headers_and_the_429(http: httpx.AsyncClient) -> None:
    alice = {"x-api-key": "alice"}
    first = await http.get("/hello", headers=alice)
    assert first.status_code == 200 and first.text == "hello"
    assert first.headers["ratelimit-policy"] == '"per-key";q=2;w=60, "global";q=1000;w=60'
    assert first.headers["ratelimit"] == '"per-key";r=1;t=30, "global";r=999;t=60'
    assert (await http.get("/hello", headers=alice)).status_code == 200
    denied = await http.get("/hello", headers=alice)
    assert denied.status_code == 429
    assert denied.headers["retry-after"] == "30"
    assert denied.headers["ratelimit"] == '"per-key";r=0;t=30'
    assert denied.headers["content-type"] == "application/problem+json"
    assert denied.json() == {
        "type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
        "title": "Request cannot be satisfied as assigned quota has been exceeded",
        "violated-policies": ["per-key"],
    }
    assert (await http.get("/hello", headers={"x-api-key": "bob"})).status_code == 200


async def test_a_request_without_a_key_is_not_limited(http: httpx.AsyncClient) -> None:
    for _ in range(5):
        r = await http.get("/hello")
        assert r.status_code == 200 and "ratelimit" not in r.headers


async def test_fifty_requests_in_flight_on_one_key(http: httpx.AsyncClient) -> None:
    statuses = await asyncio.gather(
        *(http.get("/hello", headers={"x-api-key": "hot"}) for _ in range(50))
    )
    assert sorted(r.status_code for r in statuses) == [200] * 2 + [429] * 48


async def test_wait_queues_on_the_server(arl: AsyncRateLimiter) -> None:
    app = starlette_app(arl, wait="1h")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        alice = {"x-api-key": "alice"}
        for _ in range(2):
            assert (await http.get("/hello", headers=alice)).status_code == 200
        third = asyncio.create_task(http.get("/hello", headers=alice))
        while not (await arl.client.execute_command("INFO", "ratelimit"))["ratelimit_waiting"]:
            await asyncio.sleep(0.002)
        assert not third.done()
        await arl.advance_clock(30_000_000)  # one emission interval later
        assert (await third).status_code == 200


async def test_a_command_error_is_not_failed_open(arl: AsyncRateLimiter) -> None:
    await arl.client.execute_command("SET", "rl:key:eve", "not a limiter")
    app = starlette_app(arl)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        with pytest.raises(CommandError, match=r"^WRONGTYPE key 1 holds a string"):
            await http.get("/hello", headers={"x-api-key": "eve"})


@pytest.mark.parametrize("fail_open", [True, False])
async def test_redis_unavailable(fail_open: bool) -> None:
    server = Server()
    client = server.aclient(socket_timeout=10)
    try:
        app = starlette_app(AsyncRateLimiter(client, deadline=SLACK), fail_open=fail_open)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            alice = {"x-api-key": "alice"}
            assert (await http.get("/hello", headers=alice)).status_code == 200
            server.stop()
            down = await http.get("/hello", headers=alice)
            if fail_open:
                assert down.status_code == 200 and "ratelimit" not in down.headers
            else:
                assert down.status_code == 503 and down.headers["retry-after"] == "1"
            server.start()
            until = time.monotonic() + 1  # the circuit looks again within its probe interval
            while "ratelimit" not in (back := await http.get("/hello", headers=alice)).headers:
                assert back.status_code == (200 if fail_open else 503)
                assert time.monotonic() < until, "not back within 1 s of the server's return"
                await asyncio.sleep(0.01)
            assert back.status_code == 200 and back.headers["ratelimit"].startswith('"per-key";r=1')
    finally:
        await client.aclose()
        server.remove()


async def test_fastapi(arl: AsyncRateLimiter) -> None:
    app = FastAPI()

    @app.get("/items")
    async def items() -> dict[str, int]:
        return {"n": 1}

    app.add_middleware(
        RateLimitMiddleware, limiter=arl, limits=LIMITS[:1], key=header_key("x-api-key")
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        codes = [
            (await http.get("/items", headers={"x-api-key": "k"})).status_code for _ in range(3)
        ]
    assert codes == [200, 200, 429]


async def test_litestar(arl: AsyncRateLimiter) -> None:
    @get("/items")
    async def items() -> dict[str, int]:
        return {"n": 1}

    middleware = DefineMiddleware(
        RateLimitMiddleware,  # type: ignore[arg-type]  # Litestar's own ASGI types
        limiter=arl,
        limits=LIMITS[:1],
        key=header_key("x-api-key"),
    )
    app = Litestar(route_handlers=[items], middleware=[middleware])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
        base_url="http://t",
    ) as http:
        responses = [await http.get("/items", headers={"x-api-key": "k"}) for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    assert responses[0].headers["ratelimit"] == '"per-key";r=1;t=30'
    assert responses[2].headers["retry-after"] == "30"


@pytest.mark.parametrize("fail_open", [True, False])
async def test_a_server_that_does_not_answer_in_time(
    arl: AsyncRateLimiter, fail_open: bool
) -> None:
    """Writes paused on the server: the decision waits past the timeout."""
    app = starlette_app(arl, fail_open=fail_open, timeout=0.2)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        await arl.client.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
        try:
            slow = await http.get("/hello", headers={"x-api-key": "alice"})
        finally:
            await arl.client.execute_command("CLIENT", "UNPAUSE")
        assert slow.status_code == (200 if fail_open else 503)
        assert "ratelimit" not in slow.headers


async def test_a_request_that_gives_up_while_queued_is_not_charged(arl: AsyncRateLimiter) -> None:
    app = starlette_app(arl, wait="1h")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        alice = {"x-api-key": "alice"}
        for _ in range(2):
            assert (await http.get("/hello", headers=alice)).status_code == 200
        queued = asyncio.create_task(http.get("/hello", headers=alice))
        await _until_waiting(arl, 1)
        queued.cancel()  # the client went away: its RL.ALL connection closes
        with pytest.raises(asyncio.CancelledError):
            await queued
        await _until_waiting(arl, 0)
        await arl.advance_clock(30_000_000)
        first = await http.get("/hello", headers=alice)  # the slot the leaver did not take
        assert first.status_code == 200
        assert first.headers["ratelimit"].startswith('"per-key";r=0;')


async def _until_waiting(arl: AsyncRateLimiter, n: int) -> None:
    deadline = time.monotonic() + 10
    while (await arl.client.execute_command("INFO", "ratelimit"))["ratelimit_waiting"] != n:
        assert time.monotonic() < deadline, f"never {n} waiting"
        await asyncio.sleep(0.002)
