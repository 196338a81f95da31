"""The I/O of block leasing (``leasing.py``) for the sync and the asyncio limiter."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from ._commands import Options
from ._guard import Guard
from ._landing import Land, lander, undo_decide
from .decision import Decision, parse_decision
from .errors import Unavailable
from .leasing import BlockLease, Leases, hot_args
from .policy import Policy


class SyncSender(Protocol):
    """What a sync limiter offers leasing."""

    guard: Guard

    def _guarded(self, args: Sequence[Any], seconds: float, land: Land | None = None) -> Any: ...


class AsyncSender(Protocol):
    """What an asyncio limiter offers leasing."""

    guard: Guard

    async def _guarded(
        self, args: Sequence[Any], seconds: float, land: Land | None = None
    ) -> Any: ...


def _block_land(leases: Leases, lease: BlockLease) -> Land | None:
    """A call for a block cut short gives back what it was granted."""
    options = leases.options(lease)
    policy = lease.policy
    return lander(
        lambda r: parse_decision(r, policy, True), undo_decide(lease.key, policy, options)
    )


def _late(leases: Leases, lease: BlockLease) -> Decision:
    """A request whose deadline passed while others took the blocks: denied here.

    Not an outage (the server answers): never the fallback, which may admit.
    Its ``retry_after`` is the time a block takes to accrue.
    """
    quota = lease.policy.quota
    assert quota is not None
    return leases.denied(lease, leases.block * quota.w / quota.q)


def decide(
    limiter: SyncSender, leases: Leases, key: str | bytes, policy: Policy, options: Options
) -> Decision:
    """A decision answered from ``key``'s block, calling for one when it is spent."""
    cost = options.get("cost", 1)
    deadline = options.get("deadline", limiter.guard.deadline)
    end = time.monotonic() + leases.bound(deadline)
    with leases.lock:
        lease = leases.lease(key, policy)
        while True:
            step, d = leases.take(lease, cost, time.monotonic())
            if d is not None:
                return d
            if step == "call":
                break
            left = end - time.monotonic()
            if left <= 0:
                return _late(leases, lease)
            leases.changed.wait(left)
    while True:  # this request's turn to call for a block
        left = end - time.monotonic()
        args = leases.args(lease, left - deadline)  # a queued call's line within the wait
        if args is None:  # its wait went on others' blocks: another request calls
            with leases.lock:
                leases.failed(lease)
                leases.changed.notify_all()
            return _late(leases, lease)
        try:
            reply = limiter._guarded(args, left, _block_land(leases, lease))
            got = parse_decision(reply, policy, True)
        except BaseException as e:
            with leases.lock:
                leases.failed(lease)
                leases.changed.notify_all()
            if isinstance(e, Unavailable):
                return limiter.guard.answer([(key, policy)], cost, e)
            raise
        with leases.lock:
            leases.landed(lease, got, time.monotonic())
            leases.changed.notify_all()
            step, d = leases.take(lease, cost, time.monotonic())
        if d is not None:
            return d
        if time.monotonic() >= end:  # fewer than ``cost`` came, and more may: not now
            with leases.lock:
                leases.failed(lease)
                leases.changed.notify_all()
            return _late(leases, lease)


def refund(limiter: SyncSender, leases: Leases, taken: list[tuple[BlockLease, int]]) -> int:
    """Gives ``taken`` back with ``REFUND``; the units refunded (an outage loses the rest)."""
    done = 0
    for lease, units in taken:
        try:
            limiter._guarded(leases.refund_args(lease, units), limiter.guard.deadline)
            done += units
        except Unavailable:
            pass  # they refill on the server
    return done


def refresh(limiter: SyncSender, leases: Leases) -> frozenset[bytes]:
    """One poll of ``RL.HOTKEYS``: the keys hot now; those that cooled are refunded."""
    reply = limiter._guarded(hot_args(leases), limiter.guard.deadline)
    refund(limiter, leases, leases.hot_listed(reply))
    return leases.hot_keys


class Follower:
    """A thread polling the server's hot keys until :meth:`stop`."""

    def __init__(self, poll: Callable[[], object], every: float) -> None:
        """Starts polling every ``every`` seconds (twice as long after a failure, up to 16x)."""
        self._stop = threading.Event()
        self.polls = 0
        self.thread = threading.Thread(target=self._run, args=(poll, every), daemon=True)
        self.thread.start()

    def _run(self, poll: Callable[[], object], every: float) -> None:
        wait = every
        while True:
            try:
                poll()
                self.polls += 1
                wait = every
            except Exception:  # an outage or an old server: look again later
                wait = min(wait * 2, every * 16)
            if self._stop.wait(wait):
                return

    def stop(self) -> None:
        """Ends the polling."""
        self._stop.set()
        self.thread.join()


async def adecide(
    limiter: AsyncSender, leases: Leases, key: str | bytes, policy: Policy, options: Options
) -> Decision:
    """The asyncio twin of :func:`decide`: the call for a block runs in a task of its own.

    A request cancelled while waiting for a block does not cancel the
    call: what the server grants lands in the lease for the others.
    """
    cost = options.get("cost", 1)
    end = time.monotonic() + leases.bound(options.get("deadline", limiter.guard.deadline))
    while True:
        with leases.lock:
            lease = leases.lease(key, policy)
            step, d = leases.take(lease, cost, time.monotonic())
            if d is not None:
                return d
            if step == "call":
                lease.call = asyncio.ensure_future(_fetch(limiter, leases, lease))
            call: asyncio.Future[BaseException | None] = lease.call
        left = end - time.monotonic()
        done, _ = await asyncio.wait((asyncio.shield(call),), timeout=max(left, 0))
        if not done:
            return _late(leases, lease)
        error = call.result()
        if isinstance(error, Unavailable):
            return limiter.guard.answer([(key, policy)], cost, error)
        if error is not None:
            raise error


async def _fetch(limiter: AsyncSender, leases: Leases, lease: BlockLease) -> BaseException | None:
    try:
        args = leases.args(lease)
        assert args is not None  # a whole ``queue`` to wait in line
        reply = await limiter._guarded(
            args, leases.bound(limiter.guard.deadline), _block_land(leases, lease)
        )
        got = parse_decision(reply, lease.policy, True)
    except Exception as e:
        with leases.lock:
            leases.failed(lease)
        return e
    with leases.lock:
        leases.landed(lease, got, time.monotonic())
    return None


async def arefund(limiter: AsyncSender, leases: Leases, taken: list[tuple[BlockLease, int]]) -> int:
    """The asyncio twin of :func:`refund`."""
    done = 0
    for lease, units in taken:
        try:
            await limiter._guarded(leases.refund_args(lease, units), limiter.guard.deadline)
            done += units
        except Unavailable:
            pass
    return done


async def arefresh(limiter: AsyncSender, leases: Leases) -> frozenset[bytes]:
    """The asyncio twin of :func:`refresh`."""
    reply = await limiter._guarded(hot_args(leases), limiter.guard.deadline)
    await arefund(limiter, leases, leases.hot_listed(reply))
    return leases.hot_keys


async def afollow(poll: Callable[[], Awaitable[object]], every: float) -> None:
    """Polls every ``every`` seconds until cancelled (twice as long after a failure, up to 16x)."""
    wait = every
    while True:
        try:
            await poll()
            wait = every
        except Exception:
            wait = min(wait * 2, every * 16)
        await asyncio.sleep(wait)
