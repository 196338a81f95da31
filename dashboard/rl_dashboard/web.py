"""The HTTP side: the page, its JSON and /metrics. Read-only: no route writes to the server."""

from __future__ import annotations

import base64
import hmac
import ipaddress
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files

from rl_dashboard.metrics import metrics
from rl_dashboard.poller import Poller
from rl_dashboard.view import page_state

PAGE = files("rl_dashboard").joinpath("page.html").read_bytes()
TEXT = "text/plain; charset=utf-8"


def loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, ``[::1]`` too) is this machine only."""
    host = host.removeprefix("[").removesuffix("]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The host of a ``Host`` header, without its port."""
    if header.startswith("["):
        return header.partition("]")[0] + "]"
    return header.rpartition(":")[0] if header.count(":") == 1 else header


class Dashboard(ThreadingHTTPServer):
    """Serves one poller's state to every browser and scraper."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        poller: Poller,
        *,
        token: str | None,
        top_keys: int = 20,
        max_policies: int = 20,
    ) -> None:
        super().__init__(address, Handler)
        self.poller = poller
        self.token = token
        self.top_keys = top_keys
        self.max_policies = max_policies


class Handler(BaseHTTPRequestHandler):
    """GET /, /api/state, /metrics; everything else is 404 (or 405 for other methods)."""

    server: Dashboard

    def authorized(self) -> bool:
        """No token: open (loopback only). A token: ``Bearer <token>`` or any user with it."""
        token = self.server.token
        if token is None:
            return True
        header = self.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer":
            given = value.strip()
        elif scheme.lower() == "basic":
            try:
                given = base64.b64decode(value.strip()).decode().partition(":")[2]
            except (ValueError, UnicodeDecodeError):
                return False
        else:
            return False
        return hmac.compare_digest(given.encode(), token.encode())

    def send(self, status: int, body: bytes, content_type: str) -> None:
        """A complete response, never cached."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="rl-dashboard"')
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        """The three routes."""
        host = self.headers.get("Host", "")
        if self.server.token is None and host and not loopback(host_name(host)):
            # Asked for by another name (a name rebound to 127.0.0.1 by a web
            # page, a proxy): beyond loopback, where only a token lets in.
            self.send(403, b"without --token only loopback names are served\n", TEXT)
            return
        if not self.authorized():
            self.send(401, b"authentication required\n", TEXT)
            return
        path = self.path.partition("?")[0]
        poller = self.server.poller
        if path == "/":
            self.send(200, PAGE, "text/html; charset=utf-8")
        elif path == "/api/state":
            with poller.lock:
                body = page_state(poller.state, poller.features, top_keys=self.server.top_keys)
            self.send(200, json.dumps(body).encode(), "application/json")
        elif path == "/metrics":
            with poller.lock:
                text = metrics(
                    poller.state,
                    max_policies=self.server.max_policies,
                    top_keys=self.server.top_keys,
                )
            self.send(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self.send(404, b"not found\n", "text/plain; charset=utf-8")

    def do_POST(self) -> None:
        """Refused: no route writes in this version."""
        self.send(405, b"read-only\n", "text/plain; charset=utf-8")

    do_PUT = do_DELETE = do_PATCH = do_POST

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: one line per request would drown the terminal at one refresh a second."""
