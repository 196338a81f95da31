"""The page in a real browser: the module's own numbers, charts drawn, an outage and after."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from urllib.parse import quote

from rl_dashboard.__main__ import connect

from .conftest import PASSWORD, Dashboard, Server, chromium, page, until

MIDNIGHT_US = 20833 * 86_400 * 1_000_000


def drive(server: Server) -> None:
    """Known traffic at a frozen clock: 30 allowed and 20 denied RL.GCRA, policies' denials,
    hot keys counted and one key on the deny list."""
    c = server.client()
    c.execute_command("RL.CLOCK", "SET", MIDNIGHT_US)
    c.execute_command("CONFIG", "SET", "ratelimit.hot-key-counters", 320)
    c.execute_command("RL.DENY", "user:9", "1h", "REASON", "abuse")
    for _ in range(50):
        c.execute_command("RL.GCRA", "k", 30, "1m")
    c.execute_command("RL.POLICY", "SET", "plan:free", "FIXED", 5, "1m")
    c.execute_command("RL.POLICY", "SET", "plan:shadow", "FIXED", 2, "1m", "SHADOW")
    for _ in range(12):
        c.execute_command("RL.CHECK", "user:1", "plan:free")
    for _ in range(5):
        c.execute_command("RL.CHECK", "user:2", "plan:shadow")


def info(server: Server) -> dict[str, dict[str, int]]:
    """INFO ratelimit's per-command and per-policy lines, as the test reads them itself."""
    text = server.client().execute_command("INFO", "ratelimit")
    out: dict[str, dict[str, int]] = {}
    for k, v in text.items():
        if isinstance(v, dict):
            key = v.get("name", k) if k.startswith("ratelimit_policy_") else k
            out[str(key)] = {f: n for f, n in v.items() if isinstance(n, int)}
    return out


def test_page_shows_the_modules_numbers_and_the_outage(
    server: Server, dashboard: Dashboard
) -> None:
    drive(server)
    until(
        "the dashboard to read the traffic and three samples",
        lambda: (
            dashboard.state().get("commands", {}).get("rl.gcra", {}).get("denied") == 20
            and len(dashboard.state().get("series", {}).get("t", [])) >= 2
        ),
    )
    expected = info(server)
    gcra = expected["ratelimit_rl_gcra"]
    assert (gcra["allowed"], gcra["denied"]) == (30, 20)

    dom = page(dashboard)
    assert dom.attrs["status"]["data-up"] == "1"
    for field in ("calls", "allowed", "denied", "errors"):
        assert dom.text[f"cmd-rl.gcra-{field}"] == f"{gcra[field]:,}"
        assert dom.text[f"cmd-rl.check-{field}"] == f"{expected['ratelimit_rl_check'][field]:,}"
    for name in ("plan:free", "plan:shadow"):
        for field in ("calls", "allowed", "denied", "shadow_denied", "waits"):
            assert dom.text[f"pol-{quote(name, safe='')}-{field}"] == f"{expected[name][field]:,}"
    assert (expected["plan:free"]["denied"], expected["plan:shadow"]["shadow_denied"]) == (7, 3)
    stats = server.client().execute_command("RL.POLICY", "STATS", "plan:free")
    key, count, _ = stats["top_denied"][0]
    assert dom.text["top-0"].startswith(f"{key}plan:free{count}")
    assert (key, count) == ("user:1", 7)
    rl = server.client().info("ratelimit")
    waits = rl["ratelimit_waits"]
    assert dom.text["waits"] == " / ".join(
        f"{waits[k]:,}" for k in ("started", "admitted", "timed_out", "abandoned")
    )
    assert dom.text["waiting"] == f"{rl['ratelimit_waiting']:,}"
    assert dom.text["heap-bytes"] == f"{rl['ratelimit_heap_bytes']:,}"
    server_info = server.client().info("server")
    assert dom.text["redis-version"] == server_info["redis_version"]
    assert dom.text["role"] == "master"
    assert dom.text["policies-on"] == "on"
    bounds = server.client().config_get("ratelimit.*")
    assert dom.text["bound-max-waiters"] == f"{int(str(bounds['ratelimit.max-waiters'])):,}"
    for chart in ("chart-decisions", "chart-commands", "chart-policies", "chart-waiting"):
        assert int(dom.attrs[chart]["data-points"] or "0") > 0, chart
    names = set(
        connect(server.url, 5).execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "rl.*")
    )
    # The optional panels show the server's own replies: the key with the
    # most decisions first, and the deny list's key with its reason.
    assert {"rl.hotkeys", "rl.denylist"} <= names
    hot = server.client().execute_command("RL.HOTKEYS")
    assert dom.attrs["feature-hot_keys"]["data-offered"] == "1"
    assert dom.text["feature-hot_keys"].startswith(str(hot[0][0]))
    assert str(hot[0][0]) == "k"
    assert dom.attrs["feature-deny_list"]["data-offered"] == "1"
    assert dom.text["feature-deny_list"].startswith("user:9")
    assert dom.text["feature-deny_list"].endswith("abuse")
    # The password is the dashboard's alone: not in the page, nor in what the page reads.
    assert PASSWORD.encode() not in chromium("--dump-dom", dashboard.base + "/")
    assert PASSWORD.encode() not in (dashboard.try_get("/api/state") or b"")
    assert PASSWORD.encode() not in (dashboard.try_get("/metrics") or b"")

    server.stop()
    until("the outage", lambda: not dashboard.state()["up"])
    dom = page(dashboard)
    assert dom.attrs["status"]["data-up"] == "0"
    since = dashboard.state()["down_since"]
    assert dom.text["status"].startswith(f"unreachable since {since}")

    server.start()
    until("the recovery", lambda: dashboard.state()["up"])
    c = server.client()
    c.execute_command("RL.CLOCK", "SET", MIDNIGHT_US)
    for _ in range(3):
        c.execute_command("RL.GCRA", "k", 2, "1m")
    until("the new counts", lambda: dashboard.state()["commands"]["rl.gcra"]["calls"] == 3)
    dom = page(dashboard)
    assert dom.attrs["status"]["data-up"] == "1"
    assert dom.text["status"] == "up"
    assert (dom.text["cmd-rl.gcra-allowed"], dom.text["cmd-rl.gcra-denied"]) == ("2", "1")


