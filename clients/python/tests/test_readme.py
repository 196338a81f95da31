"""The Python example on the repository README's first screen, run as written.

The example connects with ``redis.Redis()``; the test points that default at
the test server and runs the example in RESP2 and RESP3.
"""

from __future__ import annotations

import re
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
