"""A frozen server (SIGSTOP): shown within the timeout, the page still answered, then recovery."""

from __future__ import annotations

import signal
import time

from .conftest import Dashboard, Server, until


def test_a_frozen_server_is_shown_and_recovered_from(server: Server, dashboard: Dashboard) -> None:
    c = server.client()
    for _ in range(4):
        c.execute_command("RL.GCRA", "k", 2, "1m")
    until("the first read", lambda: dashboard.state().get("commands", {}).get("rl.gcra"))
    assert server.process is not None
    server.process.send_signal(signal.SIGSTOP)
    try:
        until("the freeze to show", lambda: not dashboard.state()["up"], timeout=10)
        assert "Timeout" in dashboard.state()["error"]
        # The page's data keeps coming while reads of the server time out.
        for _ in range(5):
            start = time.monotonic()
            assert dashboard.state()["up"] is False
            assert time.monotonic() - start < 0.5
    finally:
        server.process.send_signal(signal.SIGCONT)
    until("the recovery", lambda: dashboard.state()["up"], timeout=10)
    c.execute_command("RL.GCRA", "k", 2, "1m")
    # Replies read after the freeze belong to their own commands: no late reply is taken for one.
    until(
        "the count after the freeze",
        lambda: (
            dashboard.state()["commands"]["rl.gcra"]
            == {
                "calls": 5,
                "allowed": 2,
                "denied": 3,
                "errors": 0,
            }
        ),
    )
    assert dashboard.state()["bounds"][0]["name"] == "hot-key-counters"
