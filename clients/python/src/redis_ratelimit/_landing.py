"""Calls whose effect is never left unknown, as the Rust client's ``landing.rs``.

A call whose caller stops waiting after its command was written (its
deadline passed, its task was cancelled) may or may not be run by the
server: it is finished in the background instead, its late reply read,
and what that reply says it took is given back (units refunded, a
concurrency lease released, a ``CL.THROTTLE`` quantity given back with a
negative one), since nobody will use it. A call given up before its
command was written is never sent.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.connection

from ._commands import Options
from .decision import Decision
from .policy import Policy

ORPHAN_WAIT = 60.0
"""Seconds a call whose caller has gone is waited for, beyond its own ``wait``.

Past that (a server stalled that long) its effect stands: a lease ends at
its TTL, charged units refill.
"""

Undo = Callable[[Decision], Sequence[Any] | None]
"""The command giving back what a decision took, from its parsed reply (``None``: nothing)."""
Land = Callable[[Any], Sequence[Any] | None]
"""The command giving back what a call took, from its raw reply."""


def taken(options: Options, decision: Decision) -> int:
    """The units a charge took, from its decision."""
    cost = options.get("cost", 1)
    if options.get("dryrun") or "refund" in options:
        return 0
    if options.get("force"):
        return cost
    if not decision.allowed:
        return 0
    if options.get("partial") and decision.granted is not None:
        return min(cost, decision.granted)
    return cost


def undo_decide(key: str | bytes, policy: Policy, options: Options) -> Undo | None:
    """What gives back a single-key decision's charge: a refund, or a lease's release."""
    if options.get("dryrun") or "refund" in options:
        return None
    if policy.command == "RL.ACQUIRE":

        def release(d: Decision) -> Sequence[Any] | None:
            return ("RL.RELEASE", key, d.lease) if d.allowed and d.lease else None

        return release
    if policy.command not in ("RL.GCRA", "RL.BUCKET", "RL.SLIDING", "RL.FIXED", "RL.CHECK"):
        return None

    def refund(d: Decision) -> Sequence[Any] | None:
        units = taken(options, d)
        return (policy.command, key, *policy.single, "REFUND", units) if units else None

    return refund


def undo_all(
    limits: Sequence[tuple[str | bytes, Policy]], costs: Sequence[int] | None, options: Options
) -> Undo | None:
    """What gives back an ``RL.ALL`` charge: each limit's units in one ``REFUND COSTS``."""
    if options.get("dryrun") or "refund" in options:
        return None
    if any(p.command == "RL.ACQUIRE" for _, p in limits):
        return None
    cost = options.get("cost", 1)

    def refund(d: Decision) -> Sequence[Any] | None:
        each = list(costs) if costs is not None else [cost] * len(limits)
        if options.get("partial"):
            each = [
                min(c, x.granted if x.granted is not None else c)
                for c, x in zip(each, d.limits, strict=False)
            ]
        if not (d.allowed or options.get("force")) or not any(each):
            return None
        args: list[Any] = ["RL.ALL", len(limits), *(k for k, _ in limits)]
        for _, p in limits:
            args += p.words
        return [*args, "REFUND", "COSTS", *each]

    return refund


def undo_throttle(args: Sequence[Any], quantity: int) -> Undo | None:
    """What gives back a ``CL.THROTTLE`` admission: the same limit with the quantity negated.

    ``args`` is the command up to its period; a peek (0) or a give-back
    (negative) takes nothing.
    """
    if quantity <= 0:
        return None

    def give_back(d: Decision) -> Sequence[Any] | None:
        return (*args, -quantity) if d.allowed else None

    return give_back


def lander(parse: Callable[[Any], Decision], undo: Undo | None) -> Land | None:
    """The undo of a call from its raw reply (a reply that does not parse takes nothing)."""
    if undo is None:
        return None

    def land(reply: Any) -> Sequence[Any] | None:
        try:
            return undo(parse(reply))
        except Exception:  # an error reply took nothing
            return None

    return land


