"""The one poller: reads the server once a second for every browser and every scrape.

Each tick is at most two round trips: a pipeline of INFO (server, replication,
ratelimit), CONFIG GET ratelimit.*, MODULE LIST and the optional panels'
commands; then, when named policies are listed, one pipeline of
RL.POLICY STATS for the most called of them. Every call has a short timeout;
an unreachable server is recorded, not raised, and the next tick tries again.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.client import Pipeline

from rl_dashboard.features import FEATURES, Feature
from rl_dashboard.parse import bounds, module_args, parse_info, parse_stats, policy_lines


def send(client: redis.Redis | Pipeline, *args: str) -> Any:
    """One command (queued, on a pipeline); redis-py leaves ``execute_command`` untyped."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


HISTORY = 600
"""Samples kept: ten minutes at one a second."""


@dataclass
class Sample:
    """What one tick read: the counters are the module's own, since its load."""

    t: float
    info: dict[str, dict[str, str]]
    bounds: dict[str, int]
    module: dict[str, Any] | None
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class State:
    """The poller's view, read by the web handlers under the poller's lock."""

    target: str
    up: bool = False
    down_since: float | None = None
    error: str = ""
    offered: dict[str, bool] = field(default_factory=dict)
    last: Sample | None = None
    history: deque[Sample] = field(default_factory=lambda: deque(maxlen=HISTORY))


class Poller:
    """Reads the server every ``interval`` seconds on a thread of its own."""

    def __init__(
        self,
        client: redis.Redis,
        target: str,
        *,
        interval: float = 1.0,
        stats_policies: int = 5,
        features: tuple[Feature, ...] = FEATURES,
    ) -> None:
        self.client = client
        self.interval = interval
        self.stats_policies = stats_policies
        self.features = features
        self.lock = threading.Lock()
        self.state = State(target=target)
        self.multi_info = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rl-dashboard-poller", daemon=True)

    def start(self) -> None:
        """Starts polling."""
        self._thread.start()

    def stop(self) -> None:
        """Stops polling and waits for the thread."""
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            self.tick()
            next_tick += self.interval
            delay = next_tick - time.monotonic()
            if delay < 0:  # a slow tick: start again from now rather than catch up
                next_tick, delay = time.monotonic(), 0.0
            self._stop.wait(delay)

    def tick(self) -> None:
        """One read of the server; an error marks it unreachable until a read succeeds."""
        try:
            sample = self._read()
        except (redis.RedisError, OSError) as e:
            with self.lock:
                if self.state.up or self.state.down_since is None:
                    self.state.down_since = time.time()
                self.state.up = False
                self.state.offered = {}
                self.state.error = type(e).__name__ + ": " + str(e)
            return
        with self.lock:
            self.state.up = True
            self.state.down_since = None
            self.state.error = ""
            self.state.last = sample
            self.state.history.append(sample)

    def _offered(self) -> dict[str, bool]:
        with self.lock:
            offered = dict(self.state.offered)
        if offered or not self.features:
            return offered
        try:
            names = set(send(self.client, "COMMAND", "LIST", "FILTERBY", "PATTERN", "rl.*"))
        except redis.ResponseError:  # before Redis 7.0: no optional panel is offered
            names = set()
        offered = {f.name: f.check in names for f in self.features}
        with self.lock:
            self.state.offered = offered
        return offered

    def _read(self) -> Sample:
        offered = self._offered()
        extras: list[Feature] = [f for f in self.features if offered.get(f.name)]
        sections = ("server", "replication", "ratelimit")
        pipe = self.client.pipeline(transaction=False)
        if self.multi_info:
            send(pipe, "INFO", *sections)
        else:
            for section in sections:
                send(pipe, "INFO", section)
        send(pipe, "CONFIG", "GET", "ratelimit.*")
        send(pipe, "MODULE", "LIST")
        for f in extras:
            send(pipe, *f.command)
        replies = pipe.execute(raise_on_error=False)
        if self.multi_info and isinstance(replies[0], redis.ResponseError):
            self.multi_info = False  # before Redis 7.0: one section per INFO
            return self._read()
        n = 1 if self.multi_info else len(sections)
        for r in replies[: n + 2]:
            if isinstance(r, Exception):
                raise r
        info: dict[str, dict[str, str]] = {}
        for text in replies[:n]:
            info.update(parse_info(text))
        module = module_args(replies[n + 1])
        extra = {
            f.name: ([["error", str(r)]] if isinstance(r, Exception) else f.parse(r))
            for f, r in zip(extras, replies[n + 2 :], strict=True)
        }
        sample = Sample(time.time(), info, bounds(replies[n]), module, extras=extra)
        names = [p["name"] for p in policy_lines(info.get("ratelimit", {}))][: self.stats_policies]
        if names and module is not None and module["policies"]:
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                send(pipe, "RL.POLICY", "STATS", name)
            for name, r in zip(names, pipe.execute(raise_on_error=False), strict=True):
                if not isinstance(r, Exception):  # deleted since INFO: left out
                    sample.stats[name] = parse_stats(r)
        return sample
