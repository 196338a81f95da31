"""What a decision does when Redis does not answer: its deadline, the circuit, the fallback.

Pure of I/O: the sync and the asyncio limiter share it and run the
commands themselves.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Literal

import redis.exceptions

from .decision import Decision
from .errors import Unavailable
from .policy import Policy

Fallback = Literal["raise", "open", "closed", "degraded"]
"""What a decision answers when Redis is unavailable (see the README)."""

FALLBACKS: tuple[str, ...] = ("raise", "open", "closed", "degraded")

DEFAULT_DEADLINE = 0.3
"""Seconds a decision waits for Redis (plus its own ``wait``), as the Rust client's."""
PROBE_INTERVAL = 0.2
"""Seconds between two probes of an open circuit."""
DEGRADED_KEYS = 10_000
"""The most keys degraded mode counts at once (the least recently used give way)."""

OUTAGE: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    TimeoutError,
    OSError,
)
"""The errors that mean the store is unavailable (any other error is raised)."""

Step = Literal["send", "probe", "skip"]


class Circuit:
    """Whether the connection is known down, and whose turn it is to look.

    Closed: every call is sent. A call that fails for an outage opens it.
    Open: calls answer the fallback at once, except one every
    ``probe_interval`` seconds, the probe, which pings first and closes the
    circuit on an answer. One probe at a time; thread-safe.
    """

    def __init__(self, probe_interval: float = PROBE_INTERVAL) -> None:
        """A closed circuit."""
        self.probe_interval = probe_interval
        self.open = False
        self.opened = 0
        """How many times it opened."""
        self._probing = False
        self._next_probe = 0.0
        self._lock = threading.Lock()

    def step(self) -> Step:
        """What the next call does: send, probe (then send), or skip to the fallback."""
        if not self.open:
            return "send"
        with self._lock:
            if not self.open:
                return "send"
            if self._probing or time.monotonic() < self._next_probe:
                return "skip"
            self._probing = True
            return "probe"

    def succeeded(self) -> None:
        """An answer came: the connection is up."""
        if self.open or self._probing:
            with self._lock:
                self.open = False
                self._probing = False

    def failed(self) -> None:
        """A call met an outage: open (again) and look next after the interval."""
        with self._lock:
            if not self.open:
                self.opened += 1
            self.open = True
            self._probing = False
            self._next_probe = time.monotonic() + self.probe_interval

    def abandoned(self) -> None:
        """A probe ended without telling (its caller was cancelled): the next call may look."""
        with self._lock:
            self._probing = False

    def retry_after(self) -> float:
        """Seconds until the next probe."""
        return max(0.0, self._next_probe - time.monotonic())


class _Bucket:
    __slots__ = ("at", "tokens")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens = tokens
        self.at = at


class _Seen:
    """What the store's replies on one key and limit told (the share's estimate)."""

    __slots__ = ("at", "level", "own", "total")

    def __init__(self, level: float, at: float, own: float, total: float) -> None:
        self.level = level
        self.at = at
        self.own = own
        self.total = total

    def share(self) -> float:
        return self.own / max(self.total, self.own) if self.own > 0 else 0.0


DECAY = 10.0
"""Seconds: the share is over about the last 10 s, or the limit's window if longer."""


