"""Limits as values: each policy knows its command's words and its rate.

A policy is built once (a module-level constant, say) and reused on every
call: its words are computed when it is made, so a call only joins them to
its key and options.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

Duration = timedelta | str | int
"""A duration: a :class:`~datetime.timedelta` (whole milliseconds), the
module's own words (``"250ms"``, ``"1s"``, ``"1m"``, ``"1h"``, ``"1d"``) or
an ``int`` of seconds, as the module reads a bare integer."""

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_word(d: Duration) -> str:
    """The module's word for a duration: ``"1500ms"`` for 1.5 seconds.

    A ``timedelta`` must be a positive whole number of milliseconds (the
    module's resolution); strings pass through for the server to check.
    """
    if isinstance(d, str):
        return d
    if isinstance(d, bool):
        raise TypeError("a duration is a timedelta, a str or an int of seconds")
    if isinstance(d, int):
        return str(d)
    if isinstance(d, timedelta):
        us = (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
        ms, rest = divmod(us, 1000)
        if rest or ms <= 0:
            raise ValueError(f"a duration must be a positive whole number of milliseconds: {d!r}")
        return f"{ms}ms"
    raise TypeError("a duration is a timedelta, a str or an int of seconds")


def duration_ms(d: Duration) -> int:
    """A duration in milliseconds, as the module reads it (``"1m"`` is 60000).

    Raises ``ValueError`` for words the module would refuse.
    """
    word = duration_word(d).strip().lower()
    ms = None
    for unit in ("ms", "s", "m", "h", "d"):
        if word.endswith(unit) and word[: -len(unit)].isdigit():
            ms = int(word[: -len(unit)]) * _UNIT_MS[unit]
            break
    else:
        if word.isdigit():
            ms = int(word) * 1000
    if not ms:
        raise ValueError(f"a duration is a positive integer with an optional unit: {word!r}")
    return ms


@dataclass(frozen=True, slots=True)
class Quota:
    """A rate in the terms of the ``RateLimit-Policy`` field: ``q`` per ``w`` seconds."""

    q: int
    w: int

    @staticmethod
    def of_rate(count: int, period_ms: int) -> Quota:
        """``count`` per ``period_ms``.

        A period of whole seconds is ``w``; otherwise ``w`` is the shortest
        whole number of seconds with a whole ``q`` at that rate
        (1 per 250 ms is ``q=4;w=1``).
        """
        if period_ms % 1000 == 0:
            w = period_ms // 1000
        else:
            w = period_ms // math.gcd(period_ms, count * 1000)
        return Quota(q=count * 1000 * w // period_ms, w=w)


@dataclass(frozen=True, slots=True)
class Policy:
    """One limit: the words that follow a key (``GCRA 10 1s``) and its rate.

    Build one with :meth:`gcra`, :meth:`bucket`, :meth:`sliding`,
    :meth:`fixed`, :meth:`concurrency` or :meth:`named`. ``name`` is what
    the HTTP headers call it; by default its words, joined by ``-``.
    """

    words: tuple[str, ...]
    """The policy as ``RL.ALL`` and ``RL.PEEK`` take it (``("GCRA", "10", "1s")``)."""
    command: str
    """The single-key command that decides it (``RL.GCRA``)."""
    quota: Quota | None = None
    """The sustained rate, or ``None`` (a concurrency limit, a named policy)."""
    name: str = ""
    """The name in ``RateLimit`` and ``RateLimit-Policy`` fields."""
    single: tuple[str, ...] = field(default=(), repr=False)
    """The words after the key in the single-key command."""

    @property
    def label(self) -> str:
        """The name in HTTP header fields: ``name``, else the words joined by ``-``."""
        return self.name or "-".join(self.words).lower()

    def with_name(self, name: str) -> Policy:
        """The same policy under another header name."""
        return Policy(self.words, self.command, self.quota, name, self.single)

    @staticmethod
    def gcra(limit: int, period: Duration, *, burst: int | None = None, name: str = "") -> Policy:
        """A sustained ``limit`` per ``period``, bursts of ``burst`` (default ``limit``)."""
        words: tuple[str, ...] = ("GCRA", str(limit), duration_word(period))
        if burst is not None:
            words += ("BURST", str(burst))
        quota = Quota.of_rate(limit, duration_ms(period))
        return Policy(words, "RL.GCRA", quota, name, words[1:])

    @staticmethod
    def bucket(capacity: int, refill: int, period: Duration, *, name: str = "") -> Policy:
        """A token bucket of ``capacity``, refilled by ``refill`` per ``period``: RL.BUCKET."""
        words = ("BUCKET", str(capacity), str(refill), duration_word(period))
        quota = Quota.of_rate(refill, duration_ms(period))
        return Policy(words, "RL.BUCKET", quota, name, words[1:])

    @staticmethod
    def sliding(
        limit: int,
        window: Duration,
        *,
        mode: Literal["exact", "approx"] = "exact",
        buckets: int | None = None,
        name: str = "",
    ) -> Policy:
        """At most ``limit`` in any ``window``: RL.SLIDING.

        ``mode="exact"`` (a log), ``"approx"`` (the two-window estimate), or
        ``buckets=n`` sub-windows.
        """
        words: tuple[str, ...] = ("SLIDING", str(limit), duration_word(window))
        if buckets is not None:
            words += ("BUCKETS", str(buckets))
        else:
            words += (mode.upper(),)
        quota = Quota.of_rate(limit, duration_ms(window))
        return Policy(words, "RL.SLIDING", quota, name, words[1:])

    @staticmethod
    def fixed(limit: int, window: Duration, *, aligned: bool = False, name: str = "") -> Policy:
        """A count per window, from the first request or ``aligned`` to the epoch: RL.FIXED."""
        words: tuple[str, ...] = ("FIXED", str(limit), duration_word(window))
        if aligned:
            words += ("ALIGNED",)
        quota = Quota.of_rate(limit, duration_ms(window))
        return Policy(words, "RL.FIXED", quota, name, words[1:])

    @staticmethod
    def concurrency(limit: int, ttl: Duration, *, name: str = "") -> Policy:
        """At most ``limit`` held at once, each lease ending after ``ttl``: RL.ACQUIRE."""
        words = ("CONCURRENCY", str(limit), duration_word(ttl))
        return Policy(words, "RL.ACQUIRE", None, name, words[1:])

    @staticmethod
    def named(policy: str, *fallbacks: str, name: str = "") -> Policy:
        """A named policy of the server (``RL.POLICY SET``): RL.CHECK, ``POLICY name`` in RL.ALL.

        ``fallbacks`` are tried in order by RL.CHECK when ``policy`` is not
        defined; RL.ALL and RL.PEEK take the first name only.
        """
        single: tuple[str, ...] = (policy,)
        for other in fallbacks:
            single += ("OR", other)
        return Policy(("POLICY", policy), "RL.CHECK", None, name or policy, single)


@dataclass(frozen=True, slots=True)
class Node:
    """One node of an RL.SHARE path: ``limit`` per ``period`` assured, up to ``ceil``.

    The last node of a path, the root, has no ``ceil``.
    """

    limit: int
    period: Duration
    burst: int | None = None
    ceil: int | None = None

    def words(self) -> tuple[str, ...]:
        """The node as RL.SHARE takes it."""
        words: tuple[str, ...] = (str(self.limit), duration_word(self.period))
        if self.burst is not None:
            words += ("BURST", str(self.burst))
        if self.ceil is not None:
            words += ("CEIL", str(self.ceil))
        return words
