"""The Python example on the repository README's first screen, run as written.

The example connects with ``redis.Redis()``; the test points that default at
the test server and runs the example in RESP2 and RESP3.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from .conftest import Server

README = Path(__file__).resolve().parents[3] / "README.md"


def readme_example() -> str:
    """The README's first ```python block."""
    match = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert match, "no Python example in README.md"
    return match.group(1)


@pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])
def test_the_readme_example_limits_to_100_per_minute_with_retry_after(
    fresh: Server, protocol: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = redis.Redis.__init__

    def to_test_server(self: redis.Redis, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("port", fresh.port)
        kwargs.setdefault("protocol", protocol)
        original(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", to_test_server)
    scope: dict[str, Any] = {}
    exec(compile(readme_example(), str(README), "exec"), scope)
    check = scope["check"]

    statuses = [check("alice")[0] for _ in range(100)]
    assert statuses == [200] * 100  # the burst: the limit, at once
    status, headers = check("alice")
    assert status == 429
    assert headers["Retry-After"] == "1"  # 600 ms, rounded up
    assert "q=100;w=60" in headers["RateLimit-Policy"]
    assert check("bob")[0] == 200  # one key per API key


def readme_blocks() -> list[str]:
    """Every ```python block of the repository README."""
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_every_readme_python_block_is_run_here() -> None:
    """The first screen's example (above) and the client contract's ``RL.ALL`` (below)."""
    blocks = readme_blocks()
    assert len(blocks) == 2
    assert "limiter.gcra(" in blocks[0] and '"RL.ALL", 2' in blocks[1]


def test_the_readme_client_contract_in_python(
    fresh: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two limits in one ``RL.ALL``: 10 a second per key, 1,000 a minute for everyone."""
    original = redis.Redis.__init__

    def to_test_server(self: redis.Redis, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("port", fresh.port)
        original(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", to_test_server)
    scope: dict[str, Any] = {}
    exec(compile(readme_blocks()[1], str(README), "exec"), scope)
    check = scope["check"]
    status, headers = check("alice")
    assert status == 200
    assert headers["RateLimit-Policy"] == '"per-key";q=10;w=1, "global";q=1000;w=60'
    assert headers["RateLimit"].startswith('"per-key";r=9;t=')
    assert [check("alice")[0] for _ in range(9)] == [200] * 9  # the burst of 10
    status, headers = check("alice")  # the clock is still: nothing accrues
    assert status == 429
    assert headers["Retry-After"] == "1"  # 100 ms, rounded up
    assert headers["RateLimit"] == '"per-key";r=0;t=1'
    assert check("bob")[0] == 200  # another key; the global limit has room
    assert check("carol", cost=11)[0] == 429  # more than the key can ever hold
    assert "Retry-After" not in check("carol", cost=11)[1]


PACKAGE_README = Path(__file__).resolve().parents[1] / "README.md"


def package_blocks() -> list[str]:
    """Every ```python block of the package's README."""
    return re.findall(r"```python\n(.*?)```", PACKAGE_README.read_text(), re.S)


def run_block(containing: str, server: Server) -> dict[str, Any]:
    """Runs the package README's block containing ``containing``, pointed at ``server``."""
    block = next(b for b in package_blocks() if containing in b)
    source = block.replace("localhost:6379", f"127.0.0.1:{server.port}")
    source = source.replace("port=6379", f"port={server.port}")
    scope: dict[str, Any] = {"__name__": "readme"}
    exec(compile(source, str(PACKAGE_README), "exec"), scope)
    return scope


def test_every_package_readme_block_is_run_here() -> None:
    marks = ['rl.gcra("rl:user:42"', "rl.all(", "RateLimiter(client,", "Starlette(", "Flask("]
    marks += ["FastAPI()", "rl.reserve(", "Leases(20)"]
    assert len(package_blocks()) == len(marks)
    for block in package_blocks():
        assert sum(m in block for m in marks) == 1, block


def test_the_package_readme_typed_calls(fresh: Server) -> None:
    assert run_block('rl.gcra("rl:user:42"', fresh)["d"].allowed
    assert run_block("rl.all(", fresh)["d"].allowed
    own = run_block("RateLimiter(client,", fresh)["rl"]
    assert own.gcra("k", 1, "1m").allowed and own.guard.fallback == "closed"
    scope = run_block("rl.reserve(", fresh)
    assert scope["r"].delay == timedelta(0) and scope["d"].allowed


async def test_the_package_readme_asgi_app(fresh: Server) -> None:
    import httpx

    app = run_block("Starlette(", fresh)["app"]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        alice = {"x-api-key": "alice"}
        codes = [(await http.get("/hello", headers=alice)).status_code for _ in range(11)]
        assert codes == [200] * 10 + [429]
        denied = await http.get("/hello", headers=alice)
        assert denied.headers["retry-after"] == "1"
        assert (await http.get("/hello")).status_code == 200  # no key: not limited


def test_the_package_readme_flask_app(fresh: Server) -> None:
    app = run_block("Flask(", fresh)["app"]
    http = app.test_client()
    codes = [http.get("/hello").status_code for _ in range(11)]
    assert codes == [200] * 10 + [429]
    denied = http.get("/hello")
    # Ten hits at the start of an aligned minute: the next fits 6 s into the next
    # minute, more than a window away, told as just under a window.
    assert 59 <= int(denied.headers["Retry-After"]) <= 60


async def test_the_package_readme_slowapi_app(fresh: Server) -> None:
    import httpx

    app = run_block("FastAPI()", fresh)["app"]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        codes = [(await http.get("/hello")).status_code for _ in range(6)]
        assert codes == [200] * 5 + [429]


def test_one_version_everywhere() -> None:
    """The package's version is the module's (Cargo.toml), as the changelog names it."""
    root = Path(__file__).resolve().parents[3]
    crate = re.search(r'^version = "(.+)"', (root / "Cargo.toml").read_text(), re.M)
    package = re.search(
        r'^version = "(.+)"', (root / "clients/python/pyproject.toml").read_text(), re.M
    )
    assert crate and package and package.group(1) == crate.group(1)
    assert f"## {crate.group(1)} " in (root / "CHANGELOG.md").read_text()


def test_the_package_readme_leasing(fresh: Server) -> None:
    scope = run_block("Leases(20)", fresh)
    assert scope["d"].allowed and scope["d"].fallback is None
    assert scope["rl"].leases.held() == 0  # every leased unit given back
    assert not scope["hot"].follower.thread.is_alive()
    assert scope["shared"].leases.held() == 0  # its queued block (COST 20 WAIT) given back
    assert scope["shared"].leases.lease("rl:export", scope["SEARCH"]).calls == 1
