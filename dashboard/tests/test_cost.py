"""What the dashboard costs the server, and that browsers and scrapers add nothing to it."""

from __future__ import annotations

import threading
import time
import urllib.request

import redis

from rl_dashboard.features import FEATURES

from .conftest import Dashboard, Server, rl_commands, until

WINDOW = 10.0


def commandstats(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def measure(server: Server, dashboard: Dashboard) -> dict[str, float]:
    """Commands per second the server ran over a window while only the dashboard used it."""
    until("a few reads", lambda: len(dashboard.state().get("series", {}).get("t", [])) >= 2)
    client = server.client()  # one connection: its handshake is counted before the window
    before = commandstats(client)
    start = time.monotonic()
    stop = threading.Event()

    def browsers() -> None:  # 20 page refreshes and scrapes a second
        while not stop.is_set():
            for path in ("/api/state", "/metrics"):
                with urllib.request.urlopen(dashboard.base + path, timeout=5) as r:
                    r.read()
            stop.wait(0.1)

    threads = [threading.Thread(target=browsers) for _ in range(5)]
    for t in threads:
        t.start()
    until("the measurement window", lambda: time.monotonic() - start >= WINDOW, timeout=WINDOW + 5)
    stop.set()
    for t in threads:
        t.join()
    after = commandstats(client)
    elapsed = time.monotonic() - start
    after["info"] -= 1  # the first commandstats read, counted by the second
    return {
        k: round((after[k] - before.get(k, 0)) / elapsed, 2)
        for k in after
        if after[k] != before.get(k, 0)
    }


def optional(server: Server) -> set[str]:
    """The optional panels' commands this server has (RL.PENALIZED only with the penalty box)."""
    names = rl_commands(server)
    return {f.check for f in FEATURES} & names


def test_cost_without_named_policies(server: Server, dashboard: Dashboard) -> None:
    cost = measure(server, dashboard)
    print("commands per second, no policy called:", cost)
    # One pipeline a second: INFO (three sections), CONFIG GET, MODULE LIST,
    # and the optional panels' commands this server offers.
    assert {"rl.hotkeys", "rl.denylist"} <= optional(server)
    assert set(cost) == {"info", "config|get", "module|list"} | optional(server)
    assert all(0.8 <= v <= 1.2 for v in cost.values()), cost


def test_cost_with_named_policies(server: Server, dashboard: Dashboard) -> None:
    c = server.client()
    for name in ("a", "b"):
        c.execute_command("RL.POLICY", "SET", name, "FIXED", 5, "1m")
        c.execute_command("RL.CHECK", "k", name)
    cost = measure(server, dashboard)
    print("commands per second, two policies called:", cost)
    # And a second pipeline: RL.POLICY STATS for each listed policy (at most 5).
    panels = optional(server)
    assert set(cost) == {"info", "config|get", "module|list", "rl.policy|stats"} | panels
    assert 1.6 <= cost["rl.policy|stats"] <= 2.4, cost
    assert sum(cost.values()) <= len(panels) + 5.5, cost
