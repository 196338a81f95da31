"""Block leasing for hot keys, as the Rust client's ``LeasedLimit`` does.

A leased key takes units from the server in blocks of ``block`` with
``COST block PARTIAL`` and admits requests from the block locally: one
command per block instead of one per request. One call is out per key at a
time; the requests that find the block spent wait for it and take its
units. A call that leaves the key empty is followed by local denials until a
whole block can have accrued (a denied call: and until its
``retry_after``), so that processes sharing a key do not poll it one unit
at a time; while the key has units left, the next call goes at once.

With ``queue`` (seconds), a contended key is leased by queueing on the
server for the next whole block (``COST block WAIT queue``, first come
first served among the processes), as the Rust client's
``LeasePlan::queued``: one command per block and no local denials while
the line moves. A lease queues from its first call; a queued block that
leaves whole blocks unused on the server (``remaining`` of three blocks
or more) says the key is not contended, and the lease polls with
``PARTIAL`` again until a call comes back short. A queued call denied (its
place in the line lay beyond ``queue``, or the line was full) calls again
when its place would be within ``queue`` (at most a second later). A
queued call holds one connection of the pool while it waits, and a
request on a queued lease waits at most its deadline plus ``queue``.
What a block still holds is given back with ``REFUND``: :meth:`Leases.refund_idle`
for keys not asked for a while, :meth:`Leases.release` at shutdown, and at
once for a key that stops being hot.

The bound: what one process admits from its blocks can exceed the limit in
some window by at most what it holds leased, one block per key; with ``n``
processes sharing a key, ``n * block``. With a fixed clock (no refill), the
admissions of all processes never exceed what the server granted.

Which keys are leased: every key decided through the limiter (``hot=None``),
or only those the server names hot (``RL.HOTKEYS``, on a server with
``ratelimit.hot-key-counters`` above 0), polled once a second from the
limiter's first decision on.

Pure of I/O: the sync and the asyncio limiter run the commands. Thread-safe;
memory bounded by ``capacity`` keys (the least recently used give way,
their units refunded at the next :meth:`Leases.refund_idle`).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Literal

from ._commands import Options
from .decision import Decision
from .policy import Policy

CAPACITY = 10_000
"""The default number of leased keys."""
HOT_COUNT = 10
"""How many keys a hot-key poll asks for."""
HOT_RATE = 100.0
"""Decisions a second (less the count's error) from which a listed key is hot."""
HOT_POLL = 1.0
"""Seconds between two polls of ``RL.HOTKEYS``."""
KEY_BYTES = 64
"""``RL.HOTKEYS`` shows a key by its first 64 bytes."""
LEASABLE = frozenset({"cost", "deadline"})
"""The options of a call a lease may answer (others go to the server)."""
POLICIES = frozenset({"RL.GCRA", "RL.BUCKET", "RL.SLIDING", "RL.FIXED"})
SPREAD = 16
"""The most block-times a call that came back short waits before the next."""
MAX_GAP = 1.0
"""The longest a denied queued call waits before it queues again (seconds)."""


@dataclasses.dataclass(slots=True)
class BlockLease:
    """One key's lease: the units this process holds and when it may ask again."""

    key: str | bytes
    policy: Policy
    units: int = 0
    """Units taken from the server and not admitted yet."""
    remaining: int = 0
    """What the server said the key held after the last call."""
    denied_until: float = 0.0
    """Monotonic seconds: until then a request the block cannot serve is denied here."""
    calling: bool = False
    """A call for a block is out."""
    used: float = 0.0
    """Monotonic seconds of the last request."""
    admitted: int = 0
    calls: int = 0
    contended: bool = False
    """Others use the key: the next call queues (with ``Leases(queue=...)``)."""
    queued: bool = False
    """The call out queues (``WAIT``)."""
    wait: float = 0.0
    """Seconds the queued call out may wait in line."""
    call: Any = None
    """The asyncio limiter's call out (a future), awaited by every waiting request."""


Step = Literal["admit", "deny", "wait", "call"]


class Leases:
    """The block leases of one limiter (see the module's docs)."""

    def __init__(
        self,
        block: int = 20,
        *,
        hot: bool = False,
        hot_count: int = HOT_COUNT,
        hot_rate: float = HOT_RATE,
        poll: float | None = HOT_POLL,
        capacity: int = CAPACITY,
        queue: float | None = None,
    ) -> None:
        """Blocks of ``block`` units, for every key or (``hot=True``) the server's hot keys.

        With ``hot``, the limiter's first decision starts polling the hot keys
        every ``poll`` seconds (``None``: only when asked, ``refresh_hot_keys``).
        With ``queue``, a contended key queues on the server for whole blocks,
        up to ``queue`` seconds (whole milliseconds) a call.
        """
        if block < 1:
            raise ValueError("block is a number of units, at least 1")
        if queue is not None and not 0.001 <= queue <= 86_400:
            raise ValueError("queue is from 0.001 to 86400 seconds")
        if not 1 <= hot_count <= 1000:
            raise ValueError("hot_count is from 1 to 1000")
        self.block = block
        self.hot = hot
        self.hot_count = hot_count
        self.hot_rate = hot_rate
        self.poll = poll
        self.following = False
        """Whether the limiter's poll has started."""
        self.capacity = capacity
        self.queue = queue
        self.hot_keys: frozenset[bytes] = frozenset()
        """The keys leased because the server named them hot (their first 64 bytes)."""
        self._leases: OrderedDict[tuple[str | bytes, tuple[str, ...]], BlockLease] = OrderedDict()
        self._evicted: list[BlockLease] = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        """Notified whenever a call for a block lands (sync waiters)."""

    def start_following(self) -> bool:
        """True once, for the decision that starts the hot-key poll."""
        if not self.hot or self.poll is None or self.following:
            return False
        with self.lock:
            if self.following:
                return False
            self.following = True
            return True

    def applies(self, key: str | bytes, policy: Policy, options: Options) -> bool:
        """Whether a decision on ``key`` is answered from a lease."""
        if policy.command not in POLICIES or policy.quota is None:
            return False
        if not options.keys() <= LEASABLE or options.get("cost", 1) > self.block:
            return False
        return not self.hot or _prefix(key) in self.hot_keys

    def lease(self, key: str | bytes, policy: Policy) -> BlockLease:
        """The lease of ``key`` under ``policy`` (made when first asked); hold ``lock``."""
        slot = (key, policy.words)
        lease = self._leases.get(slot)
        if lease is None:
            lease = self._leases[slot] = BlockLease(key, policy, contended=self.queue is not None)
            if len(self._leases) > self.capacity:
                _, old = self._leases.popitem(last=False)
                if old.units:
                    self._evicted.append(old)
        else:
            self._leases.move_to_end(slot)
        return lease

    def take(self, lease: BlockLease, cost: int, now: float) -> tuple[Step, Decision | None]:
        """What a request of ``cost`` on ``lease`` does now; hold ``lock``."""
        lease.used = now
        if lease.units >= cost:
            lease.units -= cost
            lease.admitted += cost
            return "admit", self._admitted(lease)
        if now < lease.denied_until:
            return "deny", self.denied(lease, lease.denied_until - now)
        if lease.calling:
            return "wait", None
        lease.calling = True
        lease.queued = self.queue is not None and lease.contended
        return "call", None

    def bound(self, deadline: float) -> float:
        """Seconds a request may wait with a ``deadline`` (plus ``queue`` when queueing)."""
        return deadline + (self.queue or 0.0)

    def options(self, lease: BlockLease) -> Options:
        """The options of the call out (what its undo gives back)."""
        if lease.queued:
            return {"cost": self.block}
        return {"cost": self.block, "partial": True}

    def put_back(self, key: str | bytes, policy: Policy, units: int) -> None:
        """Units admitted from ``key``'s block for a request not served after all."""
        with self.lock:
            lease = self._leases.get((key, policy.words))
            if lease is not None:
                lease.units += units
                lease.admitted -= units
                self.changed.notify_all()

    def args(self, lease: BlockLease, within: float | None = None) -> list[Any] | None:
        """The call for a block: ``PARTIAL``, or queued (``WAIT``).

        ``within``: the seconds its caller may still wait in line (less
        than ``queue``); below a millisecond, ``None``: its caller has
        spent its wait on others' blocks and makes no call.
        """
        args = [lease.policy.command, lease.key, *lease.policy.single, "COST", self.block]
        if lease.queued and self.queue is not None:
            wait = self.queue if within is None else min(self.queue, within)
            if wait < 0.001:
                return None
            lease.wait = int(wait * 1000) / 1000
            return [*args, "WAIT", f"{int(wait * 1000)}ms"]
        return [*args, "PARTIAL"]

    def landed(self, lease: BlockLease, d: Decision, now: float) -> None:
        """A call for a block answered ``d``; hold ``lock``.

        While the key has units left the next call may go at once (and take
        fewer than a block when fewer are left); once it is empty, not before
        a whole block can have accrued (nor before a denial's ``retry_after``).
        """
        lease.calling = False
        lease.calls += 1
        if lease.queued:
            self._landed_queued(lease, d, now)
            return
        granted = (d.granted if d.granted is not None else self.block) if d.allowed else 0
        lease.units += granted
        lease.remaining = d.remaining
        if granted < self.block and self.queue is not None:
            # Contended: queue for the next block at once; the server paces the line.
            lease.contended = True
            lease.denied_until = 0.0
            return
        if granted and d.remaining > 0:
            lease.denied_until = 0.0
            return
        quota = lease.policy.quota
        assert quota is not None
        wait = self.block * quota.w / quota.q
        if 0 < granted < self.block:  # others took the rest: space calls as far apart as they
            wait *= min(SPREAD, math.ceil(self.block / granted))
        if not granted:
            retry = d.retry_after.total_seconds() if d.retry_after is not None else math.inf
            wait = max(wait, retry)
        lease.denied_until = now + wait

    def _landed_queued(self, lease: BlockLease, d: Decision, now: float) -> None:
        quota = lease.policy.quota
        assert quota is not None
        lease.remaining = d.remaining
        if d.allowed:
            lease.units += self.block
            # Whole blocks left unused: nobody else is waiting for them.
            lease.contended = d.remaining < _high(self.block, d.limit)
            lease.denied_until = 0.0
            return
        accrual = self.block * quota.w / quota.q if d.remaining <= 0 else 0.0
        if d.retry_after is None:  # a block that can never be admitted: poll for what fits
            lease.contended = False
            lease.denied_until = now + accrual
            return
        # Its place lay beyond ``queue`` (or the line was full): call again when
        # it would be within it, and not before a block could accrue.
        wait = max(d.retry_after.total_seconds() - lease.wait, accrual)
        lease.denied_until = now + min(wait, MAX_GAP)

    def failed(self, lease: BlockLease) -> None:
        """A call for a block met an outage; hold ``lock``."""
        lease.calling = False

    def idle(self, idle: float, now: float) -> list[tuple[BlockLease, int]]:
        """Takes the units of leases unused for ``idle`` seconds (and evicted ones) to refund."""
        with self.lock:
            out = [(e, e.units) for e in self._evicted]
            self._evicted = []
            for lease in self._leases.values():
                if lease.units and not lease.calling and now - lease.used >= idle:
                    out.append((lease, lease.units))
                    lease.units = 0
            for lease, _ in out:
                lease.units = 0
            return out

    def hot_listed(self, reply: Any) -> list[tuple[BlockLease, int]]:
        """Takes ``RL.HOTKEYS``' reply: the hot keys now, and the units of those no longer hot."""
        hot = set()
        for entry in reply or ():
            key, rate, error = entry[0], float(entry[1]), float(entry[2])
            if rate - error >= self.hot_rate:
                hot.add(key.encode() if isinstance(key, str) else bytes(key))
        out: list[tuple[BlockLease, int]] = []
        with self.lock:
            self.hot_keys = frozenset(hot)
            for slot in [s for s, x in self._leases.items() if _prefix(x.key) not in hot]:
                lease = self._leases[slot]
                if lease.calling:
                    continue  # refunded at the next poll or release
                del self._leases[slot]
                if lease.units:
                    out.append((lease, lease.units))
        return out

    def held(self) -> int:
        """Units held in every lease."""
        with self.lock:
            return sum(x.units for x in self._leases.values())

    def refund_args(self, lease: BlockLease, units: int) -> list[Any]:
        """The command giving ``units`` of ``lease`` back."""
        return [lease.policy.command, lease.key, *lease.policy.single, "REFUND", units]

    def _admitted(self, lease: BlockLease) -> Decision:
        quota = lease.policy.quota
        limit = quota.q if quota is not None else 0
        return Decision(
            True, limit, lease.remaining + lease.units, None, timedelta(0), policy=lease.policy
        )

    def denied(self, lease: BlockLease, wait: float) -> Decision:
        """A denial answered here, ``wait`` seconds to wait."""
        quota = lease.policy.quota
        limit = quota.q if quota is not None else 0
        retry = None if math.isinf(wait) else timedelta(milliseconds=math.ceil(wait * 1000))
        return Decision(False, limit, 0, retry, retry or timedelta(0), policy=lease.policy)

    def calls_out(self) -> list[Any]:
        """The asyncio limiter's calls for a block still out (futures)."""
        with self.lock:
            return [
                x.call
                for x in self._leases.values()
                if x.calling and x.call is not None and not x.call.done()
            ]

    def all_units(self) -> list[tuple[BlockLease, int]]:
        """Takes every lease's units, to refund them (at shutdown)."""
        with self.lock:
            out = [(e, e.units) for e in self._evicted]
            self._evicted = []
            for lease in self._leases.values():
                if lease.units:
                    out.append((lease, lease.units))
            for lease, _ in out:
                lease.units = 0
            return out


def _high(block: int, limit: int) -> int:
    """The units left on the server from which a key is not contended.

    Three blocks, at most three quarters of the limit (and above a block,
    at most a quarter of it), as the Rust client's band.
    """
    low = min(block, limit // 4)
    return max(min(3 * block, limit * 3 // 4), low + 1)


def _prefix(key: str | bytes) -> bytes:
    raw = key.encode() if isinstance(key, str) else key
    return raw[:KEY_BYTES]


def hot_args(leases: Leases) -> Sequence[Any]:
    """The poll of the server's hot keys."""
    return ("RL.HOTKEYS", "COUNT", leases.hot_count)


def now() -> float:
    """Monotonic seconds."""
    return time.monotonic()