class Degraded:
    """The local limit of degraded mode: a token bucket per key and limit, in this process.

    Each key and limit the store answered has an **observed share**: this
    process's part of what the key admitted over about the last 10 s (or
    the limit's window), from each reply (:meth:`observe`, the Rust
    client's estimate): the units the key holds (``level``, fractional,
    from ``remaining`` and ``reset_after``), what everyone took since the
    previous reply (``total``: the level it would have reached by refilling,
    less the level now), what this process took (``own``), both decayed
    exponentially. While the store is unavailable the key admits from a
    bucket of ``share * q`` filling at ``share * q`` per ``w``, starting
    from ``share * level`` at the last reply and filled since: the
    processes together admit about the limit, each about
    ``min(demand, share * rate)``. A key never answered has the fixed
    ``share`` (default 1). A limit without a rate (a concurrency limit, a
    named policy) denies. Bounded by ``capacity`` keys; thread-safe;
    ``clock`` is monotonic seconds.
    """

    def __init__(
        self,
        share: float = 1.0,
        capacity: int = DEGRADED_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Local limits at the observed share, else ``share``, of each limit's rate."""
        if not 0 < share <= 1:
            raise ValueError("degraded_share is a fraction in (0, 1]")
        self.share = share
        self.capacity = capacity
        self.clock = clock
        self._buckets: OrderedDict[tuple[str | bytes, tuple[str, ...]], _Bucket] = OrderedDict()
        self._seen: OrderedDict[tuple[str | bytes, tuple[str, ...]], _Seen] = OrderedDict()
        self._lock = threading.Lock()

    def observe(
        self, limits: Sequence[tuple[str | bytes, Policy | None]], d: Decision, cost: int
    ) -> None:
        """The store decided ``d`` (one limit, or ``RL.ALL``'s) for a request of ``cost``."""
        decisions = d.limits or (d,)
        if len(decisions) != len(limits) or d.fallback is not None:
            return
        now = self.clock()
        charged = cost if d.allowed else 0
        with self._lock:
            for (key, policy), one in zip(limits, decisions, strict=True):
                if policy is None or policy.quota is None or policy.quota.q <= 0:
                    continue
                rate = policy.quota.q / policy.quota.w
                limit = max(one.limit, 1)
                level = limit - one.reset_after.total_seconds() * rate
                level = min(one.remaining + 1.0, max(float(one.remaining), level))
                slot = (key, policy.words)
                seen = self._seen.get(slot)
                if seen is None:
                    self._seen[slot] = _Seen(level, now, charged, max(charged, limit - level))
                    if len(self._seen) > self.capacity:
                        self._seen.popitem(last=False)
                else:
                    elapsed = max(0.0, now - seen.at)
                    decay = math.exp(-elapsed / max(policy.quota.w, DECAY))
                    used = min(limit, seen.level + rate * elapsed) - level
                    seen.total = seen.total * decay + used
                    seen.own = seen.own * decay + charged
                    seen.level, seen.at = level, now
                    self._seen.move_to_end(slot)
                self._buckets.pop(slot, None)  # the store decides again

    def observed(self, key: str | bytes, policy: Policy) -> float | None:
        """The observed share of ``key`` under ``policy`` (``None``: never answered)."""
        with self._lock:
            seen = self._seen.get((key, policy.words))
            return None if seen is None else seen.share()

    def decide(self, limits: Sequence[tuple[str | bytes, Policy | None]], cost: int) -> Decision:
        """All of ``limits`` admit ``cost`` and are charged, or none is."""
        now = self.clock()
        with self._lock:
            buckets: list[tuple[_Bucket, float, float]] = []
            wait = 0.0
            for key, policy in limits:
                if policy is None or policy.quota is None or policy.quota.q <= 0:
                    return denial(policy, None)
                seen = self._seen.get((key, policy.words))
                share = self.share if seen is None else seen.share()
                if share <= 0:
                    return denial(policy, None, "degraded")
                size = max(1.0, share * policy.quota.q)
                rate = size / policy.quota.w
                bucket = self._bucket(key, policy.words, size, now, seen, share)
                bucket.tokens = min(size, bucket.tokens + (now - bucket.at) * rate)
                bucket.at = now
                if cost > size:
                    return denial(policy, None)
                if bucket.tokens < cost:
                    wait = max(wait, (cost - bucket.tokens) / rate)
                buckets.append((bucket, size, rate))
            first = limits[0][1]
            if wait > 0:
                return denial(first, wait, "degraded")
            for bucket, _, _ in buckets:
                bucket.tokens -= cost
            remaining = min(math.floor(b.tokens) for b, _, _ in buckets)
            size = min(s for _, s, _ in buckets)
            return Decision(
                True, int(size), remaining, None, timedelta(0), policy=first, fallback="degraded"
            )

    def _bucket(
        self,
        key: str | bytes,
        words: tuple[str, ...],
        size: float,
        now: float,
        seen: _Seen | None,
        share: float,
    ) -> _Bucket:
        slot = (key, words)
        bucket = self._buckets.get(slot)
        if bucket is None:
            # From the level at the last reply (filled since, below); never answered: full.
            bucket = _Bucket(size, now) if seen is None else _Bucket(seen.level * share, seen.at)
            self._buckets[slot] = bucket
            if len(self._buckets) > self.capacity:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(slot)
        return bucket


def denial(policy: Policy | None, wait: float | None, fallback: str = "closed") -> Decision:
    """A denial answered locally; ``wait`` in seconds (``None``: unknown)."""
    limit = policy.quota.q if policy is not None and policy.quota is not None else 0
    retry = None if wait is None else timedelta(milliseconds=math.ceil(wait * 1000))
    return Decision(False, limit, 0, retry, retry or timedelta(0), policy=policy, fallback=fallback)


class Guard:
    """A limiter's deadline, circuit and fallback (see :class:`~redis_ratelimit.RateLimiter`)."""

    def __init__(
        self,
        deadline: float,
        fallback: Fallback,
        degraded_share: float,
        probe_interval: float,
    ) -> None:
        """The settings of one limiter."""
        if not deadline > 0:
            raise ValueError("deadline is a positive number of seconds")
        if fallback not in FALLBACKS:
            raise ValueError(f"fallback is one of {', '.join(FALLBACKS)}: {fallback!r}")
        self.deadline = deadline
        self.fallback = fallback
        self.circuit = Circuit(probe_interval)
        self.degraded = Degraded(degraded_share)

    def answer(
        self,
        limits: Sequence[tuple[str | bytes, Policy | None]],
        cost: int,
        error: Unavailable,
    ) -> Decision:
        """The fallback's decision, for a call that met an outage (or skipped)."""
        first = limits[0][1] if limits else None
        if self.fallback == "raise":
            raise error
        if self.fallback == "open":
            limit = first.quota.q if first is not None and first.quota is not None else 0
            return Decision(True, limit, 0, None, timedelta(0), policy=first, fallback="open")
        if self.fallback == "degraded":
            return self.degraded.decide(limits, cost)
        return denial(first, max(1.0, self.circuit.retry_after()))


def timeout(guard: Guard, deadline: float | None, wait_ms: int) -> float:
    """Seconds a call may take: its deadline (else the limiter's) and its ``wait``."""
    return (deadline if deadline is not None else guard.deadline) + wait_ms / 1000


def client_options(deadline: float, *, asyncio: bool = False) -> dict[str, object]:
    """redis-py options for a client whose calls end by ``deadline`` seconds.

    No retry (redis-py 8 retries a refused connection for about 4.4 s by
    default) and RESP2 (no ``HELLO`` when connecting). A blocking client
    connects within the deadline and reads its handshake within it (a call
    reads its reply with its own timeout); an asyncio client has no socket
    timeout, as the limiter cancels the whole call at its deadline (a
    socket timeout would cut a ``wait``).
    """
    return {
        "socket_timeout": None if asyncio else deadline,
        "socket_connect_timeout": deadline,
        "retry_on_timeout": False,
        "protocol": 2,
    }