class Landings:
    """The calls of one limiter finishing in the background; ``pending`` counts them."""

    def __init__(self) -> None:
        """No call out."""
        self.pending = 0
        self.started = 0
        """Calls that went on in the background."""
        self.refunded = 0
        """Undo commands sent (and answered)."""
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    def _count(self, by: int) -> None:
        with self._lock:
            self.pending += by
            self.started += max(by, 0)

    def sync(
        self,
        pool: redis.ConnectionPool,
        conn: redis.Connection,
        land: Land | None,
        bound: float,
        answered: Callable[[], None],
    ) -> None:
        """Reads the late reply of a command written on ``conn`` in a thread, then its undo."""
        self._count(1)

        def run() -> None:
            try:
                if conn.can_read(timeout=bound):
                    reply = conn.read_response()
                    answered()
                    undo = land(reply) if land is not None else None
                    if undo is not None:
                        conn.send_command(*undo)  # type: ignore[no-untyped-call]
                        if not conn.can_read(timeout=ORPHAN_WAIT):
                            raise TimeoutError("no reply to an undo")
                        conn.read_response()
                        with self._lock:
                            self.refunded += 1
                    pool.release(conn)
                    return
            except Exception:  # the connection failed: nothing more can be learnt
                pass
            finally:
                self._count(-1)
            conn.disconnect()  # type: ignore[no-untyped-call]
            pool.release(conn)

        threading.Thread(target=run, name="rl-landing", daemon=True).start()

    def later(
        self,
        call: asyncio.Future[Any],
        flight: Flight,
        pool: redis.asyncio.ConnectionPool,
        land: Land | None,
        bound: float,
        answered: Callable[[], None],
    ) -> None:
        """Lets a written call land in the background, giving back what it took."""
        self._count(1)
        flight.land = land if land is not None else _nothing

        async def run() -> None:
            try:
                done, _ = await asyncio.wait((call,), timeout=bound)
                if not done:
                    call.cancel()
                    return
                if call.cancelled() or call.exception() is not None:
                    return
                answered()
                if flight.undone:
                    with self._lock:
                        self.refunded += 1
                if flight.looked or land is None:
                    return
                undo = land(call.result())  # the reply came before its caller gave up
                if undo is None:
                    return
                trip = asyncio.ensure_future(round_trip(pool, undo, Flight()))
                done, _ = await asyncio.wait((trip,), timeout=ORPHAN_WAIT)
                if not done:
                    trip.cancel()
                elif trip.exception() is None:
                    with self._lock:
                        self.refunded += 1
            finally:
                self._count(-1)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _nothing(reply: Any) -> None:
    return None


class Flight:
    """One asyncio call's progress: written yet, given up, given back."""

    __slots__ = ("land", "looked", "sent", "undone")

    def __init__(self) -> None:
        """Not written yet."""
        self.sent = False
        """The command may have been written (from then on the server can run it)."""
        self.land: Land | None = None
        """Set when the caller gave up: the undo, sent on the same connection."""
        self.looked = False
        """The round trip read its reply after its caller gave up (and sent any undo)."""
        self.undone = False


async def round_trip(
    pool: redis.asyncio.ConnectionPool, args: Sequence[Any], flight: Flight
) -> Any:
    """One command on a connection of ``pool``; ``flight.sent`` once it may be written.

    If the caller has given up by the time the reply comes (``flight.land``
    set), the undo goes on the same connection before it is released, so
    that giving back never waits for a connection of the pool.
    """
    conn: redis.asyncio.connection.AbstractConnection = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        flight.sent = True  # the write below starts with no await before it on a live connection
        await conn.send_command(*args)
        reply = await conn.read_response()
        if flight.land is not None:
            flight.looked = True
            undo = None if isinstance(reply, redis.exceptions.ResponseError) else flight.land(reply)
            if undo is not None:
                await conn.send_command(*undo)
                await conn.read_response()
                flight.undone = True
    except BaseException:
        await asyncio.shield(conn.disconnect())
        await pool.release(conn)
        raise
    await pool.release(conn)
    if isinstance(reply, redis.exceptions.ResponseError):
        raise reply
    return reply
