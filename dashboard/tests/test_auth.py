"""Beyond loopback only with a token; with a token, nothing without it; no write at all."""

from __future__ import annotations

import base64
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from .conftest import Dashboard, Server, rl_commands, until


def status(url: str, header: str | None = None, method: str = "GET", host: str = "") -> int:
    request = urllib.request.Request(url, method=method)
    if header:
        request.add_header("Authorization", header)
    if host:
        request.add_header("Host", host)
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


def test_without_a_token_only_loopback_names_are_served(server: Server) -> None:
    """A page of another site whose name resolves to 127.0.0.1 (DNS rebinding), or a proxy
    forwarding its own name, reaches the dashboard beyond loopback: refused without a token."""
    d = Dashboard(server.url)
    try:
        url = d.base + "/api/state"
        for host in ("evil.example", f"evil.example:{d.port}", "10.0.0.5:8080", "[2001:db8::1]"):
            assert status(url, host=host) == 403, host
        for host in (f"127.0.0.1:{d.port}", f"localhost:{d.port}", f"[::1]:{d.port}", "127.0.0.1"):
            assert status(url, host=host) == 200, host
    finally:
        d.stop()
    d = Dashboard(server.url, "--token", "t0ken")
    try:
        assert status(d.base + "/metrics", host="dash.example.com") == 401
        assert status(d.base + "/metrics", "Bearer t0ken", host="dash.example.com") == 200
    finally:
        d.stop()


READ_ONLY_ACL = [
    *("-@all", "+info", "+config|get", "+module|list", "+command|list"),
    *("+rl.policy|stats", "+rl.hotkeys", "+rl.denylist", "+client|setname"),
]
"""The documented user; ``+rl.penalized`` too on a server with the penalty box."""


def test_a_user_with_the_documented_read_only_acl_is_enough(server: Server) -> None:
    c = server.client()
    names = rl_commands(server)
    acl = READ_ONLY_ACL + (["+rl.penalized"] if "rl.penalized" in names else [])
    c.execute_command("ACL", "SETUSER", "dashboard", "on", ">dash-pw", *acl)
    c.execute_command("RL.POLICY", "SET", "p", "FIXED", 1, "1m")
    c.execute_command("CONFIG", "SET", "ratelimit.hot-key-counters", 80)
    c.execute_command("RL.DENY", "user:9", "1h", "REASON", "abuse")
    for _ in range(3):
        c.execute_command("RL.CHECK", "k", "p")
    d = Dashboard(f"redis://dashboard:dash-pw@127.0.0.1:{server.port}")
    try:
        until("a read with the top denied keys", lambda: d.state().get("top_denied"))
        state = d.state()
        assert state["up"] and state["error"] == ""
        assert state["top_denied"][0] == {"policy": "p", "key": "k", "count": 2, "error": 0}
        # Every optional panel the server offers is read, none answered NOPERM.
        offered = {f["name"] for f in state["features"] if f["offered"]}
        assert set(state["extras"]) == offered and "deny_list" in offered
        assert state["extras"]["deny_list"][0][0] == "user:9"
        for name, rows in state["extras"].items():
            assert all(r[0] != "error" for r in rows), (name, rows)
    finally:
        d.stop()
