"""Denials remembered locally, as the Rust client's deny cache does.

After the server denies a request on a key and limit with ``retry_after``
r, a request on the same key and limit costing at least as much is denied
here, without a round trip, until r has passed. It only ever denies, and
only what the server denied for that long, so it cannot admit anything the
server would not. It can deny a little longer than the server would: the
server's waits are rounded up to whole milliseconds and counted from when
the reply arrived. A refund or ``DEL`` meanwhile can also make it deny a
request the server would have admitted.

**Paced denials.** For a limit that regains one unit every ``interval``
(GCRA, token bucket), a denial says more: the key holds nothing now, one
unit comes after r, then one per interval. After n admissions of this
process since then the key holds at most ``accrued - n`` units, whatever
others did, so a request before ``r + n * interval`` is denied here too: a
key offered more than its limit costs about one command per admission, not
one per admission and one per denial. Past that time, the units that can
have come since are counted too: as many requests as units go to the
server at once, and the others meanwhile are denied here until the next.

Memory is bounded by ``capacity`` entries, the least recently used giving
way; every operation is O(1). Thread-safe; one cache may serve several
limiters.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from datetime import timedelta

from .decision import Decision
from .policy import Policy

GRACE = 1.0
"""Seconds an entry outlives its denial, waiting for an admission to move it on."""
CAPACITY = 10_000
"""The default number of entries."""


@dataclasses.dataclass(slots=True)
class _Entry:
    until: float
    interval: float | None
    cost: int
    decision: Decision
    flying: int = 0
    """Requests out for units that came since the denial."""

    def expiry(self) -> float:
        return self.until + max(GRACE, self.interval or 0.0)


def pace(policy: Policy | None) -> float | None:
    """Seconds one unit takes for a limit that regains one unit at a time (GCRA, BUCKET)."""
    if policy is None or policy.quota is None or policy.command not in ("RL.GCRA", "RL.BUCKET"):
        return None
    if policy.quota.q <= 0:
        return None  # a zero rate: the server refuses it
    return policy.quota.w / policy.quota.q


class DenyCache:
    """A bounded cache of denials (see the module), shared by a limiter's calls."""

    def __init__(
        self, capacity: int = CAPACITY, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Remembers up to ``capacity`` denials; ``clock`` (seconds) is for tests."""
        self.capacity = max(1, capacity)
        self.clock = clock
        self.saved = 0
        """Requests answered here, without a round trip."""
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many entries are held."""
        return len(self._entries)

    def check(self, slot: Hashable, cost: int) -> tuple[Decision | None, bool]:
        """The local denial of ``cost`` on ``slot`` (``None``: ask the server).

        And whether this request is out for one of a paced key's units
        (then :meth:`landed` when it ends).
        """
        now = self.clock()
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None:
                return None, False
            if now >= entry.expiry():
                del self._entries[slot]
                return None, False
            if cost < entry.cost:
                return None, False
            if now < entry.until:
                return self._deny(slot, entry, entry.until - now), False
            if entry.interval is None:
                return None, False
            # At most this many units have come since (after this process's admissions).
            accrued = 1 + math.floor((now - entry.until) / entry.interval)
            if entry.flying < accrued:
                entry.flying += 1
                return None, True
            return self._deny(slot, entry, entry.until + entry.flying * entry.interval - now), False

    def _deny(self, slot: Hashable, entry: _Entry, wait: float) -> Decision:
        self._entries.move_to_end(slot)
        self.saved += 1
        retry = timedelta(milliseconds=math.ceil(round(wait * 1000, 6)))
        return dataclasses.replace(
            entry.decision, retry_after=retry, reset_after=max(retry, entry.decision.reset_after)
        )

    def landed(self, slot: Hashable) -> None:
        """The request out for a paced key's next unit ended (answered or not)."""
        with self._lock:
            entry = self._entries.get(slot)
            if entry is not None:
                entry.flying = max(0, entry.flying - 1)

    def observe(
        self, slot: Hashable, cost: int, decision: Decision, interval: float | None
    ) -> None:
        """The server's decision of ``cost`` on ``slot``: remember a denial, pace an admission.

        An admission answered after a denial counts against it even when
        the server ran it first (already in the denial's wait): the cache
        then denies one interval longer, where not counting it would make
        the next request one more denial of the server's.
        """
        now = self.clock()
        with self._lock:
            if decision.allowed:
                entry = self._entries.get(slot)
                if entry is not None and entry.interval is not None:
                    entry.until += entry.interval * cost  # one fewer unit accrued since
                return
            retry = decision.retry_after
            if retry is None or retry <= timedelta(0):
                return  # never admissible, or admissible now: the server's answer is needed
            until = now + retry.total_seconds()
            self._entries[slot] = _Entry(until, interval, cost, decision)
            self._entries.move_to_end(slot)
            if len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