def test_screenshot_under_traffic() -> None:
    """Paced traffic on the real clock for a fixed window; DASHBOARD_SCREENSHOT keeps the PNG."""
    server = Server(manual_clock=False)
    dashboard = Dashboard(server.url)
    stop = threading.Event()

    def traffic() -> None:
        c = server.client()
        c.execute_command("RL.POLICY", "SET", "plan:free", "GCRA", 8, "1s")
        c.execute_command("RL.POLICY", "SET", "plan:pro", "GCRA", 40, "1s", "SHADOW")
        c.execute_command("CONFIG", "SET", "ratelimit.hot-key-counters", 320)
        c.execute_command("RL.DENY", "user:4", "1h", "REASON", "abuse report 1234")
        i = 0
        while not stop.is_set():
            i += 1
            c.execute_command("RL.CHECK", f"user:{i % 5}", "plan:free")
            c.execute_command("RL.CHECK", f"org:{i % 2}", "plan:pro")
            c.execute_command("RL.GCRA", f"ip:{i % 4}", 20, "1s")
            stop.wait(0.004 if (i // 500) % 2 else 0.012)  # pacing: alternating load phases

    t = threading.Thread(target=traffic)
    t.start()
    try:
        until(
            "twelve samples of traffic",
            lambda: len(dashboard.state().get("series", {}).get("t", [])) >= 12,
        )
        with tempfile.TemporaryDirectory() as tmp:
            shot = Path(tmp) / "dashboard.png"
            chromium(f"--screenshot={shot}", dashboard.base + "/")
            assert shot.stat().st_size > 30_000
            if os.environ.get("DASHBOARD_SCREENSHOT"):
                shutil.copy(shot, os.environ["DASHBOARD_SCREENSHOT"])
        dom = page(dashboard)
        assert int(dom.attrs["chart-decisions"]["data-points"] or "0") >= 3 * 11
    finally:
        stop.set()
        t.join()
        dashboard.stop()
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)
