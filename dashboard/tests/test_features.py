"""Optional panels: offered when the server has the command, else "not offered by this server"."""

from __future__ import annotations

import json
import threading
import urllib.request

from rl_dashboard.__main__ import connect
from rl_dashboard.features import FEATURES, Feature
from rl_dashboard.poller import Poller
from rl_dashboard.web import Dashboard

from .conftest import Server, until


def test_a_panel_is_offered_only_with_its_command(server: Server) -> None:
    server.client().execute_command("RL.POLICY", "SET", "plan:free", "FIXED", 3, "1m")
    # RL.POLICY LIST stands in for a command some servers have; rl.nope for one none has.
    features = (
        Feature("names", "Policy names", ("RL.POLICY", "LIST"), "rl.policy|list"),
        Feature("nope", "Nothing", ("RL.NOPE",), "rl.nope"),
    )
    poller = Poller(connect(server.url, 0.5), "test", features=features)
    web = Dashboard(("127.0.0.1", 0), poller, token=None)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    poller.start()
    try:
        url = f"http://127.0.0.1:{web.server_address[1]}/api/state"

        def state() -> dict[str, object]:
            with urllib.request.urlopen(url, timeout=5) as r:
                return dict(json.load(r))

        until("a read", lambda: state()["up"])
        s = state()
        assert s["features"] == [
            {"name": "names", "title": "Policy names", "offered": True},
            {"name": "nope", "title": "Nothing", "offered": False},
        ]
        assert s["extras"] == {"names": [["plan:free"]]}
    finally:
        poller.stop()
        web.shutdown()
        web.server_close()


def test_the_shipped_panels_follow_the_servers_commands(server: Server) -> None:
    poller = Poller(connect(server.url, 0.5), "test")
    poller.tick()
    assert poller.state.up
    names = set(
        connect(server.url, 5).execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "rl.*")
    )
    assert poller.state.offered == {f.name: f.check in names for f in FEATURES}
    assert poller.state.last is not None
    assert set(poller.state.last.extras) == {f.name for f in FEATURES if f.check in names}
