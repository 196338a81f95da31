"""Real processes: redis-server with the module, the dashboard, headless Chromium, Prometheus.

The module is ``$RL_MODULE``, else the repository's debug build (``cargo
build``), else its release build; the server binary ``$RL_SERVER``, else
``redis-server``. Waits are polls with a deadline, never bare sleeps.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "dash-s3cret-pw"
T = TypeVar("T")


def until(what: str, probe: Callable[[], T | None], timeout: float = 20) -> T:
    """Polls ``probe`` until it returns something truthy; fails with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)  # the poll's period, not a wait for a result


def module_path() -> Path:
    if "RL_MODULE" in os.environ:
        return Path(os.environ["RL_MODULE"])
    for build in ("debug", "release"):
        path = REPO / f"target/{build}/libredis_ratelimit.so"
        if path.exists():
            return path
    pytest.exit("the module is not built: run `cargo build` first", returncode=2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One redis-server with the module and a password; ``stop`` and ``start`` keep its port."""

    def __init__(self, *, manual_clock: bool = True) -> None:
        self.manual_clock = manual_clock
        self.dir = Path(tempfile.mkdtemp(prefix="rl-dash-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.port = free_port()
        self.start()

    def start(self) -> None:
        args = [
            os.environ.get("RL_SERVER", "redis-server"),
            *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir)),
            *("--save", "", "--appendonly", "no", "--logfile", "redis.log"),
            *("--requirepass", PASSWORD, "--loadmodule", str(module_path())),
            *(["clock", "manual"] if self.manual_clock else []),
            "policies",
            "on",
        ]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def ready() -> bool:
            try:
                return bool(self.client().ping())
            except redis.ConnectionError:
                assert self.process is not None and self.process.poll() is None, (
                    self.dir / "redis.log"
                ).read_text(errors="replace")
                return False

        until("redis-server to listen", ready)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis(
            port=self.port, password=PASSWORD, socket_timeout=5, decode_responses=True
        )

    @property
    def url(self) -> str:
        return f"redis://:{PASSWORD}@127.0.0.1:{self.port}"


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()
    shutil.rmtree(s.dir, ignore_errors=True)


class Dashboard:
    """``python -m rl_dashboard`` on a free port."""

    def __init__(self, url: str, *extra: str) -> None:
        self.port = free_port()
        self.token = extra[extra.index("--token") + 1] if "--token" in extra else None
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rl_dashboard", "--url", url, "--port", str(self.port), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        until("the dashboard to listen", lambda: self.try_get("/api/state") is not None)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def try_get(self, path: str) -> bytes | None:
        request = urllib.request.Request(self.base + path)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                return bytes(r.read())
        except OSError:
            assert self.process.poll() is None, self.process.stderr and self.process.stderr.read()
            return None

    def state(self) -> dict[str, Any]:
        body = self.try_get("/api/state")
        assert body is not None
        return dict(json.loads(body))

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def dashboard(server: Server) -> Iterator[Dashboard]:
    d = Dashboard(server.url)
    yield d
    d.stop()


class Dom(HTMLParser):
    """Each element with an id: its attributes and its text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.attrs: dict[str, dict[str, str | None]] = {}
        self.text: dict[str, str] = {}
        self.open: list[str | None] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        ident = a.get("id")
        if ident:
            self.attrs[ident] = a
            self.text.setdefault(ident, "")
        if tag not in ("br", "img", "input", "meta", "link"):
            self.open.append(ident)

    def handle_endtag(self, tag: str) -> None:
        if self.open:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        for ident in self.open:
            if ident:
                self.text[ident] += data


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1500",
    "--virtual-time-budget=4000",
]


def chromium(*args: str) -> bytes:
    """Headless Chromium with a profile of its own; its stdout."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="rl-dash-chromium-") as profile:
        done = subprocess.run(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            timeout=90,
            check=True,
        )
    return done.stdout


def page(d: Dashboard) -> Dom:
    """The page as the browser rendered it, after its first refreshes."""
    return Dom(chromium("--dump-dom", d.base + "/").decode())


def rl_commands(server: Server) -> set[str]:
    """The server's ``rl.*`` commands, as COMMAND LIST names them (``rl.policy|stats``)."""
    from rl_dashboard.__main__ import connect

    reply = connect(server.url, 5).execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "rl.*")
    return {str(n) for n in reply}
