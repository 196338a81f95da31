"""Migration guides that run: the same requests through the "before" and the "after" app.

Each guide drives the app as it was (Flask-Limiter or slowapi on `limits`'
own ``redis://`` storage, a hand-written ``INCR``/``EXPIRE`` limiter) and
as it is after moving to this package, through one request sequence
against one real server (the module loaded, the real clock), and compares
status codes and header fields. Every difference is asserted here and
listed in the README's "Migrating" section.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import flask
import httpx
import pytest
import redis
from fastapi import FastAPI, Request
from flask_limiter import Limiter as FlaskLimiter
from slowapi import Limiter as SlowLimiter
from slowapi import _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded

import redis_ratelimit.limits_storage  # noqa: F401 - registers redis+ratelimit://
from redis_ratelimit import RateLimiter

from .conftest import SLACK, Server

STRATEGIES = ["fixed-window", "moving-window", "sliding-window-counter"]
FIELDS = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"]


@pytest.fixture(scope="module")
def real() -> Iterator[Server]:
    """A server with the module on the real clock: `limits`' scripts read Redis's own time."""
    s = Server(manual_clock=False)
    yield s
    s.remove()


def flask_app(uri: str, strategy: str) -> flask.Flask:
    app = flask.Flask(__name__)
    FlaskLimiter(
        lambda: "client",
        app=app,
        storage_uri=uri,
        strategy=strategy,
        default_limits=["5 per minute"],
        headers_enabled=True,
    )

    @app.route("/hello")
    def hello() -> str:
        return "hello"

    return app


def flask_run(app: flask.Flask) -> list[tuple[int, dict[str, str | None]]]:
    client = app.test_client()
    out = []
    for _ in range(7):
        r = client.get("/hello")
        out.append((r.status_code, {f: r.headers.get(f) for f in FIELDS}))
    return out


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_flask_limiter_from_redis_to_redis_ratelimit(real: Server, strategy: str) -> None:
    real.client().flushall()
    if strategy == "sliding-window-counter" and time.time() % 60 > 58:
        # Both runs inside one aligned window, so that the figures below are known.
        time.sleep(60 - time.time() % 60)
    before = flask_run(flask_app(f"redis://127.0.0.1:{real.port}", strategy))
    after = flask_run(flask_app(f"redis+ratelimit://127.0.0.1:{real.port}", strategy))
    window_end = (int(time.time()) // 60 + 1) * 60
    assert [s for s, _ in before] == [s for s, _ in after] == [200] * 5 + [429] * 2
    for (_, b), (status, a) in zip(before, after, strict=True):
        assert a["X-RateLimit-Limit"] == b["X-RateLimit-Limit"] == "5"
        assert a["X-RateLimit-Remaining"] == b["X-RateLimit-Remaining"]
        assert (a["Retry-After"] is None) == (b["Retry-After"] is None)
        reset_a, reset_b = int(a["X-RateLimit-Reset"] or 0), int(b["X-RateLimit-Reset"] or 0)
        wait_a, wait_b = int(a["Retry-After"] or 0), int(b["Retry-After"] or 0)
        if strategy == "sliding-window-counter":
            # The difference: windows aligned to the epoch here. With room left, the
            # reset is the window's end; on a full key, when the full window's weight
            # has decayed by one hit: 60 s / 5 into the next window, which limits reads
            # as at most just under a window from now (hits in the window's first 12 s
            # wait longer). limits' figure is not compared: on a new key it is its PTTL
            # modulo the window, `now` or `now + 60` depending on whether a millisecond
            # passed since its write.
            full = min(window_end + 60 // 5, int(time.time()) + 60)
            told = window_end if a["X-RateLimit-Remaining"] != "0" else full
            assert told - 2 <= reset_a <= told + 1, (window_end, after)
            if status == 429:
                assert abs(reset_a - wait_a - int(time.time())) <= 2, after
        else:
            # The same instant, told by the server's clock here, the client's there.
            assert abs(reset_a - reset_b) <= 1 and abs(wait_a - wait_b) <= 1, (before, after)


async def slowapi_run(uri: str, strategy: str) -> list[int]:
    limiter = SlowLimiter(key_func=lambda request: "client", storage_uri=uri, strategy=strategy)
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]

    @app.get("/hello")
    @limiter.limit("5/minute")
    async def hello(request: Request) -> str:
        return "hello"

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        return [(await http.get("/hello")).status_code for _ in range(7)]


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_slowapi_from_redis_to_redis_ratelimit(real: Server, strategy: str) -> None:
    real.client().flushall()
    before = await slowapi_run(f"redis://127.0.0.1:{real.port}", strategy)
    after = await slowapi_run(f"redis+ratelimit://127.0.0.1:{real.port}", strategy)
    assert before == after == [200] * 5 + [429] * 2


def incr_expire(r: redis.Redis, who: str) -> tuple[int, dict[str, str]]:
    """The "before": a fixed window by hand, 5 a minute."""
    key = f"hits:{who}"
    n = int(r.incr(key))
    if n == 1:
        r.expire(key, 60)
    if n > 5:
        return 429, {"Retry-After": str(r.ttl(key))}
    return 200, {}


def fixed(rl: RateLimiter, who: str) -> tuple[int, dict[str, str]]:
    """The "after": one ``RL.FIXED``, its header fields."""
    d = rl.fixed(f"rl:{who}", 5, "1m")
    return (200 if d.allowed else 429), d.headers()


def test_a_hand_written_incr_expire_limiter(real: Server) -> None:
    r = real.client()
    r.flushall()
    rl = RateLimiter(r, deadline=SLACK)
    before = [incr_expire(r, "alice") for _ in range(7)]
    after = [fixed(rl, "alice") for _ in range(7)]
    assert [s for s, _ in before] == [s for s, _ in after] == [200] * 5 + [429] * 2
    for (_, b), (status, a) in zip(before, after, strict=True):
        # The same Retry-After on a 429 (the TTL there, the server's wait rounded up here).
        if status == 429:
            assert abs(int(a["Retry-After"]) - int(b["Retry-After"])) <= 1
        # The differences: the IETF fields on every response; none there.
        assert a["RateLimit-Policy"] == '"fixed";q=5;w=60' or a["RateLimit-Policy"].endswith(
            ";q=5;w=60"
        )
        assert "RateLimit" in a
    # And one more: the hand-written counter counted the denied hits too.
    assert int(r.get("hits:alice") or 0) == 7
    peek: Any = r.execute_command("RL.PEEK", "rl:alice", "FIXED", 5, "1m")
    assert peek[2] == 0
