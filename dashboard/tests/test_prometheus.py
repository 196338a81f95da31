"""A real Prometheus scrapes /metrics; its query API returns the module's counts and rates."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from .conftest import PASSWORD, Dashboard, Server, free_port, rl_commands, until

MIDNIGHT_US = 20833 * 86_400 * 1_000_000
TOKEN = "scrape-token"
HERE = Path(__file__).resolve().parents[1]


class Prometheus:
    """prometheus scraping one dashboard every second, with a bearer token."""

    def __init__(self, target: int) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is not installed (apt-get install prometheus)")
        self.dir = Path(tempfile.mkdtemp(prefix="rl-dash-prom-"))
        (self.dir / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: ['{HERE / 'alerts.yml'}']\n"
            "scrape_configs:\n"
            "  - job_name: ratelimit\n"
            f"    authorization: {{credentials: {TOKEN}}}\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{target}']}}]\n"
        )
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        until("prometheus to be ready", self.ready, timeout=60)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            assert self.process.poll() is None, "prometheus exited"
            return False

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of a successful API answer."""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, q: str) -> float | None:
        """The single value of an instant query, None when it has no series."""
        result = self.api("query", query=q)["result"]
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def prometheus_setup(server: Server) -> Iterator[tuple[Server, Dashboard, Prometheus]]:
    d = Dashboard(server.url, "--token", TOKEN)
    p = Prometheus(d.port)
    yield server, d, p
    p.stop()
    d.stop()


def test_prometheus_reads_the_counts_and_rates(
    prometheus_setup: tuple[Server, Dashboard, Prometheus],
) -> None:
    server, _, prom = prometheus_setup
    c = server.client()
    c.execute_command("RL.CLOCK", "SET", MIDNIGHT_US)
    for _ in range(50):
        c.execute_command("RL.GCRA", "k", 30, "1m")
    c.execute_command("RL.POLICY", "SET", "plan:free", "FIXED", 5, "1m")
    for _ in range(12):
        c.execute_command("RL.CHECK", "user:1", "plan:free")

    allowed = 'ratelimit_decisions_total{command="rl.gcra",outcome="allowed"}'
    denied = 'ratelimit_decisions_total{command="rl.gcra",outcome="denied"}'
    until("Prometheus to hold 20 denials", lambda: prom.query(denied) == 20)
    results = {
        "ratelimit_up": prom.query("ratelimit_up"),
        allowed: prom.query(allowed),
        denied: prom.query(denied),
        'ratelimit_policy_decisions_total{policy="plan:free",outcome="denied"}': prom.query(
            'ratelimit_policy_decisions_total{policy="plan:free",outcome="denied"}'
        ),
        'ratelimit_top_denied{policy="plan:free",key="user:1"}': prom.query(
            'ratelimit_top_denied{policy="plan:free",key="user:1"}'
        ),
        'ratelimit_bound{name="max-waiters"}': prom.query('ratelimit_bound{name="max-waiters"}'),
        "ratelimit_waiting": prom.query("ratelimit_waiting"),
    }
    print(results)
    assert list(results.values()) == [1, 30, 20, 7, 7, 10_000, 0]

    # Paced traffic: fresh keys are always allowed, 25 calls a second for 12 seconds.
    sent = [0]
    start = time.monotonic()

    def traffic() -> None:
        t = server.client()
        while (elapsed := time.monotonic() - start) < 12:
            t.execute_command("RL.GCRA", f"fresh:{sent[0]}", 1, "1m")
            sent[0] += 1
            time.sleep(
                max(0.0, sent[0] / 25 - elapsed)
            )  # pacing the sender, not waiting on a result

    thread = threading.Thread(target=traffic)
    thread.start()
    thread.join()
    sent_rate = sent[0] / 12
    rate_q = f"rate({allowed}[10s] offset 2s)"
    # The last scrapes of the window: the dashboard reads every second and Prometheus scrapes
    # every second, so the newest counter may be up to two seconds behind.
    until("Prometheus to hold every call", lambda: prom.query(allowed) == 30 + sent[0])
    rate = prom.query(rate_q)
    print({"sent per second": sent_rate, rate_q: rate, "total": prom.query(allowed)})
    assert rate is not None and 0.7 * sent_rate < rate < 1.3 * sent_rate

    # A client waiting in a line for 12.5 s on the clock: the lines' gauges.
    c.execute_command("RL.FIXED", "line", 1, "1h")
    waiter = redis.Connection(port=server.port, password=PASSWORD, socket_timeout=5)
    waiter.send_command("RL.FIXED", "line", 1, "1h", "WAIT", "3h")  # its reply is never read
    until("the waiter", lambda: c.info("ratelimit")["ratelimit_waiting"] == 1)
    c.execute_command("RL.CLOCK", "ADVANCE", 12_500_000)
    longest = "ratelimit_longest_wait_seconds"
    until("Prometheus to hold the longest wait", lambda: prom.query(longest) == 12.5)
    lines = c.info("ratelimit")["ratelimit_lines"]
    waited = {longest: prom.query(longest), "ratelimit_lines": prom.query("ratelimit_lines")}
    print(waited)
    assert waited == {longest: lines["longest_wait_us"] / 1e6, "ratelimit_lines": lines["count"]}
    assert lines == {"count": 1, "longest_wait_us": 12_500_000}

    # On a server with the penalty box: its counters and the listed block's time left.
    penalty_box = "rl.penalized" in rl_commands(server)
    if penalty_box:
        for _ in range(3):  # allowed, denied (the block begins), denied by the block
            c.execute_command("RL.GCRA", "abuser", 1, "1h", "BLOCK", "1h")
        blocks = "ratelimit_penalty_blocks_total"
        until("Prometheus to hold the block", lambda: prom.query(blocks) == 1)
        left = 'ratelimit_penalized_seconds_left{key="abuser",form="block"}'
        boxed = {
            blocks: prom.query(blocks),
            "ratelimit_penalty_denials_total": prom.query("ratelimit_penalty_denials_total"),
            left: prom.query(left),
        }
        print(boxed)
        rl = c.info("ratelimit")
        listed = c.execute_command("RL.PENALIZED")
        assert boxed == {
            blocks: rl["ratelimit_penalty_blocks"],
            "ratelimit_penalty_denials_total": rl["ratelimit_penalty_denials"],
            left: int(listed[0][1]) / 1000,
        }
        assert list(boxed.values()) == [1, 1, 3600]

    # Every query of the shipped Grafana dashboard runs, and those over traffic find series.
    grafana = json.loads((HERE / "grafana.json").read_text())
    for panel in grafana["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$instance", ".*").replace("$__rate_interval", "10s")
            result = prom.api("query", query=expr)["result"]
            if panel["title"] in (
                "Up",
                "Decisions per second",
                "Most denied keys (this minute and the last)",
                "Longest wait now",
                "Lines (keys with waiters)",
            ) or (penalty_box and panel["title"].startswith("Penalty")):
                assert result, (panel["title"], expr)
    # The shipped alerting rules load and evaluate.
    groups = prom.api("rules")["groups"]
    rules = {r["name"]: r for g in groups for r in g["rules"]}
    assert len(rules) == 6
    until(
        "the rules evaluated",
        lambda: all(r.get("health") == "ok" for r in prom.api("rules")["groups"][0]["rules"]),
    )

    waiter.disconnect()
    server.stop()
    until("ratelimit_up 0", lambda: prom.query("ratelimit_up") == 0)
