"""The ``limits`` storage: its strategies, Flask-Limiter and slowapi by the storage URI."""

from __future__ import annotations

import asyncio
import time

import flask
import httpx
import limits.aio.strategies
import pytest
import redis
from fastapi import FastAPI, Request
from flask_limiter import Limiter as FlaskLimiter
from flask_limiter.util import get_remote_address
from limits import parse
from limits.storage import storage_from_string
from limits.strategies import STRATEGIES
from slowapi import Limiter as SlowLimiter
from slowapi import _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded

import redis_ratelimit.limits_storage
from redis_ratelimit.limits_storage import AsyncRateLimitStorage, RateLimitStorage

from .conftest import SLACK, Server

STRATEGY_NAMES = sorted(STRATEGIES)


def commands(client: redis.Redis) -> int:
    """Commands the server has run, scripts' own calls included (INFO commandstats)."""
    stats = client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k not in ("cmdstat_info",))


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_strategies_decide_with_one_command_per_hit(fresh: Server, strategy: str) -> None:
    storage = storage_from_string(fresh.url, deadline=SLACK)
    assert isinstance(storage, RateLimitStorage)
    limiter = STRATEGIES[strategy](storage)
    item = parse("3/minute")
    counter = fresh.client()
    assert storage.check()  # connected: the handshake is not a hit's
    before = commands(counter)
    hits = [limiter.hit(item, "alice") for _ in range(5)]
    assert commands(counter) - before == 5
    assert hits == [True, True, True, False, False]
    assert not limiter.test(item, "alice")
    assert limiter.get_window_stats(item, "alice").remaining == 0
    counter.execute_command(
        "RL.CLOCK", "ADVANCE", 60_000_000 * (2 if strategy == "sliding-window-counter" else 1)
    )
    assert limiter.test(item, "alice")
    assert limiter.hit(item, "alice")
    limiter.clear(item, "alice")
    assert limiter.get_window_stats(item, "alice").remaining == 3
    assert storage.check()
    assert storage.reset() == 0


def test_window_stats(fresh: Server) -> None:
    storage = RateLimitStorage(fresh.url, deadline=SLACK)
    item = parse("10/minute")
    moving = STRATEGIES["moving-window"](storage)
    moving.hit(item, "k", cost=4)
    counter = fresh.client()
    counter.execute_command("RL.CLOCK", "ADVANCE", 20_000_000)
    moving.hit(item, "k", cost=2)
    assert storage.get_moving_window(item.key_for("k"), 10, 60)[1] == 6
    stats = moving.get_window_stats(item, "k")
    assert stats.remaining == 4
    fixed = STRATEGIES["fixed-window"](storage)
    assert fixed.hit(item, "f", cost=11) is False  # counted anyway, as limits counts
    assert storage.get(item.key_for("f")) == 11
    assert fixed.get_window_stats(item, "f").remaining == 0
    assert storage.reset() == 2


async def test_async_storage(fresh: Server) -> None:
    storage = storage_from_string("async+" + fresh.url, deadline=SLACK)
    assert isinstance(storage, AsyncRateLimitStorage)
    item = parse("3/minute")
    for name in ("fixed-window", "moving-window", "sliding-window-counter"):
        limiter = limits.aio.strategies.STRATEGIES[name](storage)  # type: ignore[abstract]
        results = await asyncio.gather(*(limiter.hit(item, name) for _ in range(50)))
        assert sum(results) == 3, name
        assert (await limiter.get_window_stats(item, name)).remaining == 0
    assert await storage.check()
    assert await storage.reset() == 3


