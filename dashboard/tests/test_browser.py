"""The page in a real browser: the module's own numbers, charts drawn, an outage and after."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from rl_dashboard.__main__ import connect

from .conftest import PASSWORD, Dashboard, Server, chromium, page, rl_commands, until

MIDNIGHT_US = 20833 * 86_400 * 1_000_000

PENALIZE = ("BLOCK", "1h")
"""The penalty box's block form, as an option of a rate command."""


def drive(server: Server) -> None:
    """Known traffic at a frozen clock: 30 allowed and 20 denied RL.GCRA, policies' denials,
    hot keys counted, one key on the deny list and two concurrency leases held (three granted,
    one released)."""
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
    leases = [c.execute_command("RL.ACQUIRE", "jobs", 5, "1h")["lease"] for _ in range(3)]
    assert c.execute_command("RL.RELEASE", "jobs", leases[0]) == 1


def wait_in_lines(server: Server) -> list[redis.Connection]:
    """Three clients waiting in two lines (keys ``w1``, ``w2``), the first 7.5 s on the clock
    when it reaches ``MIDNIGHT_US`` (the hot keys are counted in the last seconds: first)."""
    c = server.client()
    c.execute_command("RL.CLOCK", "SET", MIDNIGHT_US - 7_500_000)
    for key in ("w1", "w2"):
        c.execute_command("RL.FIXED", key, 1, "1h")  # spent for the hour: the next call waits
    waiting = []
    for i, key in enumerate(("w1", "w2", "w1")):
        conn = redis.Connection(port=server.port, password=PASSWORD, socket_timeout=5)
        conn.send_command("RL.FIXED", key, 1, "1h", "WAIT", "3h")  # its reply is never read
        waiting.append(conn)
        until(f"{i + 1} waiting", lambda: c.info("ratelimit")["ratelimit_waiting"] == len(waiting))
        if i == 0:
            c.execute_command("RL.CLOCK", "ADVANCE", 2_500_000)
    c.execute_command("RL.CLOCK", "ADVANCE", 5_000_000)
    return waiting


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
    waiters = wait_in_lines(server)
    drive(server)
    until(
        "the dashboard to read the traffic, the waiters and three samples",
        lambda: (
            dashboard.state().get("commands", {}).get("rl.gcra", {}).get("denied") == 20
            and (dashboard.state().get("lines") or {}).get("longest_wait_us") == 7_500_000
            and (dashboard.state().get("leases") or {}).get("held") == 2
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
    # The lines: two keys with clients waiting, the first arrival 7.5 s ago on the clock.
    lines = rl["ratelimit_lines"]
    assert (lines["count"], lines["longest_wait_us"], rl["ratelimit_waiting"]) == (2, 7_500_000, 3)
    assert dom.text["lines"] == f"{lines['count']:,}"
    assert dom.text["longest-wait"] == f"{lines['longest_wait_us'] / 1000:.1f} ms"
    # The leases: three granted at the frozen clock, one released.
    leases = rl["ratelimit_leases"]
    held = tuple(leases[k] for k in ("held", "granted", "released", "expired"))
    assert held == (2, 3, 1, 0)
    assert dom.text["leases-held"] == "2"
    server_info = server.client().info("server")
    assert dom.text["redis-version"] == server_info["redis_version"]
    assert dom.text["role"] == "master"
    assert dom.text["policies-on"] == "on"
    bounds = server.client().config_get("ratelimit.*")
    assert dom.text["bound-max-waiters"] == f"{int(str(bounds['ratelimit.max-waiters'])):,}"
    # The server-wide bounds say what fills them: the clients waiting, the deny list's keys.
    assert dom.text["bound-max-waiters-used"] == f"{rl['ratelimit_waiting']:,} waiting"
    denied_keys = rl["ratelimit_deny_list"]["keys"]
    assert denied_keys == 1
    assert dom.text["bound-max-denied-keys-used"] == f"{denied_keys:,} keys denied"
    # A line per outcome, per command and per policy.
    legends = dom.text["legend-commands"] + dom.text["legend-policies"]
    for label in (
        "rl.gcra allowed",
        "rl.gcra denied",
        "plan:free denied",
        "plan:shadow shadow-denied",
    ):
        assert label in legends, (label, legends)
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

    for conn in waiters:
        conn.disconnect()
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
        if "rl.penalized" in rl_commands(server):  # a server with the penalty box: two blocks
            for key in ("bot:7", "bot:9"):
                for _ in range(2):
                    c.execute_command("RL.GCRA", key, 1, "1h", *PENALIZE)
        i = 0
        while not stop.is_set():
            i += 1
            c.execute_command("RL.CHECK", f"user:{i % 5}", "plan:free")
            c.execute_command("RL.CHECK", f"org:{i % 2}", "plan:pro")
            c.execute_command("RL.GCRA", f"ip:{i % 4}", 20, "1s")
            stop.wait(0.004 if (i // 500) % 2 else 0.012)  # pacing: alternating load phases

    def waiter() -> None:  # closed loop: one export a second among three clients, each waits
        c = server.client()
        while not stop.is_set():
            c.execute_command("RL.GCRA", "export", 1, "1s", "WAIT", "4s")

    threads = [
        threading.Thread(target=traffic),
        *(threading.Thread(target=waiter) for _ in range(3)),
    ]
    for t in threads:
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
        for t in threads:
            t.join()
        dashboard.stop()
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


def info_count(section: dict[str, object], name: str) -> int:
    """``name`` in INFO ratelimit: a line of its own, or a field of a line."""
    value = section.get("ratelimit_" + name)
    if isinstance(value, int):
        return value
    found = [v[name] for v in section.values() if isinstance(v, dict) and name in v]
    assert found, (name, section)
    return int(found[0])


def test_penalty_boxed_keys_show_the_servers_list(server: Server, dashboard: Dashboard) -> None:
    c = server.client()
    names = rl_commands(server)
    if "rl.penalized" not in names:
        pytest.skip(
            "this server has no RL.PENALIZED (a module without the penalty box): its panel "
            "is 'not offered by this server', as test_features checks for any such command"
        )
    c.execute_command("RL.CLOCK", "SET", MIDNIGHT_US)
    for key, calls in (("abuser:1", 3), ("abuser:2", 2)):
        for _ in range(calls):  # allowed, then denied: the block begins; then denied by it
            try:
                c.execute_command("RL.GCRA", key, 1, "1h", *PENALIZE)
            except redis.ResponseError as e:
                pytest.fail(f"the penalty box's option is not {PENALIZE} on this server: {e}")
    listed = c.execute_command("RL.PENALIZED", "COUNT", "20")
    assert [str(r[0]) for r in listed] == ["abuser:2", "abuser:1"]  # the latest block first
    rows = [[str(x) for x in r] for r in listed]
    until(
        "the dashboard to read the list",
        lambda: dashboard.state()["extras"].get("penalized") == rows,
    )
    rl = c.info("ratelimit")
    blocks, denials = info_count(rl, "penalty_blocks"), info_count(rl, "penalty_denials")
    print("RL.PENALIZED:", rows, "blocks:", blocks, "denials:", denials)
    assert (blocks, denials) == (2, 1)
    until(
        "the dashboard to read the counts",
        lambda: dashboard.state()["penalty"] == {"blocks": blocks, "denials": denials},
    )

    dom = page(dashboard)
    assert dom.attrs["feature-penalized"]["data-offered"] == "1"
    assert dom.text["penalty-blocks"] == f"{blocks:,}"
    assert dom.text["penalty-denials"] == f"{denials:,}"
    assert dom.text["feature-penalized"].endswith("".join("".join(r) for r in rows))
    metrics = (dashboard.try_get("/metrics") or b"").decode()
    assert f"ratelimit_penalty_blocks_total {blocks}\n" in metrics
    assert f"ratelimit_penalty_denials_total {denials}\n" in metrics
    for key, ms_left, form in rows:
        sample = (
            f'ratelimit_penalized_seconds_left{{key="{key}",form="{form}"}} {int(ms_left) / 1000:g}'
        )
        assert sample + "\n" in metrics, (sample, metrics)
