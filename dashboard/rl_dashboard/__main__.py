"""``python -m rl_dashboard``: the dashboard for one server with the module."""

from __future__ import annotations

import argparse
import os
import sys
from urllib.parse import urlsplit

import redis

from rl_dashboard.poller import Poller
from rl_dashboard.web import Dashboard, loopback


def target(url: str) -> str:
    """The server as the page shows it: host and port, never the user or password."""
    u = urlsplit(url)
    return f"{u.hostname or 'localhost'}:{u.port or 6379}"


def connect(url: str, timeout: float) -> redis.Redis:
    """A client whose every call gives up after ``timeout`` seconds, replies as sent."""
    client = redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry_on_timeout=False,
        client_name="rl-dashboard",
    )
    client.response_callbacks.clear()  # INFO as text, CONFIG GET and the rest as sent
    return client


def main(argv: list[str] | None = None) -> None:
    """Parses the arguments and serves until interrupted."""
    p = argparse.ArgumentParser(prog="rl-dashboard", description=__doc__)
    p.add_argument(
        "--url",
        default=os.environ.get("RL_DASHBOARD_URL", "redis://localhost:6379"),
        help="the server (redis://[:password@]host:port/db, rediss:// for TLS); "
        "default $RL_DASHBOARD_URL or redis://localhost:6379",
    )
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    p.add_argument(
        "--token",
        default=os.environ.get("RL_DASHBOARD_TOKEN"),
        help="required from browsers (basic auth password) and scrapers (Bearer); "
        "needed to bind beyond loopback; default $RL_DASHBOARD_TOKEN",
    )
    p.add_argument("--interval", type=float, default=1.0, help="seconds between reads (default 1)")
    p.add_argument(
        "--timeout",
        type=float,
        default=0.5,
        help="seconds each call to the server may take (default 0.5)",
    )
    p.add_argument("--top-keys", type=int, default=20, help="most denied keys shown (default 20)")
    p.add_argument(
        "--policies",
        type=int,
        default=20,
        help="named policies with metrics of their own, the most called (default 20)",
    )
    p.add_argument(
        "--stats-policies",
        type=int,
        default=5,
        help="most called policies whose most denied keys are read, one RL.POLICY STATS "
        "each a second (default 5)",
    )
    a = p.parse_args(argv)
    if not loopback(a.bind) and not a.token:
        p.error(f"--bind {a.bind} is beyond loopback: give --token (or $RL_DASHBOARD_TOKEN)")
    poller = Poller(
        connect(a.url, a.timeout),
        target(a.url),
        interval=a.interval,
        stats_policies=a.stats_policies,
    )
    server = Dashboard(
        (a.bind, a.port), poller, token=a.token, top_keys=a.top_keys, max_policies=a.policies
    )
    poller.start()
    host, port = str(server.server_address[0]), server.server_address[1]
    print(
        f"rl-dashboard: http://{host}:{port}/ (metrics at /metrics) for {poller.state.target}",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        poller.stop()


if __name__ == "__main__":
    main()