def test_server_errors_are_storage_errors_when_asked(fresh: Server) -> None:
    from limits.errors import StorageError

    storage = RateLimitStorage(fresh.url, wrap_exceptions=True, deadline=SLACK)
    with pytest.raises(StorageError):
        storage.acquire_entry("k", 10_000_000, 60)  # above ratelimit.max-log-entries


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_flask_limiter(fresh: Server, strategy: str) -> None:
    assert redis_ratelimit.limits_storage  # the import registers redis+ratelimit://
    app = flask.Flask(__name__)
    limiter = FlaskLimiter(
        get_remote_address,
        app=app,
        storage_uri=fresh.url,
        strategy=strategy,
        headers_enabled=True,
        storage_options={"deadline": int(SLACK)},
    )

    @app.route("/")
    @limiter.limit("2/minute")
    def index() -> str:
        return "ok"

    client = app.test_client()
    codes = [client.get("/").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    assert client.get("/").headers["X-RateLimit-Remaining"] == "0"
    fresh.client().execute_command("RL.CLOCK", "ADVANCE", 120_000_000)
    assert client.get("/").status_code == 200


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
async def test_slowapi(fresh: Server, strategy: str) -> None:
    limiter = SlowLimiter(
        key_func=lambda request: "client",
        storage_uri=fresh.url,
        strategy=strategy,
        storage_options={"deadline": str(SLACK)},
    )
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]

    @app.get("/")
    @limiter.limit("2/minute")
    async def index(request: Request) -> dict[str, str]:
        return {"ok": "yes"}

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        codes = [(await http.get("/")).status_code for _ in range(3)]
    assert codes == [200, 200, 429]


async def test_slowapi_in_flight(fresh: Server) -> None:
    limiter = SlowLimiter(
        key_func=lambda request: "hot",
        storage_uri=fresh.url,
        strategy="moving-window",
        storage_options={"deadline": str(SLACK)},
    )
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]

    @app.get("/")
    @limiter.limit("10/minute")
    async def index(request: Request) -> dict[str, str]:
        return {"ok": "yes"}

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        responses = await asyncio.gather(*(http.get("/") for _ in range(50)))
    assert sorted(r.status_code for r in responses) == [200] * 10 + [429] * 40


@pytest.mark.parametrize("at", [7, 50])
def test_the_sliding_window_counter_resets_when_a_hit_is_admitted_again(
    fresh: Server, at: int
) -> None:
    """10 per minute, 10 hits `at` s into an aligned window: the next fits 6 s into the next."""
    storage = RateLimitStorage(fresh.url, deadline=SLACK)
    limiter = STRATEGIES["sliding-window-counter"](storage)
    item = parse("10/minute")
    clock = fresh.client()
    clock.execute_command("RL.CLOCK", "ADVANCE", at * 1_000_000)
    assert [limiter.hit(item, "k") for _ in range(11)] == [True] * 10 + [False]
    told = limiter.get_window_stats(item, "k").reset_time - time.time()
    true_wait = 60 - at + 6
    assert true_wait - 1 < told <= true_wait + 0.1
    clock.execute_command("RL.CLOCK", "ADVANCE", (true_wait - 1) * 1_000_000)
    assert not limiter.hit(item, "k")  # a client that came back a second early
    clock.execute_command("RL.CLOCK", "ADVANCE", 1_000_000)
    assert limiter.hit(item, "k")  # one that waited as told


@pytest.mark.parametrize("strategy", ["moving-window", "sliding-window-counter"])
def test_a_jittered_denial_is_the_reset_limits_reads(fresh: Server, strategy: str) -> None:
    """Clients denied together are told waits spread from the true wait on, never before it.

    40 s into an aligned window: the sliding counter's true wait (26 s) leaves
    room under the window (the most ``limits`` reads) for the spread.
    """
    fresh.client().execute_command("RL.CLOCK", "ADVANCE", 40_000_000)
    storage = RateLimitStorage(fresh.url, deadline=SLACK, jitter="true")
    limiter = STRATEGIES[strategy](storage)
    item = parse("10/minute")
    # A key of its own: the server's herds outlive FLUSHALL (memory only),
    # and each test sets the clock back to the same instant.
    key = f"k-{strategy}"
    assert all(limiter.hit(item, key) for _ in range(10))
    plain = limiter.get_window_stats(item, key).reset_time - time.time()
    told = []
    for _ in range(8):
        assert not limiter.hit(item, key)
        told.append(limiter.get_window_stats(item, key).reset_time - time.time())
    assert min(told) >= plain - 0.1  # never before the true wait
    assert max(told) - min(told) >= 5  # spread: about an interval (6 s) per client denied
    unjittered = RateLimitStorage(fresh.url, deadline=SLACK)
    assert not STRATEGIES[strategy](unjittered).hit(item, key)
