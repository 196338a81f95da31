"""Beyond loopback only with a token; with a token, nothing without it; no write at all."""

from __future__ import annotations

import base64
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from .conftest import Dashboard, Server, until


def status(url: str, header: str | None = None, method: str = "GET") -> int:
    request = urllib.request.Request(url, method=method)
    if header:
        request.add_header("Authorization", header)
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_binding_beyond_loopback_needs_a_token() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rl_dashboard", "--bind", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "--bind 0.0.0.0 is beyond loopback: give --token" in done.stderr


@pytest.mark.parametrize("path", ["/", "/api/state", "/metrics"])
def test_a_token_is_asked_for_on_every_route(server: Server, path: str) -> None:
    d = Dashboard(server.url, "--token", "t0ken")
    try:
        url = d.base + path
        assert status(url) == 401
        assert status(url, "Bearer wrong") == 401
        assert status(url, "Bearer t0ken") == 200
        basic = base64.b64encode(b"anyone:t0ken").decode()
        assert status(url, f"Basic {basic}") == 200
        assert status(url, "Bearer t0ken", method="POST") == 405
    finally:
        d.stop()


READ_ONLY_ACL = [
    *("-@all", "+info", "+config|get", "+module|list", "+command|list"),
    *("+rl.policy|stats", "+client|setname"),
]


def test_a_user_with_the_documented_read_only_acl_is_enough(server: Server) -> None:
    c = server.client()
    c.execute_command("ACL", "SETUSER", "dashboard", "on", ">dash-pw", *READ_ONLY_ACL)
    c.execute_command("RL.POLICY", "SET", "p", "FIXED", 1, "1m")
    for _ in range(3):
        c.execute_command("RL.CHECK", "k", "p")
    d = Dashboard(f"redis://dashboard:dash-pw@127.0.0.1:{server.port}")
    try:
        until("a read with the top denied keys", lambda: d.state().get("top_denied"))
        state = d.state()
        assert state["up"] and state["error"] == ""
        assert state["top_denied"][0] == {"policy": "p", "key": "k", "count": 2, "error": 0}
    finally:
        d.stop()
